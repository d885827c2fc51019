from code.common.config_registry import register
from code.common.constants import LWIS, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.resnet50 import ResNet50Base, ResNet50GPUBase


class MultiStreamCPUBase(ResNet50Base):
    scenario = Scenario.MultiStream
    batch_size = 8
    multi_stream_expected_latency_ns = 50_000_000


class MultiStreamGPUBase(ResNet50GPUBase):
    scenario = Scenario.MultiStream
    batch_size = 8
    multi_stream_expected_latency_ns = 600_000


@register(GENERIC_CPU)
class GenericCPU(MultiStreamCPUBase):
    pass


@register("H100_SXM_80GBx1", harness=LWIS)
class H100_SXM_80GBx1(MultiStreamGPUBase):
    pass


@register("H200_SXM_141GBx1", harness=LWIS)
class H200_SXM_141GBx1(MultiStreamGPUBase):
    multi_stream_expected_latency_ns = 580_000


@register("L4x1", harness=LWIS)
class L4x1(MultiStreamGPUBase):
    multi_stream_expected_latency_ns = 2_300_000
