"""The sweep behind an untuned layout (tuning/measured_layout.py says what it chooses and when): the engine's
candidates measured in seconds with the raw loops of make bench (bench_raw), before the first test that runs the
engine, and kept beside it, so that it runs once per engine and machine."""
from __future__ import annotations

import dataclasses
import time
from types import MappingProxyType
from typing import Iterable

from ..common.benchmark_api import get_benchmark
from ..common.config_registry import UNTUNED, ResolvedConfig
from ..common.constants import Scenario
from ..common.errors import UserError
from ..common.fileio import sha256_file
from ..common.paths import shown_path
from ..common.tuning import measured_layout as measured
from ..common.tuning.layouts import instance_layouts
from . import bench_raw
from .base import Context


def with_values(config: ResolvedConfig, **values) -> ResolvedConfig:
    return dataclasses.replace(config, values=MappingProxyType({**config.values, **values}))


def candidates(ctx: Context, config: ResolvedConfig, kind: str) -> list[tuple[str, ResolvedConfig, int]]:
    """(label, the config it runs, batch size) of each candidate a sweep that varies `kind` measures (fewer than
    two: no sweep): Offline's batch sizes up to the model's largest, or the instances x threads that use every
    core once at the config's batch size."""
    if kind == measured.BATCH:
        return [(measured.batch_label(b), config, b) for b in measured.OFFLINE_BATCHES]
    cores, batch = ctx.system.info.cpu.cores, int(config["batch_size"])
    return [(measured.layout_label(n, t), with_values(config, instances=n, intra_op_threads=t), batch)
            for n, t in instance_layouts(cores, config["backend"], config.scenario)]


def sweep(ctx: Context, benchmark: str, config: ResolvedConfig) -> measured.Sweep | None:
    """The candidates of `config`'s engine measured in turns (`measure`) and kept beside the engine; None where
    the layout is not the sweep's to choose, is chosen already, or the engine is missing (the planner then names
    the make target that builds it)."""
    from ..common.harness.engine_build import locate_engine

    if not measured.applies(config):
        return None
    where = ctx.paths.layout_sweep(ctx.system.system_id, benchmark, config.scenario)
    kept = measured.find_sweep(where, config, ctx.machine)
    load = measured.load_now()
    if any(s.startswith(UNTUNED) for s in config.sources.values()) and not measured.quieter_now(kept, load):
        return None    # chosen already (a sweep made on a busy machine is made again once it is quiet)
    kind = measured.varies(config.scenario, get_benchmark(benchmark).models[config["model"]].max_batch_size)
    tried = candidates(ctx, config, kind)
    if len(tried) < 2 or any(name in ctx.pinned_layout(config) for name in measured.SWEPT_FIELDS[kind]):
        return None
    try:
        engine = locate_engine(config, ctx.system.system_id, ctx.paths, get_benchmark(benchmark))
    except UserError:
        return None
    what = ", ".join(label for label, _, _ in tried)
    how = (f"{measured.TURNS_SECONDS:g} s of turns of {max(batch for _, _, batch in tried)} samples each"
           if kind == measured.BATCH else f"{measured.PASSES} passes of {measured.SWEEP_SECONDS:g} s each")
    ctx.log(f"{benchmark} {config.scenario.value}: no layout tuned on this system: measuring {what} on the engine "
            f"({measured.STEADY_SECONDS:g} s unmeasured, then {how}, once; kept in "
            f"{shown_path(where, ctx.paths.repo)}) ...")
    began = time.monotonic()
    rates = measure(ctx, benchmark, tried, kind)
    found = measured.Sweep(config.scenario.value, engine.name, sha256_file(ctx.paths.engine_manifest(engine)),
                           ctx.machine, MappingProxyType(measured.sweep_fields(config, kind)),
                           MappingProxyType({label: round(rates[label], 1) for label, _, _ in tried}),
                           round(time.monotonic() - began, 1), measured.measured_now(), load,
                           ctx.system.info.cpu.cores)
    measured.keep_sweep(where, found)
    _, why = measured.chosen(config, found)
    ctx.log(f"  untuned: {why}")
    return found


def measure(ctx: Context, benchmark: str, tried: list[tuple[str, ResolvedConfig, int]], kind: str
            ) -> dict[str, float]:
    """Samples/s of each candidate, the engine first run unmeasured for STEADY_SECONDS. Batch sizes share one
    loaded engine and are measured in turns of the same samples each for TURNS_SECONDS
    (bench_raw.throughput_in_turns); layouts, each an engine loaded apart, in PASSES passes in turns, every other
    one in reverse order, each candidate's figure the mean of its passes (measured_layout.py says why)."""
    if kind == measured.BATCH:
        with bench_raw.raw_engine(ctx, benchmark, tried[0][1]) as raw:
            bench_raw.loaded_throughput(raw, tried[0][2], measured.STEADY_SECONDS)
            rates = bench_raw.throughput_in_turns(raw, [batch for _, _, batch in tried], measured.TURNS_SECONDS)
        return {label: rates[batch] for label, _, batch in tried}
    taken: dict[str, list[float]] = {label: [] for label, _, _ in tried}
    for number in range(measured.PASSES):
        for place, (label, config, batch) in enumerate(tried if number % 2 == 0 else tried[::-1]):
            with bench_raw.raw_engine(ctx, benchmark, config) as raw:
                if number == 0 and place == 0:
                    bench_raw.loaded_throughput(raw, batch, measured.STEADY_SECONDS)
                taken[label].append(bench_raw.loaded_throughput(raw, batch, measured.SWEEP_SECONDS))
    return {label: sum(rates) / len(rates) for label, rates in taken.items()}


def ensure_sweeps(ctx: Context, pairs: Iterable[tuple[str, Scenario]]) -> None:
    """A sweep for each (benchmark, scenario) whose untuned layout a sweep chooses and which has none yet."""
    for benchmark, scenario in dict.fromkeys(pairs):
        sweep(ctx, benchmark, ctx.resolve(benchmark, scenario))
