from configs._llm import Offline, generic_cpu
from configs.llama2_70b_99_9 import ONLY_TARGET, Llama2Base


class OfflineCPUBase(Offline, Llama2Base):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(OfflineCPUBase, ONLY_TARGET)
