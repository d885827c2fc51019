from configs._llm import Server, generic_cpu
from configs.gpt_oss_120b import GptOssBase


class ServerCPUBase(Server, GptOssBase):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(ServerCPUBase)
