from code.common.config_registry import PerCore, register
from code.common.constants import OPENAI_WORKLOAD, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.llama3_1_8b_edge import LlamaEdgeBase


class OfflineCPUBase(LlamaEdgeBase):
    scenario = Scenario.Offline
    offline_expected_qps = PerCore(0.005)   # an estimate for the 8B model (see configs/llama3_1_8b/Offline)


@register(GENERIC_CPU)
class GenericCPU(OfflineCPUBase):
    pass


@register(GENERIC_CPU, OPENAI_WORKLOAD)
class GenericCPUServing(OfflineCPUBase):
    """The model in a serving engine (--harness_type=openai): as many requests in flight per endpoint as the local
    server runs sequences together (make serve_llm starts it with batch_size of them)."""
    openai_in_flight = 8
