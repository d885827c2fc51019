"""The submission's own runs a compliance test is compared with, found through their metadata.json."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from ..config_registry import ResolvedConfig
from ..constants import TestMode
from ..harness.metadata import COMPLETED, find_metadata, read_metadata

# Fields that decide what a run computes: a reference must agree on all of them.
MATCHING_FIELDS = ("model", "dataset", "backend", "precision")


@dataclass(frozen=True)
class Reference:
    performance: dict[str, Any] | None
    accuracy: dict[str, Any] | None

    def missing(self) -> list[TestMode]:
        return [mode for mode, record in ((TestMode.PerformanceOnly, self.performance),
                                          (TestMode.AccuracyOnly, self.accuracy)) if record is None]


def score(record: dict[str, Any]) -> float:
    """A performance run's figure with higher always better, whatever the scenario's metric."""
    metric = record.get("metric") or {}
    value = float(metric.get("value") or 0.0)
    return value if metric.get("higher_is_better", True) else (1.0 / value if value else 0.0)


def _matches(record: dict[str, Any], system_id: str, config: ResolvedConfig, mode: TestMode) -> bool:
    fields = record.get("config", {}).get("fields", {})
    return (record.get("status") == COMPLETED and record.get("purpose", "submission") == "submission"
            and record.get("system", {}).get("id") == system_id and record.get("benchmark") == config.benchmark
            and record.get("scenario") == config.scenario.value and record.get("test_mode") == mode.value
            and all(fields.get(name) == config[name] for name in MATCHING_FIELDS))


def find_references(roots: Iterable[Path], system_id: str, config: ResolvedConfig) -> Reference:
    """For performance the run staging would submit (VALID first, then the best figure); for accuracy the
    newest."""
    records = []
    for root in dict.fromkeys(roots):
        records += [read_metadata(path) for path in find_metadata(root)]
    best: dict[TestMode, dict[str, Any] | None] = {}
    for mode in TestMode:
        candidates = [r for r in records if _matches(r, system_id, config, mode)]
        key = (lambda r: (bool(r.get("valid")), score(r), r.get("finished", ""))) \
            if mode is TestMode.PerformanceOnly \
            else (lambda r: r.get("finished", ""))
        best[mode] = max(candidates, key=key, default=None)
    return Reference(performance=best[TestMode.PerformanceOnly], accuracy=best[TestMode.AccuracyOnly])
