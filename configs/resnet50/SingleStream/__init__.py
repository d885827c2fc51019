from code.common.config_registry import register
from code.common.constants import LWIS, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.resnet50 import ResNet50Base, ResNet50GPUBase


class SingleStreamCPUBase(ResNet50Base):
    scenario = Scenario.SingleStream
    batch_size = 1
    single_stream_expected_latency_ns = 8_000_000


class SingleStreamGPUBase(ResNet50GPUBase):
    scenario = Scenario.SingleStream
    batch_size = 1
    single_stream_expected_latency_ns = 330_000


@register(GENERIC_CPU)
class GenericCPU(SingleStreamCPUBase):
    pass


@register("H100_SXM_80GBx1", harness=LWIS)
class H100_SXM_80GBx1(SingleStreamGPUBase):
    pass


@register("H200_SXM_141GBx1", harness=LWIS)
class H200_SXM_141GBx1(SingleStreamGPUBase):
    single_stream_expected_latency_ns = 320_000


@register("L4x1", harness=LWIS)
class L4x1(SingleStreamGPUBase):
    single_stream_expected_latency_ns = 400_000
