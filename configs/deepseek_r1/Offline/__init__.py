from configs._llm import Offline, generic_cpu
from configs.deepseek_r1 import DeepSeekBase


class OfflineCPUBase(Offline, DeepSeekBase):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(OfflineCPUBase)
