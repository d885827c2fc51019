from configs._llm import Interactive, generic_cpu
from configs.gpt_oss_120b import GptOssBase


class InteractiveCPUBase(Interactive, GptOssBase):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(InteractiveCPUBase)
