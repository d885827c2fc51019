"""Verification of compliance runs, judged exactly as the round's official scripts judge them.

- TEST01 accuracy: compliance/TEST01/verify_accuracy.py (responses compared by qsl_idx, first element only; a
  qsl_idx the accuracy run lacks is counted, not failed). For a benchmark whose first value says little (yolo:
  the image index), `compare_whole_responses` also compares every value and gives a warning beside the verdict.
  When responses differ, Part III: the baseline (the accuracy run's entries for the sampled qsl_idx) and the
  compliance log are scored by the benchmark's accuracy script; the submission checker then accepts the test
  when |1 - baseline / compliance| * 100 is within the round's delta (1 %, 0.1 % for 99.9 % targets).
  `part3_verdict` is that check, shared with the toolkit's checker.
- TEST01 performance: compliance/TEST01/verify_performance.py (detail log, raw figures, two-sided).
- TEST04 performance: compliance/TEST04/verify_performance.py (summary log, rates, one-sided `test < ref*(1+t)`).

Each check gives a `Check`: the verdict, the text of its verify_*.txt (the lines the official script prints, so
the file reads the same as theirs) and a one-line summary for people.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..benchmark_api import ResponseFormat
from ..constants import Scenario
from ..paths import BASELINE_ACCURACY_TXT, COMPLIANCE_ACCURACY_TXT, DETAIL_LOG, SUMMARY_LOG
from ..records.loadgen_log import LoadGenLog, read_detail
from ..rules import ComplianceTest

PASS, FAIL = "TEST PASS", "TEST FAIL"
# The detail-log figure TEST01's verify_performance.py compares, per scenario (latencies in ns).
RAW_FIELD = {Scenario.Offline: "result_samples_per_second", Scenario.SingleStream: "early_stopping_latency_ss",
             Scenario.MultiStream: "early_stopping_latency_ms", Scenario.Server: "result_completed_samples_per_sec"}
# The summary line TEST04's verify_performance.py reads, per scenario, and whether it is a latency (1e9 / ns).
SUMMARY_FIELD = {"SingleStream": (r".*Early stopping (90th|90.0th|99.9th) percentile estimate", True),
                 "MultiStream": (r".*Early stopping (99th|99.0th) percentile estimate", True),
                 "Server": (r"Completed samples per second", False),
                 "Offline": (r"Samples per second", False)}


@dataclass(frozen=True)
class Check:
    passed: bool
    text: str       # the verify_*.txt content
    summary: str    # one line for the console

    @property
    def verdict(self) -> str:
        return PASS if self.passed else FAIL


def read_accuracy_log(path: Path) -> list[dict]:
    return json.loads(Path(path).read_text())


# -- TEST01 accuracy --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Comparison:
    reference_entries: int
    duplicate_keys: int
    reference_mismatches: int
    compliance_entries: int
    matched: int
    mismatched: int
    missing: int


def _decode(data: str, dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(data), dtype=dtype)


def compare_accuracy_logs(reference: list[dict], compliance: list[dict], dtype: np.dtype) -> Comparison:
    """verify_accuracy.py's comparison: the accuracy run's first response per qsl_idx against each compliance
    entry (first element, decoded with `dtype`); a compliance entry then stands for its qsl_idx."""
    known: dict[int, str] = {}
    duplicates = reference_mismatches = 0
    for entry in reference:
        index, data = entry["qsl_idx"], entry["data"]
        if index in known:
            duplicates += 1
            reference_mismatches += known[index] != data
        else:
            known[index] = data
    matched = mismatched = missing = 0
    for entry in compliance:
        index, data = entry["qsl_idx"], _decode(entry["data"], dtype)
        if index in known:
            matched += 1
            previous = _decode(known[index], dtype)
            if previous.size == 0 or data.size == 0:
                mismatched += previous.size != data.size
            elif data[0] != previous[0]:
                mismatched += 1
        else:
            missing += 1
        known[index] = entry["data"]
    return Comparison(len(reference), duplicates, reference_mismatches, len(compliance), matched, mismatched,
                      missing)


@dataclass(frozen=True)
class WholeResponses:
    """TEST01's responses compared whole (every record, every value), beyond what the official script compares."""

    compared: int                       # sampled responses that have a counterpart in the accuracy run
    differing: tuple[int, ...]          # their qsl_idx where the whole response differs
    detail: str                         # the first difference, for people ("" when none)

    @property
    def warning(self) -> str | None:
        if not self.differing:
            return None
        return (f"{len(self.differing)} of {self.compared} sampled responses differ from the accuracy run beyond "
                f"their first value, which is all the official script compares ({self.detail})")

    def text(self) -> str:
        lines = [f"compared = {self.compared}", f"differing = {len(self.differing)}"]
        if self.differing:
            lines += [f"differing_qsl_idx = {' '.join(map(str, self.differing))}", f"first = {self.detail}"]
        return "\n".join(lines) + "\n"


def compare_whole_responses(reference: list[dict], compliance: list[dict], response: ResponseFormat) \
        -> WholeResponses:
    """Each sampled response against the accuracy run's first response for its qsl_idx, byte for byte; a
    difference is described in the benchmark's response format (records and fields)."""
    known: dict[int, str] = {}
    for entry in reference:
        known.setdefault(entry["qsl_idx"], entry["data"])
    compared, differing, detail = 0, [], ""
    for entry in compliance:
        index = entry["qsl_idx"]
        if index not in known:
            continue
        compared += 1
        if entry["data"].upper() == known[index].upper():
            continue
        differing.append(index)
        if not detail:
            detail = f"qsl_idx {index}: " + _describe(bytes.fromhex(known[index]), bytes.fromhex(entry["data"]),
                                                       response)
    return WholeResponses(compared, tuple(differing), detail)


def _describe(expected: bytes, found: bytes, response: ResponseFormat) -> str:
    width = response.record_bytes
    if len(expected) % width or len(found) % width:
        return f"{len(found)} bytes, the accuracy run {len(expected)} bytes"
    a, b = response.decode(expected), response.decode(found)
    if len(a) != len(b):
        return f"{len(b)} records ({', '.join(response.fields)}), the accuracy run {len(a)}"
    gap = np.abs(a.astype(np.float64) - b.astype(np.float64))
    record, field = np.unravel_index(int(np.argmax(gap)), gap.shape)
    return (f"record {record} {response.fields[field]} is {b[record, field]:.7g}, the accuracy run's "
            f"{a[record, field]:.7g} (largest of {int((gap > 0).sum())} differing values)")


def verify_test01_accuracy(comparison: Comparison) -> Check:
    c = comparison
    lines = [f"num_acc_log_entries = {c.reference_entries}", f"num_acc_log_duplicate_keys = {c.duplicate_keys}",
             f"num_acc_log_data_mismatch = {c.reference_mismatches}", f"num_perf_log_entries = {c.compliance_entries}",
             f"num_perf_log_qsl_idx_match = {c.matched}", f"num_perf_log_data_mismatch = {c.mismatched}",
             f"num_missing_qsl_idxs = {c.missing}"]
    passed = c.mismatched == 0 and c.matched > 0
    if passed:
        summary = f"{c.matched} sampled responses match the accuracy run"
    elif c.matched == 0:
        summary = "no sampled response has a counterpart in the accuracy run"
    else:
        summary = f"{c.mismatched} of {c.matched} sampled responses differ from the accuracy run"
    if c.missing:
        summary += f" ({c.missing} sampled qsl_idx not in the accuracy log, which the script counts, not fails)"
    return Check(passed, "\n".join([*lines, PASS if passed else FAIL]) + "\n\n", summary)


def part3_baseline(reference: list[dict], compliance: list[dict]) -> list[dict]:
    """create_accuracy_baseline.sh: the accuracy run's entries whose qsl_idx the compliance run logged."""
    sampled = {entry["qsl_idx"] for entry in compliance}
    return [entry for entry in reference if entry["qsl_idx"] in sampled]


def accuracy_value(text: str, pattern: str) -> float | None:
    """The checker's reading of an accuracy text: the last line `pattern` matches (re.match), as a number."""
    value = None
    for line in text.splitlines():
        found = re.match(pattern, line)
        if found:
            try:
                value = float(found.group(1))
            except (IndexError, ValueError):
                value = None
    return value


def part3_verdict(baseline_text: str, compliance_text: str, pattern: str, delta_percent: float) -> Check:
    """The submission checker's Part III test of TEST01/accuracy/{baseline,compliance}_accuracy.txt."""
    baseline, compliance = accuracy_value(baseline_text, pattern), accuracy_value(compliance_text, pattern)
    if not baseline or not compliance:
        which = BASELINE_ACCURACY_TXT if not baseline else COMPLIANCE_ACCURACY_TXT
        return Check(False, "", f"{which} holds no accuracy value the round's pattern reads (or it is 0)")
    delta = abs(1 - baseline / compliance) * 100
    passed = delta <= delta_percent
    return Check(passed, "", f"Part III: baseline {baseline:g} vs compliance {compliance:g}, delta {delta:.3f} % "
                             f"({'within' if passed else 'over'} the {delta_percent:g} % allowed)")


# -- TEST01 performance (detail logs, raw figures) -----------------------------------------------------
def _raw_score(log: LoadGenLog, path: Path) -> tuple[float | None, str | None]:
    try:
        scenario = log.scenario
    except Exception:  # noqa: BLE001 - missing or unknown scenario: the script fails on it too
        return None, f"{path} names no scenario"
    value = log.get(RAW_FIELD[scenario])
    if value is None:
        return None, f"{path} has no {RAW_FIELD[scenario]}"
    if not log.valid:
        return None, f"Invalid results in {path}"
    if log.errors or log.get("num_errors"):
        return None, f"LoadGen reported errors in {path} (the official script stops on them)"
    return float(value), None


def _tolerance(test: ComplianceTest, scenario: Scenario | str, reference_score: float) -> float:
    limit = test.fast_limit.get(Scenario(scenario)) if str(scenario) in Scenario.__members__ else None
    return test.fast_tolerance if limit is not None and reference_score <= limit else test.performance_tolerance


def _finish(lines: list[str], passed: bool, why: str, summary: str) -> Check:
    lines.append(PASS if passed else f"{FAIL}: {why}")
    return Check(passed, "\n".join(lines) + "\n", summary)


def verify_raw(test: ComplianceTest, reference_dir: Path, compliance_dir: Path) -> Check:
    lines = ["Verifying performance."]
    ref_log, test_log = read_detail(reference_dir), read_detail(compliance_dir)
    ref, problem = _raw_score(ref_log, reference_dir / DETAIL_LOG)
    if problem is None:
        score, problem = _raw_score(test_log, compliance_dir / DETAIL_LOG)
    if problem is not None:
        return _finish(lines, False, problem, problem)
    if ref_log.scenario is not test_log.scenario:
        return _finish(lines, False, "Test and reference scenarios do not match!", "the scenarios differ")
    if ref_log.scenario is Scenario.Server and \
            ref_log.get("effective_target_latency_ns") != test_log.get("effective_target_latency_ns"):
        return _finish(lines, False, "Server target latency mismatch", "the Server latency bounds differ")
    tolerance = _tolerance(test, ref_log.scenario, ref)
    lines += [f"Reference score = {ref}", f"Test score = {score}"]
    passed = ref * (1 - tolerance) <= score <= ref * (1 + tolerance)
    unit = "ns" if ref_log.scenario in (Scenario.SingleStream, Scenario.MultiStream) else "samples/s"
    summary = (f"{score:g} vs {ref:g} {unit}, ratio {score / ref:.3f} (allowed {1 - tolerance:.2f}-"
               f"{1 + tolerance:.2f})")
    return _finish(lines, passed, "Test score invalid", summary)


# -- TEST04 performance (summary logs, rates) ---------------------------------------------------------
@dataclass(frozen=True)
class SummaryScore:
    scenario: str
    score: float
    invalid: bool


def read_summary_score(path: Path) -> SummaryScore:
    """TEST04's reading of mlperf_log_summary.txt: the scenario, the last matching score line (SS/MS latencies
    as 1e9 / ns), and whether `Result is : INVALID`."""
    scenario, score, invalid = "", 0.0, False
    for line in Path(path).read_text(errors="replace").splitlines(keepends=True):
        if re.match("Scenario", line):
            scenario = line.split(": ", 1)[1].strip()
            continue
        pattern, is_latency = SUMMARY_FIELD.get(scenario, (None, False))
        if pattern is not None and re.match(pattern, line):
            value = float(line.split(": ", 1)[1].strip())
            score = 1e9 / value if is_latency else value
            continue
        if re.match("Result is", line):
            invalid = invalid or line.split(": ", 1)[1].strip() == "INVALID"
    return SummaryScore(scenario, score, invalid)


def verify_rate(test: ComplianceTest, reference_dir: Path, compliance_dir: Path) -> Check:
    lines = ["Verifying performance."]
    try:
        ref, score = read_summary_score(reference_dir / SUMMARY_LOG), read_summary_score(compliance_dir / SUMMARY_LOG)
    except (OSError, IndexError, ValueError, ZeroDivisionError) as exc:
        return _finish(lines, False, f"a summary log cannot be read ({exc})", f"a summary log cannot be read ({exc})")
    if ref.invalid or score.invalid:
        which = "Reference" if ref.invalid else "Test"
        return _finish(lines, False, f"{which} results are invalid", f"the {which.lower()} run is INVALID")
    if ref.scenario != score.scenario:
        return _finish(lines, False, "Test and reference scenarios do not match!", "the scenarios differ")
    tolerance = _tolerance(test, ref.scenario, ref.score)
    lines += [f"reference score = {ref.score}", f"test score = {score.score}"]
    passed = score.score < ref.score * (1 + tolerance)
    ratio = score.score / ref.score if ref.score else float("inf")
    summary = f"{ratio:.3f} x the submission run's rate (must stay below {1 + tolerance:.2f})"
    return _finish(lines, passed, "Test score invalid", summary)


def verify_performance(test: ComplianceTest, reference_dir: Path, compliance_dir: Path) -> Check:
    """The test's verify_performance.py on the submission run's logs and the compliance run's logs."""
    verify = verify_rate if test.score_kind == "rate" else verify_raw
    return verify(test, Path(reference_dir), Path(compliance_dir))
