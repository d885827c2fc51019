"""Why a run is INVALID, in plain words with numbers, and which config field to change."""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..constants import Scenario
from ..rules.schema import TokenLatencyLimits
from .early_stopping import TARGET_LATENCY_PERCENTILE, early_stopping_min_queries, server_min_queries
from .loadgen_log import LoadGenLog


@dataclass(frozen=True)
class Verdict:
    valid: bool
    submittable: bool           # valid and not a shortened test run
    reasons: tuple[str, ...]    # one sentence each: what happened and what to change


def _yes(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "yes", "1")


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.2f} ms"


def _judged_percentile(log: LoadGenLog) -> float | None:
    """The latency percentile LoadGen's early stopping judges (SingleStream/MultiStream); None elsewhere."""
    if log.scenario not in TARGET_LATENCY_PERCENTILE:
        return None
    return float(log.get("effective_target_latency_percentile") or TARGET_LATENCY_PERCENTILE[log.scenario])


def _test_run_note(log: LoadGenLog) -> str:
    """What a --test_run ran instead of the rules' 600 s: a count when it ended on one (min_duration 0), else its
    min_duration, with the min_query_count against what early stopping needs for SingleStream/MultiStream."""
    v = log.values
    min_s = log.min_duration_ms / 1000
    percentile = _judged_percentile(log)
    needed = early_stopping_min_queries(percentile) if percentile is not None else None
    if min_s == 0 and log.scenario is Scenario.Offline:
        ran = f"it ran one query of {log.offline_query_samples} samples instead of the rules' 600 s"
    elif min_s == 0 and percentile is not None:
        ran = (f"it ran {v.get('effective_min_query_count')} queries instead of the rules' 600 s (early stopping "
               f"needs {needed} for the {percentile * 100:g}th percentile)")
    else:
        ran = f"min_duration was {min_s:.0f} s instead of the rules' 600 s"
        if percentile is not None and v.get("effective_min_query_count") is not None:
            count = int(v["effective_min_query_count"])
            why = f"what LoadGen's early stopping needs for the {percentile * 100:g}th percentile" \
                if count == needed else f"early stopping needs {needed} for the {percentile * 100:g}th percentile"
            ran += f", with min_query_count {count} ({why})"
    return f"This was a test run (--test_run): {ran}, so the result is for a quick look only and cannot be submitted."


def _bound_text(ns: float) -> str:
    return f"{ns / 1e6:g} ms"


def _token_latency_reasons(log: LoadGenLog, fields: Mapping[str, Any], limits: TokenLatencyLimits | None,
                           label: str) -> tuple[list[str], bool]:
    """Why an LLM Server / Interactive run fails its time-to-first-token or time-per-output-token bound: each p99
    over the bound LoadGen judged it by (then LoadGen calls the run INVALID), or at or over the rules' bound (the
    checkers want it strictly below, whatever user.conf told LoadGen), with what to change; and whether the
    checkers refuse the run for it."""
    tokens = log.token_latencies()
    if tokens is None:
        return [], False
    v = log.values
    target = float(v.get("effective_target_qps", fields.get("server_target_qps") or 0) or 0)
    completed = float(v.get("result_completed_samples_per_sec", 0) or 0)
    reasons, worst = [], 1.0
    checks = (("time to first token", tokens.ttft_p99_ns, tokens.ttft_bound_ns, limits.ttft_ns if limits else None),
              ("time per output token", tokens.tpot_p99_ns, tokens.tpot_bound_ns, limits.tpot_ns if limits else None))
    over, refused = [], False
    for what, observed, loadgen_bound, rules_bound in checks:
        if observed is None:
            continue
        refused = refused or bool(rules_bound and observed >= rules_bound)
        if loadgen_bound and observed > loadgen_bound:
            over.append((what, observed, f"the {_bound_text(loadgen_bound)} bound LoadGen judged it by"))
            worst = min(worst, loadgen_bound / observed)
        elif rules_bound and observed >= rules_bound:
            over.append((what, observed, f"the rules' {_bound_text(rules_bound)} bound (the submission checkers "
                                         f"want it strictly below; user.conf gave LoadGen a looser one)"))
            worst = min(worst, rules_bound / observed)
    for what, observed, bound in over:
        if what == "time to first token":
            suggestion = min(target, completed or target) * min(0.9, worst)
            fix = (f"lower server_target_qps to about {suggestion:.2f} (queries wait less for a free slot), or "
                   f"raise batch_size so that more sequences are served at once")
        else:
            fix = ("lower batch_size (fewer sequences share each decode step) or prefill_batch (a prefill holds up "
                   "every running sequence), set or lower prefill_chunk_tokens (prompts prefilled in chunks between "
                   "decode steps), or lower server_target_qps")
        reasons.append(f"{label} 99th percentile {what} {_ms(observed)} is over {bound} at {target:g} QPS: {fix}.")
    return reasons, refused


def explain(log: LoadGenLog, fields: Mapping[str, Any], test_run: bool,
            token_limits: TokenLatencyLimits | None = None, run_scenario: Scenario | None = None) -> Verdict:
    """The verdict of a run in plain words. For an LLM Server or Interactive run, `token_limits` are the rules'
    TTFT / TPOT bounds of the run's scenario (BenchmarkRules.token_limits) and `run_scenario` names it (LoadGen
    logs an Interactive run as Server); without them the bounds LoadGen logged are used."""
    v = log.values
    scenario = log.scenario
    reasons: list[str] = []
    min_s = log.min_duration_ms / 1000
    duration = log.run_duration_s
    duration_short = not _yes(v.get("result_min_duration_met", True))

    if scenario is Scenario.Offline and duration_short and duration is not None:
        measured = float(v.get("result_samples_per_second", 0))
        reasons.append(f"Offline run lasted {duration:.0f} s < {min_s:.0f} s: raise offline_expected_qps "
                       f"to about {measured:.0f} (the measured samples/s; LoadGen then issues enough samples "
                       f"for {min_s * 1.1:.0f} s).")
    elif scenario in (Scenario.SingleStream, Scenario.MultiStream) and (
            duration_short or any("Ran out of generated queries" in e for e in log.errors)):
        field = ("single_stream_expected_latency_ns" if scenario is Scenario.SingleStream
                 else "multi_stream_expected_latency_ns")
        expected = float(v.get("effective_target_latency_ns", 0) or fields.get(field) or 0)
        mean = float(v.get("result_mean_latency_ns", 0))
        reasons.append(f"{scenario.value} ran out of pre-generated queries after "
                       f"{duration or 0:.0f} s < {min_s:.0f} s: queries took {_ms(mean)} on average but "
                       f"LoadGen planned for {_ms(expected)}; lower {field} to about {int(mean * 0.9)}.")
    elif duration_short:
        reasons.append(f"The run lasted {duration or 0:.0f} s < {min_s:.0f} s: give LoadGen more work "
                       f"(a higher target) so it runs at least min_duration.")

    refused = False   # the checkers refuse a run LoadGen calls VALID (a token bound loosened in user.conf)
    if scenario is Scenario.Server and log.uses_token_latencies:
        token_reasons, refused = _token_latency_reasons(log, fields, token_limits, (run_scenario or scenario).value)
        reasons += token_reasons
    elif scenario is Scenario.Server:
        bound = float(v.get("effective_target_latency_ns", 0))
        percentile = float(v.get("effective_target_latency_percentile", 0.99)) * 100
        observed = float(v.get(f"result_{percentile:.2f}_percentile_latency_ns", 0))
        target = float(v.get("effective_target_qps", fields.get("server_target_qps") or 0))
        completed = float(v.get("result_completed_samples_per_sec", 0))
        if bound and observed > bound:
            suggestion = min(target, completed or target) * min(0.9, bound / observed)
            reasons.append(f"Server {percentile:.0f}th percentile latency {_ms(observed)} exceeds the "
                           f"{_ms(bound)} bound at {target:.0f} QPS: lower server_target_qps to about "
                           f"{suggestion:.0f}, or lower server_batch_timeout_us / batch_size.")

    if not _yes(v.get("result_min_queries_met", True)):
        reasons.append(f"Only {v.get('result_query_count', '?')} queries ran, fewer than the "
                       f"{v.get('effective_min_query_count', '?')} required: raise the target or min_duration.")
    if not _yes(v.get("early_stopping_met", True)):
        # A token-latency run logs one early-stopping result per bound (TTFT, TPOT) instead of one.
        result = v.get("early_stopping_result") or " ".join(
            str(v.get(key) or "") for key in ("early_stopping_ttft_result", "early_stopping_tpot_result"))
        needed = re.search(r"at least (\d+) (total |more )?queries", str(result))
        ran = v.get("result_query_count", "?")
        fewest = server_min_queries()   # Server's p99 with every query within the bound
        # Every query within the bound but fewer than a p99 needs: LoadGen asks for exactly the rest.
        if needed and needed.group(2) == "more " and str(ran).isdigit() and \
                int(ran) + int(needed.group(1)) <= fewest:
            reasons.append(f"Early stopping could not bound the latency percentile: only {ran} queries ran, and "
                           f"the 99th percentile needs at least {fewest} (LoadGen asks for {needed.group(1)} more, "
                           f"every one within the bound). Run longer: a higher min_query_count or min_duration.")
        elif needed and needed.group(2) == "more ":
            # Too many queries over the latency: more queries help only if they all come in under it.
            reasons.append(f"Early stopping could not bound the latency percentile: too many of the {ran} queries "
                           f"were over the latency bound, and LoadGen would need {needed.group(1)} more, every one "
                           f"within it. Lower the load (target QPS) or the latency, or run longer.")
        else:
            count = f" ({ran} ran, LoadGen asks for at least {needed.group(1)})" if needed else ""
            reasons.append(f"Early stopping could not bound the latency percentile with this many queries{count}: "
                           f"run longer (a higher min_duration or min_query_count).")
    for error in log.errors:
        if "Ran out of generated queries" not in error:
            reasons.append(f"LoadGen reported an error: {error}")

    valid = log.valid and not log.errors
    if not valid and not reasons:
        reasons.append(f"LoadGen says: {v.get('result_invalid_reason') or 'INVALID (no reason given)'}")
    if test_run:
        reasons.append(_test_run_note(log))
    return Verdict(valid=valid, submittable=valid and not test_run and not refused, reasons=tuple(reasons))
