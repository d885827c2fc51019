from code.common.config_registry import register
from code.common.constants import OPENAI_WORKLOAD, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.llama3_1_8b_edge import LlamaEdgeBase


class SingleStreamCPUBase(LlamaEdgeBase):
    scenario = Scenario.SingleStream
    batch_size = 1
    # One summary of ~128 tokens from the 8B model on a CPU: a minute or more. An estimate, not a measurement.
    single_stream_expected_latency_ns = 60_000_000_000


@register(GENERIC_CPU)
class GenericCPU(SingleStreamCPUBase):
    pass


@register(GENERIC_CPU, OPENAI_WORKLOAD)
class GenericCPUServing(SingleStreamCPUBase):
    """The model in a serving engine (--harness_type=openai): as many requests in flight per endpoint as the local
    server runs sequences together (make serve_llm starts it with batch_size of them)."""
    openai_in_flight = 1
