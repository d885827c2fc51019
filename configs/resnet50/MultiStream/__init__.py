from code.common.config_registry import register
from code.common.constants import Scenario, TRITON_WORKLOAD
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
@register(GENERIC_CPU, TRITON_WORKLOAD)
class GenericCPU(MultiStreamCPUBase):
    pass


@register("H100_SXM_80GBx1")
class H100_SXM_80GBx1(MultiStreamGPUBase):
    pass


@register("H200_SXM_141GBx1")
class H200_SXM_141GBx1(MultiStreamGPUBase):
    multi_stream_expected_latency_ns = 580_000


@register("L4x1")
class L4x1(MultiStreamGPUBase):
    multi_stream_expected_latency_ns = 2_300_000
