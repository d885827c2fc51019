from code.common.config_registry import PerCore, register
from code.common.constants import OPENAI_WORKLOAD, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.llama3_1_8b import LlamaBase


class InteractiveCPUBase(LlamaBase):
    scenario = Scenario.Interactive
    # An estimate for the 8B model on a CPU (see Offline); make find_peak measures the rate that keeps the
    # first-token and per-token latencies within the round's bounds.
    server_target_qps = PerCore(0.002)
    # SmolLM2, 2 cores: 32-token chunk 50 ms (16: 31, 64: 89, whole 128: 168) + 22-30 ms step < 100 ms TPOT
    prefill_chunk_tokens = 32


@register(GENERIC_CPU)
class GenericCPU(InteractiveCPUBase):
    pass


@register(GENERIC_CPU, OPENAI_WORKLOAD)
class GenericCPUServing(InteractiveCPUBase):
    """The model in a serving engine (--harness_type=openai): as many requests in flight per endpoint as the local
    server runs sequences together (make serve_llm starts it with batch_size of them)."""
    openai_in_flight = 8
