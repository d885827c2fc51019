"""bench: the harness's speed, each figure a ratio against a baseline measured in the same run.

(a) Offline samples/s of the harness with a backend that returns at once / a bare LoadGen null SUT.
    With it (bench_native.py): null backend, Server ceiling (native, Python harness), Offline (native) / C++ SUT.
(b) Offline samples/s of the model through the harness / raw ONNX Runtime on the same preprocessed inputs, same
    engine, instances and threads, at the raw loop's best batch size (RAW_BATCHES measured in turns of the same
    samples each, bench_raw.throughput_in_turns; the harness runs the batch a first run takes: make tune's, else
    the one a sweep of the engine chose, layout_sweep.py).
(c) SingleStream: raw ONNX Runtime's batch-1 latency / the harness's, as LoadGen measures it, both at the
    percentile LoadGen judges (the 90th), so that higher is better (goal: the harness within 1.05 x raw), with the
    SingleStream layout (instance's threads, spinning or sleeping), in runs of STREAM_SECONDS each side.
(b) and (c) are taken in ROUNDS rounds of a raw run and a harness run, raw first in every other one (ratios.in_turns),
    and the best run of each side is compared (ratios.Rounds): a shared VM's speed moves in phases. Each raw
    run lasts as long as a harness run, so that the best of each side is picked from windows of one length.
(d) Server at INT8: the highest target QPS that LoadGen rates VALID (search.find_highest over short runs) / the
    INT8 Offline samples/s through the harness; (e) the same at FP32. Beside each, at the rate the harness held,
    the raw engine's p99 latency / the harness's (bench_raw.server_p99: the same layout fed the same arrivals,
    LoadGen's own schedule, without LoadGen or the harness, judged as LoadGen judges; the best of ROUNDS runs each
    in turns), and for the record the raw engine's own Server ceiling (bench_raw.server_peak, its search in turns
    with the harness's, trial by trial: tuning/turns.py) against Offline: what queueing at the latency bound leaves
    of the engine's throughput on this machine, whatever runs it.
(m) Server at fixed rates (FIXED_SERVER_RATES), with the layout a first run takes there (tuned, else measured on the
    engine for that rate: tuning/measured_layout.py, else configured): the raw engine's p99 / the harness's, read as
    beside (d) and (e), in runs of at least FIXED_SERVER_QUERIES queries each (a p99 that is a statistic, not the
    few worst samples of a short run).
(k) Offline samples/s of the harness type's first implementation (native) / its last (python), same engine and
    config (where the first can run); (l) the last one's Server p99 latency / the first one's, at the rate (d) found;
    both the best of ROUNDS runs each in turns, as (b) and (c).
(b), (c) and (k) are measured for every benchmark (resnet50, yolo), (d), (e), (m) and (l) for those with a Server
scenario. A harness plug-in with figures of its own gets those instead (its `bench_figures`): the LLM harness for
the benchmarks that generate tokens (bench_llm.py: (f) and (g)), the Triton harness with --harness_type=triton
(bench_triton.py: (h), (i) and (j)); and the figures a plug-in adds beside (a) (its `overhead_figures`: the native
core's, bench_native.py).
Runs every benchmark on its embedded default unless RUN_ARGS choose otherwise; builds the engines it needs.
"""
from __future__ import annotations

import dataclasses
import importlib
import itertools
import json
import math
import subprocess
import sys
from typing import Callable
from ..common.benchmark_api import IMPLEMENTATIONS
from ..common.constants import Scenario
from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.harness.registry import IMPL_FIELD, of_type
from ..common.harness.selection import choose
from ..common.records.early_stopping import TARGET_LATENCY_PERCENTILE
from ..common.tuning.ratios import Figure, Rounds, figure_table, in_turns
from ..common.tuning.search import Outcome, SearchResult, find_highest, round_sig
from ..common.tuning.turns import side_by_side
from . import bench_raw
from .base import Context, Handler
from .locks import measuring
from .harness import DownloadData, DownloadModel, GenerateEngines, PreprocessData, with_embedded_default
from .layout_sweep import ensure_sweeps
from .trial_runs import run_once, with_fields

# (c): the harness's SingleStream p90 at most 1.05 x raw batch-1 latency; (d), (e): Server VALID at 0.8 x Offline
# (NVIDIA's published H100 ratio is 0.82).
# (d), (e) against the raw engine (the same layout fed the same arrivals without LoadGen or the harness): at the rate
# the harness held, its p99 within 1 / 0.9 of the raw engine's (the toolkit's own goal).
# (m): at fixed rates, with the layout a first run takes (tuned, else measured on the engine), the harness's p99
# within 1.1 x the raw engine's at the same rate.
GOALS = {"a": 0.8, "b": 0.97, "c": round(1 / 1.05, 3), "server": 0.8, "server_raw": 0.9, "impl": 0.97,
         "server_fixed": round(1 / 1.1, 3)}
# A model of one image per call (yolo): within 5 % of raw ONNX Runtime in throughput and SingleStream latency.
BENCHMARK_GOALS = {"yolo": {"b": 0.95, "c": round(1 / 1.05, 3)}}
BENCH_SOURCE = "make bench"   # the source its records give the settings bench chooses
PROBE_SECONDS = 5
RUN_SECONDS = 15
RAW_BATCHES = (1, 2, 4, 8, 16, 32, 64)   # the raw loop's batch sizes, for (b)'s best batch (ONNX Runtime)
RAW_BATCH_SECONDS = 3         # each batch size's share of the raw loop's turns while looking for the best
# Each raw loop at the best batch as long as a harness run, in turns with them: the best of several short
# loops would catch a fast phase of the machine that a longer harness run averages away.
RAW_ROUND_SECONDS = RUN_SECONDS
ROUNDS = 3                    # (b), (c): runs of each side, in turns (ratios.in_turns)
# (c)'s runs, each side's: a percentile of a window shorter than the machine's phases measures the phase. On the 2-core
# VM (MobileNetV2 FP32, batch 1, 2 threads; 5 s medians of 5.1 to 5.7 ms for up to 10 s, else 7.2 to 9.4), the raw
# loop's p90 over every 10 s window of 150 s read 5.78 to 10.54 ms, over every 30 s window 8.40 to 10.22.
STREAM_SECONDS = 30
SERVER_TOLERANCE = 0.05
SERVER_MAX_TRIALS = 10
SCENARIOS = (Scenario.Offline, Scenario.Server, Scenario.SingleStream)
FIXED_SERVER_RATES = (40.0, 80.0)   # (m): Server p99 at these rates, harness vs raw engine, the first run's layout
# (m)'s runs, each side's, hold at least this many queries: in a short run's 600 at 40 QPS the p99 is the 6th-worst
# latency, and the same raw engine's 15 s runs in a row read 6.5 to 15.5 ms; 60 s runs (2,400) read 8.3 to 9.6 ms.
FIXED_SERVER_QUERIES = 2000
# Server layout per precision (documentation/harness.md, "Why the CPU defaults"): INT8 with the configs' own
# layout (one single-threaded instance per core); FP32, whose single-threaded latency tail alone nearly fills
# the 15 ms bound on a small CPU, with one instance on every core, which shortens each sample instead, its
# threads sleeping between operators (spinning ones hold the cores against LoadGen's threads between queries:
# measured on a shared 2-core machine at 20 QPS, p50 413 ms spinning against 22 ms sleeping).
# A layout tuned on this system (make tune, in custom.py) is measured instead. Each is given (never left to the
# sweep, whose layout follows the rate): a search's runs at different rates, and the raw engine's, run one layout.
SERVER_LAYOUT = {"int8": {"instances": 0, "intra_op_threads": 1},    # instances 0: one per core (server_layout)
                 "fp32": {"instances": 1, "intra_op_threads": 0, "intra_op_spinning": False}}


def _function(target: str):
    """The function a harness plug-in names as "module:function" for its bench figures."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def _with(ctx: Context, scenarios: tuple[Scenario, ...], **fields) -> Context:
    return with_fields(ctx, scenarios, True, fields, BENCH_SOURCE)


def ctx_layout(ctx: Context, benchmark_name: str, scenario: Scenario = Scenario.Server) -> str:
    """"2 x 1 thread": the config's instances and threads per instance, as the harness resolves them; for Server
    with its largest batch and batching window."""
    config = ctx.resolve(benchmark_name, scenario)
    from ..common.backends import threads_per_instance

    threads = threads_per_instance(config, ctx.system.info.cpu.cores)
    layout = f"{config['instances']} x {threads} thread{'s' if threads > 1 else ''}"
    if threads > 1 and config.get("intra_op_spinning") is False:
        layout += " sleeping"
    if int(config.get("inter_op_threads") or 1) > 1:
        layout += f", {config['inter_op_threads']} inter-op"
    if scenario is Scenario.SingleStream:
        return layout
    if scenario is Scenario.Server:
        layout += f", batch {config['batch_size']} within {config['server_batch_timeout_us']} us"
    return layout


def layout_origin(ctx: Context, benchmark_name: str, scenario: Scenario) -> str:
    """Where the layout a figure runs comes from: make tune or the user's custom.py, a sweep of the engine (where
    none is tuned), or the shipped config."""
    from ..common.config_registry import UNTUNED
    from ..common.harness.first_run import LAYOUT_FIELDS

    config = ctx.resolve(benchmark_name, scenario)
    if any(config.sources.get(name, "").startswith(UNTUNED) for name in LAYOUT_FIELDS):
        return "untuned, measured on the engine"
    return "tuned" if ctx.pinned_layout(config) else "configured"


def server_layout(ctx: Context, benchmark_name: str, precision: str) -> dict:
    """SERVER_LAYOUT's fields for `precision`, unless this system's custom.py sets a layout field of the Server config
    (make tune's layout): that one is measured as it is."""
    from ..common.harness.first_run import LAYOUT_FIELDS, set_in_custom_config

    config = ctx.resolve(benchmark_name, Scenario.Server)
    _, config_class = ctx.registry.lookup(benchmark_name, Scenario.Server, [config.key.system_id],
                                          config.key.workload)
    if any(set_in_custom_config(config_class, field) for field in LAYOUT_FIELDS):
        return {}
    layout = dict(SERVER_LAYOUT[precision])
    return {**layout, "instances": layout["instances"] or ctx.system.info.cpu.cores}


def offline_layout(ctx: Context, benchmark_name: str) -> str:
    return ctx_layout(ctx, benchmark_name, Scenario.Offline)


def bench_scenarios(args, available) -> tuple[Scenario, ...]:
    """The scenarios bench measures of those the benchmark has: all of them, but Server only where --scenarios
    names it when --scenarios is given (its searches are the longest part; Offline and SingleStream are the
    baselines of every figure and always run)."""
    if "scenarios" not in args.explicit:
        return tuple(available)
    return tuple(s for s in available if s is not Scenario.Server or s in args.scenarios)


def best_of(rates: dict[int, float]) -> tuple[int, float]:
    """(the batch size, its samples/s) of the highest samples/s."""
    if not rates:
        raise ValueError("no batch size was measured")
    batch = max(rates, key=lambda b: rates[b])
    return batch, rates[batch]


class Bench(Handler):
    def __init__(self, ctx: Context) -> None:
        # Every benchmark the toolkit implements unless RUN_ARGS choose, each on its embedded default (an edge
        # variant runs the same model and harness as its datacenter benchmark: measured once).
        super().__init__(with_embedded_default(ctx, benchmarks=tuple(b for b in IMPLEMENTATIONS
                                                                     if not b.endswith("-edge"))))

    def run(self) -> int:
        with measuring(self.ctx.paths):    # never beside find_peak, which needs the machine to itself
            return super().run()

    def handle(self) -> int:
        self.ctx.refuse_unrunnable()     # performance runs of the scenarios the benchmarks have
        figures: list[Figure] = []
        searches: dict[str, SearchResult] = {}
        for number, benchmark_name in enumerate(self.ctx.args.benchmarks):
            figures += self._figures(benchmark_name, searches, overhead=number == 0)
        self.ctx.log(f"\nBenchmark of the harness on {self.ctx.system.system_id}:")
        for line in figure_table(figures):
            self.ctx.log(f"  {line}")
        for each, search in searches.items():
            bracket = ", ".join(f"{v:g}" if v is not None else "-" for v in (search.low, search.high))
            self.ctx.log(f"  Server {each}: {search.stopped}; bracket [{bracket}] QPS "
                         f"({len(search.steps)} runs of at least {RUN_SECONDS} s)")
            rejected = [s.outcome for s in search.steps if not s.accepted]
            if search.value is None and rejected:
                self.ctx.log(f"    no rate was VALID; the last INVALID one: {rejected[-1].reason}")
        return EXIT_OK

    def _figures(self, benchmark_name: str, searches: dict[str, SearchResult], overhead: bool) -> list[Figure]:
        """(a) when `overhead`; (b) and (c) for the benchmark; (d) and (e) where it has a Server scenario."""
        scenarios = bench_scenarios(self.ctx.args, [s for s in SCENARIOS
                                                    if self.ctx.registry.systems_for(benchmark_name, s)])
        one = dataclasses.replace(self.ctx, args=self.ctx.args.fill_in(BENCH_SOURCE, benchmarks=(benchmark_name,)),
                                  _registry=None)
        ctx = _with(one, scenarios)
        goals = {**GOALS, **BENCHMARK_GOALS.get(benchmark_name, {})}
        offline = ctx.resolve(benchmark_name, Scenario.Offline)
        harness = choose(offline, ctx.args.workload.harness_type.value, ctx.paths.build)
        if harness.bench_figures:
            return _function(harness.bench_figures)(self, ctx, benchmark_name)
        precision, model = offline["precision"], offline["model"]
        server = Scenario.Server in scenarios
        # The configs as they are (b, c), and at INT8 and FP32 for the Server figures (d, e).
        at = {p: _with(ctx, scenarios, precision=p) for p in ("int8", "fp32") if p != precision and server}
        at[precision] = ctx
        for step in (DownloadModel, DownloadData, PreprocessData):
            step(ctx).run()
        for each in at.values():
            GenerateEngines(each).run()
        # The layout a first run takes where none is tuned: measured on the engine, once (layout_sweep.py).
        ensure_sweeps(ctx, [(benchmark_name, s) for s in scenarios])
        offline = ctx.resolve(benchmark_name, Scenario.Offline)
        figures = []
        self.ctx.log(f"{benchmark_name}: {model} {precision}; Offline batch {offline['batch_size']}, "
                     f"{offline['instances']} instance(s)")
        if overhead:
            # The harness's own cost per sample, whatever the model: at the configured batch, not the one a sweep
            # chose for this engine (a batch of one would measure a call per sample against a backend that costs
            # nothing, where the model's own time makes that call negligible).
            configured = ctx.resolve(benchmark_name, Scenario.Offline, measured_layout=False)
            bare = self._probe("bare", configured)
            probed = self._probe("harness", configured)
            figures.append(Figure(f"(a) harness overhead: Offline (batch {configured['batch_size']}, configured), "
                                  f"backend returns at once, vs bare LoadGen SUT", probed, bare, "samples/s",
                                  goals["a"]))
            for plugin in of_type(harness.harness_type, generates_tokens=False):
                if plugin.overhead_figures:
                    figures += _function(plugin.overhead_figures)(self, ctx)

        # Every raw batch size first, for the best; then the harness and raw ONNX Runtime at that batch in turns
        # (ratios.in_turns: a shared machine's speed drifts within minutes, and each round's ratio sees one drift).
        batches = RAW_BATCHES if offline["backend"] == "onnxruntime" else (int(offline["batch_size"]),)
        tried = bench_raw.throughputs(ctx, benchmark_name, offline, batches, RAW_BATCH_SECONDS * len(batches))
        best_batch, expected = best_of(tried)
        self.ctx.log(f"raw ONNX Runtime, {offline_layout(ctx, benchmark_name)}: "
                     + ", ".join(f"b{b} {rate:,.1f}" for b, rate in tried.items()) + " samples/s")
        offline_runs = itertools.count(1)
        rounds = in_turns(lambda: bench_raw.throughput(ctx, benchmark_name, offline, best_batch, RAW_ROUND_SECONDS),
                          lambda: self._harness_offline(ctx, benchmark_name, expected,
                                                        f"{benchmark_name}-offline-{precision}-{next(offline_runs)}"),
                          ROUNDS)
        self._log_rounds("(b) Offline samples/s", rounds)
        harness, raw = rounds.best()
        through = {precision: harness}
        figures.append(Figure(f"(b) {model} {precision} Offline (batch {offline['batch_size']}, "
                              f"{offline_layout(ctx, benchmark_name)}; "
                              f"{layout_origin(ctx, benchmark_name, Scenario.Offline)}): harness vs raw ONNX Runtime "
                              f"at its best "
                              f"batch ({best_batch}), best of {ROUNDS} runs each in turns", harness, raw, "samples/s",
                              goals["b"]))

        single = ctx.resolve(benchmark_name, Scenario.SingleStream)
        percentile = TARGET_LATENCY_PERCENTILE[Scenario.SingleStream]
        rounds = self._stream_rounds(ctx, benchmark_name, single, percentile)
        self._log_rounds(f"(c) SingleStream p{percentile * 100:g} ms", rounds)
        measured, raw = rounds.best()
        stream_layout = ctx_layout(ctx, benchmark_name, Scenario.SingleStream)
        figures.append(Figure(f"(c) {model} {precision} SingleStream ({stream_layout}) p{percentile * 100:g} "
                              f"latency: raw ONNX Runtime batch 1 / harness, best of {ROUNDS} runs of "
                              f"{STREAM_SECONDS} s each in turns",
                              measured, raw, "ms", goals["c"], higher_is_better=False))
        if not server:
            return figures + self._implementations(ctx, benchmark_name, scenarios, through[precision], None)
        for rate in FIXED_SERVER_RATES:
            figures.append(self._server_fixed(ctx, scenarios, benchmark_name, f"{model} {precision}", rate, goals))
        server_at: tuple[Context, float] | None = None
        for label, each in (("d", "int8"), ("e", "fp32")):
            if each not in through:
                through[each] = self._harness_offline(at[each], benchmark_name, through[precision],
                                                      f"{benchmark_name}-offline-{each}")
            server_ctx = _with(at[each], scenarios, precision=each, **server_layout(at[each], benchmark_name, each))
            layout = ctx_layout(server_ctx, benchmark_name)
            # The harness's search and the raw engine's, from the same rate with the same settings, trial by trial
            # in turns (tuning/turns.py).
            start, search = through[each] * GOALS["server"], self._server_search(through[each])
            self.ctx.log(f"Server {each}: highest VALID target QPS through the harness and of the raw engine, "
                         f"from {round_sig(start):g}, their runs in turns")
            searches[each], ceiling = side_by_side([
                lambda turn: self._server_peak(server_ctx, benchmark_name, each, start, search, turn),
                lambda turn: bench_raw.server_peak(server_ctx, benchmark_name,
                                                   server_ctx.resolve(benchmark_name, Scenario.Server), start, turn,
                                                   self._labelled("raw engine"), **search)])
            held = searches[each].value or 0.0
            figures.append(Figure(f"({label}) {model} {each} Server ({layout}): highest VALID target "
                                  f"QPS vs {each} Offline through the harness", held,
                                  through[each], "QPS", goals["server"], baseline_unit="samples/s"))
            figures.append(self._server_against_raw(server_ctx, benchmark_name, label, f"{model} {each}", held,
                                                    goals))
            figures.append(self._server_ceiling(label, f"{model} {each}", ceiling, through[each]))
            server_at = server_at or (server_ctx, searches[each].value or start)
        return figures + self._implementations(ctx, benchmark_name, scenarios, through[precision], server_at)

    # -- (k), (l): one implementation of the harness against another ---------------------------------
    def _implementations(self, ctx: Context, benchmark_name: str, scenarios: tuple[Scenario, ...], expected: float,
                         server_at: tuple[Context, float] | None) -> list[Figure]:
        """(k) Offline samples/s of the harness type's first implementation / its last; (l) where given a Server
        config and rate, the last one's p99 latency at that rate / the first one's. Same engine and config; the best
        of ROUNDS runs of each, taken in turns."""
        config = ctx.resolve(benchmark_name, Scenario.Offline)   # the first unless it cannot be, and then says why
        implementations = [p.implementation for p in of_type(ctx.args.workload.harness_type.value, False)]
        if len(implementations) < 2:
            return []
        first, last = implementations[0], implementations[-1]
        if config[IMPL_FIELD] != first:
            self.ctx.log(f"{benchmark_name}: no {first}-vs-{last} figures: {IMPL_FIELD} is {config[IMPL_FIELD]} "
                         f"({config.sources[IMPL_FIELD]})")
            return []
        folder = self.ctx.paths.bench_dir
        numbers = itertools.count(1)

        def offline(impl: str) -> float:
            return self._harness_offline(_with(ctx, scenarios, **{IMPL_FIELD: impl}), benchmark_name, expected,
                                         f"{benchmark_name}-offline-{impl}-{next(numbers)}")
        rounds = in_turns(lambda: offline(last), lambda: offline(first), ROUNDS)
        self._log_rounds("(k) Offline samples/s", rounds, (first, last))
        model = config["model"]
        figures = [Figure(f"(k) {model} Offline: {first} harness vs {last} harness, best of {ROUNDS} runs each in "
                          f"turns", *rounds.best(), "samples/s", GOALS["impl"])]
        if server_at is None:
            return figures
        server_ctx, qps = server_at

        def p99(impl: str) -> float:
            run_dir = folder / f"{benchmark_name}-server-{impl}-{qps:g}qps-{next(numbers)}"
            outcome = self._short(_with(server_ctx, scenarios, **{IMPL_FIELD: impl}), benchmark_name,
                                  Scenario.Server, run_dir, server_target_qps=qps)
            self.ctx.log(f"Server at {qps:g} QPS, {impl} harness: {outcome.describe()}")
            return (outcome.latency_ns or float("nan")) / 1e6
        rounds = in_turns(lambda: p99(last), lambda: p99(first), ROUNDS, higher_is_better=False)
        self._log_rounds(f"(l) Server p99 ms at {qps:g} QPS", rounds, (first, last))
        precision = server_ctx.resolve(benchmark_name, Scenario.Server)["precision"]
        figures.append(Figure(f"(l) {model} {precision} Server at {qps:g} QPS: p99 latency, {last} harness / {first} "
                              f"harness, best of {ROUNDS} runs each in turns", *rounds.best(), "ms", GOALS["impl"],
                              higher_is_better=False))
        return figures

    # -- (a) ---------------------------------------------------------------------------------------
    def _probe(self, kind: str, config) -> float:
        outdir = self.ctx.paths.bench_dir / f"overhead-{kind}"
        command = [sys.executable, "-m", "code.common.harness.overhead", kind, str(outdir), str(PROBE_SECONDS),
                   str(config["batch_size"]), str(config["instances"])]
        done = subprocess.run(command, cwd=self.ctx.paths.repo, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])["samples_per_second"]

    # -- through the harness -----------------------------------------------------------------------
    def _harness_offline(self, ctx: Context, benchmark_name: str, expected: float, name: str) -> float:
        """Offline samples/s through the harness in a run of about RUN_SECONDS; run again, sized from what was
        measured, when `expected` was so low that the query ended sooner."""
        folder = self.ctx.paths.bench_dir
        outcome = self._short(ctx, benchmark_name, Scenario.Offline, folder / name, offline_expected_qps=expected)
        if not outcome.valid and outcome.throughput and outcome.throughput > expected:
            outcome = self._short(ctx, benchmark_name, Scenario.Offline, folder / f"{name}-resized",
                                  offline_expected_qps=round_sig(outcome.throughput * 1.1))
        if not outcome.throughput:
            raise UserError(f"The Offline run in {outcome.run_dir} gave no throughput: {outcome.reason}",
                            exit_code=EXIT_FAILURE)
        return outcome.throughput

    def _log_rounds(self, what: str, rounds: Rounds, names: tuple[str, str] = ("harness", "raw")) -> None:
        """The measurements in the order taken; `names`: what the measured side and the baseline are called."""
        taken = [f"{names[0] if harness else names[1]} {figure:,.3f}" for harness, figure in rounds.taken()]
        self.ctx.log(f"{what}, in turns: {', '.join(taken)}")

    def _stream_rounds(self, ctx: Context, benchmark_name: str, single, percentile: float) -> Rounds:
        """(c)'s runs: the raw loop's batch-1 latency `percentile` and the harness's SingleStream, in ms, ROUNDS
        runs of STREAM_SECONDS each, in turns."""
        raw_latencies: list[float] = []

        def raw_latency() -> float:
            raw_latencies.append(bench_raw.latency(ctx, benchmark_name, single, percentile, STREAM_SECONDS))
            return raw_latencies[-1]
        stream_runs = itertools.count(1)
        return in_turns(raw_latency, lambda: self._harness_singlestream(ctx, benchmark_name, raw_latencies[-1],
                                                                        next(stream_runs)),
                        ROUNDS, higher_is_better=False)

    def _harness_singlestream(self, ctx: Context, benchmark_name: str, expected_ms: float, number: int) -> float:
        """The SingleStream latency percentile LoadGen judges, in ms, through the harness (a short run sized on
        the raw latency, so that it does not run out of queries), STREAM_SECONDS long."""
        outcome = self._short(ctx, benchmark_name, Scenario.SingleStream, self.ctx.paths.bench_dir /
                              f"{benchmark_name}-singlestream-{number}", min_duration=STREAM_SECONDS * 1000,
                              single_stream_expected_latency_ns=max(1, int(expected_ms * 1e6)))
        if outcome.latency_ns is None:
            raise UserError(f"The SingleStream run in {outcome.run_dir} gave no latency: {outcome.reason}",
                            exit_code=EXIT_FAILURE)
        return outcome.latency_ns / 1e6

    def _server_peak(self, ctx: Context, benchmark_name: str, precision: str, start: float, search: dict,
                     next_turn: Callable[[], None]) -> SearchResult:
        """The highest Server target QPS LoadGen rates VALID in short runs, searched from `start` with `search`
        (_server_search); `next_turn` is called before each run."""
        folder = self.ctx.paths.bench_dir / f"{benchmark_name}-server-{precision}"
        numbers = itertools.count(1)

        def trial(qps: float) -> Outcome:   # the figure is LoadGen's VALID: early stopping counts here
            next_turn()
            outcome = self._short(ctx, benchmark_name, Scenario.Server,
                                  folder / f"trial-{next(numbers):02d}-{qps:g}qps", server_target_qps=qps)
            return dataclasses.replace(outcome, early_stopping_only=False)
        return find_highest(trial, start, log=self._labelled("harness"), **search)

    @staticmethod
    def _server_search(offline: float) -> dict:
        """find_highest's settings for both Server searches (the harness's and the raw engine's): never above the
        Offline throughput, accepting a rate when it is VALID. Below a sixteenth of the Offline throughput the
        figure is far from its goal anyway, and each trial (500 queries) lasts ever longer: the searches give up
        there instead of halving on towards 1 QPS."""
        return {"tolerance": SERVER_TOLERANCE, "latency_margin": 0.0, "ceiling": round_sig(offline),
                "floor": offline / 16, "max_trials": SERVER_MAX_TRIALS, "unit": lambda v: f"{v:g} QPS"}

    def _labelled(self, who: str) -> Callable[[str], None]:
        """The log, each line saying whose search it belongs to (the two searches' lines alternate)."""
        return lambda line: self.ctx.log(f"  {who}: {line.strip()}")

    def _server_fixed(self, ctx: Context, scenarios: tuple[Scenario, ...], benchmark_name: str, what: str,
                      rate: float, goals: dict) -> Figure:
        """(m) At a fixed `rate`, with the Server layout a first run takes there (tuned, else measured on the engine
        for that rate, else configured): the raw engine's p99 / the harness's, as (d) and (e) read theirs."""
        at = _with(ctx, scenarios, server_target_qps=rate)
        layout = f"{ctx_layout(at, benchmark_name)}; {layout_origin(at, benchmark_name, Scenario.Server)}"
        return self._server_against_raw(at, benchmark_name, "m", f"{what} ({layout})", rate, goals,
                                        goal=goals["server_fixed"], queries=FIXED_SERVER_QUERIES)

    def _server_against_raw(self, ctx: Context, benchmark_name: str, label: str, what: str, rate: float,
                            goals: dict, goal: float | None = None, queries: int | None = None) -> Figure:
        """At the rate the harness held: the raw engine's p99 latency, fed LoadGen's own arrivals and batched
        alike (bench_raw.server_p99) / the harness's, the best of ROUNDS runs each in turns. Two searches, even in
        turns, part ways after one unlucky short run near the bound; runs at one rate compare like with like.
        `queries`: each run's least number of queries, both sides (else a short run's)."""
        at = f"{rate:g} QPS" if rate else "the rate the harness held (none)"
        runs = f"runs of {queries:,} queries or more" if queries else "short runs"
        name = (f"({label}) {what} Server at {at}: p99 latency, the raw engine fed the same Poisson arrivals and "
                f"batched alike / the harness, best of {ROUNDS} {runs} each in turns")
        goal = goals["server_raw"] if goal is None else goal
        if not rate:
            return Figure(name, math.nan, math.nan, "ms", goal, higher_is_better=False)
        config = ctx.resolve(benchmark_name, Scenario.Server)
        folder = self.ctx.paths.bench_dir / f"{benchmark_name}-server-{config['precision']}-{label}-vs-raw"
        numbers = itertools.count(1)

        length = {"min_query_count": queries} if queries else {}

        def harness() -> float:
            outcome = self._short(ctx, benchmark_name, Scenario.Server, folder / f"{rate:g}qps-{next(numbers)}",
                                  server_target_qps=rate, **length)
            return (outcome.latency_ns or math.nan) / 1e6
        rounds = in_turns(lambda: bench_raw.server_p99(ctx, benchmark_name, config, rate, queries), harness, ROUNDS,
                          higher_is_better=False)
        self._log_rounds(f"({label}) Server p99 ms at {rate:g} QPS", rounds)
        return Figure(name, *rounds.best(), "ms", goal, higher_is_better=False)

    def _server_ceiling(self, label: str, what: str, found: SearchResult, offline: float) -> Figure:
        """For the record: the raw engine's Server ceiling against Offline, what queueing at the bound leaves of the
        engine's throughput on this machine, whatever runs it."""
        if found.value is None:
            self.ctx.log(f"  Server, raw engine: no rate held the bound ({found.stopped})")
        return Figure(f"({label}) {what} Server: the raw engine's highest VALID rate (searched in turns with the "
                      f"harness's) vs Offline through the harness (queueing at the bound)", found.value or math.nan,
                      offline, "QPS", None, baseline_unit="samples/s")

    def _short(self, ctx: Context, benchmark_name: str, scenario: Scenario, run_dir, **fields) -> Outcome:
        """One short run (trials.SHORT_RUNS; Offline lasts RUN_SECONDS) with `fields` set."""
        if scenario is Scenario.Offline:
            fields = {"min_duration": RUN_SECONDS * 1000, **fields}
        return run_once(ctx, benchmark_name, scenario, run_dir, fields, short=True, source=BENCH_SOURCE)
