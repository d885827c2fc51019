"""The LoadGen runs a search is made of: what a short run sets, and a completed run read back as an Outcome.

A short run sets its own min_duration and min_query_count (SHORT_RUNS) and is marked a test run; a full-length run
sets neither, so LoadGen applies the round's mlperf.conf (600 s, its query counts). The runs themselves are made by
the actions (code/actions/trial_runs.py).
"""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ..constants import Scenario
from ..records.early_stopping import scenario_min_queries
from ..records.loadgen_log import read_detail
from .search import Outcome

# LoadGen's Server early stopping needs 459 queries within the bound (0.99^459 < 1 - 0.99) to rate a p99
# VALID; 500 leaves a few over-bound queries room.
SERVER_SHORT_QUERIES = 500
SHORT_SECONDS = {Scenario.Offline: 10, Scenario.Server: 15, Scenario.Interactive: 15,
                 Scenario.SingleStream: 10, Scenario.MultiStream: 10}
# What a short run sets, per scenario: SingleStream and MultiStream get the fewest queries early stopping accepts
# for their percentile (64, 662); Offline ends on its one query (min_query_count is its samples).
SHORT_RUNS: Mapping[Scenario, Mapping[str, int]] = MappingProxyType({
    scenario: MappingProxyType({"min_duration": SHORT_SECONDS[scenario] * 1000,
                                "min_query_count": SERVER_SHORT_QUERIES if scenario.server_like
                                else scenario_min_queries(scenario) or 1})
    for scenario in Scenario})
# LoadGen's verdicts besides early stopping (results.cc); all true and early stopping false: INVALID by early
# stopping alone.
MET_OTHERWISE = ("result_perf_constraints_met", "result_min_duration_met", "result_min_queries_met")
# The fields a search moves, per scenario.
SEARCHED_FIELD = MappingProxyType({
    Scenario.Server: "server_target_qps", Scenario.Interactive: "server_target_qps",
    Scenario.Offline: "offline_expected_qps",
    Scenario.SingleStream: "single_stream_expected_latency_ns",
    Scenario.MultiStream: "multi_stream_expected_latency_ns"})
FIND_PEAK_SOURCE = "make find_peak"   # the source its records give the settings a search chooses


def outcome_of(run_dir: Path, valid: bool, reasons: tuple[str, ...] | list[str] = ()) -> Outcome:
    """What the search needs of a completed run, from LoadGen's detail log in `run_dir`."""
    log = read_detail(run_dir)
    v = log.values
    scenario = log.scenario
    percentile = float(v.get("effective_target_latency_percentile") or 0) or None
    latency = v.get(f"result_{percentile * 100:.2f}_percentile_latency_ns") if percentile else None
    throughput = v.get("result_samples_per_second" if scenario is Scenario.Offline
                       else "result_completed_samples_per_sec")
    mean = v.get("result_mean_latency_ns")
    causes = [r for r in reasons if not r.startswith("This was a test run")]
    return Outcome(
        valid=valid,
        latency_ns=float(latency) if latency is not None and scenario is not Scenario.Offline else None,
        percentile=percentile if scenario is not Scenario.Offline else None,
        bound_ns=float(v.get("effective_target_latency_ns") or 0) or None if scenario is Scenario.Server else None,
        mean_latency_ns=float(mean) if mean is not None and scenario is not Scenario.Offline else None,
        throughput=float(throughput) if throughput is not None else None,
        reason=_short(causes[0]) if causes and not valid else "",
        run_dir=str(run_dir),
        early_stopping_only=not valid and not log.errors and v.get("early_stopping_met") is False
        and all(v.get(key) is True for key in MET_OTHERWISE))


def _short(reason: str, limit: int = 140) -> str:
    return reason if len(reason) <= limit else reason[:limit - 3].rstrip() + "..."
