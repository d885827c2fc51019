"""What the LLM benchmarks' scenario configs share, so that each benchmark's scenario module states only what differs
(its benchmark base, a rate of its own, its accuracy target):

    from configs._llm import Offline, generic_cpu
    from configs.llama3_1_8b import LlamaBase


    class OfflineCPUBase(Offline, LlamaBase):
        offline_expected_qps = PerCore(0.005)      # the scenario base comes first: it wins where both set a field


    GenericCPU, GenericCPUServing = generic_cpu(OfflineCPUBase)

The scenario bases hold the CPU defaults every LLM benchmark takes; `generic_cpu` makes the generic CPU system's
two configs, one for every harness and one for the openai harness (which tunes for how many requests are in flight
per endpoint). This package is no benchmark: ConfigRegistry.load imports only configs/<benchmark>/<Scenario>.
"""
from __future__ import annotations

from code.common.config_registry import BenchmarkConfig, PerCore, class_values, register
from code.common.constants import AccuracyTarget, Scenario
from code.common.systems.known import GENERIC_CPU

# The served configs' harness: the LLM in OpenAI-compatible serving engines.
SERVED = "openai"
# The least a rate field takes on one core: a placeholder for the large closed models on a CPU, not a measurement;
# make find_peak RUN_ARGS="--benchmarks=<benchmark> --scenarios=<scenario>" measures it.
LEAST_RATE = PerCore(0.001)


class Offline(BenchmarkConfig):
    scenario = Scenario.Offline
    offline_expected_qps = LEAST_RATE


class Server(BenchmarkConfig):
    scenario = Scenario.Server
    # The rate that keeps the first-token and per-token latencies within the round's bounds is make find_peak's to
    # measure.
    server_target_qps = LEAST_RATE
    # SmolLM2, 2 cores: 32-token chunk 50 ms (16: 31, 64: 89, whole 128: 168) + 22-30 ms step < 100 ms TPOT
    prefill_chunk_tokens = 32


class Interactive(Server):
    scenario = Scenario.Interactive


class SingleStream(BenchmarkConfig):
    scenario = Scenario.SingleStream
    batch_size = 1


def generic_cpu(base: type, accuracy_target: AccuracyTarget = AccuracyTarget.k_99) -> tuple[type, type]:
    """The generic CPU system's configs of `base` (a scenario base and a benchmark base), made in `base`'s module
    as if written there (that is where the registry, show_config and the config writers find them):
    GenericCPU, for every harness; and GenericCPUServing, for the openai harness, with as many requests in flight
    per endpoint as the server decodes sequences together (batch_size: make serve_llm starts it with that many)."""
    every = _made_beside(base, "GenericCPU", {})
    served = _made_beside(base, "GenericCPUServing", {
        "__doc__": "Served (--harness_type=openai): as many requests in flight per endpoint as the server batches.",
        "openai_in_flight": class_values(base)["batch_size"]})
    return (register(GENERIC_CPU, accuracy_target=accuracy_target)(every),
            register(GENERIC_CPU, harness=SERVED, accuracy_target=accuracy_target)(served))


def _made_beside(base: type, name: str, body: dict) -> type:
    """A subclass of `base` named `name`, of `base`'s module (so its file is `base`'s, and that module registers it)."""
    return type(name, (base,), {**body, "__module__": base.__module__, "__qualname__": name})
