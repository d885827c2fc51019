from code.common.config_registry import register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.yolo import YoloBase


class SingleStreamCPUBase(YoloBase):
    scenario = Scenario.SingleStream
    single_stream_expected_latency_ns = 30_000_000


@register(GENERIC_CPU)
class GenericCPU(SingleStreamCPUBase):
    pass
