from code.common.config_registry import PerCore, register
from code.common.constants import LWIS, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.resnet50 import ResNet50Base, ResNet50GPUBase


class ServerCPUBase(ResNet50Base):
    # One sample per call, one single-threaded instance per core (documentation/harness.md, "Why the CPU
    # defaults"): on a CPU a batch buys no throughput, and c independent servers queue far less than one server
    # c times as fast (no intra-op thread pool to wake, so nothing spins against LoadGen's issuing thread).
    scenario = Scenario.Server
    batch_size = 1
    instances = PerCore(1)
    intra_op_threads = 1
    server_target_qps = PerCore(10.0)
    server_batch_timeout_us = 0


class ServerGPUBase(ResNet50GPUBase):
    scenario = Scenario.Server
    batch_size = 256
    instances = 4           # per GPU (NVIDIA's gpu_inference_streams): every GPU of an x8 system gets four
    server_target_qps = 77000.0
    server_batch_timeout_us = 2000


@register(GENERIC_CPU)
class GenericCPU(ServerCPUBase):
    pass


@register("H100_SXM_80GBx1", harness=LWIS)
class H100_SXM_80GBx1(ServerGPUBase):
    pass


@register("H100_SXM_80GBx8", harness=LWIS)
class H100_SXM_80GBx8(ServerGPUBase):
    server_target_qps = 610000.0


@register("H200_SXM_141GBx1", harness=LWIS)
class H200_SXM_141GBx1(ServerGPUBase):
    server_target_qps = 81000.0


@register("H200_SXM_141GBx8", harness=LWIS)
class H200_SXM_141GBx8(ServerGPUBase):
    server_target_qps = 640000.0


@register("L4x1", harness=LWIS)
class L4x1(ServerGPUBase):
    batch_size = 16
    instances = 2
    server_target_qps = 12000.0
