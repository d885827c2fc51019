"""Whether a laid-out TEST0x folder passes, read as the round's submission checkers read it.

Shared by stage_compliance (what may be staged) and the toolkit's checker (what a tree holds), so both give
the verdict of tools/submission/submission_checker (compliance_check.py) and submission_checker_old.py:
- verify_performance.txt passes when a line holds "TEST PASS";
- TEST01 verify_accuracy.txt passes when a line is exactly "TEST PASS"; TEST01/accuracy/ must then hold exactly
  mlperf_log_accuracy.json and accuracy.txt (the old checker refuses more). Otherwise Part III: accuracy/ holds
  exactly those two plus baseline_accuracy.txt and compliance_accuracy.txt, and their accuracies differ by no
  more than the round's delta.
- TEST06 verify_accuracy.txt passes when, lines stripped, one is "First token check pass: True" or "... Skipped",
  one "EOS check pass: True" and one "Sample length check pass: True" (the last line is not read). Neither
  checker reads a TEST06 performance run or its accuracy/ folder; run_verification.py copies the accuracy log to
  TEST06/accuracy/, which staging does too.
- TEST07 verify_accuracy.txt and TEST09 verify_output_len.txt pass when they hold "TEST PASS" anywhere (the toolkit
  also wants it as the last line, where the scripts write it). Neither checker reads their performance run or
  accuracy/ folder; run_verification.py copies both there, which staging does too.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ..constants import AccuracyTarget
from ..fileio import sha256_file, write_atomically
from ..paths import (ACCURACY_DIR, ACCURACY_LOG, ACCURACY_TXT, BASELINE_ACCURACY_TXT, COMPLIANCE_ACCURACY_TXT,
                     VERIFY_ACCURACY, VERIFY_OUTPUT_LEN, VERIFY_PERFORMANCE, accuracy_dir)
from ..rules import BenchmarkRules, ComplianceTest, RulesRound
from .test06 import EOS, FIRST_TOKEN, LENGTH, SKIPPED
from .verify import PASS, part3_verdict

# Beside the verdicts of a compliance folder, never staged: which submission runs they were reached against.
VERIFIED_AGAINST = "verified_against.json"
COMPLIANCE_RUN = "compliance_run_dir"              # its key for the run whose logs the folder lays out
JUDGED_LOG_SHA256 = "judged_accuracy_log_sha256"   # its key for the log a TEST07 / TEST09 verdict judged
ACCURACY_FILES = frozenset({ACCURACY_LOG, ACCURACY_TXT})
PART3_SCORES = (BASELINE_ACCURACY_TXT, COMPLIANCE_ACCURACY_TXT)   # in that order: baseline, compliance
PART3_FILES = ACCURACY_FILES | set(PART3_SCORES)
# Names the checkers leave out when they compare a folder's files with the set they require.
IGNORED_FILES = frozenset({"mlperf_log_trace.json", "results.json", ".gitkeep"})

Problem = tuple[Path, str]   # (file or folder, what is wrong)


# -- verified_against.json ------------------------------------------------------------------------------------
def write_verified_against(folder: Path, performance_log_dir: str, detail_log: Path,
                           accuracy_log_dir: str | None = None, accuracy_log: Path | None = None,
                           eos_token_ids: Sequence[int] | None = None, judged_log: Path | None = None,
                           compliance_run_dir: Path | None = None) -> None:
    """Record which runs (folders, and the sha256 of the logs compared with) a compliance folder was verified
    against; for TEST06 also the EOS token ids its verdict was reached with (from the model's tokenizer), so that
    staging can verify it again without the model at hand; for TEST07 / TEST09 the sha256 of the compliance run's
    accuracy log the verdict judged (`judged_log`), so that staging stages the verdict with that very log; and the
    compliance run whose logs the folder lays out (`compliance_run_dir`), whose record holds their sha256."""
    against: dict[str, Any] = {"performance_log_dir": performance_log_dir,
                               "performance_detail_sha256": sha256_file(detail_log)}
    if accuracy_log_dir is not None and accuracy_log is not None:
        against.update(accuracy_log_dir=accuracy_log_dir, accuracy_log_sha256=sha256_file(accuracy_log))
    if eos_token_ids is not None:
        against["eos_token_ids"] = [int(i) for i in eos_token_ids]
    if judged_log is not None:
        against[JUDGED_LOG_SHA256] = sha256_file(judged_log)
    if compliance_run_dir is not None:
        against[COMPLIANCE_RUN] = str(compliance_run_dir)
    write_atomically(folder / VERIFIED_AGAINST, json.dumps(against, indent=2) + "\n")


def read_verified_against(folder: Path) -> dict[str, Any]:
    """What write_verified_against recorded in `folder`; {} when there is no record. ValueError (or OSError)
    when the record is damaged."""
    path = folder / VERIFIED_AGAINST
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    if not isinstance(data, dict):
        raise ValueError("it holds no JSON object")
    return data


def _lines(path: Path) -> list[str] | None:
    try:
        return [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return None


def _last(lines: list[str]) -> str:
    return next((line for line in reversed(lines) if line), "nothing")


def listed(folder: Path) -> set[str]:
    try:
        return {p.name for p in folder.iterdir()} - IGNORED_FILES
    except OSError:
        return set()


def _file_set(folder: Path, wanted: frozenset[str], why: str) -> list[Problem]:
    found = listed(folder)
    if found == wanted:
        return []
    parts = []
    if wanted - found:
        parts.append(f"lacks {', '.join(sorted(wanted - found))}")
    if found - wanted:
        parts.append(f"also holds {', '.join(sorted(found - wanted))}")
    return [(folder, f"{folder.name}/ {' and '.join(parts)}; {why} it must hold exactly "
                     f"{', '.join(sorted(wanted))}")]


def performance_verdict_problems(folder: Path) -> list[Problem]:
    path = folder / VERIFY_PERFORMANCE
    lines = _lines(path) if path.is_file() else None
    if lines is None:
        return [(path, f"{VERIFY_PERFORMANCE} is missing or unreadable")]
    if not any(PASS in line for line in lines):
        return [(path, f"{VERIFY_PERFORMANCE} has no TEST PASS line (it ends with {_last(lines)!r})")]
    return []


def accuracy_verdict_problems(folder: Path, bench: BenchmarkRules, target: AccuracyTarget | None,
                              rules: RulesRound) -> list[Problem]:
    """TEST01's accuracy part: the verify_accuracy.txt verdict, or Part III with its files and delta."""
    path, accuracy = folder / VERIFY_ACCURACY, accuracy_dir(folder)
    lines = _lines(path) if path.is_file() else None
    if lines is None:
        return [(path, f"{VERIFY_ACCURACY} is missing or unreadable")]
    if PASS in lines:
        return _file_set(accuracy, ACCURACY_FILES, f"with {VERIFY_ACCURACY} saying TEST PASS")
    if any(PASS in line for line in lines):
        return [(path, f"{VERIFY_ACCURACY} has a line holding TEST PASS that is not exactly 'TEST PASS': the two "
                       f"official checkers read it differently")]
    problems = _file_set(accuracy, PART3_FILES, f"for the Part III fallback ({VERIFY_ACCURACY} says TEST FAIL)")
    if problems:
        return problems
    delta = rules.part3_delta_percent.get(target or AccuracyTarget.k_99, 1.0)
    check = part3_verdict(*((accuracy / name).read_text(errors="replace") for name in PART3_SCORES),
                          bench.accuracy_pattern, delta)
    return [] if check.passed else [(accuracy / COMPLIANCE_ACCURACY_TXT, check.summary)]


TEST06_PASS_LINES = ((f"{FIRST_TOKEN}: True", f"{FIRST_TOKEN}: {SKIPPED}"), (f"{EOS}: True",), (f"{LENGTH}: True",))
TEST06_ACCURACY_LOG = Path(ACCURACY_DIR) / ACCURACY_LOG


def token_verdict_problems(folder: Path) -> list[Problem]:
    """TEST06: verify_accuracy.txt holds a passing line for each of its three checks."""
    path = folder / VERIFY_ACCURACY
    lines = _lines(path) if path.is_file() else None
    if lines is None:
        return [(path, f"{VERIFY_ACCURACY} is missing or unreadable")]
    failing = [choices[0].split(":")[0] for choices in TEST06_PASS_LINES if not any(c in lines for c in choices)]
    if failing:
        return [(path, f"{VERIFY_ACCURACY} has no passing line for: {', '.join(failing)} (it ends with "
                       f"{_last(lines)!r})")]
    return []


def pass_line_problems(folder: Path, name: str) -> list[Problem]:
    """TEST07 (verify_accuracy.txt) and TEST09 (verify_output_len.txt): the checkers accept the file when it holds
    "TEST PASS" anywhere. The toolkit also wants its last line to be exactly that, as the scripts write it, so that
    a "TEST PASS" in the scorer's output above a failing summary is never taken for a pass."""
    path = folder / name
    lines = _lines(path) if path.is_file() else None
    if lines is None:
        return [(path, f"{name} is missing or unreadable")]
    if not any(PASS in line for line in lines):
        return [(path, f"{name} has no TEST PASS line (it ends with {_last(lines)!r})")]
    if _last(lines) != PASS:
        return [(path, f"{name} holds TEST PASS but does not end with it (it ends with {_last(lines)!r}): the "
                       f"verification summary is the file's last block")]
    return []


def verdict_problems(folder: Path, test: ComplianceTest, bench: BenchmarkRules, target: AccuracyTarget | None,
                     rules: RulesRound) -> list[Problem]:
    """Every reason the checkers would not accept this TEST0x folder's verdicts (empty: it passes)."""
    problems = performance_verdict_problems(folder) if test.compares_performance else []
    if test.samples_accuracy:
        problems += accuracy_verdict_problems(folder, bench, target, rules)
    if test.checks_output_tokens:
        problems += token_verdict_problems(folder)
    if test.scores_accuracy:
        problems += pass_line_problems(folder, VERIFY_ACCURACY)
    if test.checks_output_length:
        problems += pass_line_problems(folder, VERIFY_OUTPUT_LEN)
    return problems
