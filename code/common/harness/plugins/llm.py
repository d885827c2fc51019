"""The in-process LLM harness: token streaming (llm_sut.StreamingSUT) over one continuous-batching engine
(batching_engine.py) of the backend's step-level decoders, one per instance."""
from __future__ import annotations

from pathlib import Path

from ..registry import HarnessPlugin, HarnessRun


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

    def create(self, run: HarnessRun):
        from ..llm_sut import LLMSut, PromptLibrary

        samples = run.samples
        if run.fields.get("max_input_tokens"):
            samples = samples.capped(int(run.fields["max_input_tokens"]))
        prompts = PromptLibrary(samples, run.spec.performance_sample_count)
        return LLMSut(run.spec.scenario_enum, prompts, decoders(run), run.generation).start(), prompts
