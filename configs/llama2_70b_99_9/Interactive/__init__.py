from configs._llm import Interactive, generic_cpu
from configs.llama2_70b_99_9 import ONLY_TARGET, Llama2Base


class InteractiveCPUBase(Interactive, Llama2Base):
    pass  # the shared LLM estimates


GenericCPU, GenericCPUServing = generic_cpu(InteractiveCPUBase, ONLY_TARGET)
