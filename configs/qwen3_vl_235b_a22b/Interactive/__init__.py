from configs._llm import Interactive, generic_cpu
from configs.qwen3_vl_235b_a22b import Qwen3VLBase


class InteractiveCPUBase(Interactive, Qwen3VLBase):
    # The round's Interactive data set: the 8,000-product subset (the checkers' accuracy-sample-count).
    dataset = "shopify_product_catalogue_8k"


GenericCPU, GenericCPUServing = generic_cpu(InteractiveCPUBase)
