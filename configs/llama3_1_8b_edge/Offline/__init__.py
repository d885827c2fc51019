from code.common.config_registry import PerCore
from configs._llm import Offline, generic_cpu
from configs.llama3_1_8b_edge import LlamaEdgeBase


class OfflineCPUBase(Offline, LlamaEdgeBase):
    offline_expected_qps = PerCore(0.005)   # an estimate for the 8B model (see configs/llama3_1_8b/Offline)


GenericCPU, GenericCPUServing = generic_cpu(OfflineCPUBase)
