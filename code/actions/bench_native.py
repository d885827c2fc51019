"""bench: the native harness core's ceiling with a null backend, against a C++ SUT that completes every sample inside
IssueQuery (the BasicSUT of LoadGen's loadgen/benchmark/repro.cpp: the limit, "the C++ reference"), all three on the
same LoadGen (the native build's).

- Server ceiling: the highest target rate LoadGen rates VALID at p99 <= 10 ms, found by search.find_highest over
  short runs, for the reference, the native harness (goal: 0.8 x the reference) and the Python harness (for the
  record).
- Offline: samples/s of the native harness / the reference on the same query (goal 0.9), runs interleaved.
  LoadGen stamps every sample of a QuerySamplesComplete call when the call begins, and its own bookkeeping of each
  sample (about 85 ns on a 2-core machine) follows: the reference's single call leaves all of it outside its
  figure, a harness that completes batch by batch has it inside for every batch but the last. Measured on 2 cores,
  completing inside IssueQuery in calls of 512 samples (no thread, no queue) reaches 0.4 to 0.5 x the
  reference. So the native harness is also held, for the record, against that floor: the reference completing in
  calls of the native harness's batch size ("the batched C++ reference").

Each run is one `python -m code.actions.native_ceiling` process (native_ceiling.py, the probe this bench action
runs). Measured on 2 cores: the whole takes about three minutes.
"""
from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Callable

from ..common.native.build import NativeUnavailable, build_native
from ..common.tuning.ratios import Figure
from ..common.tuning.search import Outcome, SearchResult, find_highest

LATENCY_BOUND_NS = 10_000_000     # native_ceiling.py's Server bound
SERVER_SECONDS = 3                # each trial of the search
SERVER_START = 50_000             # samples/s
SERVER_CEILING = 3_200_000        # 2^6 x the start: no search grows past it
SERVER_TOLERANCE = 0.1
SERVER_MAX_TRIALS = 12            # ~5 to bracket from 50k, ~3 to narrow to 10 %, 2 to rerun the edges, 2 for
                                  # runs that contradict each other (a short run near the ceiling is noisy)
OFFLINE_QPS = 1_000_000           # the expected rate of the Offline query: 1.1 x 3 s of it, 3.3 M samples
OFFLINE_SECONDS = 3
OFFLINE_REPEATS = 3               # reference and native interleaved, the median of each
PROBE_TIMEOUT_S = 300
GOALS = {"server": 0.8, "offline": 0.9}
NAMES = {"reference": "C++ reference", "reference-batched": "batched C++ reference", "native": "native",
         "python": "Python harness"}

# (kind, scenario, target samples/s, seconds, run folder) -> the probe's JSON line
Probe = Callable[[str, str, float, float, Path], dict]
Log = Callable[[str], None]


def subprocess_probe(lib: Path, repo: Path) -> Probe:
    """Runs of native_ceiling.py, each in a process of its own (a LoadGen test per process)."""
    def probe(kind: str, scenario: str, target: float, seconds: float, run_dir: Path) -> dict:
        command = [sys.executable, "-m", "code.actions.native_ceiling", str(lib), kind, scenario, str(run_dir),
                   f"{target:g}", f"{seconds:g}"]
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}   # numpy's BLAS threads: none to spin beside the run
        try:
            done = subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True,
                                  timeout=PROBE_TIMEOUT_S, check=False)
        except subprocess.TimeoutExpired:
            return {"error": f"no result within {PROBE_TIMEOUT_S} s"}
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            return {"error": f"exit status {done.returncode}: {done.stderr.strip()[-500:]}"}
        return json.loads(lines[-1])
    return probe


def outcome(result: dict, run_dir: Path) -> Outcome:
    """A probe's Server run as the search judges it: LoadGen's VALID (early stopping counts), p99 against 10 ms."""
    error = result.get("error") or ""
    reason = error or ("" if result.get("valid") else
                       "INVALID: " + ", ".join(k for k in ("min_duration_met", "perf_constraints_met",
                                                            "early_stopping_met") if result.get(k) is False))
    return Outcome(valid=bool(result.get("valid")) and not error, latency_ns=result.get("p99_latency_ns"),
                   percentile=0.99, bound_ns=LATENCY_BOUND_NS, throughput=result.get("samples_per_second"),
                   reason=reason, run_dir=str(run_dir))


def server_ceiling(probe: Probe, kind: str, folder: Path, log: Log) -> SearchResult:
    """The highest Server target rate VALID for `kind`, from SERVER_START, in short runs."""
    numbers = itertools.count(1)
    log(f"Server ceiling, {NAMES[kind]}: highest VALID target rate (p99 <= {LATENCY_BOUND_NS / 1e6:g} ms), "
        f"from {SERVER_START:g} samples/s, {SERVER_SECONDS} s runs")

    def trial(target: float) -> Outcome:
        run_dir = folder / f"{kind}-server" / f"trial-{next(numbers):02d}-{target:g}"
        return outcome(probe(kind, "Server", target, SERVER_SECONDS, run_dir), run_dir)

    return find_highest(trial, SERVER_START, tolerance=SERVER_TOLERANCE, latency_margin=0.0, ceiling=SERVER_CEILING,
                        max_trials=SERVER_MAX_TRIALS, unit=lambda v: f"{v:g} samples/s", log=log)


def offline_rates(probe: Probe, folder: Path, log: Log) -> dict[str, float]:
    """Offline samples/s of the reference and the native harness on the same query, each the median of
    OFFLINE_REPEATS runs taken in turns (a slow drift of the machine weighs on both alike). The query (OFFLINE_QPS x
    1.1 x OFFLINE_SECONDS samples) is completed sooner than that, so LoadGen rates both runs INVALID for their
    duration: the figure is the rate, not the verdict."""
    measured: dict[str, list[float]] = {"reference": [], "reference-batched": [], "native": []}
    for repeat, kind in itertools.product(range(1, OFFLINE_REPEATS + 1), measured):
        result = probe(kind, "Offline", OFFLINE_QPS, OFFLINE_SECONDS, folder / f"{kind}-offline-{repeat}")
        if result.get("error") or not result.get("samples_per_second"):
            log(f"  Offline {NAMES[kind]} run {repeat}: no result: {result.get('error') or 'no samples/s logged'}")
            continue
        measured[kind].append(float(result["samples_per_second"]))
        log(f"  Offline {NAMES[kind]} run {repeat}: {measured[kind][-1]:,.0f} samples/s")
    return {kind: statistics.median(rates) if rates else 0.0 for kind, rates in measured.items()}


def ratio_line(label: str, value: float, reference: float, against: str = NAMES["reference"]) -> str:
    """`Server ceiling, native: 290000 samples/s, 0.91 x the C++ reference`."""
    ratio = f"{value / reference:.2f}" if reference else "-"
    return f"{label}: {value:.0f} samples/s, {ratio} x the {against}"


def figures_from(probe: Probe, folder: Path, log: Log) -> list[Figure]:
    """The Server ceilings of the three kinds and the Offline rates, as figures and log lines."""
    ceilings: dict[str, float] = {}
    for kind in ("reference", "native", "python"):
        search = server_ceiling(probe, kind, folder, log)
        ceilings[kind] = search.value or 0.0
        log(f"  {search.stopped}")
    offline = offline_rates(probe, folder, log)
    reference = ceilings["reference"]
    log(f"Server ceiling, {NAMES['reference']}: {reference:.0f} samples/s")
    for kind in ("native", "python"):
        log(ratio_line(f"Server ceiling, {NAMES[kind]}", ceilings[kind], reference))
    log(f"Offline, null backend, {NAMES['reference']}: {offline['reference']:.0f} samples/s")
    log(ratio_line("Offline, null backend, native", offline["native"], offline["reference"]))
    log(ratio_line("Offline, null backend, native", offline["native"], offline["reference-batched"],
                   NAMES["reference-batched"]))
    bound = f"null backend, VALID at p99 <= {LATENCY_BOUND_NS / 1e6:g} ms"
    return [Figure(f"Server ceiling, native ({bound}) vs the C++ reference", ceilings["native"], reference,
                   "samples/s", GOALS["server"]),
            Figure(f"Server ceiling, Python harness ({bound}) vs the C++ reference", ceilings["python"], reference,
                   "samples/s", None),
            Figure("Offline, null backend, native vs the C++ reference", offline["native"], offline["reference"],
                   "samples/s", GOALS["offline"]),
            Figure("Offline, null backend, native vs the batched C++ reference (completes inside IssueQuery in "
                   "calls of the same batch size)", offline["native"], offline["reference-batched"], "samples/s",
                   None)]


def native_figures(bench, ctx) -> list[Figure]:
    """The native core's figures for `make bench` (none, saying why, where the core cannot be built here)."""
    paths, log = bench.ctx.paths, bench.ctx.log
    try:
        built = build_native(paths.build, paths.download_cache, log=log)
    except NativeUnavailable as why:
        log(f"no figures of the native harness core: it cannot be built here: {why}")
        return []
    return figures_from(subprocess_probe(built.lib, paths.repo), paths.bench_dir / "native-ceiling", log)
