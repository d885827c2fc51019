from code.common.config_registry import PerCore
from configs._llm import Server, generic_cpu
from configs.llama3_1_8b import LlamaBase


class ServerCPUBase(Server, LlamaBase):
    server_target_qps = PerCore(0.002)      # an estimate for the 8B model on a CPU (see Offline)


GenericCPU, GenericCPUServing = generic_cpu(ServerCPUBase)
