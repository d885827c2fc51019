"""Verification of compliance runs, as the round's official scripts judge them, with the figures shown.

Each check returns a `Check`: pass/fail and the text of its verdict file, which ends with `TEST PASS` or
`TEST FAIL` after the figures it compared (the official verify_accuracy.txt / verify_performance.txt shape).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..benchmark_api import AccuracyResult
from ..constants import AccuracyTarget, Scenario
from ..harness.loadgen_log import LoadGenLog
from ..rules import ComplianceTest

PASS, FAIL = "TEST PASS", "TEST FAIL"


@dataclass(frozen=True)
class Check:
    passed: bool
    text: str

    @property
    def verdict(self) -> str:
        return PASS if self.passed else FAIL


def _finish(lines: list[str], passed: bool, why: str = "") -> Check:
    lines.append(PASS if passed else f"{FAIL}{': ' + why if why else ''}")
    return Check(passed, "\n".join(lines) + "\n")


def read_accuracy_log(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text())


def _first(data: str, dtype: np.dtype):
    values = np.frombuffer(bytes.fromhex(data), dtype=dtype)
    return values[0] if values.size else None


# -- TEST01 accuracy --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    reference_entries: int
    duplicate_keys: int
    compliance_entries: int
    matched: int
    mismatched: int
    missing: int


def compare_accuracy_logs(reference: list[dict], compliance: list[dict], dtype: np.dtype) -> Comparison:
    """Each compliance entry against the accuracy run's response for the same qsl_idx (first element,
    decoded with the benchmark's response dtype)."""
    by_index: dict[int, object] = {}
    duplicates = 0
    for entry in reference:
        if entry["qsl_idx"] in by_index:
            duplicates += 1
        else:
            by_index[entry["qsl_idx"]] = _first(entry["data"], dtype)
    matched = mismatched = missing = 0
    for entry in compliance:
        if entry["qsl_idx"] not in by_index:
            missing += 1
        elif _first(entry["data"], dtype) == by_index[entry["qsl_idx"]]:
            matched += 1
        else:
            mismatched += 1
    return Comparison(len(reference), duplicates, len(compliance), matched, mismatched, missing)


def verify_test01_accuracy(comparison: Comparison) -> Check:
    c = comparison
    lines = [f"num_acc_log_entries = {c.reference_entries}", f"num_acc_log_duplicate_keys = {c.duplicate_keys}",
             f"num_perf_log_entries = {c.compliance_entries}", f"num_perf_log_qsl_idx_match = {c.matched}",
             f"num_perf_log_data_mismatch = {c.mismatched}", f"num_missing_qsl_idxs = {c.missing}"]
    if c.compliance_entries == 0:
        return _finish(lines, False, "the compliance run logged no responses")
    if c.missing:
        return _finish(lines, False, f"{c.missing} sampled responses have no entry in the accuracy run's log")
    return _finish(lines, c.mismatched == 0, f"{c.mismatched} responses differ from the accuracy run")


def part3_fallback(reference: list[dict], compliance: list[dict], score: Callable[[Path], AccuracyResult],
                   work_dir: Path, target: AccuracyTarget) -> tuple[Check, AccuracyResult, AccuracyResult]:
    """TEST01 Part III: the accuracy run restricted to the compliance run's qsl_idx set vs the compliance run,
    both scored by the benchmark's accuracy script; the relative delta must stay within 1 % (99 % targets)
    or 0.1 % (99.9 % targets)."""
    sampled = {entry["qsl_idx"] for entry in compliance}
    baseline = [entry for entry in reference if entry["qsl_idx"] in sampled]
    work_dir.mkdir(parents=True, exist_ok=True)
    baseline_log = work_dir / "baseline_mlperf_log_accuracy.json"
    baseline_log.write_text(json.dumps(baseline))
    compliance_log = work_dir / "compliance_mlperf_log_accuracy.json"
    compliance_log.write_text(json.dumps(compliance))
    base, test = score(baseline_log), score(compliance_log)
    tolerance = 0.001 if target is AccuracyTarget.k_99_9 else 0.01
    delta = abs(base.value - test.value) / base.value if base.value else float("inf")
    lines = [f"baseline accuracy (accuracy run, same {len(sampled)} samples): {base.text}",
             f"compliance accuracy: {test.text}",
             f"relative difference = {delta:.5f} (allowed {tolerance:g} for the {target.percent_label} % target)"]
    return _finish(lines, delta <= tolerance, "accuracy differs by more than allowed"), base, test


# -- performance (TEST01, TEST04) --------------------------------------------------------------------
def performance_score(log: LoadGenLog) -> float:
    """Higher is better: Offline samples/s, Server completed samples/s, SS/MS 1e9 / latency (ns)."""
    metric = log.metric()
    if metric is None:
        raise ValueError(f"no {log.scenario.value} result in the log")
    return metric.value if metric.higher_is_better else 1e3 / metric.value


def _tolerance(test: ComplianceTest, reference: LoadGenLog) -> float:
    metric = reference.metric()
    fast = metric is not None and (
        (reference.scenario is Scenario.SingleStream and metric.value <= test.fast_singlestream_ms)
        or (reference.scenario is Scenario.MultiStream and metric.value <= test.fast_multistream_ms))
    return test.fast_tolerance if fast else test.performance_tolerance


def verify_performance(test: ComplianceTest, reference: LoadGenLog, compliance: LoadGenLog) -> Check:
    lines = [f"reference scenario = {reference.scenario.value}", f"test scenario = {compliance.scenario.value}"]
    if not reference.valid:
        return _finish(lines, False, "the submission's performance run is INVALID")
    if not compliance.valid:
        return _finish(lines, False, "the compliance run is INVALID")
    if reference.scenario is not compliance.scenario:
        return _finish(lines, False, "the scenarios differ")
    if reference.scenario is Scenario.Server and \
            reference.get("effective_target_latency_ns") != compliance.get("effective_target_latency_ns"):
        return _finish(lines, False, "the Server latency bounds differ")
    ref_score, test_score = performance_score(reference), performance_score(compliance)
    tolerance = _tolerance(test, reference)
    ratio = test_score / ref_score
    lines += [f"reference score = {ref_score:.6g}", f"test score = {test_score:.6g}",
              f"ratio = {ratio:.4f}"]
    if test.name == "TEST04":
        lines.append(f"allowed: at most {1 + tolerance:.2f} x the reference (no caching of repeated samples)")
        return _finish(lines, ratio <= 1 + tolerance, f"{ratio:.2f} x faster than the submission run")
    lines.append(f"allowed: within +-{tolerance:.0%} of the reference")
    return _finish(lines, abs(ratio - 1) <= tolerance, f"differs by {ratio - 1:+.1%} from the submission run")
