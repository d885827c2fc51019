"""wan-2.2-t2v-a14b's SingleStream result in seconds, as the official checker reports it: main.py's performance check
divides `early_stopping_latency_ss` (ns) by 1e6 and, for this benchmark alone, by 1e3 more, and labels it
"Latency (s)" (constants.py SPECIAL_UNIT_DICT). The toolkit's run record and printed figure carry the same number in
the same unit; the staged tree carries LoadGen's logs as they are, from which the checker computes it."""
from __future__ import annotations

from pathlib import Path

import pytest

from code.common.constants import Scenario
from code.common.harness.plan import measured_speed
from code.common.records.loadgen_log import read_detail
from code.common.rules import get_round
from tests.official_tools import NOT_AT_HAND, inference_dir, load_official_module
from tests.synthetic_logs import write_detail

WAN = "wan-2.2-t2v-a14b"


def test_wans_singlestream_latency_is_in_seconds_and_every_other_in_ms(tmp_path: Path) -> None:
    rules = get_round("v6.1")
    assert rules.benchmark(WAN).latency_unit == "s"
    assert {rules.benchmark(name).latency_unit for name in rules.benchmarks if name != WAN} == {"ms"}
    single = read_detail(write_detail(tmp_path / "ss", {
        "effective_scenario": "SingleStream", "result_90.00_percentile_latency_ns": 94_000_000_000,
        "early_stopping_latency_ss": 95_500_000_000}))
    seconds = single.metric(rules.benchmark(WAN).latency_unit)
    assert (seconds.value, seconds.unit, seconds.higher_is_better) == (95.5, "s", False)
    assert (single.metric().value, single.metric().unit) == (95_500.0, "ms")
    offline = read_detail(write_detail(tmp_path / "o", {"effective_scenario": "Offline",
                                                        "result_samples_per_second": 0.0105}))
    assert offline.metric("s").unit == "samples/s" and offline.metric("s").value == 0.0105
    with pytest.raises(ValueError, match="ms or s"):
        single.metric("min")


def test_a_run_planned_from_a_latency_in_seconds_reads_it_as_seconds() -> None:
    from types import SimpleNamespace

    earlier = SimpleNamespace(metric=95.5, metric_unit="s", folder="f", fields={})
    speed = measured_speed(Scenario.SingleStream, earlier, SimpleNamespace(samples_per_query=1))
    assert speed.samples_per_s == pytest.approx(1 / 95.5) and "95.5 s per query" in speed.basis
    in_ms = measured_speed(Scenario.SingleStream, SimpleNamespace(**{**vars(earlier), "metric": 95_500.0,
                                                                      "metric_unit": "ms"}),
                           SimpleNamespace(samples_per_query=1))
    assert in_ms.samples_per_s == pytest.approx(speed.samples_per_s)


def test_the_official_checker_reports_wans_singlestream_in_seconds() -> None:
    checkout = inference_dir()
    if checkout is None:
        pytest.skip(NOT_AT_HAND)
    submission = checkout / "tools" / "submission" / "submission_checker"
    constants = load_official_module(submission / "constants.py", "official_checker_constants")
    assert constants.SPECIAL_UNIT_DICT[WAN]["SingleStream"] == "Latency (s)"
    assert constants.RESULT_FIELD_NEW["v6.1"]["SingleStream"] == "early_stopping_latency_ss"
    assert WAN not in constants.RESULT_FIELD_BENCHMARK_OVERWRITE["v6.1"]
    check = (submission / "checks" / "performance_check.py").read_text()
    assert 'if str(self.model).lower() == "wan-2.2-t2v-a14b":\n                res /= S_TO_MS' in check


@pytest.mark.parametrize("harness", [(), ("--harness_type=openai",)])
def test_wans_served_settings_wait_for_whole_videos(tmp_path: Path, harness: tuple[str, ...]) -> None:
    """A video comes back whole: few in flight, an hour of silence allowed, one warm-up video (not the LLM's 256,
    600 s and 4); a typed value still wins."""
    import dataclasses

    from code.actions import ACTIONS
    from code.actions.base import Context
    from code.common.arguments import parse_run_args
    from code.common.paths import Paths
    from code.common.systems import SystemDetector
    from code.main import available_benchmarks

    rules = get_round("v6.1")

    def resolve(*flags: str):
        real = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
        paths = dataclasses.replace(real, repo=tmp_path)
        argv = ["--action=run_harness", "--benchmarks=wan-2.2", *harness, *flags]
        args = parse_run_args(argv, list(ACTIONS), available_benchmarks(real, rules), list(rules.benchmarks))
        return Context(args=args, paths=paths, rules=rules, detect=SystemDetector().detect,
                       log=lambda _: None).resolve(WAN, Scenario.Offline)

    config = resolve()
    assert (config["openai_in_flight"], config["openai_request_timeout_s"], config["openai_warmup_requests"]) == \
        (2, 3600.0, 1)
    assert resolve("--openai_in_flight=8")["openai_in_flight"] == 8
