"""RunSpec: everything a child process needs to run one LoadGen test, as JSON on disk."""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..constants import Scenario, TestMode, WorkloadSetting, test_label
from ..fileio import write_atomically


@dataclass(frozen=True)
class RunSpec:
    benchmark: str
    model: str
    dataset: str
    division: str
    scenario: str                      # Scenario value
    test_mode: str                     # TestMode value
    loadgen_model: str
    log_dir: str
    scratch: str                       # MLPERF_SCRATCH_PATH of the invocation
    engine: str
    engine_manifest: dict[str, Any]
    config: dict[str, Any]             # ResolvedConfig.as_dict()
    system: dict[str, Any]             # id, known, description, hardware
    user_conf: list[str]
    performance_sample_count: int
    cpu_cores: int
    test_run: bool
    rules_version: str
    accuracy_threshold: float | None   # closed-division target of the metric, None when not gated
    invocation: dict[str, Any]         # record.Invocation as JSON: what the user typed, what was filled in
    purpose: str = "submission"        # "submission", "audit" or "bench": only submission runs are references
    audit_test: str | None = None
    audit_config: list[str] = field(default_factory=list)   # lines; written to the run folder, never to cwd
    accuracy_target: str | None = None   # closed division: the AccuracyTarget whose bounds every metric is held to
    harness: str = ""                    # the harness plug-in that runs the test (harness/registry.py)
    harness_options: dict[str, Any] = field(default_factory=dict)   # what the plug-in took from the invocation
    data: dict[str, Any] = field(default_factory=dict)   # record.DataRecord of the preprocessed set it reads

    @property
    def fields(self) -> dict[str, Any]:
        return self.config["fields"]

    @property
    def workload(self) -> WorkloadSetting:
        return WorkloadSetting.from_name(self.config["workload_setting"])

    @property
    def scenario_enum(self) -> Scenario:
        return Scenario(self.scenario)

    @property
    def mode_enum(self) -> TestMode:
        return TestMode(self.test_mode)

    @property
    def label(self) -> str:
        return test_label(self.benchmark, self.scenario, self.test_mode, self.audit_test)

    def save(self, path: Path) -> Path:
        return write_atomically(path, json.dumps(asdict(self), indent=2, default=str) + "\n")

    @classmethod
    def load(cls, path: Path) -> "RunSpec":
        return cls(**json.loads(path.read_text()))
