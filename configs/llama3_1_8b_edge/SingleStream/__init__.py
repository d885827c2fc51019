from code.common.config_registry import register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.llama3_1_8b_edge import LlamaEdgeBase


class SingleStreamCPUBase(LlamaEdgeBase):
    scenario = Scenario.SingleStream
    batch_size = 1
    # One summary of ~128 tokens from the 8B model on a CPU: a minute or more. An estimate, not a measurement.
    single_stream_expected_latency_ns = 60_000_000_000


@register(GENERIC_CPU)
class GenericCPU(SingleStreamCPUBase):
    pass
