"""Which runs make up the submission: read from metadata.json files only.

Per (system, benchmark, scenario): the performance run that ranks first among those that may be submitted, and
the accuracy run of the same model, data set, backend and precision that ranks first. One order, `rank`, decides
both: a VALID run before an INVALID one, a full run before a --test_run, then the better figure, then the newer.
stage_results, generate_conf_files (whose README repeats the chosen run's command line) and the compliance
references (audit/references.py) all take the run chosen here, so they never refer to different runs.

Failed and interrupted runs never count; INVALID and test runs count only for dry runs (`--allow_test_runs`), and
the reasons say why each run was passed over. A metadata.json that cannot be read is left out with a line naming it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..constants import Scenario, TestMode
from ..harness.metadata import COMPLETED, read_records, skipped_line

Key = tuple[str, str, Scenario]   # system id, toolkit benchmark, scenario
Rank = tuple[bool, bool, float, str]

# Fields that decide what a run computes: a performance run and its accuracy run (and a compliance test and the
# runs it is compared with) must agree on all of them.
MATCHING_FIELDS = ("model", "dataset", "backend", "precision")


@dataclass
class Choice:
    performance: dict[str, Any] | None = None
    accuracy: dict[str, Any] | None = None
    passed_over: list[str] = field(default_factory=list)

    @property
    def division(self) -> str:
        return (self.performance or self.accuracy or {}).get("division", "open")


def score(record: dict[str, Any]) -> float:
    """A performance run's figure with higher always better, whatever the scenario's metric (0 without one)."""
    metric = record.get("metric") or {}
    value = float(metric.get("value") or 0.0)
    return value if metric.get("higher_is_better", True) else (1.0 / value if value else 0.0)


def rank(record: dict[str, Any]) -> Rank:
    """The one order of runs, higher is better: VALID first, then a full run before a test run, then the
    figure, then the newer. As a full VALID run outranks every test run, a dry run (--allow_test_runs) chooses the
    same run as a real one whenever a real one would choose any."""
    return (record.get("valid") is True, not record.get("test_run"), score(record), str(record.get("finished") or ""))


def key_of(record: dict[str, Any]) -> Key:
    return record["system"]["id"], record["benchmark"], Scenario(record["scenario"])


def load_records(roots: Iterable[Path], log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Every readable metadata.json under `roots`; each unreadable one is skipped with one line naming it and why."""
    return list(read_records(roots, lambda path, reason: log(skipped_line(path, reason))))


def _why_not(record: dict[str, Any], allow_test_runs: bool) -> str | None:
    if record.get("status") != COMPLETED:
        return f"{record.get('status', 'unfinished')} run"
    if not record.get("valid"):
        return None if allow_test_runs and record.get("test_run") else "INVALID run"
    if record.get("test_run") and not allow_test_runs:
        return "test run (--test_run; stage it with --allow_test_runs for a dry run)"
    return None


def same_computation(a: dict[str, Any], b: dict[str, Any]) -> bool:
    fa, fb = a["config"]["fields"], b["config"]["fields"]
    return all(fa.get(name) == fb.get(name) for name in MATCHING_FIELDS)


def _is_submission_run(record: dict[str, Any], system_id: str | None) -> bool:
    return (record.get("purpose", "submission") == "submission" and not record.get("audit_test")
            and (system_id is None or record["system"]["id"] == system_id))


def choose_runs(records: list[dict[str, Any]], allow_test_runs: bool,
                system_id: str | None = None) -> dict[Key, Choice]:
    choices: dict[Key, Choice] = {}
    eligible: dict[Key, list[dict[str, Any]]] = {}
    for record in (r for r in records if _is_submission_run(r, system_id)):
        key = key_of(record)
        choice = choices.setdefault(key, Choice())
        reason = _why_not(record, allow_test_runs)
        if reason:
            choice.passed_over.append(f"{record.get('log_dir', record.get('_path'))}: {reason}")
        else:
            eligible.setdefault(key, []).append(record)
    for key, choice in choices.items():
        runs = eligible.get(key, [])
        choice.performance = max((r for r in runs if r["test_mode"] == TestMode.PerformanceOnly.value),
                                 key=rank, default=None)
        choice.accuracy = max((r for r in runs if r["test_mode"] == TestMode.AccuracyOnly.value
                               and (choice.performance is None or same_computation(r, choice.performance))),
                              key=rank, default=None)
    return choices
