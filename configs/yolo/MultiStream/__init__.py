from code.common.config_registry import register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.yolo import YoloBase


class MultiStreamCPUBase(YoloBase):
    scenario = Scenario.MultiStream
    multi_stream_expected_latency_ns = 240_000_000   # 8 images one after the other


@register(GENERIC_CPU)
class GenericCPU(MultiStreamCPUBase):
    pass
