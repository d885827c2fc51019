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
    raws, harness = iter([100.0, 80.0, 60.0, 110.0]), iter([90.0, 70.0, 105.0])

    def raw() -> float:
        order.append("raw")
        return next(raws)

    def measured() -> float:
        order.append("harness")
        return next(harness)

    rounds = in_turns(raw, measured, 3)
    assert order == ["raw", "harness", "raw", "harness", "raw", "harness", "raw"]
    # The machine slowed, then recovered: each side's quietest run is compared.
    assert rounds.harness == (90.0, 70.0, 105.0) and rounds.baselines == (100.0, 80.0, 60.0, 110.0)
    assert rounds.best() == (105.0, 110.0)


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
