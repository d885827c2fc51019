from configs._llm import Server, generic_cpu
from configs.deepseek_r1 import DeepSeekBase


class ServerCPUBase(Server, DeepSeekBase):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(ServerCPUBase)
