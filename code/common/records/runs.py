"""Which runs make up the submission: read from metadata.json files only.

Per (system, benchmark, scenario): the performance run that ranks first among those that may be submitted, and the
accuracy run that belongs to it: one of the same computation (records/computation.py: the same engine file, the same
preprocessed data and the same config fields that decide the outputs) that ranks first. One order, `rank`, decides
both: a VALID run before an INVALID one, a full run before a --test_run, then the better figure, then the newer.
stage_results, generate_conf_files (whose README repeats the chosen run's command line) and the compliance
references (audit/references.py) all take the runs chosen here, so they never refer to different runs.

Accuracy runs of one computation should score the same. Where those that qualify disagree (one was made from a
damaged input, say), none is chosen: the choice names them all (`conflict`), and stage_results and
run_audit_harness stop for that scenario instead of taking the newest.

Failed and interrupted runs never count; INVALID and test runs count only for dry runs (`--allow_test_runs`), and
the reasons say why each run was passed over. A metadata.json that cannot be read is left out with a line naming it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from ..constants import RUN_HARNESS_ACTION, Scenario, TestMode
from .computation import computation_differences
from .metadata import RunRecord, read_records, skipped_line
from .reproduce import record_selection

Key = tuple[str, str, Scenario]   # system id, toolkit benchmark, scenario
Rank = tuple[bool, bool, float, str]

# Accuracy runs of one computation agree when their figures are within this fraction of the higher one: batch
# composition may move an output's last bits, a damaged input moves the figure far more.
ACCURACY_AGREEMENT = 0.005


@dataclass
class Choice:
    performance: RunRecord | None = None
    accuracy: RunRecord | None = None
    passed_over: list[str] = field(default_factory=list)
    # Accuracy runs of the performance run's computation whose figures disagree: then `accuracy` is None.
    conflict: tuple[RunRecord, ...] = ()
    # Qualifying accuracy runs of another computation than the performance run's, and how they differ.
    other_accuracy: list[str] = field(default_factory=list)

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


def accuracy_figure(record: RunRecord) -> str:
    accuracy = record.accuracy
    return "no accuracy" if accuracy is None else f"{accuracy.metric} {accuracy.value:.3f}{accuracy.unit}"


def _disagree(runs: list[RunRecord]) -> bool:
    values = [float(r.accuracy.value) if r.accuracy is not None else math.nan for r in runs]
    return any(math.isnan(v) for v in values) or \
        not math.isclose(min(values), max(values), rel_tol=ACCURACY_AGREEMENT, abs_tol=1e-9)


def conflict_message(label: str, conflict: Iterable[RunRecord], then: str = "make stage_results") -> str:
    """What to do about accuracy runs of one computation that disagree: the runs, their figures, the fix."""
    runs = sorted(conflict, key=lambda r: r.finished or "")
    listed = "; ".join(f"{r.log_dir} ({accuracy_figure(r)}, finished {r.finished or 'at an unknown time'})"
                       for r in runs)
    again = record_selection(runs[-1]).command(RUN_HARNESS_ACTION)
    return (f"{label}: {len(runs)} accuracy runs of the same engine, preprocessed data and config disagree: "
            f"{listed}. One of them ran on a damaged or changed input, so none is staged for this scenario: delete "
            f"or move the folder of the run that is wrong, then run {then} again. Unsure which? Run make "
            f"preprocess_data and make generate_engines (they repair damaged inputs), then the test once more: "
            f"{again}")


def _is_submission_run(record: RunRecord, system_id: str | None) -> bool:
    return (record.purpose == "submission" and not record.audit_test
            and (system_id is None or record.system.id == system_id))


def _choose_accuracy(choice: Choice, runs: list[RunRecord]) -> None:
    """The best accuracy run of the performance run's computation, unless those runs disagree."""
    accuracy_runs = [r for r in runs if r.test_mode is TestMode.AccuracyOnly]
    performance = choice.performance
    if performance is None:
        choice.accuracy = max(accuracy_runs, key=rank, default=None)
        return
    matching = []
    for run in accuracy_runs:
        differences = computation_differences(run, performance)
        if differences:
            choice.other_accuracy.append(f"{run.log_dir}: {'; '.join(differences)}")
        else:
            matching.append(run)
    if len(matching) > 1 and _disagree(matching):
        choice.conflict = tuple(matching)
        return
    choice.accuracy = max(matching, key=rank, default=None)


def choose_runs(records: list[RunRecord], allow_test_runs: bool, system_id: str | None = None,
                key: Callable[[RunRecord], Key] = key_of) -> dict[Key, Choice]:
    """The chosen runs of each key (`key`: the tree a run goes into; by default its system, benchmark and scenario),
    of the runs of `system_id` (all where None)."""
    choices: dict[Key, Choice] = {}
    eligible: dict[Key, list[RunRecord]] = {}
    for record in (r for r in records if _is_submission_run(r, system_id)):
        key_ = key(record)
        choice = choices.setdefault(key_, Choice())
        reason = _why_not(record, allow_test_runs)
        if reason:
            choice.passed_over.append(f"{record.log_dir or record.path}: {reason}")
        else:
            eligible.setdefault(key_, []).append(record)
    for key, choice in choices.items():
        runs = eligible.get(key, [])
        choice.performance = max((r for r in runs if r.test_mode is TestMode.PerformanceOnly), key=rank, default=None)
        _choose_accuracy(choice, runs)
    return choices
