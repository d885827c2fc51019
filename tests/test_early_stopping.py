"""The query count LoadGen's early stopping needs, against LoadGen's own numbers and the real LoadGen.

`python -m tests.test_early_stopping <Scenario> <percentile> <min_query_count> <outdir>` runs one LoadGen test
on a SUT that answers at once (a process per test: LoadGen reads its mlperf.conf once per process) and prints
a JSON line with what LoadGen decided.
"""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.constants import Scenario
from code.common.records.early_stopping import (TARGET_LATENCY_PERCENTILE, early_stopping_min_queries,
                                                early_stopping_odds, scenario_min_queries)
from code.common.paths import REPO_ROOT

# What LoadGen 6.0.17 printed in its summaries ("at least N queries") for these target_latency_percentile
# settings, run by run with this module's probe.
LOADGEN_COUNTS = {0.50: 11, 0.80: 31, 0.90: 64, 0.95: 130, 0.97: 219, 0.99: 662, 0.995: 1325, 0.999: 6636}


@pytest.mark.parametrize("percentile,count", sorted(LOADGEN_COUNTS.items()))
def test_min_queries_match_loadgen(percentile, count):
    assert early_stopping_min_queries(percentile) == count


def test_odds_is_the_binomial_tail_and_the_minimum_is_the_first_passing_h():
    # t = 1: P(at most one miss in h + 1) = q^(h+1) + (h+1)(1-q)q^h.
    for q, h in ((0.9, 63), (0.99, 661), (0.5, 3)):
        assert math.isclose(early_stopping_odds(h, 1, q), q ** (h + 1) + (h + 1) * (1 - q) * q ** h, rel_tol=1e-12)
    assert math.isclose(early_stopping_odds(4, 0, 0.5), 0.5 ** 4)
    for percentile, count in LOADGEN_COUNTS.items():
        h_min = count - 1
        assert early_stopping_odds(h_min, 1, percentile) < 0.01 <= early_stopping_odds(h_min - 1, 1, percentile)


def test_scenarios_and_bad_input():
    assert scenario_min_queries(Scenario.SingleStream) == 64
    assert scenario_min_queries(Scenario.MultiStream) == 662
    assert scenario_min_queries(Scenario.Offline) is None and scenario_min_queries(Scenario.Server) is None
    for bad in (0.0, 1.0, 1.5, -0.1):
        with pytest.raises(ValueError):
            early_stopping_min_queries(bad)


def _loadgen(scenario: str, percentile: float | None, min_queries: int, outdir: Path) -> dict:
    args = [sys.executable, "-m", "tests.test_early_stopping", scenario, str(percentile or ""), str(min_queries),
            str(outdir)]
    done = subprocess.run(args, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("scenario", ["SingleStream", "MultiStream"])
def test_real_loadgen_accepts_the_count_and_refuses_one_less(tmp_path, scenario):
    """The scenario's percentile as LoadGen's mlperf.conf sets it; exactly the computed count of queries meets
    early stopping, one fewer does not."""
    needed = scenario_min_queries(Scenario(scenario))
    enough = _loadgen(scenario, None, needed, tmp_path / "enough")
    assert enough["percentile"] == TARGET_LATENCY_PERCENTILE[Scenario(scenario)]
    assert enough["queries"] >= needed and enough["early_stopping_met"] is True
    assert enough["loadgen_says"] == needed
    short = _loadgen(scenario, None, needed - 1, tmp_path / "short")
    assert short["queries"] == needed - 1 and short["early_stopping_met"] is False
    assert short["loadgen_says"] == needed


def test_real_loadgen_agrees_at_another_percentile(tmp_path):
    result = _loadgen("SingleStream", 0.97, 1, tmp_path)
    assert result["percentile"] == 0.97 and result["loadgen_says"] == early_stopping_min_queries(0.97) == 219


def main(scenario_name: str, percentile: str, min_queries: int, outdir: str) -> None:
    import mlperf_loadgen as lg

    from code.common.records.loadgen_log import read_detail
    from tests.null_sut import run_null_sut

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    key = f"resnet50.{scenario_name}"
    # min_duration 1 ms and a 1 s target latency: LoadGen issues exactly max(min_query_count, 2) queries.
    lines = [f"{key}.min_query_count = {min_queries}", f"{key}.min_duration = 1", f"{key}.target_latency = 1000",
             f"{key}.performance_sample_count_override = 16", f"{key}.samples_per_query = 1"]
    if percentile:
        lines.append(f"{key}.target_latency_percentile = {float(percentile) * 100:g}")
    (out / "user.conf").write_text("\n".join(lines) + "\n")
    settings = lg.TestSettings()
    assert settings.FromConfig(str(out / "user.conf"), "resnet50", scenario_name, 1) == 0
    settings.scenario = getattr(lg.TestScenario, scenario_name)
    settings.mode = lg.TestMode.PerformanceOnly

    run_null_sut(lg, settings, out)
    log = read_detail(out)
    said = re.search(r"(?:Need to process|Processed) at least (\d+) queries",
                     (out / "mlperf_log_summary.txt").read_text())
    print(json.dumps({"percentile": float(log.get("effective_target_latency_percentile")),
                      "queries": int(log.get("result_query_count")),
                      "early_stopping_met": log.get("early_stopping_met"),
                      "loadgen_says": int(said.group(1)) if said else None}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4])
