from configs._llm import Server, generic_cpu
from configs.qwen3_vl_235b_a22b import Qwen3VLBase


class ServerCPUBase(Server, Qwen3VLBase):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(ServerCPUBase)
