from code.common.config_registry import PerCore, register
from code.common.constants import OPENAI_WORKLOAD, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.gpt_oss_120b import GptOssBase


class ServerCPUBase(GptOssBase):
    scenario = Scenario.Server
    # An estimate (see Offline); make find_peak measures the rate that keeps the first-token and per-token
    # latencies within the round's bounds.
    server_target_qps = PerCore(0.001)
    prefill_chunk_tokens = 32


@register(GENERIC_CPU)
class GenericCPU(ServerCPUBase):
    pass


@register(GENERIC_CPU, OPENAI_WORKLOAD)
class GenericCPUServing(ServerCPUBase):
    """Served (--harness_type=openai): as many requests in flight per endpoint as the server batches."""
    openai_in_flight = 8
