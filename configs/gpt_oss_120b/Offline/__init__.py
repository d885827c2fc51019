from configs._llm import Offline, generic_cpu
from configs.gpt_oss_120b import GptOssBase


class OfflineCPUBase(Offline, GptOssBase):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(OfflineCPUBase)
