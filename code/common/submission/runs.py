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
from typing import Any, Callable, Iterable, Mapping

from ..constants import Scenario, TestMode
from ..harness.metadata import RunRecord, read_records, skipped_line

Key = tuple[str, str, Scenario]   # system id, toolkit benchmark, scenario
Rank = tuple[bool, bool, float, str]

# Fields that decide what a run computes: a performance run and its accuracy run (and a compliance test and the
# runs it is compared with) must agree on all of them.
MATCHING_FIELDS = ("model", "dataset", "backend", "precision")


@dataclass
class Choice:
    performance: RunRecord | None = None
    accuracy: RunRecord | None = None
    passed_over: list[str] = field(default_factory=list)

    @property
    def division(self) -> str:
        record = self.performance or self.accuracy
        return record.division if record is not None else "open"


def score(record: RunRecord) -> float:
    """A performance run's figure with higher always better, whatever the scenario's metric (0 without one)."""
    metric = record.metric
    if metric is None:
        return 0.0
    value = float(metric.value or 0.0)
    return value if metric.higher_is_better else (1.0 / value if value else 0.0)


def rank(record: RunRecord) -> Rank:
    """The one order of runs, higher is better: VALID first, then a full run before a test run, then the
    figure, then the newer. As a full VALID run outranks every test run, a dry run (--allow_test_runs) chooses the
    same run as a real one whenever a real one would choose any."""
    return record.valid is True, not record.test_run, score(record), record.finished or ""


def key_of(record: RunRecord) -> Key:
    return record.system.id, record.benchmark, record.scenario


def load_records(roots: Iterable[Path], log: Callable[[str], None] = print) -> list[RunRecord]:
    """Every readable metadata.json under `roots`; each unreadable one is skipped with one line naming it and why."""
    return list(read_records(roots, lambda path, reason: log(skipped_line(path, reason))))


def _why_not(record: RunRecord, allow_test_runs: bool) -> str | None:
    if not record.completed:
        return f"{record.status} run"
    if not record.valid:
        return None if allow_test_runs and record.test_run else "INVALID run"
    if record.test_run and not allow_test_runs:
        return "test run (--test_run; stage it with --allow_test_runs for a dry run)"
    return None


def differing_fields(have: Mapping[str, Any], want: Mapping[str, Any]) -> list[str]:
    """The MATCHING_FIELDS whose values differ: empty when the two configs compute the same."""
    return [name for name in MATCHING_FIELDS if have.get(name) != want.get(name)]


def same_computation(a: RunRecord, b: RunRecord) -> bool:
    return not differing_fields(a.config.fields, b.config.fields)


def _is_submission_run(record: RunRecord, system_id: str | None) -> bool:
    return (record.purpose == "submission" and not record.audit_test
            and (system_id is None or record.system.id == system_id))


def choose_runs(records: list[RunRecord], allow_test_runs: bool, system_id: str | None = None) -> dict[Key, Choice]:
    choices: dict[Key, Choice] = {}
    eligible: dict[Key, list[RunRecord]] = {}
    for record in (r for r in records if _is_submission_run(r, system_id)):
        key = key_of(record)
        choice = choices.setdefault(key, Choice())
        reason = _why_not(record, allow_test_runs)
        if reason:
            choice.passed_over.append(f"{record.log_dir or record.path}: {reason}")
        else:
            eligible.setdefault(key, []).append(record)
    for key, choice in choices.items():
        runs = eligible.get(key, [])
        choice.performance = max((r for r in runs if r.test_mode is TestMode.PerformanceOnly), key=rank, default=None)
        choice.accuracy = max((r for r in runs if r.test_mode is TestMode.AccuracyOnly
                               and (choice.performance is None or same_computation(r, choice.performance))),
                              key=rank, default=None)
    return choices
