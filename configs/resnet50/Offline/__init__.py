from code.common.config_registry import PerCore, register
from code.common.constants import LWIS, PowerSetting, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.resnet50 import ResNet50Base, ResNet50GPUBase


class OfflineCPUBase(ResNet50Base):
    scenario = Scenario.Offline
    batch_size = 32
    offline_expected_qps = PerCore(120.0)


class OfflineGPUBase(ResNet50GPUBase):
    scenario = Scenario.Offline
    batch_size = 2048
    instances = 2           # per GPU (NVIDIA's gpu_inference_streams): every GPU of an x8 system gets two
    offline_expected_qps = 90000.0


@register(GENERIC_CPU)
class GenericCPU(OfflineCPUBase):
    pass


@register("H100_SXM_80GBx1", harness=LWIS)
class H100_SXM_80GBx1(OfflineGPUBase):
    pass


@register("H100_SXM_80GBx1", harness=LWIS, power_setting=PowerSetting.MaxQ)
class H100_SXM_80GBx1_MaxQ(H100_SXM_80GBx1):
    offline_expected_qps = 72000.0


@register("H100_SXM_80GBx8", harness=LWIS)
class H100_SXM_80GBx8(OfflineGPUBase):
    offline_expected_qps = 720000.0


@register("H200_SXM_141GBx1", harness=LWIS)
class H200_SXM_141GBx1(OfflineGPUBase):
    offline_expected_qps = 96000.0


@register("H200_SXM_141GBx8", harness=LWIS)
class H200_SXM_141GBx8(OfflineGPUBase):
    offline_expected_qps = 770000.0


@register("L4x1", harness=LWIS)
class L4x1(OfflineGPUBase):
    batch_size = 32
    instances = 1
    offline_expected_qps = 13500.0
