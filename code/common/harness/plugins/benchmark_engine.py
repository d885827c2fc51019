"""The in-process harness of a benchmark that brings its own engines: a model that generates tokens from prompts the
decoder graph does not take (speech), run in this process by request-level engines the benchmark makes
(`GenerativeBenchmark.own_engines` names them, `request_engines` makes them: generation.RequestEngine), their outputs
streamed to LoadGen by the token-streaming system under test (llm_sut.StreamingSUT) as the LLM harnesses' are, each
response the benchmark's answer kind. No engine file: the engines load the model's own files. `inprocess_engine`
picks among the benchmark's engines."""
from __future__ import annotations

from ...fields import Field
from ..registry import HarnessPlugin, HarnessRun, Selection

ENGINE_FIELD = Field(
    "inprocess_engine", str, "", "The in-process engine of a benchmark that brings its own (make run lists them "
    "where one is asked for that it has not): empty for the benchmark's default.", generative=True)


def own_engines(benchmark_name: str) -> tuple[str, ...]:
    """The names of the benchmark's in-process engines (none: it has none, or is not registered)."""
    from ...benchmark_api import IMPLEMENTATIONS, generative, get_benchmark

    if benchmark_name not in IMPLEMENTATIONS or not get_benchmark(benchmark_name).generates_tokens:
        return ()
    return generative(get_benchmark(benchmark_name)).own_engines


class BenchmarkEngineHarness(HarnessPlugin):
    name = "engine"
    harness_type = "lwis"
    implementation = "python"
    generates_tokens = True
    needs_engine = False
    fields = (ENGINE_FIELD,)
    description = "in process: the benchmark's own engines (e.g. speech recognition), outputs streamed to LoadGen"
    bench_figures = "code.actions.bench_engine:engine_bench"

    def why_not(self, selection: Selection) -> str | None:
        if not own_engines(selection.benchmark):
            return f"{selection.benchmark} has no in-process engines of its own"
        return None

    def needs_environment(self, args, for_run: bool) -> bool:
        """A benchmark's own engines run in its own environment (wan's diffusers one): make build makes it, as make
        run and make download_model do."""
        return any(own_engines(name) for name in args.benchmarks)

    def make_environment(self, ctx) -> None:
        from ...benchmark_api import generative, get_benchmark

        for name in ctx.args.benchmarks:
            if own_engines(name):
                generative(get_benchmark(name)).make_environment(ctx.paths, ctx.log)

    def check_model(self, benchmark, fields, paths) -> None:
        # The generation settings are read from the model's own files, which the benchmark checks against the
        # digests recorded when they were made: a damaged model stops here, before the test's process starts.
        benchmark.generation(fields["model"], fields, paths)

    def prepare_model(self, config, paths, log) -> str:
        from ...benchmark_api import get_benchmark
        from ...model_files import verified_model

        weights = get_benchmark(config.benchmark).download_model(config["model"], paths, log)
        if not weights.is_dir():    # a folder (a diffusers pipeline) is checked by the benchmark that made it
            verified_model(config.benchmark, config["model"], paths, weights)   # before any test: as it was made
        return f"no engine file: the engines load {weights}"

    def create(self, run: HarnessRun):
        from ...backends import threads_per_instance
        from ...benchmark_api import generative
        from ..llm_sut import PromptLibrary, StreamingSUT

        fields, benchmark = run.fields, generative(run.benchmark)
        engines = benchmark.request_engines(run.spec.model, fields, run.paths, instances=int(fields["instances"]),
                                            threads=threads_per_instance(fields, run.spec.cpu_cores))
        prompts = PromptLibrary(run.samples, run.spec.performance_sample_count)
        answer = benchmark.answer(run.spec.model, run.paths)
        return StreamingSUT(run.spec.scenario_enum, prompts, engines, run.generation, answer=answer).start(), prompts
