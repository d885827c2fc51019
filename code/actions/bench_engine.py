"""bench for the benchmarks that bring their own in-process engines (harness/plugins/benchmark_engine.py):

(f) Offline tokens/s through the harness (LoadGen, the token-streaming system under test) / a bare loop over the
    same engines, batch size and samples: every sample submitted to the engines at once, no LoadGen, timed from the
    first submit to the last output.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

from ..common.benchmark_api import get_benchmark
from ..common.constants import Scenario
from ..common.errors import EXIT_FAILURE, UserError
from ..common.records.loadgen_log import read_detail
from ..common.tuning.ratios import Figure
from ..common.tuning.search import round_sig

GOAL = 0.95
RUN_SECONDS = 20                 # the harness's Offline measurement
BARE_TIMEOUT_S = 3600.0


class _Collected:
    """A token stream that counts each request's tokens and says when every request is done."""

    def __init__(self, count: int) -> None:
        self.tokens, self.left, self.error = 0, count, None
        self._lock, self.done = threading.Lock(), threading.Event()

    def chunk(self, request_id, tokens, final) -> None:
        with self._lock:
            self.tokens += len(tokens)
            self.left -= bool(final)
            if self.left <= 0:
                self.done.set()

    def failed(self, error) -> None:
        self.error = error
        self.done.set()


def bare_loop(ctx, benchmark_name: str, config) -> tuple[float, float]:
    """(tokens/s, samples/s) of the benchmark's own engines over every sample of the config's data set."""
    from ..common.backends import threads_per_instance
    from ..common.generation import Request
    from ..common.harness.settings import effective_dataset_size

    benchmark = get_benchmark(benchmark_name)
    model = config["model"]
    settings = benchmark.generation(model, config.values, ctx.paths)
    samples = benchmark.preprocessed(model, config["dataset"], ctx.paths)
    prompts = [samples.load(i) for i in range(effective_dataset_size(config.values, len(samples)))]
    engines = benchmark.request_engines(model, config.values, ctx.paths, instances=int(config["instances"]),
                                        threads=threads_per_instance(config, ctx.system.info.cpu.cores))

    def run(batch) -> tuple[int, float]:
        stream = _Collected(len(batch))
        for engine in engines:
            engine.open(stream)
        start = time.perf_counter()
        try:
            for number, prompt in enumerate(batch):
                engines[number % len(engines)].submit([Request(number, prompt, settings)])
            if not stream.done.wait(BARE_TIMEOUT_S) or stream.error is not None:
                raise UserError(f"The bare loop of {benchmark_name}'s engines failed: {stream.error or 'timeout'}",
                                exit_code=EXIT_FAILURE)
            return stream.tokens, time.perf_counter() - start
        finally:
            for engine in engines:
                engine.close()

    run(prompts[:1])                   # warm-up: the first call of a runtime is slow
    tokens, seconds = run(prompts)
    return tokens / seconds, len(prompts) / seconds


def engine_bench(bench, ctx, benchmark_name: str) -> list[Figure]:
    """The figures of a benchmark's own engines for `make bench` (benchmark_engine.py names this function)."""
    from .harness import DownloadData, DownloadModel, PreprocessData

    for step in (DownloadModel, DownloadData, PreprocessData):
        step(ctx).run()
    offline = ctx.resolve(benchmark_name, Scenario.Offline)
    bare_tokens, bare_samples = bare_loop(ctx, benchmark_name, offline)
    ctx.log(f"{benchmark_name}: bare engine loop {bare_tokens:.2f} tokens/s ({bare_samples:.3f} samples/s), batch "
            f"{offline['batch_size']}")
    outcome = bench._short(ctx, benchmark_name, Scenario.Offline, ctx.paths.bench_dir / f"{benchmark_name}-offline",
                           offline_expected_qps=round_sig(bare_samples), min_duration=RUN_SECONDS * 1000)
    tokens = float(read_detail(Path(outcome.run_dir)).values.get("result_tokens_per_second") or 0)
    if not tokens:
        raise UserError(f"The Offline run in {outcome.run_dir} reported no tokens per second: {outcome.reason}",
                        exit_code=EXIT_FAILURE)
    return [Figure(f"(f) {offline['model']} Offline: harness vs bare engine loop (batch {offline['batch_size']})",
                   tokens, bare_tokens, "tokens/s", GOAL)]
