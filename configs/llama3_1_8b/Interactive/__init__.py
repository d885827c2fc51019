from code.common.config_registry import PerCore, register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.llama3_1_8b import LlamaBase


class InteractiveCPUBase(LlamaBase):
    scenario = Scenario.Interactive
    # An estimate for the 8B model on a CPU (see Offline); make find_peak measures the rate that keeps the
    # first-token and per-token latencies within the round's bounds.
    server_target_qps = PerCore(0.002)


@register(GENERIC_CPU)
class GenericCPU(InteractiveCPUBase):
    pass
