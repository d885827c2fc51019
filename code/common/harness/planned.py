"""A planned LoadGen test, and the earlier runs a plan is made from: what the plan (plan.py) and --resume
(resume.py) share."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..constants import Scenario, TestMode, test_label
from ..disk_full import format_bytes
from ..records.metadata import COMPLETED, read_records


# -- earlier runs ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class EarlierRun:
    """What the plan and --resume need of an earlier run's metadata.json."""

    folder: Path
    system_id: str
    benchmark: str
    scenario: str
    test_mode: str
    audit_test: str | None
    purpose: str
    status: str
    valid: bool
    test_run: bool
    fields: Mapping[str, Any]
    metric: float | None            # the headline figure: samples/s (Offline, Server), ms per query (SS, MS)
    finished: str
    metric_unit: str = ""           # its unit: samples/s, ms, or an LLM's tokens/s (Offline, Server)
    workload_setting: str = ""      # e.g. lwis_k_99_MaxP: the harness type among others
    # The running servers it sent its queries to (--endpoints; not those the test started itself): (host, port,
    # machine), the machine "" in records written before it was kept.
    servers: tuple[tuple[str, int, str], ...] = ()
    # The fields a sweep of the engine chose where none was tuned or typed (config.measured_layout).
    untuned: frozenset[str] = frozenset()
    # Its wall time and measured part (durations.test_s, measured_s): a client test's start-up is their difference.
    test_s: float | None = None
    measured_s: float | None = None
    accuracy_samples: int | None = None     # the samples an accuracy test scored

    @property
    def done(self) -> bool:
        """Completed and VALID: nothing gained by running it again."""
        return self.status == COMPLETED and self.valid

    def outcome(self) -> str:
        if self.status != COMPLETED:
            return self.status
        return "VALID" if self.valid else "INVALID"


def earlier_runs(roots: Iterable[Path], skipped: Callable[[Path, str], None]) -> list[EarlierRun]:
    """Every readable run record under `roots`: the one place here that reads metadata.json, so that a change of
    the record's shape is adapted here alone. An unreadable record goes to `skipped(path, reason)`."""
    runs = []
    for record in read_records(roots, skipped):
        runs.append(EarlierRun(
            folder=Path(record.path).parent, system_id=record.system.id, benchmark=record.benchmark,
            scenario=record.scenario.value, test_mode=record.test_mode.value, audit_test=record.audit_test,
            purpose=record.purpose, status=record.status, valid=record.valid is True, test_run=record.test_run,
            fields=record.config.fields, metric=record.metric.value if record.metric else None,
            finished=record.finished or "", metric_unit=record.metric.unit if record.metric else "",
            workload_setting=record.config.workload_setting,
            servers=tuple((e.host, e.port, e.machine) for e in record.endpoints if not e.local),
            untuned=frozenset(record.config.measured_layout.get("fields") or ()),
            test_s=record.durations.test_s if record.durations else None,
            measured_s=record.durations.measured_s if record.durations else None,
            accuracy_samples=record.accuracy.samples if record.accuracy else None))
    return runs


@dataclass(frozen=True)
class Speed:
    samples_per_s: float
    source: str        # plan.MEASURED or plan.FROM_CONFIG
    basis: str         # the figure and where it comes from

    def __str__(self) -> str:
        return f"{self.source}: {self.basis}"


LOADGEN = "LoadGen"


# -- one test ---------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PlannedTest:
    benchmark: str
    scenario: Scenario
    test_mode: TestMode
    audit_test: str | None
    queries: int
    samples: int                # samples LoadGen issues
    duration_s: float           # the LoadGen test, not counting the start-up of its process
    logged_responses: int       # entries of the accuracy log
    disk_bytes: int
    speed: Speed
    folder: Path | None = None  # where it writes; None: a folder of a LOG_DIR not created yet
    skip: str | None = None     # why it does not run (--resume: done already)
    note: str | None = None     # e.g. the earlier attempts a rerun follows
    retry: int = 0              # which retry of the test this run is (0: its first attempt)
    retries_left: int = 0       # --resume: how many times it may run again after this run if it is not VALID
    # start_from_device: (samples, bytes) of the performance set each GPU holds; None when it stays on the host
    device_set: tuple[int, int] | None = None
    subset: str | None = None   # the data set prepared here is not the published one: what it is
    load_generator: str = LOADGEN     # who runs it: LoadGen, or a harness's own (e.g. the endpoints client)
    basis: tuple[str, ...] = ()       # a harness's own estimate: what it is based on

    @property
    def label(self) -> str:
        return test_label(self.benchmark, self.scenario.value, self.test_mode.value, self.audit_test)

    def lines(self) -> list[str]:
        if self.skip:
            return [f"  {self.label}: SKIPPED, {self.skip}"]
        queries = f"{self.queries} {'query' if self.queries == 1 else 'queries'}"
        logged = f", {self.logged_responses} responses logged" if self.logged_responses else ""
        issued = f"{self.samples} samples in {queries}" if self.load_generator == LOADGEN else \
            f"{queries} on {self.load_generator}"
        lines = [f"  {self.label}: {issued}, about {format_duration(self.duration_s)} ({self.speed}), "
                 f"{format_bytes(self.disk_bytes)}{logged}"]
        if self.folder is not None:
            lines.append(f"    -> {self.folder}")
        if self.device_set is not None:
            samples, nbytes = self.device_set
            lines.append(f"    start_from_device: the performance set ({samples} samples) takes "
                         f"{format_bytes(nbytes)} of memory on each GPU")
        lines += [f"    {line}" for line in self.basis]
        if self.subset:
            lines.append(f"    {self.subset}")
        if self.note:
            lines.append(f"    {self.note}")
        return lines


def format_duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"
