"""Compliance evidence checked against its run: the logs a compliance folder lays out are the ones its compliance
run wrote (the sha256 each its metadata.json recorded), and a written verify_*.txt says what its logs say.

A verdict is derived, never read: stage_compliance and check_submission recompute each test's verdict from its
logs (TEST01/TEST04 against the submission run, TEST06's tokens, TEST07 scored again, TEST09 counted and measured)
and refuse a written verdict file that disagrees, naming the file and both verdicts.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

from ..fileio import sha256_file
from ..paths import (ACCURACY_LOG, COMPLIANCE_RUNS, DETAIL_LOG, LOADGEN_LOGS, RUN_RECORD, SUMMARY_LOG,
                     accuracy_dir, performance_run_dir)
from ..records.metadata import RunRecord, read_metadata
from .test06 import EOS, FIRST_TOKEN, LENGTH
from .verdicts import COMPLIANCE_RUN, TEST06_PASS_LINES, VERIFIED_AGAINST
from .verify import FAIL, PASS, Check

TEST06_CHECKS = (FIRST_TOKEN, EOS, LENGTH)

Problem = tuple[Path, str]


def laid_out_logs(folder: Path) -> dict[str, Path]:
    """The LoadGen logs a compliance folder holds (performance/run_1/ and accuracy/), by log name."""
    candidates = {SUMMARY_LOG: performance_run_dir(folder) / SUMMARY_LOG,
                  DETAIL_LOG: performance_run_dir(folder) / DETAIL_LOG,
                  ACCURACY_LOG: accuracy_dir(folder) / ACCURACY_LOG}
    return {name: path for name, path in candidates.items() if path.is_file() and not path.is_symlink()}


def log_entry_problem(path: Path) -> str | None:
    """Why the entry at a log's place is not a log a run wrote: a link (dangling or not), a folder or anything but
    a regular file, or a file that cannot be read; None when it is a readable file or nothing is there."""
    if path.is_symlink():
        target = os.readlink(path)
        state = "which does not exist" if not path.exists() else "and a submission holds the file itself"
        return f"{path} is a link to {target}, {state}"
    if not path.exists():
        return None
    if not path.is_file():
        return f"{path} is a folder (or other non-file) where the log should be"
    try:
        with open(path, "rb") as f:
            f.read(1)
    except OSError as error:
        return f"{path} cannot be read ({error.strerror or error})"
    return None


def laid_out_problems(folder: Path) -> list[Problem]:
    """Each place of a LoadGen log in a compliance folder that holds something other than a readable log."""
    places = (performance_run_dir(folder) / SUMMARY_LOG, performance_run_dir(folder) / DETAIL_LOG,
              accuracy_dir(folder) / ACCURACY_LOG)
    return [(path, problem) for path in places if (problem := log_entry_problem(path)) is not None]


def _read(path: Path) -> RunRecord | None:
    try:
        return read_metadata(path)
    except Exception:  # noqa: BLE001 - an unreadable record is no record: the caller says the logs are unverified
        return None


def compliance_record(folder: Path) -> RunRecord | None:
    """The record of the compliance run whose logs `folder` (build/compliance_logs/TEST0x/...) lays out: the run
    run_audit_harness named in verified_against.json, or, for a folder laid out before it named one, the run under
    runs/ whose detail log is the laid-out one. None when no record with digests is found."""
    try:
        named = json.loads((folder / VERIFIED_AGAINST).read_text()).get(COMPLIANCE_RUN)
    except (OSError, ValueError, AttributeError):
        named = None
    if isinstance(named, str) and named:
        record = _read(Path(named) / RUN_RECORD)
        return record if record is not None and record.log_sha256 else None
    detail = performance_run_dir(folder) / DETAIL_LOG
    if not detail.is_file():
        return None
    digest = sha256_file(detail)
    for path in sorted((folder / COMPLIANCE_RUNS).glob(f"*/{RUN_RECORD}"), reverse=True):
        record = _read(path)
        if record is not None and record.log_sha256.get(DETAIL_LOG) == digest:
            return record
    return None


def digest_problems(logs: Mapping[str, Path], digests: Mapping[str, Any], run: str) -> list[Problem]:
    """Each log (by LoadGen log name) whose sha256 is not the one its run recorded in `digests`."""
    problems = []
    for name, path in logs.items():
        expected = digests.get(name)
        if name in LOADGEN_LOGS and isinstance(expected, str) and sha256_file(path) != expected:
            problems.append((path, f"{path} is not the {name} the compliance run wrote (its sha256 is not the one "
                                   f"{run} recorded): it was edited, cut or replaced after the run"))
    return problems


def written_verdict(path: Path) -> str | None:
    """What a verify_*.txt says as the checkers read it (the more lenient of them, so that the toolkit is never the
    weaker): TEST PASS when any line holds it, or, for TEST06's file, when each of its three checks has a passing
    line; else TEST FAIL. None when the file is missing or unreadable."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return None
    if any(line.startswith(TEST06_CHECKS) for line in lines):
        passed = all(any(choice in lines for choice in choices) for choices in TEST06_PASS_LINES)
    else:
        passed = any(PASS in line for line in lines)
    return PASS if passed else FAIL


def disagreement(path: Path, written: str | None, derived: Check) -> Problem | None:
    """A verdict file that says otherwise than its logs, as a problem naming the file and both verdicts."""
    if written == derived.verdict:
        return None
    return (path, f"{path.name} says {written or 'no verdict'}, but its logs give {derived.verdict} "
                  f"({derived.summary}): the verdict file was edited or belongs to other logs")
