"""make tune: the layout search on a fake engine with known costs (no LoadGen, no timing), its resumption from the
records of an interrupted tune, and the winner written into a custom config only after its confirmation."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.actions.tune import Tune
from code.common.arguments import parse_run_args
from code.common.constants import Scenario, TestMode
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.tuning.config_edit import TUNE_MARKER
from code.common.tuning.layouts import (OFFLINE_BATCHES, RUNOFF, SERVER_WINDOWS_US, Judge, Layout, knobs,
                                        planned_trials, server_failure, tune)
from code.common.tuning.search import Outcome
from code.common.tuning.trial_book import RECORD, TrialBook
from tests.test_find_peak import _load, repo_copy  # noqa: F401  (the fixture)

BOUND_NS = 15e6


class FakeEngine:
    """A CPU engine of known costs. One batch of b samples on t threads takes (3 + b + 0.02 b^2) / speedup(t) ms
    (a fixed cost per call, a cost per sample, and a cache penalty for large batches), 0.5 ms more with two inter-op
    threads (a chain of operators gains nothing from them); instances run in parallel. Threads that sleep between
    operators speed up less (1.6 x on two threads, against 1.7 x spinning). Server: a window of w us gathers
    min(b, 1 + rate x w) samples a batch; p99 = w + batch time / (1 - load), plus SPIN_MS where an instance's
    threads spin (they hold the cores against the threads that issue and complete)."""

    SPEEDUP = {(1, True): 1.0, (2, True): 1.7, (1, False): 1.0, (2, False): 1.6}
    SPIN_MS = 4.0

    def __init__(self) -> None:
        self.runs: list[tuple[Layout, float, bool]] = []

    def batch_ms(self, batch: float, layout: Layout) -> float:
        speedup = self.SPEEDUP[layout.intra_op_threads, layout.intra_op_spinning is not False]
        return (3 + batch + 0.02 * batch ** 2) / speedup + (0.5 if (layout.inter_op_threads or 1) > 1 else 0)

    def capacity(self, layout: Layout, batch: float | None = None) -> float:
        batch = layout.batch_size if batch is None else batch
        return layout.instances * batch / self.batch_ms(batch, layout) * 1000

    def server_p99_ns(self, layout: Layout, rate: float) -> float:
        window_s = (layout.server_batch_timeout_us or 0) / 1e6
        batch = min(layout.batch_size, 1 + rate * window_s)
        load = rate / self.capacity(layout, batch)
        spin = self.SPIN_MS if layout.intra_op_threads > 1 and layout.intra_op_spinning is not False else 0.0
        return float("inf") if load >= 1 else (window_s * 1e3 + spin + self.batch_ms(batch, layout)
                                                / (1 - load)) * 1e6

    def run(self, scenario: Scenario, fields: dict, short: bool) -> Outcome:
        layout = Layout(fields["batch_size"], fields["instances"], fields["intra_op_threads"],
                        fields.get("server_batch_timeout_us"), fields.get("intra_op_spinning"),
                        fields.get("inter_op_threads"))
        if scenario is Scenario.Offline:
            value = fields["offline_expected_qps"]
            self.runs.append((layout, value, short))
            rate = self.capacity(layout)
            valid = short or value >= rate / 1.1         # a full-length run needs the query to last
            return Outcome(valid=valid, throughput=rate, reason="" if valid else "min duration not met")
        value = fields["server_target_qps"]
        self.runs.append((layout, value, short))
        p99 = self.server_p99_ns(layout, value)
        valid = p99 <= BOUND_NS
        return Outcome(valid=valid, latency_ns=min(p99, 1e12), percentile=0.99, bound_ns=BOUND_NS,
                       throughput=value, reason="" if valid else "99th percentile latency over the bound")


def lines_sink() -> tuple[list[str], callable]:
    lines: list[str] = []
    return lines, lines.append


# -- the search, pure --------------------------------------------------------------------------------------------
def test_offline_tune_finds_the_layout_and_batch_of_the_highest_throughput():
    engine, (lines, log) = FakeEngine(), lines_sink()
    start = Layout(32, 1, 2, None, True, 1)
    stages = knobs(Scenario.Offline, "onnxruntime", 2)
    judge = Judge(Scenario.Offline, 240.0, log, lambda v: f"{v:g} QPS")
    result = tune(lambda layout, value: engine.run(Scenario.Offline, {**layout.fields(),
                                                                      "offline_expected_qps": value}, True),
                  start, stages, judge, log)
    # Stage 1 at batch 32: two instances of one thread beat one of two (speed-up 1.7 < 2).
    layouts = [Layout(32, n, 2 // n, None, True, 1) for n in (1, 2)]
    best_layout = max(layouts, key=engine.capacity)
    # Stage 2 at that layout: the batch of the lowest cost per sample among the candidates.
    expected = max((replace(best_layout, batch_size=b) for b in OFFLINE_BATCHES), key=engine.capacity)
    assert result.best.layout == expected
    assert result.best.score == pytest.approx(engine.capacity(expected))
    # Every candidate once, and the best two again in the runoff.
    assert len(engine.runs) == len(result.judged) + RUNOFF == len({*layouts, *(replace(best_layout, batch_size=b)
                                                                                for b in OFFLINE_BATCHES)}) + RUNOFF
    # The fewest the plan announced: 2 x 1 won, whose threads have no pool to spin; 1 x 2 would have tried its
    # sleeping threads and two inter-op threads as well.
    assert planned_trials(Scenario.Offline, start, stages) == (len(engine.runs), len(engine.runs) + 2)
    assert any("runoff: the best 2 run again" in line for line in lines)


def test_runoff_overturns_a_lucky_first_run():
    """A layout measured once on a quiet moment of a shared machine does not win on that run alone."""
    engine, (lines, log) = FakeEngine(), lines_sink()
    start = Layout(4, 2, 1, None, True, 1)
    runs: dict[Layout, int] = {}

    def noisy(layout: Layout, value: float) -> Outcome:
        runs[layout] = runs.get(layout, 0) + 1
        outcome = engine.run(Scenario.Offline, {**layout.fields(), "offline_expected_qps": value}, True)
        lucky = layout.batch_size == 8 and runs[layout] == 1       # its first run: 1.4 x what it does
        return replace(outcome, throughput=outcome.throughput * 1.4) if lucky else outcome

    stages = [k for k in knobs(Scenario.Offline, "onnxruntime", 2) if k.name == "batch size"]
    result = tune(noisy, start, stages, Judge(Scenario.Offline, 240.0, log, lambda v: f"{v:g} QPS"), log)
    truth = max((replace(start, batch_size=b) for b in OFFLINE_BATCHES), key=engine.capacity)
    lucky = replace(start, batch_size=8)
    assert 1.4 * engine.capacity(lucky) > engine.capacity(truth)        # the stage alone would have chosen b8
    assert result.best.layout == truth and runs[lucky] == 2 and runs[truth] == 2
    assert any("batch size: 7 candidates" in line for line in lines)


def _threading_stage(scenario: Scenario):
    (stage,) = [k for k in knobs(scenario, "onnxruntime", 2) if k.name == "ONNX Runtime threading"]
    return stage


def test_threading_stage_lets_server_threads_sleep_where_spinning_costs_latency():
    engine, (lines, log) = FakeEngine(), lines_sink()
    start = Layout(1, 1, 2, 0, True, 1)
    stage = _threading_stage(Scenario.Server)
    # Server: spinning or sleeping, never inter-op threads (one call's latency on a chain of operators).
    assert stage.candidates(start) == [start, replace(start, intra_op_spinning=False)]
    judge = Judge(Scenario.Server, 20.0, log, lambda v: f"{v:g} QPS")
    result = tune(lambda layout, value: engine.run(Scenario.Server, {**layout.fields(),
                                                                     "server_target_qps": value}, True),
                  start, [stage], judge, log)
    assert result.best.layout == replace(start, intra_op_spinning=False)
    assert "intra_op_spinning" in result.best.layout.fields() and "-sleep" in result.best.layout.label
    held = {j.layout: j.score for j in result.judged}
    assert held[start] is not None and result.best.score > held[start]


def test_threading_stage_keeps_spinning_and_one_inter_op_thread_where_they_pay():
    engine, (lines, log) = FakeEngine(), lines_sink()
    start = Layout(8, 1, 2, None, True, 1)
    stage = _threading_stage(Scenario.Offline)
    candidates = stage.candidates(start)
    assert candidates == [start, replace(start, intra_op_spinning=False), replace(start, inter_op_threads=2)]
    assert replace(start, inter_op_threads=2).label == "b8-i1x2-io2"
    judge = Judge(Scenario.Offline, 240.0, log, lambda v: f"{v:g} QPS")
    result = tune(lambda layout, value: engine.run(Scenario.Offline, {**layout.fields(),
                                                                      "offline_expected_qps": value}, True),
                  start, [stage], judge, log)
    assert result.best.layout == start and len(engine.runs) == 3 + RUNOFF
    # Instances of one thread have no pool of threads to spin: nothing to try there.
    assert stage.candidates(Layout(8, 2, 1, None, True, 1)) == [Layout(8, 2, 1, None, True, 1)]


def test_server_tune_raises_the_rate_held_at_the_bound_with_batching():
    engine, (lines, log) = FakeEngine(), lines_sink()
    start = Layout(1, 2, 1, 0)              # the shipped CPU Server layout: batch 1, no window
    judge = Judge(Scenario.Server, 20.0, log, lambda v: f"{v:g} QPS")
    result = tune(lambda layout, value: engine.run(Scenario.Server, {**layout.fields(),
                                                                     "server_target_qps": value}, True),
                  start, knobs(Scenario.Server, "onnxruntime", 2), judge, log)
    held = {j.layout: j.score for j in result.judged if j.score is not None}
    assert result.best.layout in held and result.best.score == max(held.values())
    # Every rate a short run accepted holds 90 % of the bound on the engine's known costs.
    for layout, rate, _ in engine.runs:
        if rate <= held.get(layout, 0):
            assert engine.server_p99_ns(layout, rate) <= 0.9 * BOUND_NS
    assert result.best.score > held[start]                  # batching within a window pays on this engine
    best = result.best.layout
    assert best.batch_size > 1 and best.server_batch_timeout_us in SERVER_WINDOWS_US[1:]
    peak = max(r / 10 for r in range(1, 20_000) if engine.server_p99_ns(best, r / 10) <= 0.9 * BOUND_NS)
    assert 0.9 * peak <= result.best.score <= peak          # within the search's tolerance of the known peak
    fewest, most = planned_trials(Scenario.Server, start, knobs(Scenario.Server, "onnxruntime", 2))
    assert fewest <= len(engine.runs) <= most
    assert any("does not hold" in line for line in lines)    # a losing challenger cost one run


def test_tensorrt_keeps_the_batch_of_its_engine():
    assert "ONNX Runtime threading" in [k.name for k in knobs(Scenario.Server, "onnxruntime", 16)]
    names = [k.name for k in knobs(Scenario.Server, "tensorrt", 16)]
    assert names == ["instances x intra-op threads", "batching window (server_batch_timeout_us)"]
    assert [k.name for k in knobs(Scenario.Offline, "tensorrt", 16)] == ["instances x intra-op threads"]
    layouts = knobs(Scenario.Offline, "tensorrt", 16)[0].candidates(Layout(2048, 1))
    assert [(layout.instances, layout.intra_op_threads) for layout in layouts] == [(1, None), (2, None)]
    single = knobs(Scenario.SingleStream, "onnxruntime", 4)
    assert single[0].candidates(Layout(1, 2, 2)) == [Layout(1, 1, 4), Layout(1, 1, 2)]


def test_a_batch_of_one_has_no_window_to_try():
    (window,) = [k for k in knobs(Scenario.Server, "onnxruntime", 2) if k.name.startswith("batching window")]
    assert window.candidates(Layout(1, 2, 1, 0)) == [Layout(1, 2, 1, 0)]
    assert len(window.candidates(Layout(4, 2, 1, 2000))) == len(SERVER_WINDOWS_US)


def test_a_model_of_one_sample_a_call_is_never_tried_at_a_larger_batch():
    offline = knobs(Scenario.Offline, "onnxruntime", 2, max_batch=1)
    assert [k.name for k in offline] == ["instances x intra-op threads", "ONNX Runtime threading"]
    server = knobs(Scenario.Server, "onnxruntime", 2, max_batch=4)
    (largest,) = [k for k in server if k.name == "largest batch"]
    assert {layout.batch_size for layout in largest.candidates(Layout(1, 2, 1, 0))} == {1, 2, 4}
    assert [k.name for k in knobs(Scenario.MultiStream, "onnxruntime", 2, 8, max_batch=1)] == \
        ["instances x intra-op threads", "ONNX Runtime threading"]


def test_trial_book_hands_back_each_recorded_run_once(tmp_path):
    measured: list[str] = []

    def measure(run_dir):
        measured.append(run_dir.name)
        return Outcome(valid=True, throughput=100.0 + len(measured), run_dir=str(run_dir))

    book = TrialBook(tmp_path)
    fields = {"batch_size": 8, "short": True}
    first = book.run(fields, book.next_free("trial-b8"), measure)
    second = book.run(fields, book.next_free("trial-b8"), measure)
    assert measured == ["trial-b8-01", "trial-b8-02"] and first.throughput != second.throughput
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / RECORD).write_text("{not json")
    again = TrialBook(tmp_path)
    assert again.recorded == 2 and again.unreadable == [tmp_path / "broken" / RECORD]
    assert again.run(fields, again.next_free("trial-b8"), measure) == first
    assert again.run(fields, again.next_free("trial-b8"), measure) == second
    assert again.run(fields, again.next_free("trial-b8"), measure).throughput == 103.0   # a third: measured
    assert again.reused == 2 and measured[-1] == "trial-b8-03"


# -- the action, with the fake engine instead of LoadGen, in a copy of the repository -----------------------------
class FakeTune(Tune):
    def __init__(self, ctx, engine: FakeEngine, fail_after: int | None = None, confirm_valid: bool = True) -> None:
        super().__init__(ctx)
        self.engine, self.fail_after, self.confirm_valid = engine, fail_after, confirm_valid

    def preflight(self, benchmark, scenario) -> None:
        pass

    def run_one(self, benchmark, scenario, run_dir, fields, short) -> Outcome:
        if self.fail_after is not None and len(self.engine.runs) >= self.fail_after:
            raise UserError(f"The run in {run_dir} did not complete (interrupted).", exit_code=1)
        outcome = self.engine.run(scenario, dict(fields), short)
        if not short and not self.confirm_valid:
            outcome = replace(outcome, valid=False, reason="99th percentile latency over the bound")
        return replace(outcome, run_dir=str(run_dir))


def context(repo, kvm_2core, *flags: str) -> tuple[Context, list[str]]:
    lines: list[str] = []
    args = parse_run_args(["--action=tune", "--benchmarks=resnet50", "--model=mobilenet_v2", *flags], list(ACTIONS),
                          ["resnet50"])
    paths = Paths.create(scratch=repo / "scratch", log_dir=repo / "logs", repo=repo)
    return Context(args=args, paths=paths, rules=get_round(), detect=lambda: kvm_2core, log=lines.append), lines


def test_interrupted_offline_tune_resumes_and_writes_the_confirmed_layout(repo_copy, kvm_2core):  # noqa: F811
    ctx, _ = context(repo_copy, kvm_2core, "--scenarios=offline")
    interrupted = FakeEngine()
    with pytest.raises(UserError, match="interrupted"):
        FakeTune(ctx, interrupted, fail_after=4).run()
    custom = repo_copy / "configs/resnet50/Offline/custom.py"
    assert not custom.exists()
    folder = repo_copy / "logs/tune/AMD_EPYC_2C/resnet50/Offline"
    assert len(list(folder.glob(f"*/{RECORD}"))) == 4

    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=offline")
    resumed = FakeEngine()
    assert FakeTune(ctx, resumed).run() == 0
    assert any("resuming: 4 run(s) recorded" in line for line in lines)
    plan = next(line for line in lines if "plan:" in line)
    assert "short runs" in plan and "confirmed at full length" in plan
    # the resumed tune ran only what the interrupted one had not
    short_runs = [r for r in resumed.runs if r[2]]
    assert len(short_runs) + 4 == len({*(r[0] for r in interrupted.runs), *(r[0] for r in short_runs)}) + RUNOFF
    text = custom.read_text()
    best = max((Layout(b, 2, 1) for b in OFFLINE_BATCHES), key=resumed.capacity)
    assert f"batch_size = {best.batch_size}\n" in text and "instances = 2\n" in text
    assert "intra_op_threads = 1\n" in text and "offline_expected_qps = " in text
    assert f"{TUNE_MARKER} on " in text and ", with model=mobilenet_v2: the best of" in text
    assert "Confirmed VALID at full length" in text
    assert "confirm-" in text and "logs/tune/AMD_EPYC_2C/resnet50/Offline" in text
    shown = subprocess.run([sys.executable, "-m", "code.main", "--action=show_config", "--benchmarks=resnet50",
                            "--scenarios=offline", "--system_name=AMD_EPYC_2C"], cwd=repo_copy,
                           capture_output=True, text=True, check=False)
    assert shown.returncode == 0, shown.stderr
    assert f"batch_size                        = {best.batch_size} " in shown.stdout
    _tuned_layout_reaches_the_run_record_and_the_report(repo_copy, folder, best)


def _tuned_layout_reaches_the_run_record_and_the_report(repo_copy, folder, best: Layout) -> None:
    """make tune's record of what it wrote: a run of that layout carries it, a run of another layout does not, and
    the report says which layout each ran and the measurement behind a tuned one."""
    import json

    from code.common.harness.first_run import tuned_layout
    from code.common.paths import TUNED_LAYOUT
    from code.common.records.metadata import write_metadata
    from code.common.report.collect import read_rows
    from code.common.report.text import layout_text
    from tests.run_records import make_record

    written = json.loads((folder / TUNED_LAYOUT).read_text())
    assert written["layout"]["batch_size"] == best.batch_size and written["confirmed"]["valid"] is True
    assert written["confirmed"]["run_dir"].startswith("logs/tune/") and "samples/s" in written["short_run"]["figure"]
    fields = {**written["engine"], **written["layout"], "offline_expected_qps": 1.0}   # a later find_peak's QPS
    assert tuned_layout(folder, fields) == written
    other = {**fields, "batch_size": best.batch_size * 2}
    assert tuned_layout(folder, other) == {}
    assert tuned_layout(folder, {**fields, "precision": "int8"}) == {}    # another engine
    # The tuned layout on another engine: the plan says whose figures they are, and how to run or measure either.
    from code.common.harness.first_run import other_engine_note

    tuned_precision = written["engine"]["precision"]
    note = other_engine_note("resnet50", Scenario.Offline, folder, {**fields, "precision": "int8"})
    assert f"measured with precision={tuned_precision}; this run has precision=int8" in note
    assert f"Run with --precision={tuned_precision} for the tuned one" in note
    assert ('make tune RUN_ARGS="--benchmarks=resnet50 --scenarios=offline --model=mobilenet_v2 '
            f'--dataset={fields["dataset"]} --precision=int8"') in note
    assert "offline_expected_qps=" in note
    assert other_engine_note("resnet50", Scenario.Offline, folder, fields) is None       # the engine it was tuned on
    assert other_engine_note("resnet50", Scenario.Offline, folder, {**other, "precision": "int8"}) is None
    (folder / TUNED_LAYOUT).write_text("{not json")
    assert tuned_layout(folder, fields) == {}
    (folder / TUNED_LAYOUT).write_text(json.dumps(written))

    swept = {"fields": {"batch_size": 2}, "why": "batch 2 from a 6 s sweep of this engine; make tune confirms"}
    for name, run_fields in (("tuned", fields), ("configured", other), ("measured", other)):
        record = make_record(value=250.0, log_dir=str(repo_copy / "report-logs" / name), **{
            k: v for k, v in run_fields.items() if k in ("batch_size", "instances", "intra_op_threads")})
        record = replace(record, config=replace(record.config, tuned_layout=tuned_layout(folder, run_fields),
                                                measured_layout=swept if name == "measured" else {}))
        (repo_copy / "report-logs" / name).mkdir(parents=True)
        write_metadata(repo_copy / "report-logs" / name, record)
    rows = {row.run_dir.name: row for row in read_rows([repo_copy / "report-logs"], lambda *_: None)}
    tuned = layout_text(rows["tuned"])
    assert f"batch_size={best.batch_size}" in tuned and "make tune" in tuned
    assert written["confirmed"]["figure"] in tuned and written["confirmed"]["run_dir"] in tuned
    assert layout_text(rows["configured"]).endswith("(as configured; not tuned on this system)")
    assert layout_text(rows["measured"]).endswith(f"(untuned: {swept['why']})")


def test_server_layout_not_confirmed_is_not_written(repo_copy, kvm_2core):  # noqa: F811
    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=server")
    engine = FakeEngine()
    assert FakeTune(ctx, engine, confirm_valid=False).run() == 1
    assert sum(1 for r in engine.runs if not r[2]) == 3       # three full-length tries, each a safer rate
    assert not (repo_copy / "configs/resnet50/Server/custom.py").exists()
    assert "AMD_EPYC_2C" not in (repo_copy / "code/common/systems/custom_list.py").read_text()
    assert any("nothing written" in line and "was not confirmed" in line for line in lines)


class SlowEngine(FakeEngine):
    """Its latency alone is over the bound: p99 1.2 x the bound at any rate."""

    def server_p99_ns(self, layout: Layout, rate: float) -> float:
        return 1.2 * BOUND_NS


def test_server_tune_that_holds_nothing_writes_nothing_and_says_why(repo_copy, kvm_2core):  # noqa: F811
    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=server")
    engine = SlowEngine()
    assert FakeTune(ctx, engine).run() == 1
    assert not (repo_copy / "configs/resnet50/Server/custom.py").exists()
    tried = {layout for layout, _, _ in engine.runs}
    # Nothing held, so the threading stage tried the layouts of several threads too (sleeping), and the batching
    # stages, which at a low rate only add latency, were skipped.
    assert Layout(1, 1, 2, 0, False, 1) in tried and all(layout.batch_size == 1 for layout in tried)
    assert sum("skipped: no layout so far held the bound" in line for line in lines) == 2
    summary = lines[lines.index("\ntune:") + 1]
    assert "nothing written" in summary and "p99 18.0 ms against the 15 ms bound" in summary
    assert "the engine's own latency on this machine" in summary


def test_dry_run_prints_the_plan_and_runs_nothing(repo_copy, kvm_2core):  # noqa: F811
    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=offline,server", "--dry_run")
    engine = FakeEngine()
    assert FakeTune(ctx, engine).run() == 0
    assert engine.runs == [] and not (repo_copy / "logs").exists()
    assert any("stage 4, batching window (server_batch_timeout_us): 0, 500, 2000, 8000 us (batches above 1)" in line for line in lines)
    assert any("plan: 10 to 12 short runs" in line for line in lines)
    assert lines[-1] == "Dry run: nothing was run or written."


def test_yolo_dry_run_plans_no_batch_larger_than_its_model_takes(repo_copy, kvm_2core):  # noqa: F811
    lines: list[str] = []
    args = parse_run_args(["--action=tune", "--benchmarks=yolo", "--scenarios=offline,singlestream", "--dry_run"],
                          list(ACTIONS), ["yolo"])
    paths = Paths.create(scratch=repo_copy / "scratch", log_dir=repo_copy / "logs", repo=repo_copy)
    ctx = Context(args=args, paths=paths, rules=get_round(), detect=lambda: kvm_2core, log=lines.append)
    assert FakeTune(ctx, FakeEngine()).run() == 0
    assert not any("batch size" in line for line in lines)
    assert any("== tune yolo Offline" in line for line in lines) and any("== tune yolo SingleStream" in line
                                                                         for line in lines)


def test_run_lengths_are_refused(repo_copy, kvm_2core):  # noqa: F811
    ctx, _ = context(repo_copy, kvm_2core, "--scenarios=offline", "--min_duration=1000")
    with pytest.raises(UserError, match="--min_duration"):
        FakeTune(ctx, FakeEngine()).run()


def test_bench_measures_server_at_the_tuned_layout(repo_copy, kvm_2core):  # noqa: F811
    from code.actions.bench import SERVER_LAYOUT, ctx_layout, server_layout

    ctx, _ = context(repo_copy, kvm_2core, "--scenarios=server")
    assert server_layout(ctx, "resnet50", "fp32") == SERVER_LAYOUT["fp32"]      # nothing tuned: bench's own
    from code.actions.bench import _with
    own = _with(ctx, (Scenario.Server,), **SERVER_LAYOUT["fp32"])
    assert ctx_layout(own, "resnet50").startswith("1 x 2 threads sleeping, batch 1")
    assert FakeTune(ctx, FakeEngine()).run() == 0
    ctx, _ = context(repo_copy, kvm_2core, "--scenarios=server")
    ctx.registry.add_module(_load(repo_copy / "configs/resnet50/Server/custom.py"))
    assert server_layout(ctx, "resnet50", "fp32") == {}                         # the tuned one, as it is
    tuned = ctx.resolve("resnet50", Scenario.Server)
    assert ctx_layout(ctx, "resnet50") == (f"{tuned['instances']} x {tuned['intra_op_threads']} thread"
                                           f"{'s' if tuned['intra_op_threads'] > 1 else ''}, batch "
                                           f"{tuned['batch_size']} within {tuned['server_batch_timeout_us']} us")


def test_a_server_layout_that_holds_nothing_is_given_up_before_its_runs_grow_long():
    from code.common.tuning.layouts import SERVER_LONGEST_TRIAL_S
    from code.common.tuning.trials import SERVER_SHORT_QUERIES

    rates: list[float] = []
    layouts: list[Layout] = []

    def never(layout: Layout, rate: float) -> Outcome:
        rates.append(rate)
        layouts.append(layout)
        # The engine's own latency: 1.1 x the bound however far apart the queries are, a little more when closer.
        return Outcome(valid=False, latency_ns=(1.1 + rate / 1000) * BOUND_NS, percentile=0.99, bound_ns=BOUND_NS,
                       mean_latency_ns=0.8 * BOUND_NS, throughput=rate, reason="p99 high")
    start = Layout(1, 2, 1, 0)
    result = tune(never, start, knobs(Scenario.Server, "onnxruntime", 2)[:1],
                  Judge(Scenario.Server, 20.0, lambda _: None, str), lambda _: None)
    assert result.best is None
    why = server_failure(result.judged, lambda v: f"{v:g} QPS")
    assert why.startswith(f"at the lowest rate tried ({min(rates):g} QPS, ")
    assert f"p99 {(1.1 + min(rates) / 1000) * 15:.1f} ms against the 15 ms bound" in why and "mean 12.0 ms" in why
    assert "--precision=int8" in why
    assert min(rates) >= SERVER_SHORT_QUERIES / SERVER_LONGEST_TRIAL_S and rates[0] == 20.0
    assert rates[:3] == [20.0, 10.0, 5.0] and layouts[0] == start   # the configured layout is searched first


@pytest.mark.parametrize("flags, says", [
    (("--scenarios=interactive",), "make tune cannot run resnet50 Interactive: no config for it (resnet50 has "
                                   "configs for Offline, Server, SingleStream, MultiStream)"),
    (("--scenarios=offline", "--test_mode=AccuracyOnly"), "make tune runs PerformanceOnly tests only, so "
                                                          "--test_mode=AccuracyOnly would be ignored"),
])
def test_what_tune_cannot_run_is_refused(repo_copy, kvm_2core, flags, says):  # noqa: F811
    ctx, _ = context(repo_copy, kvm_2core, *flags)
    with pytest.raises(UserError) as refused:
        FakeTune(ctx, FakeEngine()).run()
    assert refused.value.exit_code == 2 and str(refused.value).startswith(says)


def test_a_served_llm_is_not_tuned_and_its_plan_does_not_recommend_tune(repo_copy, kvm_2core):  # noqa: F811
    """The openai harness with --endpoints: ONNX Runtime layouts never reach the servers; refused, and the plan of
    its runs names no make tune."""
    from code.common.harness.plan import untuned_notes

    args = parse_run_args(["--action=tune", "--benchmarks=llama3.1-8b", "--scenarios=server", "--harness_type=openai",
                           "--endpoints=http://127.0.0.1:8000"], list(ACTIONS), ["llama3.1-8b"])
    paths = Paths.create(scratch=repo_copy / "scratch", log_dir=repo_copy / "logs", repo=repo_copy)
    ctx = Context(args=args, paths=paths, rules=get_round(), detect=lambda: kvm_2core, log=lambda line: None)
    with pytest.raises(UserError) as refused:
        FakeTune(ctx, FakeEngine()).run()
    assert refused.value.exit_code == 2
    assert str(refused.value).startswith("make tune cannot tune llama3.1-8b Server on the openai harness: its model "
                                         "runs in the serving engines")
    assert "--openai_in_flight" in str(refused.value)
    selection = [("llama3.1-8b", s, TestMode.PerformanceOnly) for s in (Scenario.Offline, Scenario.Server)]
    assert untuned_notes(ctx, selection) == ()
    in_process, _ = context(repo_copy, kvm_2core, "--scenarios=offline")
    [note] = untuned_notes(in_process, [("resnet50", Scenario.Offline, TestMode.PerformanceOnly)])
    assert "make tune" in note
