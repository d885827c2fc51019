from code.common.config_registry import PerCore, register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.yolo import YoloBase


class OfflineCPUBase(YoloBase):
    scenario = Scenario.Offline
    instances = PerCore(1)
    intra_op_threads = 1
    # YOLOv11l (86.9 GFLOPs at 640) is not available on the machines this project is measured on: an estimate from
    # NanoDet-m's measured 30 samples/s per core (0.72 GFLOPs at 416), not a measurement. Run make find_peak
    # RUN_ARGS="--benchmarks=yolo --scenarios=offline" once the model is there; a guess too low makes the run end
    # before min_duration (INVALID, with the rate to set), one too high only makes it longer.
    offline_expected_qps = PerCore(0.5)


@register(GENERIC_CPU)
class GenericCPU(OfflineCPUBase):
    pass
