"""Run folders as the harness leaves them (official-looking LoadGen logs, user.conf, metadata.json), written
without running anything, for tests of what reads them: choosing, staging, auditing, skipping damaged ones."""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any

from code.common.config_registry import ConfigKey, ResolvedConfig
from code.common.constants import Scenario, WorkloadSetting
from code.common.harness.metadata import LOG_DIGESTS, log_digests, write_metadata
from tests.official_corpus import perf_values, write_run

FIELDS = {"model": "mobilenet_v2", "dataset": "foolbox20", "backend": "onnxruntime", "precision": "fp32",
          "batch_size": 4}


def resolved_config(system_id: str = "box", **fields: Any) -> ResolvedConfig:
    """The config of resnet50 Offline the records below were made with (fields given here from the command line)."""
    values = {**FIELDS, **fields}
    sources = {name: "command line" if name in fields else "config class" for name in values}
    return ResolvedConfig(ConfigKey("resnet50", Scenario.Offline, system_id, WorkloadSetting()), "test", "exact",
                          MappingProxyType(values), MappingProxyType(sources))


def write_record(run_dir: Path, value: float, valid: bool = True, test_run: bool = True,
                 finished: str = "2026-01-01T00:00:00+00:00", system_id: str = "box", mode: str = "PerformanceOnly",
                 **fields: Any) -> Path:
    """A completed Offline run of the embedded default in `run_dir`: PerformanceOnly at `value` samples/s, or an
    AccuracyOnly record (its logs are performance logs: nothing here reads them)."""
    validity = "VALID" if valid else "INVALID"
    write_run(run_dir, perf_values("Offline", result_samples_per_second=value, result_validity=validity))
    (run_dir / "user.conf").write_text("*.Offline.min_duration = 6000\n")
    config = resolved_config(system_id, **fields)
    record = {
        "benchmark": "resnet50", "model": config["model"], "dataset": config["dataset"], "division": "open",
        "scenario": "Offline", "test_mode": mode, "purpose": "submission", "audit_test": None,
        "system": {"id": system_id, "known": True, "description": system_id, "system_type": "edge"},
        "config": config.as_dict(), "test_run": test_run, "rules_version": "v6.1",
        "engine": {"path": "engine.onnx", "manifest": {"runtime_version": "onnxruntime 1.0", "calibration": None}},
        "command_line": ["python3", "-m", "code.main"], "log_dir": str(run_dir), "status": "completed",
        "started": finished, "finished": finished, "loadgen": {"version": "6.0.17"},
        "metric": {"name": "samples per second", "value": value, "unit": "samples/s", "higher_is_better": True},
        "result_validity": validity, "valid": valid, "submittable": valid and not test_run, "reasons": [],
        LOG_DIGESTS: log_digests(run_dir),
    }
    if mode == "AccuracyOnly":
        del record["metric"], record["result_validity"]
        record["accuracy"] = {"metric": "top-1", "value": value, "good": 18, "total": 20, "text": "accuracy=90.000%",
                              "threshold": None, "meets_target": None}
    write_metadata(run_dir, record)
    return run_dir
