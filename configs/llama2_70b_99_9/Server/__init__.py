from configs._llm import Server, generic_cpu
from configs.llama2_70b_99_9 import ONLY_TARGET, Llama2Base


class ServerCPUBase(Server, Llama2Base):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(ServerCPUBase, ONLY_TARGET)
