from code.common.config_registry import PerCore, register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.yolo import YoloBase


class OfflineCPUBase(YoloBase):
    scenario = Scenario.Offline
    instances = PerCore(1)
    intra_op_threads = 1
    offline_expected_qps = PerCore(30.0)   # nanodet-m: 29 to 31 samples/s per single-threaded instance


@register(GENERIC_CPU)
class GenericCPU(OfflineCPUBase):
    pass
