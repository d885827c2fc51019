from configs._llm import Offline, generic_cpu
from configs.qwen3_vl_235b_a22b import Qwen3VLBase


class OfflineCPUBase(Offline, Qwen3VLBase):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(OfflineCPUBase)
