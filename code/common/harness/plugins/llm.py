"""The in-process LLM harness: token streaming (llm_sut.StreamingSUT) over one continuous-batching engine
(batching_engine.py) of the backend's step-level decoders, one per instance."""
from __future__ import annotations

from pathlib import Path

from ..registry import HarnessPlugin, HarnessRun, Selection


def prompt_parts(selection: Selection) -> tuple[str, ...]:
    """What the prompts of the test's model are made of (ModelSpec.prompt_parts); () for a model the benchmark does
    not have (the plan refuses it, naming the models)."""
    from ...benchmark_api import IMPLEMENTATIONS, get_benchmark

    if selection.benchmark not in IMPLEMENTATIONS:
        return ()
    model = get_benchmark(selection.benchmark).models.get(selection.model)
    return model.prompt_parts if model is not None else ()


def decoders(run: HarnessRun) -> list:
    """One decoder per backend instance, each warmed up: a first prefill and step are slow in every runtime."""
    import numpy as np

    from ...backends import threads_per_instance
    from ...backends.registry import get_plugin

    spec, fields = run.spec, run.fields
    plugin = get_plugin(fields["backend"])
    threads = threads_per_instance(fields, spec.cpu_cores)
    made = [plugin.create_decoder(Path(spec.engine), threads=threads, max_batch=run.generation.max_batch,
                                  device=spec.engine_manifest.get("device", "cpu"), instance=index)
            for index in range(int(fields["instances"]))]
    for decoder in made:
        batch = decoder.new_batch()
        batch.add([np.arange(1, 9, dtype=np.int64)])
        batch.step()
        batch.remove([0])
        batch.close()
    return made


class LLMHarness(HarnessPlugin):
    name = "llm"
    harness_type = "lwis"
    implementation = "python"
    generates_tokens = True
    description = "in process: continuous batching over the backend's decoder instances, tokens streamed to LoadGen"
    bench_figures = "code.actions.bench_llm:llm_bench"

    def why_not(self, selection: Selection) -> str | None:
        """The decoder graph takes token ids: a model prompted with chat content (text, images, audio) is refused
        before any test starts."""
        from ..batching_engine import ContinuousBatchingEngine

        other = set(prompt_parts(selection)) - ContinuousBatchingEngine.prompt_parts
        if not other:
            return None
        return (f"the in-process decoder takes prompts of token ids, and {selection.model}'s prompts are made of "
                f"{', '.join(sorted(prompt_parts(selection)))}: run it with --harness_type=openai on a serving engine "
                f"that takes them")

    def create(self, run: HarnessRun):
        from ...benchmark_api import generative
        from ..llm_sut import LLMSut, PromptLibrary

        samples = run.samples
        if run.fields.get("max_input_tokens"):
            samples = samples.capped(int(run.fields["max_input_tokens"]))
        prompts = PromptLibrary(samples, run.spec.performance_sample_count)
        answer = generative(run.benchmark).answer(run.spec.model, run.paths)
        return LLMSut(run.spec.scenario_enum, prompts, decoders(run), run.generation, answer).start(), prompts
