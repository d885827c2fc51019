from code.common.config_registry import PerCore, register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.llama2_70b_99_9 import HIGH_ACCURACY, HIGH_ACCURACY_OPENAI, Llama2Base


class OfflineCPUBase(Llama2Base):
    scenario = Scenario.Offline
    # An estimate, not a measurement (a fifth of llama3.1-8b's per core, the least the field takes on one core): make
    # find_peak RUN_ARGS="--benchmarks=llama2-70b-99.9 --scenarios=offline" measures it.
    offline_expected_qps = PerCore(0.001)


@register(GENERIC_CPU, HIGH_ACCURACY)
class GenericCPU(OfflineCPUBase):
    pass


@register(GENERIC_CPU, HIGH_ACCURACY_OPENAI)
class GenericCPUServing(OfflineCPUBase):
    """Served (--harness_type=openai): as many requests in flight per endpoint as the server batches."""
    openai_in_flight = 8
