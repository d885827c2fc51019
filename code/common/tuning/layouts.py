"""`make tune`: which layout of the engine (batch size, instances x intra-op threads, ONNX Runtime's
threading, for Server the batching window) does best on this system, from short LoadGen runs. Pure: the runs come
in as a callable.

The search goes knob by knob (coordinate descent) instead of over the whole grid, so its trials add up instead of
multiplying: first the instances x threads layouts at the configured batch size, then (ONNX Runtime) whether
intra-op threads spin or sleep between operators and, for one instance off Server, one or two inter-op threads,
then the batch sizes at the best layout (Server: larger batches with a window, since without one a batch holds
only what is already queued), then (Server) the batching windows at the best of both. A knob with one candidate
costs no trial. Outside Server the two best then run again back to back and are judged by those runs (a shared
machine's load drifts between stages; runs back to back see much the same load).

How a candidate is judged, per scenario:
- Offline: the samples/s of one short run (its verdict is about the query's length, which the confirmation sizes).
- SingleStream / MultiStream: the percentile LoadGen judges (p90 / p99) of one short run, lower is better.
- Server: the highest arrival rate a short run accepts (VALID at the latency bound, early stopping included, with
  find_peak's margin). The first candidate is searched with find_peak's bracket; each challenger runs first just
  above the best rate so far, and is searched upwards only when it holds the bound there, so a losing layout costs
  one run.
"""
from __future__ import annotations

from dataclasses import dataclass, fields as dataclass_fields, replace
from typing import Callable, Iterable, Sequence

from ..constants import Scenario
from .search import Outcome, find_highest, round_sig
from .trials import SERVER_SHORT_QUERIES

# Candidates per knob. Batch sizes: powers of two up to what pays on a CPU (Offline) or what a window fills at a
# rate near the bound (Server); SingleStream and MultiStream queries bring their own batch.
OFFLINE_BATCHES = (1, 2, 4, 8, 16, 32, 64)
SERVER_BATCHES = (1, 2, 4, 8, 16)
SERVER_WINDOWS_US = (0, 500, 2000, 8000)
BATCHING_WINDOW_US = 2000        # the window larger batches are first tried with (the field's default)
SERVER_CHALLENGE = 1.05          # a challenger first runs at 1.05 x the best rate so far
SERVER_TOLERANCE = 0.05
SERVER_LATENCY_MARGIN = 0.10
SERVER_TRIALS_FIRST = 8          # find_highest trials for the first candidate
SERVER_TRIALS_MORE = 4           # ... and for a challenger that held the bound at the challenge rate
SERVER_CHALLENGER_GROWTH = 1.25  # a challenger is near the best rate: it climbs in smaller steps than the first
# A short Server run lasts at least its 500 queries at the rate: below this many seconds' worth the search gives
# up on a layout instead of halving on (at 1 QPS one run would take over 8 minutes).
SERVER_LONGEST_TRIAL_S = 120
THREADED_BACKENDS = ("onnxruntime",)   # backends whose instances share the cores (intra_op_threads)


@dataclass(frozen=True)
class Layout:
    """The fields a tune sets. None: not a knob here (e.g. intra_op_threads on TensorRT, the window off Server)."""

    batch_size: int
    instances: int
    intra_op_threads: int | None = None
    server_batch_timeout_us: int | None = None
    intra_op_spinning: bool | None = None     # ONNX Runtime: idle intra-op threads spin (True) or sleep
    inter_op_threads: int | None = None       # ONNX Runtime: 1 sequential, more its parallel mode

    def fields(self) -> dict[str, int | bool]:
        return {f.name: getattr(self, f.name) for f in dataclass_fields(self) if getattr(self, f.name) is not None}

    @property
    def label(self) -> str:
        """The layout in a run folder's name: b8-i1x2-w2000us, with -sleep where intra-op threads do not spin and
        -io2 for two inter-op threads."""
        threads = f"x{self.intra_op_threads}" if self.intra_op_threads is not None else ""
        window = f"-w{self.server_batch_timeout_us}us" if self.server_batch_timeout_us is not None else ""
        sleep = "-sleep" if self.intra_op_spinning is False else ""
        inter = f"-io{self.inter_op_threads}" if (self.inter_op_threads or 1) > 1 else ""
        return f"b{self.batch_size}-i{self.instances}{threads}{window}{sleep}{inter}"

    def describe(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.fields().items())


@dataclass(frozen=True)
class Knob:
    name: str                        # what the stage varies, in words
    candidates: Callable[[Layout], list[Layout]]   # the layouts to try, from the best one so far
    values: str                      # the values it tries, in words (for the plan)
    # Server: the stage batches (a larger batch, a longer window), which at a low rate only adds latency, so where
    # no layout before it held the bound at any rate it is skipped.
    batches: bool = False


def instance_layouts(cores: int, backend: str, scenario: Scenario) -> list[tuple[int, int | None]]:
    """(instances, intra-op threads) pairs that use every core once: 1 x cores, ..., cores x 1 (ONNX Runtime), or
    1 and 2 instances where the engine has no threads to share (TensorRT streams). SingleStream and MultiStream run
    their query on the first instance alone, so only 1 instance counts there, with all the cores or half of them."""
    if scenario in (Scenario.SingleStream, Scenario.MultiStream):
        if backend not in THREADED_BACKENDS:
            return [(1, None)]
        return [(1, t) for t in sorted({cores, max(1, cores // 2)}, reverse=True)]
    if backend in THREADED_BACKENDS:
        return [(n, cores // n) for n in range(1, cores + 1) if cores % n == 0]
    return [(1, None), (2, None)]


def knobs(scenario: Scenario, backend: str, cores: int, samples_per_query: int = 8,
          max_batch: int | None = None) -> list[Knob]:
    """The stages of a tune, in the order they run. `max_batch`: the most samples the model takes per call (yolo:
    1); no larger batch is tried, and a batch stage left with one size is no stage."""
    offline_batches = tuple(b for b in OFFLINE_BATCHES if max_batch is None or b <= max_batch)
    server_sizes = tuple(b for b in SERVER_BATCHES if max_batch is None or b <= max_batch)
    stream_batches = sorted(b for b in {1, samples_per_query} if max_batch is None or b <= max_batch)
    pairs = instance_layouts(cores, backend, scenario)

    def layouts(best: Layout) -> list[Layout]:
        return [replace(best, instances=n, intra_op_threads=t) for n, t in pairs]

    def batches(values: Iterable[int]) -> Callable[[Layout], list[Layout]]:
        return lambda best: [replace(best, batch_size=b) for b in values]

    def server_batches(best: Layout) -> list[Layout]:
        """A larger batch fills only within a window: where the best layout has none, the larger batches are
        tried with BATCHING_WINDOW_US (the window stage then moves it)."""
        window = best.server_batch_timeout_us or BATCHING_WINDOW_US
        return [replace(best, batch_size=b, server_batch_timeout_us=best.server_batch_timeout_us if b == 1 else window)
                for b in server_sizes]

    def threading(best: Layout) -> list[Layout]:
        """Intra-op threads that spin or sleep where an instance has a pool of them (more than one thread), and for
        one instance outside Server, two inter-op threads (ORT's parallel mode: independent branches of the graph
        at once; a chain of operators gains nothing, and the trial says so)."""
        spins = (True, False) if (best.intra_op_threads or 1) > 1 else (best.intra_op_spinning,)
        found = [replace(best, intra_op_spinning=spin) for spin in spins]
        if best.instances == 1 and not scenario.server_like and cores > 1:
            found.append(replace(best, inter_op_threads=2 if (best.inter_op_threads or 1) == 1 else 1))
        return found

    # A TensorRT plan is built for its batch size (paths.engine_file names it): other sizes need engines of
    # their own, so there the batch size stays as configured.
    rebatch = backend in THREADED_BACKENDS
    stages = [Knob("instances x intra-op threads", layouts,
                   ", ".join(f"{n}x{t}" if t is not None else f"{n}" for n, t in pairs))]
    if rebatch:
        stages.append(Knob("ONNX Runtime threading", threading,
                           "intra-op threads spinning or sleeping (instances of several threads)"
                           + ("; 1 or 2 inter-op threads (one instance)" if not scenario.server_like else "")))
    if scenario is Scenario.Offline and rebatch and len(offline_batches) > 1:
        stages.append(Knob("batch size", batches(offline_batches), _listed(offline_batches)))
    elif scenario.server_like:
        if rebatch and len(server_sizes) > 1:
            stages.append(Knob("largest batch", server_batches,
                               f"{_listed(server_sizes)} (above 1 with a window of {BATCHING_WINDOW_US} us)",
                               batches=True))
        # A batch of one never waits for a second sample: its window is no knob (a trial of it measures noise).
        stages.append(Knob("batching window (server_batch_timeout_us)",
                           lambda best: [replace(best, server_batch_timeout_us=w) for w in SERVER_WINDOWS_US]
                           if best.batch_size > 1 else [best],
                           f"{_listed(SERVER_WINDOWS_US)} us (batches above 1)", batches=True))
    elif scenario is Scenario.MultiStream and rebatch and len(stream_batches) > 1:
        stages.append(Knob("batch size", batches(stream_batches), _listed(stream_batches)))
    return stages


def _listed(values: Iterable[int]) -> str:
    return ", ".join(str(v) for v in values)


def starting_layout(config, scenario: Scenario, backend: str, cores: int) -> Layout:
    """The configured layout, as the tune's first point (intra_op_threads 0 is spelled out as the run shares it)."""
    instances = int(config["instances"])
    threaded = backend in THREADED_BACKENDS
    threads = (int(config.get("intra_op_threads") or 0) or max(1, cores // instances)) if threaded else None
    window = int(config["server_batch_timeout_us"]) if scenario.server_like else None
    spinning = bool(config.get("intra_op_spinning", True)) if threaded else None
    inter = int(config.get("inter_op_threads") or 1) if threaded else None
    return Layout(int(config["batch_size"]), instances, threads, window, spinning, inter)


@dataclass(frozen=True)
class Judged:
    layout: Layout
    score: float | None          # higher is better; None: the layout held nothing
    value: float | None          # the setting LoadGen sizes the run from, measured with this layout
    outcome: Outcome | None      # the run the score comes from
    trials: int


# (layout, the searched field's value) -> the short run's outcome
Trial = Callable[[Layout, float], Outcome]


class Judge:
    """How one scenario's candidates are scored (see the module's docstring)."""

    def __init__(self, scenario: Scenario, start_value: float, log: Callable[[str], None],
                 unit: Callable[[float], str]) -> None:
        self.scenario, self.start_value, self.log, self.unit = scenario, start_value, log, unit
        self.best: Judged | None = None

    def shown(self, score: float | None) -> str:
        """A score as people read it: samples/s (Offline), the rate or the latency (the unit's), or that nothing
        was accepted."""
        if score is None:
            return "no short run accepted"
        return f"{score:,.1f} samples/s" if self.scenario is Scenario.Offline else self.unit(abs(score))

    def __call__(self, trial: Trial, layout: Layout) -> Judged:
        if self.scenario.server_like:
            return self._server(trial, layout)
        value = self.start_value if self.best is None or self.best.value is None else self.best.value
        outcome = trial(layout, value)
        if self.scenario is Scenario.Offline:
            score = outcome.throughput
            measured = round_sig(outcome.throughput * 1.1) if outcome.throughput else None
        else:
            score = -outcome.latency_ns if outcome.latency_ns else None
            measured = outcome.latency_ns
        return Judged(layout, score, measured, outcome, 1)

    def _server(self, trial: Trial, layout: Layout) -> Judged:
        count = 0

        def run(qps: float) -> Outcome:
            nonlocal count
            count += 1
            return trial(layout, qps)

        def search(start: float, max_trials: int, growth: float) -> Judged:
            found = find_highest(run, start, tolerance=SERVER_TOLERANCE, latency_margin=SERVER_LATENCY_MARGIN,
                                 growth=growth, max_trials=max_trials, unit=self.unit, log=self.log,
                                 floor=max(start / 64, SERVER_SHORT_QUERIES / SERVER_LONGEST_TRIAL_S))
            accepted = [s for s in found.steps if s.accepted and s.value == found.value]
            if accepted:
                return Judged(layout, found.value, found.value, accepted[-1].outcome, count)
            # Nothing held: the run at the lowest rate tried, whose queue was the shortest (why, in tune_failure).
            lowest = min(found.steps, key=lambda step: step.value, default=None)
            return Judged(layout, None, None, lowest.outcome if lowest else None, count)

        if self.best is None or self.best.score is None:
            return search(self.start_value, SERVER_TRIALS_FIRST, growth=2.0)
        challenge = round_sig(self.best.score * SERVER_CHALLENGE)
        outcome = run(challenge)
        if not outcome.accepted(SERVER_LATENCY_MARGIN):
            self.log(f"    {layout.label}: does not hold {self.unit(challenge)} "
                     f"({outcome.describe(SERVER_LATENCY_MARGIN)}); the best so far stays")
            return Judged(layout, None, None, outcome, count)
        return search(challenge, SERVER_TRIALS_MORE, growth=SERVER_CHALLENGER_GROWTH)


def server_failure(judged: Sequence[Judged], unit: Callable[[float], str]) -> str:
    """Why no Server layout held the bound, from the run of the lowest rate tried (where the queue is nearly empty,
    so its latency is the engine's own on this machine); empty when no layout ran."""
    runs = [j for j in judged if j.outcome is not None and j.outcome.latency_ns and j.outcome.bound_ns]
    if not runs:
        return ""
    low = min(runs, key=lambda j: (j.outcome.throughput or 0.0, j.outcome.latency_ns))
    outcome = low.outcome
    mean = f"mean {outcome.mean_latency_ns / 1e6:.1f} ms, " if outcome.mean_latency_ns else ""
    rate = unit(round_sig(outcome.throughput or 0.0))
    return (f"at the lowest rate tried ({rate}, {low.layout.label}) the latency was "
            f"{mean}p99 {outcome.latency_ns / 1e6:.1f} ms against the {outcome.bound_ns / 1e6:g} ms bound: with "
            f"queries that far apart the queue is nearly empty, so that is the engine's own latency on this machine "
            f"(other processes on its cores lengthen it). A faster engine (--precision=int8), or a quieter machine, "
            f"is what holds the bound")


@dataclass(frozen=True)
class TuneResult:
    best: Judged | None
    judged: tuple[Judged, ...]


def tune(trial: Trial, start: Layout, stages: Sequence[Knob], judge: Judge,
         log: Callable[[str], None]) -> TuneResult:
    """The best layout of the stages' candidates (each stage from the best so far), and every layout judged."""
    judged: dict[Layout, Judged] = {}
    best: Judged | None = None
    for stage in stages:
        held = best is not None and best.score is not None
        if stage.batches and judged and not held:
            log(f"  {stage.name}: skipped: no layout so far held the bound at any rate, and at a low rate batching "
                f"only adds latency")
            continue
        incumbent = best.layout if best else start
        # The incumbent first: the layout in use is the one the others must beat (and the Server's first search).
        # With no winner yet (nothing held the bound), the stage tries its candidates of every layout judged.
        sources = [incumbent] if held or not judged else [start, *judged]
        candidates = sorted(dict.fromkeys(c for source in sources for c in stage.candidates(source)),
                            key=lambda layout: layout != incumbent)
        if len(candidates) < 2 and best is not None:
            continue
        if not held and judged and all(c in judged for c in candidates):
            continue
        log(f"  {stage.name}: {len(candidates)} candidate{'s' if len(candidates) != 1 else ''}")
        for layout in candidates:
            if layout not in judged:
                judged[layout] = judge(trial, layout)
                log(f"    {layout.label}: {judge.shown(judged[layout].score)}")
            if judged[layout].score is not None and (best is None or best.score is None
                                                     or judged[layout].score > best.score):
                best = judged[layout]
            judge.best = best
    if not judge.scenario.server_like:
        best = _runoff(trial, judged, judge, log) or best
    return TuneResult(best if best is not None and best.score is not None else None, tuple(judged.values()))


RUNOFF = 2     # Offline, SingleStream, MultiStream: the best this many run again, back to back, after the stages


def _runoff(trial: Trial, judged: dict[Layout, Judged], judge: Judge, log: Callable[[str], None]) -> Judged | None:
    """The best RUNOFF layouts run once more, one right after the other, and are judged by these runs alone: on a
    shared machine the load drifts between the stages (a candidate measured in a quiet minute would otherwise win
    on that minute), while runs back to back see much the same load."""
    scored = sorted((j for j in judged.values() if j.score is not None), key=lambda j: j.score, reverse=True)
    if len(scored) < 2:
        return None
    log(f"  runoff: the best {RUNOFF} run again back to back, and are judged by these runs")
    finalists = []
    for first in scored[:RUNOFF]:
        again = judge(trial, first.layout)
        if again.score is None:      # it measured nothing this time: it keeps its first run, and does not win
            finalists.append(replace(first, score=None))
            log(f"    {first.layout.label}: measured nothing in the runoff")
            continue
        judged[first.layout] = replace(again, trials=first.trials + again.trials)
        finalists.append(judged[first.layout])
        log(f"    {first.layout.label}: {judge.shown(again.score)} (first run: {judge.shown(first.score)})")
    measured = [j for j in finalists if j.score is not None]
    if not measured:
        return None
    best = max(measured, key=lambda j: j.score)
    judge.best = best
    return best


def planned_trials(scenario: Scenario, start: Layout, stages: Sequence[Knob]) -> tuple[int, int]:
    """(fewest, most) short runs the stages take: each distinct candidate once (Server: one run for a challenger
    that loses at once, up to the search's trials for one that wins). A stage of one candidate takes none."""
    if not stages:
        return 0, 0
    counts = []
    # A later stage's candidates depend on the first stage's winner (threading: one instance of several threads
    # has more to try than several of one), so the count is taken for each winner the first stage may choose.
    first = list(dict.fromkeys(stages[0].candidates(start)))
    for winner in first or [start]:
        seen: set[Layout] = set(first)
        for stage in stages[1:]:
            candidates = set(stage.candidates(winner))
            if len(candidates) > 1:
                seen.update(candidates)
        counts.append(len(seen))
    fewest, most = min(counts), max(counts)
    if not scenario.server_like:
        runoff = RUNOFF if fewest >= 2 else 0
        return fewest + runoff, most + runoff
    return SERVER_TRIALS_FIRST - 4 + (fewest - 1), SERVER_TRIALS_FIRST + (most - 1) * (1 + SERVER_TRIALS_MORE)
