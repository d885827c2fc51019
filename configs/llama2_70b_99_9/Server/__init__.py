from code.common.config_registry import PerCore, register
from code.common.constants import Scenario
from code.common.systems.known import GENERIC_CPU
from configs.llama2_70b_99_9 import HIGH_ACCURACY, HIGH_ACCURACY_OPENAI, Llama2Base


class ServerCPUBase(Llama2Base):
    scenario = Scenario.Server
    # An estimate (see Offline); make find_peak measures the rate that keeps the first-token and per-token
    # latencies within the round's bounds.
    server_target_qps = PerCore(0.001)
    prefill_chunk_tokens = 32


@register(GENERIC_CPU, HIGH_ACCURACY)
class GenericCPU(ServerCPUBase):
    pass


@register(GENERIC_CPU, HIGH_ACCURACY_OPENAI)
class GenericCPUServing(ServerCPUBase):
    """Served (--harness_type=openai): as many requests in flight per endpoint as the server batches."""
    openai_in_flight = 8
