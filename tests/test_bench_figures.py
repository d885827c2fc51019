"""make bench's figures: ratios (latencies inverted so that higher is better), goals and the printed table."""
import math

import pytest

from code.actions.bench_raw import percentile_of
from code.common.tuning.ratios import Figure, amount, figure_table


def test_ratio_and_goal():
    throughput = Figure("(b) Offline", 970.0, 1000.0, "samples/s", 0.97)
    assert throughput.ratio == 0.97 and throughput.meets
    latency = Figure("(c) SingleStream p90", 4.0, 3.0, "ms", 0.97, higher_is_better=False)
    assert latency.ratio == 0.75 and not latency.meets      # raw 3 ms / harness 4 ms
    server = Figure("(d) Server", 0.0, 500.0, "QPS", 0.5, baseline_unit="samples/s")
    assert server.ratio == 0.0 and not server.meets
    assert math.isnan(Figure("x", 1.0, 0.0, "ms", 0.5).ratio) and not Figure("x", 1.0, 0.0, "ms", 0.5).meets


def test_table_has_one_aligned_row_per_figure():
    lines = figure_table([
        Figure("(a) overhead", 45_000.0, 50_000.0, "samples/s", 0.8),
        Figure("(c) SingleStream p90 latency: raw / harness", 3.61, 3.52, "ms", 0.97, higher_is_better=False),
        Figure("(d) int8 Server vs Offline", 120.0, 480.0, "QPS", 0.5, baseline_unit="samples/s"),
    ])
    assert lines[0].split() == ["figure", "harness", "baseline", "ratio", "goal"]
    assert set(lines[1].replace(" ", "")) == {"-"}
    a, c, d = lines[2:]
    assert "45,000 samples/s" in a and "50,000 samples/s" in a and "0.900" in a and ">= 0.8" in a and "meets" in a
    assert "3.610 ms" in c and "3.520 ms" in c and "0.975" in c and c.endswith("meets")
    assert "120 QPS" in d and "480 samples/s" in d and "0.250" in d and d.endswith("BELOW")
    assert len({line.index(">=") for line in lines[2:]}) == 1      # the goal column lines up


def test_amounts_and_loadgen_percentile():
    assert amount(47.25, "QPS") == "47.2 QPS" and amount(1234.4, "samples/s") == "1,234 samples/s"
    assert amount(float("nan"), "ms") == "- ms"
    assert percentile_of(list(range(1, 11)), 0.9) == 10.0    # sorted[int(10 x 0.9)], as LoadGen's results.cc
    assert percentile_of([5], 0.9) == 5.0


def test_the_raw_loop_is_taken_at_its_best_batch():
    from code.actions.bench import best_of

    assert best_of({1: 180.0, 8: 221.5, 32: 212.0}) == (8, 221.5)


def test_server_figures_run_only_where_scenarios_name_server():
    from code.actions import ACTIONS
    from code.actions.bench import SCENARIOS, bench_scenarios
    from code.common.arguments import parse_run_args
    from code.common.constants import Scenario

    def scenarios(*flags: str):
        return bench_scenarios(parse_run_args(["--action=bench", *flags], list(ACTIONS), ["resnet50"]), SCENARIOS)

    assert scenarios() == SCENARIOS                                        # all, by default
    assert Scenario.Server not in scenarios("--scenarios=offline,singlestream")
    assert Scenario.Offline in scenarios("--scenarios=server") and Scenario.Server in scenarios("--scenarios=server")


def test_rounds_in_turns_compare_the_best_run_of_each_side():
    from code.common.tuning.ratios import in_turns

    order: list[str] = []
    raws, harness = iter([100.0, 80.0, 110.0]), iter([90.0, 70.0, 105.0])

    def raw() -> float:
        order.append("raw")
        return next(raws)

    def measured() -> float:
        order.append("harness")
        return next(harness)

    rounds = in_turns(raw, measured, 3)
    # As many runs of each side; every other round the harness goes first, so a steady drift favours neither.
    assert order == ["raw", "harness", "harness", "raw", "raw", "harness"]
    # The machine slowed, then recovered: each side's quietest run is compared.
    assert rounds.harness == (90.0, 70.0, 105.0) and rounds.baselines == (100.0, 80.0, 110.0)
    assert rounds.best() == (105.0, 110.0)
    # printed in the order taken
    assert rounds.taken() == [(False, 100.0), (True, 90.0), (True, 70.0), (False, 80.0), (False, 110.0),
                              (True, 105.0)]


def test_the_best_of_more_runs_is_not_compared_with_the_best_of_fewer():
    """Two sides whose runs read the same two speeds at random (a VM's fast and slow phases) come out ahead as often
    as each other: the best of one more run on one side would win more often by chance alone."""
    import random
    from code.common.tuning.ratios import in_turns

    draw = random.Random(54)
    phases = (5.0, 8.0)

    def run() -> float:
        return draw.choice(phases)
    rounds = [in_turns(run, run, 3, higher_is_better=False) for _ in range(2000)]
    harness_ahead = sum(r.best()[0] < r.best()[1] for r in rounds)
    baseline_ahead = sum(r.best()[1] < r.best()[0] for r in rounds)
    assert all(len(r.harness) == len(r.baselines) == 3 for r in rounds)
    assert abs(harness_ahead - baseline_ahead) < 0.2 * (harness_ahead + baseline_ahead)


def test_rounds_of_latencies_take_the_lowest_of_each_side():
    from code.common.tuning.ratios import Rounds

    rounds = Rounds(harness=(5.3, 8.1), baselines=(5.1, 7.9, 5.2), higher_is_better=False)
    assert rounds.best() == (5.3, 5.1)


def test_no_rounds_is_refused():
    from code.common.tuning.ratios import in_turns

    with pytest.raises(ValueError):
        in_turns(lambda: 1.0, lambda: 1.0, 0)


@pytest.mark.parametrize("flags, says", [
    (["--benchmarks=resnet50", "--scenarios=interactive"], "make bench cannot run resnet50 Interactive: no config "
                                                            "for it (resnet50 has configs for Offline, Server, "
                                                            "SingleStream, MultiStream)"),
    (["--benchmarks=whisper", "--scenarios=server"], "make bench cannot run whisper Server: no config for it "
                                                      "(whisper has configs for Offline)"),
    (["--benchmarks=resnet50", "--test_mode=AccuracyOnly"], "make bench runs PerformanceOnly tests only, so "
                                                             "--test_mode=AccuracyOnly would be ignored"),
])
def test_what_bench_cannot_run_is_refused_before_anything_runs(tmp_path, kvm_2core, flags, says):
    from code.actions import ACTIONS
    from code.actions.base import Context
    from code.actions.bench import Bench
    from code.common.arguments import parse_run_args
    from code.common.errors import UserError
    from code.common.paths import Paths
    from code.common.rules import get_round

    args = parse_run_args(["--action=bench", *flags], list(ACTIONS), ["resnet50", "whisper"])
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path)
    lines: list[str] = []
    with pytest.raises(UserError) as refused:
        Bench(Context(args=args, paths=paths, rules=get_round(), detect=lambda: kvm_2core, log=lines.append)).run()
    assert refused.value.exit_code == 2 and str(refused.value).startswith(says)
    assert lines == [] and not (tmp_path / "scratch").exists()


def test_workers_are_measured_in_turns_with_one_loop_each_worker_at_one_loops_load():
    from code.actions import bench_serving

    seen: list[tuple[str, ...]] = []
    costs = iter([12.0, 14.0, 11.0, 13.5])        # one loop, workers, one loop, workers

    def measure(*flags: str) -> dict:
        seen.append(flags)
        return {"us_per_token": next(costs), "flags": flags}

    one, many = bench_serving.workers_in_turns(measure, 3, 300)
    in_flight = bench_serving.CLIENT_IN_FLIGHT
    assert seen == [("--client=harness",), ("--client=harness", "--workers=3", f"--in_flight={3 * in_flight}",
                                            "--requests=900")] * bench_serving.CLIENT_ROUNDS
    # each side's quietest run, with every run's figure kept
    assert (one["us_per_token"], one["runs"]) == (11.0, [12.0, 11.0])
    assert (many["us_per_token"], many["runs"]) == (13.5, [14.0, 13.5])


def test_the_workers_figure_compares_per_token_cpu_against_ten_percent_and_logs_each_process():
    from code.actions import bench_serving

    logged: list[str] = []

    class Context:
        log = logged.append

    def run(us: float, processes: list[float], reads: int, wakeups: int, runs=()) -> dict:
        tokens = 10_000
        return {"us_per_token": us, "tokens": tokens, "cpu_s": sum(processes), "seconds": 2.0,
                "tokens_per_second": tokens / 2.0, "tokens_per_read": tokens / reads,
                "tokens_per_wakeup": tokens / wakeups, "process_cpu_s": processes, "runs": list(runs)}

    one = run(10.0, [0.1], 10_000, 4_000, [10.0, 11.0])
    many = run(10.5, [0.005, 0.05, 0.05], 10_100, 5_000, [10.5, 12.0])
    shared = run(13.0, [0.01, 0.06, 0.06], 10_000, 5_000)
    cost, loops_per_core = bench_serving.workers_figures(Context(), "llama3.1-8b", one, many, shared, 2)
    assert (cost.value, cost.baseline, cost.goal) == (10.5, 10.0, 1 / 1.1)
    assert cost.ratio >= cost.goal                   # 5 % more CPU per token: within the goal of 10 %
    assert "1.00 tokens/read" in cost.label and "0.99 tokens/read" in cost.label
    assert (loops_per_core.value, loops_per_core.baseline) == pytest.approx((5_000 / 0.0525, 5_000 / 0.05))
    line = logged[0]
    assert "the LoadGen process 0.50, each worker 5.00, 5.00" in line and "2.00 tokens/wake-up" in line
    assert "all runs 10.50, 12.00" in line and "at 64 in flight (1/2 of the load each) 13.00 us/token" in line
    # each worker streamed 2,500 tokens/s, half one loop's 5,000: the log says the workers did not get its load
    assert len(logged) == 2 and "kept 2,500 tokens/s per worker, against one loop's 5,000" in logged[1]
    logged.clear()
    bench_serving.workers_figures(Context(), "llama3.1-8b", one, {**many, "tokens_per_second": 10_000.0}, shared, 2)
    assert len(logged) == 1


def test_singlestream_runs_last_as_long_on_both_sides_and_take_turns(tmp_path, monkeypatch):
    from types import SimpleNamespace
    from code.actions import bench, bench_raw
    from code.common.tuning.search import Outcome

    taken: list[tuple[str, float]] = []
    raw_latencies = iter([8.4, 5.3, 8.8])

    def short(self, ctx, benchmark_name, scenario, run_dir, **fields):
        taken.append(("harness", fields["min_duration"] / 1000))
        # each harness run is sized on the raw latency just measured, so that LoadGen does not run out of queries
        assert fields["single_stream_expected_latency_ns"] == int(expected.pop(0) * 1e6)
        return Outcome(valid=True, latency_ns=8.1e6, percentile=0.9, bound_ns=None)

    def latency(ctx, benchmark_name, config, percentile, seconds):
        taken.append(("raw", seconds))
        return next(raw_latencies)

    expected = [8.4, 8.4, 8.8]    # the newest raw latency before each harness run
    monkeypatch.setattr(bench.Bench, "_short", short)
    monkeypatch.setattr(bench_raw, "latency", latency)
    handler = object.__new__(bench.Bench)
    handler.ctx = SimpleNamespace(paths=SimpleNamespace(bench_dir=tmp_path))
    rounds = handler._stream_rounds(handler.ctx, "resnet50", {}, 0.9)
    seconds = float(bench.STREAM_SECONDS)
    assert taken == [("raw", seconds), ("harness", seconds), ("harness", seconds), ("raw", seconds),
                     ("raw", seconds), ("harness", seconds)]
    assert rounds.best() == (8.1, 5.3)
    # A percentile of a window as short as the machine's phases measures the phase (bench.py says what was seen).
    assert bench.STREAM_SECONDS >= 30


@pytest.mark.parametrize("queries", [None, 2000])
def test_server_against_raw_runs_both_sides_at_least_as_long_as_asked(tmp_path, monkeypatch, queries):
    """(m)'s runs hold FIXED_SERVER_QUERIES queries on both sides, the harness's LoadGen run and the raw engine's
    arrivals; (d) and (e) beside their searches stay short runs."""
    from types import SimpleNamespace

    from code.actions import bench, bench_raw
    from code.common.tuning.search import Outcome

    harness_runs: list[dict] = []
    raw_runs: list = []

    def short(self, ctx, benchmark_name, scenario, run_dir, **fields):
        harness_runs.append(fields)
        return Outcome(valid=True, latency_ns=12e6, percentile=0.99, bound_ns=15e6)

    def server_p99(ctx, benchmark_name, config, rate, least=None):
        raw_runs.append((rate, least))
        return 10.0

    monkeypatch.setattr(bench.Bench, "_short", short)
    monkeypatch.setattr(bench_raw, "server_p99", server_p99)
    logged: list[str] = []
    ctx = SimpleNamespace(resolve=lambda *_: {"precision": "fp32"}, log=logged.append,
                          paths=SimpleNamespace(bench_dir=tmp_path))
    handler = object.__new__(bench.Bench)   # its own context only: no embedded default to fill in
    handler.ctx = ctx
    figure = handler._server_against_raw(ctx, "resnet50", "m", "mobilenet_v2 fp32", 40.0, bench.GOALS,
                                         goal=bench.GOALS["server_fixed"], queries=queries)
    assert raw_runs == [(40.0, queries)] * bench.ROUNDS
    expected = {"server_target_qps": 40.0, **({"min_query_count": queries} if queries else {})}
    assert harness_runs == [expected] * bench.ROUNDS
    assert figure.ratio == pytest.approx(10.0 / 12.0)
    assert ("runs of 2,000 queries or more" in figure.label) == bool(queries)
    assert bench.FIXED_SERVER_QUERIES >= 2000   # a p99 over 20 samples or more above it, not the few worst
