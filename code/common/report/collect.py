"""What a report shows, read from the run records (metadata.json) and the LoadGen detail logs beside them.

Records are read in one place, `_view`, which turns one record into a ReportRow: the rest of the report
never looks inside a record.
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..paths import RUN_RECORD
from ..records.loadgen_log import read_detail
from ..records.metadata import COMPLETED, RunRecord, changed_logs, read_records
from ..records.reproduce import reproduce_command

PERCENTILES = (50.0, 90.0, 95.0, 97.0, 99.0, 99.9)
THROUGHPUT_UNIT = "samples/s"
SUBMISSION = "submission"    # the purpose of the runs a submission is made of
# Config fields that hold the figure a scenario aims at: (field, label, unit, scale into the unit).
TARGET_FIELDS = {
    "Offline": ("offline_expected_qps", "expected QPS", THROUGHPUT_UNIT, 1.0),
    "Server": ("server_target_qps", "target QPS", THROUGHPUT_UNIT, 1.0),
    "Interactive": ("server_target_qps", "target QPS", THROUGHPUT_UNIT, 1.0),
    "SingleStream": ("single_stream_expected_latency_ns", "expected latency", "ms", 1e-6),
    "MultiStream": ("multi_stream_expected_latency_ns", "expected latency", "ms", 1e-6),
}


@dataclass(frozen=True)
class Figure:
    """A number with what it is: a run's headline figure, or the target it is measured against."""

    label: str
    value: float
    unit: str
    higher_is_better: bool = True


@dataclass(frozen=True)
class Accuracy:
    metric: str
    value: float | None
    text: str
    threshold: float | None
    meets_target: bool | None


@dataclass(frozen=True)
class ReportRow:
    """One LoadGen test as the report sees it."""

    record_path: Path
    status: str
    system: str
    benchmark: str
    model: str
    dataset: str
    scenario: str
    test_mode: str
    audit_test: str | None
    purpose: str                          # submission, audit or bench (harness measurements, tuning trials)
    test_run: bool
    started: dt.datetime
    metric: Figure | None
    valid: bool | None
    reasons: tuple[str, ...]
    error: str | None
    accuracy: Accuracy | None
    fields: Mapping[str, Any]
    sources: Mapping[str, str]
    workload_setting: str
    config_class: str
    engine_path: str | None
    engine_manifest: Mapping[str, Any]
    target_latency_ns: float | None       # the latency bound LoadGen enforced (Server), from its settings
    # Files of the run folder that no longer match what metadata.json recorded of them (edited, cut, removed).
    changed_logs: tuple[str, ...] = ()
    rerun_command: str = ""               # the make line that runs the test again
    tuned_layout: Mapping[str, Any] = field(default_factory=dict)   # make tune's record of the layout run, if any
    subset: str = ""                      # "a subset: N of the published M samples" where the set was not whole
    measured_layout: Mapping[str, Any] = field(default_factory=dict)   # a sweep's choice where none was tuned

    @property
    def run_dir(self) -> Path:
        """Where the logs are now (the record's `log_dir` names where they were written)."""
        return self.record_path.parent

    @property
    def group(self) -> tuple[str, str, str]:
        """Runs compared over time: same system, benchmark and scenario."""
        return self.system, self.benchmark, self.scenario

    @property
    def mode(self) -> str:
        if self.audit_test:
            return f"{self.test_mode} {self.audit_test}"
        return self.test_mode if self.purpose == SUBMISSION else f"{self.test_mode} ({self.purpose})"

    @property
    def is_accuracy(self) -> bool:
        return self.test_mode == "AccuracyOnly"

    @property
    def verdict(self) -> str:
        """VALID or INVALID for a test that ran to its end, else its status (FAILED, INTERRUPTED)."""
        if self.status != COMPLETED:
            return self.status.upper()
        return "VALID" if self.valid else "INVALID"

    @property
    def changed_text(self) -> str:
        """"logs changed since the run: <files>", or empty when the logs are as the test left them."""
        return f"logs changed since the run: {', '.join(self.changed_logs)}" if self.changed_logs else ""

    @property
    def verdict_text(self) -> str:
        notes = [n for n, applies in (("below target", self.accuracy is not None and self.accuracy.meets_target
                                       is False), ("test run", self.test_run), (self.subset, self.subset),
                                      (self.changed_text, self.changed_logs))
                 if applies]
        return f"{self.verdict} ({', '.join(notes)})" if notes else self.verdict

    @property
    def precision(self) -> str | None:
        value = self.engine_manifest.get("precision", self.fields.get("precision"))
        return None if value is None else str(value)


def _time(text: Any, fallback: Path) -> dt.datetime:
    """An aware datetime (naive ones are local time); the record file's time when the text is no time."""
    try:
        moment = dt.datetime.fromisoformat(str(text))
    except ValueError:
        try:
            moment = dt.datetime.fromtimestamp(fallback.stat().st_mtime)
        except OSError:
            moment = dt.datetime.fromtimestamp(0)
    return moment if moment.tzinfo else moment.astimezone()


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _view(record: RunRecord) -> ReportRow:
    """The one place that reads a run record (metadata.json as records.record reads it)."""
    path = Path(record.path) if record.path is not None else Path(record.log_dir) / RUN_RECORD
    metric, accuracy, engine = record.metric, record.accuracy, record.engine
    effective = record.loadgen.effective if record.loadgen is not None else {}
    return ReportRow(
        record_path=path, status=record.status, system=record.system.id, benchmark=record.benchmark,
        model=record.model, dataset=record.dataset, scenario=record.scenario.value,
        test_mode=record.test_mode.value, audit_test=record.audit_test, purpose=record.purpose,
        test_run=record.test_run,
        started=_time(record.started or record.finished, path),
        metric=None if metric is None else Figure(metric.name, metric.value, metric.unit, metric.higher_is_better),
        valid=record.valid, reasons=tuple(record.reasons), error=record.error,
        accuracy=None if accuracy is None else Accuracy(accuracy.metric, accuracy.value, accuracy.text,
                                                        accuracy.threshold, accuracy.meets_target),
        fields=dict(record.config.fields), sources=dict(record.config.sources),
        workload_setting=record.config.workload_setting, config_class=record.config.config_class,
        engine_path=None if engine is None else engine.path,
        engine_manifest=dict(engine.manifest) if engine is not None else {},
        target_latency_ns=_number(effective.get("target_latency_ns")) or None,
        changed_logs=changed_logs(record, path.parent), rerun_command=reproduce_command(record),
        tuned_layout=dict(record.config.tuned_layout), measured_layout=dict(record.config.measured_layout),
        subset=record.data.subset if record.data is not None else "",
    )


def read_rows(roots: Iterable[Path], skipped: Callable[[Path, str], None]) -> list[ReportRow]:
    """Every usable run under `roots`, oldest first; damaged records go to `skipped(path, reason)`."""
    rows = [_view(record) for record in read_records(roots, skipped)]
    return sorted(rows, key=lambda r: (r.started, str(r.record_path)))


# -- scope: which runs one report is about --------------------------------------------------------------------
@dataclass(frozen=True)
class Scope:
    name: str                    # the report's folder name under build/reports
    description: str             # what was searched, for people
    roots: tuple[Path, ...]      # runs under these folders are reported

    def holds(self, row: ReportRow) -> bool:
        return any(row.record_path.is_relative_to(root) for root in self.roots)


def newest_log_dir(rows: Iterable[ReportRow], logs_root: Path) -> Path | None:
    """The folder directly under `logs_root` (one LOG_DIR) holding the run that started last."""
    newest: dict[Path, dt.datetime] = {}
    for row in rows:
        if row.record_path.is_relative_to(logs_root) and len(row.record_path.relative_to(logs_root).parts) > 1:
            top = logs_root / row.record_path.relative_to(logs_root).parts[0]
            newest[top] = max(newest.get(top, row.started), row.started)
    return max(newest, key=lambda top: (newest[top], top.name)) if newest else None


# -- figures read from the logs ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Latencies:
    """Latency percentiles of one run, in ms: {curve name: ((percentile, ms), ...)} and its throughput."""

    curves: Mapping[str, tuple[tuple[float, float], ...]] = field(default_factory=dict)
    throughput: float | None = None      # samples/s


def _percentile_key(percentile: float, per_query: bool) -> str:
    return f"result_{percentile:.2f}_percentile_{'per_query_' if per_query else ''}latency_ns"


def read_latencies(row: ReportRow) -> Latencies:
    """The percentiles LoadGen logged in the run's mlperf_log_detail.txt (none when the log is missing)."""
    if row.is_accuracy or row.status != COMPLETED:
        return Latencies()
    try:
        values = read_detail(row.run_dir).values
    except (OSError, ValueError):
        return Latencies()
    curves = {}
    kinds = (("per query", True), ("per sample", False)) if row.scenario == "MultiStream" else (("latency", False),)
    for name, per_query in kinds:
        points = tuple((p, float(values[_percentile_key(p, per_query)]) / 1e6) for p in PERCENTILES
                       if _number(values.get(_percentile_key(p, per_query))) is not None)
        if points:
            curves[name] = points
    return Latencies(curves, _throughput(row, values))


def _throughput(row: ReportRow, values: Mapping[str, Any]) -> float | None:
    if row.metric is not None and row.metric.unit == THROUGHPUT_UNIT:
        return row.metric.value
    queries_per_s = _number(values.get("result_qps_with_loadgen_overhead"))
    per_query = _number(values.get("effective_samples_per_query")) or 1.0
    return queries_per_s * per_query if queries_per_s else None


# -- targets ------------------------------------------------------------------------------------------------
def target(row: ReportRow) -> Figure | None:
    """What the run's figure is measured against: the config's expected or target figure, or for an
    accuracy run the accuracy threshold of the closed division."""
    if row.is_accuracy:
        threshold = row.accuracy.threshold if row.accuracy else None
        return None if threshold is None else Figure("threshold", threshold, "", True)
    name, label, unit, scale = TARGET_FIELDS.get(row.scenario, (None, "", "", 1.0))
    value = _number(row.fields.get(name)) if name else None
    return None if value is None else Figure(label, value * scale, unit, unit == THROUGHPUT_UNIT)


def latency_bound_ms(row: ReportRow, rules_bound_ms: Callable[[str], float | None]) -> float | None:
    """Server's latency bound: the one LoadGen enforced, else the rules round's."""
    if row.scenario != "Server":
        return None
    return row.target_latency_ns / 1e6 if row.target_latency_ns else rules_bound_ms(row.benchmark)


def history(rows: Iterable[ReportRow], group: tuple[str, str, str]) -> list[ReportRow]:
    """The completed runs of a (system, benchmark, scenario), oldest first; compliance and bench runs (other
    settings, other backends) left out."""
    return sorted((r for r in rows if r.group == group and r.status == COMPLETED and r.audit_test is None
                   and r.purpose == SUBMISSION), key=lambda r: r.started)


def ordered(rows: Iterable[ReportRow]) -> list[ReportRow]:
    """Tests as the report lists them: by system, benchmark and scenario, performance before accuracy, compliance
    and bench runs after the others, then oldest first."""
    return sorted(rows, key=lambda r: (*r.group, r.is_accuracy, r.purpose != SUBMISSION, r.audit_test or "",
                                       r.started, str(r.record_path)))
