from configs._llm import Interactive, generic_cpu
from configs.deepseek_r1 import DeepSeekBase


class InteractiveCPUBase(Interactive, DeepSeekBase):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(InteractiveCPUBase)
