"""Which runs make up the submission: read from metadata.json files only.

Per (system, benchmark, scenario): the best performance run that may be submitted, and the newest accuracy
run of the same model, data set, backend and precision. Failed and interrupted runs never count; INVALID
and test runs count only for dry runs (`--allow_test_runs`), and the reasons say why each run was passed over.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from ..audit.references import MATCHING_FIELDS, score
from ..constants import Scenario, TestMode
from ..harness.metadata import COMPLETED, find_metadata, read_metadata

Key = tuple[str, str, Scenario]   # system id, toolkit benchmark, scenario


@dataclass
class Choice:
    performance: dict[str, Any] | None = None
    accuracy: dict[str, Any] | None = None
    passed_over: list[str] = field(default_factory=list)

    @property
    def division(self) -> str:
        return (self.performance or self.accuracy or {}).get("division", "open")


def load_records(roots: Iterable[Path]) -> list[dict[str, Any]]:
    records = []
    for root in dict.fromkeys(roots):
        for path in find_metadata(root):
            record = read_metadata(path)
            record["_path"] = str(path)
            records.append(record)
    return records


def _why_not(record: dict[str, Any], allow_test_runs: bool) -> str | None:
    if record.get("status") != COMPLETED:
        return f"{record.get('status', 'unfinished')} run"
    if record.get("test_mode") == TestMode.PerformanceOnly.value and not record.get("valid"):
        return None if allow_test_runs and record.get("test_run") else "INVALID run"
    if record.get("test_run") and not allow_test_runs:
        return "test run (--test_run; stage it with --allow_test_runs for a dry run)"
    return None


def _same_computation(a: dict[str, Any], b: dict[str, Any]) -> bool:
    fa, fb = a["config"]["fields"], b["config"]["fields"]
    return all(fa.get(name) == fb.get(name) for name in MATCHING_FIELDS)


def choose_runs(records: list[dict[str, Any]], allow_test_runs: bool,
                system_id: str | None = None) -> dict[Key, Choice]:
    choices: dict[Key, Choice] = {}
    submission = [r for r in records if r.get("purpose", "submission") == "submission" and not r.get("audit_test")
                  and (system_id is None or r.get("system", {}).get("id") == system_id)]
    for record in submission:
        key = (record["system"]["id"], record["benchmark"], Scenario(record["scenario"]))
        choice = choices.setdefault(key, Choice())
        reason = _why_not(record, allow_test_runs)
        if reason:
            choice.passed_over.append(f"{record.get('log_dir', record['_path'])}: {reason}")
        elif record["test_mode"] == TestMode.PerformanceOnly.value:
            if choice.performance is None or (score(record), record.get("finished", "")) > \
                    (score(choice.performance), choice.performance.get("finished", "")):
                choice.performance = record
    for record in submission:
        key = (record["system"]["id"], record["benchmark"], Scenario(record["scenario"]))
        choice = choices[key]
        if record["test_mode"] != TestMode.AccuracyOnly.value or _why_not(record, allow_test_runs):
            continue
        if choice.performance is not None and not _same_computation(record, choice.performance):
            continue
        if choice.accuracy is None or record.get("finished", "") > choice.accuracy.get("finished", ""):
            choice.accuracy = record
    return choices
