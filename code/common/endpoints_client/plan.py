"""The plan's estimate of a test on the endpoints client, from what the client will do (not LoadGen's sizing):

- its queries, known before it runs (the benchmark's ClientLoad: the agentic replay's assistant turns, videos, products,
  or the accuracy samples), each taking the time per query of the newest earlier client test of the same system,
  benchmark, scenario and speed fields (its 90th percentile latency, a little pessimistic, or one over its samples/s),
  or the config's expected latency or rate where none was measured; an accuracy test's samples at the time per sample of
  the newest earlier accuracy test on the client (its scored part over its samples), else at the replay's time per turn
  (a bound: shorter prompts, the same cap on output tokens);
- the minimum duration the v6.1 checker wants (600 s): a pass the client makes once whatever min_duration_ms says
  (the agentic replay: every recorded turn once) is not lengthened by it; another one runs at least that long;
- the start-up (the client's check of the YAML, the local server's start, the client's own start), measured as the
  earlier test's wall time less its measured part where there is one; otherwise not counted, and the plan says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from .workload import ClientLoad


@dataclass(frozen=True)
class ClientEstimate:
    queries: int
    seconds: float               # the queries, at least min_duration where it lengthens the pass, and the start-up
    per_query_s: float
    measured: bool               # the time per query comes from an earlier run (else from the config)
    basis: str                   # the figure and where it comes from
    notes: tuple[str, ...]       # what the count is, the minimum duration, the start-up


# The config's pace of a scenario without an expected latency: its expected or target rate, one query a sample.
RATE_FIELDS = ("offline_expected_qps", "server_target_qps")
LATENCY_SECONDS = {"ms": 1e-3, "s": 1.0}         # a latency figure's unit (wan reports its SingleStream in s)


def config_pace(fields: Mapping[str, Any], latency_field: str) -> tuple[float, str] | None:
    """(seconds per query, basis) from the config: the scenario's expected latency where it has one
    (`latency_field`), else its expected or target rate; None where neither is set."""
    if latency_field and fields.get(latency_field):
        ns = float(fields[latency_field])
        return ns / 1e9, f"{latency_field}={int(ns)}, {ns / 1e9:.3g} s per query"
    for name in RATE_FIELDS:
        if fields.get(name):
            rate = float(fields[name])
            return 1 / rate, f"{name}={rate:g}, {1 / rate:.3g} s per sample"
    return None


def per_query_time(earlier: Any, config: tuple[float, str] | None) -> tuple[float, bool, str] | None:
    """(seconds per query, measured, basis): the earlier client test's 90th percentile latency, or one over its
    samples per second, else the config's pace; None where neither is known."""
    if earlier is not None and earlier.metric:
        metric = float(earlier.metric)
        if earlier.metric_unit in LATENCY_SECONDS:
            seconds = metric * LATENCY_SECONDS[earlier.metric_unit]
            return seconds, True, f"{seconds:.3g} s per query, the 90th percentile latency in {earlier.folder}"
        if earlier.metric_unit == "samples/s":
            return 1 / metric, True, f"{1 / metric:.3g} s per sample, {metric:.3g} samples/s in {earlier.folder}"
    if config is not None:
        return config[0], False, config[1]
    return None


def per_sample_time(earlier_accuracy: Any) -> tuple[float, bool, str] | None:
    """(seconds per sample, measured, basis) of an earlier accuracy test on the client: its measured part (the
    client's duration_s of the scored samples) over its samples."""
    if earlier_accuracy is None or not earlier_accuracy.measured_s or not earlier_accuracy.accuracy_samples:
        return None
    seconds = float(earlier_accuracy.measured_s) / int(earlier_accuracy.accuracy_samples)
    return seconds, True, (f"{seconds:.3g} s per sample, {float(earlier_accuracy.measured_s):.0f} s for "
                           f"{earlier_accuracy.accuracy_samples} samples in {earlier_accuracy.folder}")


def startup_time(earlier: Any) -> float | None:
    """The earlier client test's wall time less its measured part: the YAML's check, the servers' and the client's
    start (None where unknown)."""
    if earlier is None or earlier.test_s is None or earlier.measured_s is None:
        return None
    return max(0.0, float(earlier.test_s) - float(earlier.measured_s))


def estimate_client_test(load: ClientLoad, per_query: tuple[float, bool, str], min_duration_s: float,
                         startup_s: float | None, earlier_folder: str = "") -> ClientEstimate:
    seconds_per_query, measured, basis = per_query
    passes = load.queries * seconds_per_query
    notes = [f"{'at most ' if load.at_most else ''}{load.queries} {load.what}"]
    if min_duration_s > 0:
        if load.one_pass:
            notes.append(f"min_duration_ms {int(min_duration_s * 1000)} (the v6.1 checker's) does not lengthen it: "
                         f"{load.one_pass}")
        elif passes < min_duration_s:
            notes.append(f"lengthened to min_duration_ms {int(min_duration_s * 1000)} (the v6.1 checker's)")
            passes = min_duration_s
    if startup_s is not None:
        notes.append(f"with {startup_s:.0f} s of start-up (the YAML's check, the server's and the client's start), "
                     f"measured in {earlier_folder}")
    else:
        notes.append("plus the start-up (the YAML's check, the server's and the client's start: minutes on a small "
                     "machine), not measured here yet")
    return ClientEstimate(load.queries, passes + (startup_s or 0.0), seconds_per_query, measured, basis, tuple(notes))
