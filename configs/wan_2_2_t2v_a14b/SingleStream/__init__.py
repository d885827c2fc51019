"""wan-2.2-t2v-a14b SingleStream: one prompt at a time, the latency of a whole video (the checkers report it in
seconds). On a CPU the full model takes about an hour a video; an estimate, not a measurement."""
from code.common.config_registry import register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.wan_2_2_t2v_a14b import WanBase


class SingleStreamCPUBase(WanBase):
    scenario = Scenario.SingleStream
    single_stream_expected_latency_ns = 3_300_000_000_000


@register(GENERIC_CPU)
class GenericCPU(SingleStreamCPUBase):
    pass
