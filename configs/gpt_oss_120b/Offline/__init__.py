from code.common.config_registry import PerCore, register
from code.common.constants import OPENAI_WORKLOAD, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.gpt_oss_120b import GptOssBase


class OfflineCPUBase(GptOssBase):
    scenario = Scenario.Offline
    # An estimate, not a measurement (the least the field takes on one core): make find_peak
    # RUN_ARGS="--benchmarks=gpt-oss-120b --scenarios=offline" measures it.
    offline_expected_qps = PerCore(0.001)


@register(GENERIC_CPU)
class GenericCPU(OfflineCPUBase):
    pass


@register(GENERIC_CPU, OPENAI_WORKLOAD)
class GenericCPUServing(OfflineCPUBase):
    """Served (--harness_type=openai): as many requests in flight per endpoint as the server batches."""
    openai_in_flight = 8
