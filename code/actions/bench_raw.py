"""The raw engine, without LoadGen or the harness: the baselines of `make bench`'s figures (b), (c), (d) and (e).

Each loop loads the config's own engine with the harness's instances, threads per instance and ONNX Runtime
settings, feeds it the same preprocessed samples, and postprocesses every batch as the harness does. The samples are
in memory before a loop starts (HELD_SAMPLES of them, as the harness's sample library holds its performance set),
and each batch is taken from them in the order LoadGen issues its samples and gathered as the native core gathers
them (`gather`): an engine fed one batch over and over reads it from the cache, which no run does.
- throughput: batches of one size back to back on every instance, each the next samples of the held set, as LoadGen
  issues an Offline query (the loaded set in its order) (b);
- latency: one sample after the other, as SingleStream issues them (c);
- server: the arrivals of a Server run at a target rate, batched as the harness batches, judged as LoadGen judges
  (tuning/poisson_server.py): `server_p99` is one run's p99 at a rate (the harness's at the rate it held is read
  against it), `server_peak` searches the highest rate the engine holds, as (d) and (e) search the harness's.
"""
from __future__ import annotations

import itertools
import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np

from ..common.benchmark_api import get_benchmark
from ..common.constants import Scenario
from ..common.harness.plugins.inprocess import warmup_batch_sizes
from ..common.tuning import poisson_server
from ..common.tuning.search import Outcome, SearchResult, find_highest
from ..common.tuning.trials import SERVER_SHORT_QUERIES, SHORT_SECONDS
from .base import Context

HELD_SAMPLES = 256            # the samples a raw loop holds in memory and gathers its batches from
SEED = 1                      # the raw Server run's draw of samples: the same ones for every measurement


@dataclass
class RawEngine:
    """The config's engine loaded as the harness loads it, and its samples."""

    postprocess: Callable
    batch: Callable[[np.ndarray], dict]      # sample indices -> the batch of named inputs
    count: int                               # samples
    backends: list
    _held: dict | None = None

    def held(self) -> dict[str, np.ndarray]:
        """The first HELD_SAMPLES samples (all, where there are fewer) stacked per named input, loaded once: what a
        loop gathers its batches from, in memory before it starts."""
        if self._held is None:
            self._held = self.batch(np.arange(min(self.count, HELD_SAMPLES)))
        return self._held

    def close(self) -> None:
        for backend in self.backends:
            backend.close()
        self.backends = []

    def __enter__(self) -> "RawEngine":
        return self

    def __exit__(self, *_) -> None:
        self.close()


def raw_engine(ctx: Context, benchmark_name: str, config) -> RawEngine:
    from ..common.backends import create_backend, get_plugin, runtime_options, threads_per_instance
    from ..common.backends.registry import instance_count
    from ..common.harness.engine_build import locate_engine
    from ..common.named_inputs import named_sample, stack_batch

    benchmark = get_benchmark(benchmark_name)
    engine = locate_engine(config, ctx.system.system_id, ctx.paths, benchmark)
    samples = benchmark.preprocessed(config["model"], config["dataset"], ctx.paths)
    instances = instance_count(get_plugin(config["backend"]), int(config["instances"]))   # TensorRT: per GPU
    threads = threads_per_instance(config, ctx.system.info.cpu.cores)
    inputs = benchmark.models[config["model"]].inputs
    backends = [create_backend(engine, backend=config["backend"], input_names=[i.name for i in inputs],
                               threads=threads, instance=index, options=runtime_options(config))
                for index in range(instances)]

    def batch(indices) -> dict[str, np.ndarray]:
        return stack_batch([named_sample(samples.load(int(i)), inputs) for i in indices], inputs)
    return RawEngine(benchmark.postprocessor(config["model"], samples), batch, len(samples), backends)


def throughput(ctx: Context, benchmark_name: str, config, batch_size: int, seconds: float) -> float:
    """Samples/s of batches of `batch_size` back to back on every instance."""
    with raw_engine(ctx, benchmark_name, config) as raw:
        return loaded_throughput(raw, batch_size, seconds)


def throughputs(ctx: Context, benchmark_name: str, config, batch_sizes: Sequence[int], seconds: float
                ) -> dict[int, float]:
    """Samples/s of each batch size on one loaded engine, measured in turns for `seconds` (throughput_in_turns)."""
    with raw_engine(ctx, benchmark_name, config) as raw:
        return throughput_in_turns(raw, batch_sizes, seconds)


def gather(held: dict[str, np.ndarray], indices: np.ndarray, out: dict[str, np.ndarray] | None = None
           ) -> dict[str, np.ndarray]:
    """The held samples at `indices` as a batch, as the native core gathers them (native/src/core/sample_library.cc):
    samples that lie one after another (a batch of one) read where they lie, the others copied (into `out`'s arrays
    where given)."""
    first = int(indices[0])
    if np.array_equal(indices, np.arange(first, first + len(indices))):
        return {name: data[first:first + len(indices)] for name, data in held.items()}
    if out is None:
        return {name: data[indices] for name, data in held.items()}
    for name, data in held.items():
        np.take(data, indices, axis=0, out=out[name])
    return out


def _feeds(raw: RawEngine, batch_size: int) -> list[tuple]:
    """Per instance: its backend, the buffers a batch across the end of the held set is copied into, and its batches
    of `batch_size`, the instances taking the held samples in turn, in order and round again, as the core serves
    LoadGen's Offline query."""
    held = raw.held()
    count = len(next(iter(held.values())))
    draws = [(np.arange(batch_size) + start) % count
             for start in range(0, count * batch_size // math.gcd(count, batch_size), batch_size)]
    draws = [draws[slot::len(raw.backends)] or draws for slot in range(len(raw.backends))]
    return [(backend, {name: np.empty((batch_size, *data.shape[1:]), dtype=data.dtype) for name, data in held.items()},
             itertools.cycle(each)) for backend, each in zip(raw.backends, draws)]


def _warm(feeds: list[tuple]) -> None:
    for backend, buffers, _ in feeds:
        backend.infer(buffers)   # one call at this batch size, unmeasured


def _serve(raw: RawEngine, feeds: list[tuple], batch_size: int, going: Callable[[int], bool]) -> tuple[int, float]:
    """Every instance's batches back to back, all at once, each while `going(its samples so far)`: the samples
    served and the seconds it took."""
    held = raw.held()
    done = [0] * len(feeds)

    def loop(slot: int) -> None:
        backend, buffers, batches = feeds[slot]
        while going(done[slot]):
            indices = next(batches)
            raw.postprocess(backend.infer(gather(held, indices, buffers)), indices)
            done[slot] += batch_size

    start = time.monotonic()
    workers = [threading.Thread(target=loop, args=(i,)) for i in range(len(feeds))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(done), time.monotonic() - start


def loaded_throughput(raw: RawEngine, batch_size: int, seconds: float) -> float:
    """Samples/s of batches of `batch_size` back to back on every instance of a loaded engine for `seconds` (after
    one warm-up call each), the held samples taken as `_feeds` takes them."""
    feeds = _feeds(raw, batch_size)
    _warm(feeds)
    stop = time.monotonic() + seconds
    done, took = _serve(raw, feeds, batch_size, lambda _: time.monotonic() < stop)
    return done / took


def throughput_in_turns(raw: RawEngine, batch_sizes: Sequence[int], seconds: float) -> dict[int, float]:
    """Samples/s of each batch size on a loaded engine, measured in turns: in each turn every batch size serves the
    same samples on every instance (one batch of the largest), the order reversed every other turn, turn after
    turn until `seconds` have passed (two turns at least); each size's figure is its samples over its time in all
    turns. A machine whose speed moves within seconds then slows or speeds every size alike, where a window of
    its own for each size gives the one that met a fast moment the lead. Each size runs once first, unmeasured."""
    feeds = {size: _feeds(raw, size) for size in batch_sizes}
    for each in feeds.values():
        _warm(each)
    per_turn = max(batch_sizes)
    served = dict.fromkeys(batch_sizes, 0)
    took = dict.fromkeys(batch_sizes, 0.0)
    stop, turn = time.monotonic() + seconds, 0
    while turn < 2 or time.monotonic() < stop:
        for size in (batch_sizes if turn % 2 == 0 else list(reversed(batch_sizes))):
            done, spent = _serve(raw, feeds[size], size, lambda samples: samples < per_turn)
            served[size] += done
            took[size] += spent
        turn += 1
    return {size: served[size] / took[size] for size in batch_sizes}


def percentile_of(latencies, percentile: float) -> float:
    """The percentile as LoadGen takes it (results.cc): the sorted latencies at index count x percentile."""
    ordered = sorted(latencies)
    return float(ordered[min(len(ordered) - 1, int(len(ordered) * percentile))])


def latency(ctx: Context, benchmark_name: str, config, percentile: float, seconds: float) -> float:
    """One sample after the other on the first instance (gathered from memory, inferred, postprocessed): the
    `percentile` of the per-sample latencies over `seconds`, in ms."""
    with raw_engine(ctx, benchmark_name, config) as raw:
        backend = raw.backends[0]
        singles = [raw.batch([index]) for index in range(raw.count)]
        backend.infer(singles[0])   # warm-up
        latencies: list[int] = []
        stop = time.monotonic() + seconds
        for index in itertools.cycle(range(raw.count)):
            if time.monotonic() >= stop:
                break
            began = time.perf_counter_ns()
            raw.postprocess(backend.infer(singles[index]), np.array([index]))
            latencies.append(time.perf_counter_ns() - began)
        return percentile_of(latencies, percentile) / 1e6


def server_run(raw: RawEngine, rate: float, batch_size: int, window_us: int, bound_ms: float,
               seconds: float = SHORT_SECONDS[Scenario.Server], min_queries: int = SERVER_SHORT_QUERIES,
               seed: int = poisson_server.SEED) -> Outcome:
    """One Server run of the raw engine at `rate` per second, as long as the harness's short Server runs, on
    LoadGen's schedule for `seed` (the round's schedule_rng_seed: the arrivals the harness's run gets)."""
    schedule = poisson_server.arrivals(rate, seconds, min_queries, seed)
    # The samples drawn at random from those held, as LoadGen draws them; each batch gathered from them as the harness
    # gathers, never read from the preprocessed files during the run.
    held = raw.held()
    samples = np.random.default_rng(SEED).integers(0, len(next(iter(held.values()))), len(schedule))

    def instance(backend) -> poisson_server.BatchCall:
        def call(numbers: np.ndarray) -> None:
            indices = samples[numbers]
            raw.postprocess(backend.infer(gather(held, indices)), indices)
        return call

    latencies = poisson_server.serve(schedule, [instance(b) for b in raw.backends], batch_size, window_us * 1000)
    verdict = poisson_server.judge(latencies, schedule, bound_ms * 1e6)
    return verdict.outcome(bound_ms * 1e6, float(latencies.mean()))


@contextmanager
def server_engine(ctx: Context, benchmark_name: str, config) -> Iterator[Callable[[float], Outcome]]:
    """The config's engine loaded and warmed up as the harness warms up its instances, as a Server run at a rate:
    (rate, least number of queries or None for a short run's) -> the Outcome of one run with the config's layout
    (largest batch, batching window) at the round's bound."""
    bound_ms = ctx.rules.benchmark(benchmark_name).server_latency_ms
    with raw_engine(ctx, benchmark_name, config) as raw:
        batch_size, window_us = int(config["batch_size"]), int(config.get("server_batch_timeout_us") or 0)
        for backend in raw.backends:
            for size in warmup_batch_sizes(Scenario.Server, batch_size):
                backend.infer(raw.batch(np.arange(size) % raw.count))
        seed = ctx.rules.seeds.schedule_rng_seed    # LoadGen's arrivals, as the harness's runs get them
        yield lambda rate, queries=None: server_run(raw, rate, batch_size, window_us, bound_ms,
                                                    min_queries=queries or SERVER_SHORT_QUERIES, seed=seed)


def server_p99(ctx: Context, benchmark_name: str, config, rate: float, queries: int | None = None) -> float:
    """The raw engine's p99 latency in ms in one Server run at `rate`, as long as a short run of the harness, or
    holding at least `queries` arrivals."""
    with server_engine(ctx, benchmark_name, config) as run:
        return run(rate, queries).latency_ns / 1e6


def server_peak(ctx: Context, benchmark_name: str, config, start: float, next_turn: Callable[[], None],
                log: Callable[[str], None], **search) -> SearchResult:
    """The highest rate the raw engine holds at the Server latency bound, with the config's layout (instances,
    threads, largest batch, batching window), searched by find_highest with `search`, the settings of the harness's
    own Server search. `next_turn` is called before each run (tuning/turns.py: searches side by side)."""
    with server_engine(ctx, benchmark_name, config) as run:
        def trial(rate: float) -> Outcome:
            next_turn()
            return run(rate)
        log(f"highest rate that holds p99 <= {ctx.rules.benchmark(benchmark_name).server_latency_ms:g} ms, "
            f"from {start:g} QPS")
        return find_highest(trial, start, log=log, **search)
