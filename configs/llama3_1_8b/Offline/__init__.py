from code.common.config_registry import PerCore, register
from code.common.constants import OPENAI_WORKLOAD, Scenario
from code.common.systems.known import GENERIC_CPU
from configs.llama3_1_8b import LlamaBase


class OfflineCPUBase(LlamaBase):
    scenario = Scenario.Offline
    # Llama-3.1-8B in fp32 reads 32 GB of weights per decode step: on a CPU a few steps per second at most, so a
    # batch of 8 sequences of ~128 tokens gives well under a sample per second. An estimate, not a measurement:
    # make find_peak RUN_ARGS="--benchmarks=llama3.1-8b --scenarios=offline" measures it.
    offline_expected_qps = PerCore(0.005)


@register(GENERIC_CPU)
class GenericCPU(OfflineCPUBase):
    pass


@register(GENERIC_CPU, OPENAI_WORKLOAD)
class GenericCPUServing(OfflineCPUBase):
    """The model in a serving engine (--harness_type=openai): as many requests in flight per endpoint as the local
    server runs sequences together (make serve_llm starts it with batch_size of them)."""
    openai_in_flight = 8
