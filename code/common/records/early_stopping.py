"""How many queries LoadGen's early stopping needs before it can judge a latency percentile.

LoadGen (loadgen/results.cc, PerformanceSummary::EarlyStopping, and loadgen/early_stopping.cc) rates a
SingleStream or MultiStream run INVALID unless it issued at least h_min + 1 queries ("Need to process at least
h_min+1 queries for early stopping"), where h_min is the smallest h with

    odds(h, t=1, p, d) < 1 - c,    odds(h, t, p, d) = BetaRegularized(p - d, h, 1 + t)
                                                   = sum_{x=0..t} C(h+t, x) (1-q)^x q^(h+t-x),  q = p - d,

the chance of at most t over-latency queries among h + t when each is under the percentile with chance q.
LoadGen uses confidence c = 0.99 and tolerance d = 0. Its binary search takes h as passing when odds < 1 - c
(strictly); odds never equals 1 - c exactly at these values, so `<` and `<=` give the same counts.

Counts LoadGen 6.0.17 itself printed (its summary's "at least N queries"), which this module reproduces:
p = 0.50: 11, 0.80: 31, 0.90: 64, 0.95: 130, 0.97: 219, 0.99: 662, 0.995: 1325, 0.999: 6636.
"""
from __future__ import annotations

import math

from ..constants import Scenario

EARLY_STOPPING_CONFIDENCE = 0.99
EARLY_STOPPING_TOLERANCE = 0.0

# The latency percentile LoadGen judges per scenario: its TestSettings defaults and the round's mlperf.conf
# (single_stream_target_latency_percentile = 0.90, multi_stream_target_latency_percentile = 0.99).
TARGET_LATENCY_PERCENTILE = {Scenario.SingleStream: 0.90, Scenario.MultiStream: 0.99}


def early_stopping_odds(h: int, t: int, percentile: float, tolerance: float = EARLY_STOPPING_TOLERANCE) -> float:
    """The chance of at most `t` over-latency queries among `h + t` (LoadGen's odds(h, t, p, d))."""
    q = percentile - tolerance
    n = h + t
    log_q, log_miss = math.log(q), math.log1p(-q)
    return sum(math.exp(math.log(math.comb(n, x)) + x * log_miss + (n - x) * log_q) for x in range(t + 1))


def _min_passing_h(t: int, percentile: float, confidence: float, tolerance: float) -> int:
    """The smallest h >= 1 with odds(h, t, p, d) < 1 - c; odds falls as h grows, so search by doubling, then
    bisect over the integers."""
    def passes(h: int) -> bool:
        return early_stopping_odds(h, t, percentile, tolerance) < 1 - confidence

    high = 1
    while not passes(high):
        high *= 2
    low = high // 2          # fails (or is 0); high passes
    while high - low > 1:
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle
    return high


def early_stopping_min_queries(percentile: float, confidence: float = EARLY_STOPPING_CONFIDENCE,
                               tolerance: float = EARLY_STOPPING_TOLERANCE) -> int:
    """The fewest queries a SingleStream/MultiStream run must issue for LoadGen's early stopping to judge
    the `percentile` (0.90 -> 64, 0.99 -> 662): h_min + 1 with t = 1."""
    if not 0.0 < percentile - tolerance < 1.0:
        raise ValueError(f"percentile {percentile} (less tolerance {tolerance}) must lie strictly between 0 and 1")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence {confidence} must lie strictly between 0 and 1")
    return _min_passing_h(1, percentile, confidence, tolerance) + 1


def scenario_min_queries(scenario: Scenario) -> int | None:
    """What early stopping needs in `scenario`; None where LoadGen applies no early stopping count (Offline,
    and Server, whose need depends on how many queries ran over the latency bound)."""
    percentile = TARGET_LATENCY_PERCENTILE.get(scenario)
    return early_stopping_min_queries(percentile) if percentile is not None else None


def server_min_queries(percentile: float = 0.99, confidence: float = EARLY_STOPPING_CONFIDENCE,
                       tolerance: float = EARLY_STOPPING_TOLERANCE) -> int:
    """The fewest queries a Server run must issue for early stopping to pass when every one is within the bound
    (results.cc: queries_issued >= h + t with t = 0): 459 at the 99th percentile."""
    return _min_passing_h(0, percentile, confidence, tolerance)


def server_early_stopping_met(queries: int, over_bound: int, percentile: float = 0.99,
                              confidence: float = EARLY_STOPPING_CONFIDENCE,
                              tolerance: float = EARLY_STOPPING_TOLERANCE) -> bool:
    """LoadGen's Server early stopping (results.cc): with `over_bound` of `queries` over the latency bound (t), met
    when queries >= h + t, h the smallest passing h for that t."""
    if over_bound < 0 or over_bound > queries:
        raise ValueError(f"{over_bound} queries over the bound among {queries}")
    return queries >= _min_passing_h(over_bound, percentile, confidence, tolerance) + over_bound
