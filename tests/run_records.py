"""Run folders as the harness leaves them (official-looking LoadGen logs, user.conf, metadata.json), written
without running anything, for tests of what reads them: choosing, staging, auditing, skipping damaged ones."""
from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

from code.common.config_registry import ConfigKey, ResolvedConfig
from code.common.constants import Scenario, TestMode, WorkloadSetting
from code.common.records.loadgen_log import Metric
from code.common.records.metadata import (AccuracyRecord, ConfigRecord, DataRecord, EngineRecord, Invocation,
                                          LoadGenRecord, RunRecord, SystemRecord, log_digests, write_metadata)
from tests.official_corpus import accuracy_values, detail_text, perf_values, summary_text, write, write_run
from tests.synthetic_logs import accuracy_entries

SAMPLES = 20   # foolbox20

FIELDS = {"model": "mobilenet_v2", "dataset": "foolbox20", "backend": "onnxruntime", "precision": "fp32",
          "batch_size": 4}


def resolved_config(system_id: str = "box", scenario: Scenario = Scenario.Offline, **fields: Any) -> ResolvedConfig:
    """The config of resnet50 Offline the records below were made with (fields given here from the command line)."""
    values = {**FIELDS, **fields}
    sources = {name: "command line" if name in fields else "config class" for name in values}
    return ResolvedConfig(ConfigKey("resnet50", scenario, system_id, WorkloadSetting()), "test", "exact",
                          MappingProxyType(values), MappingProxyType(sources))


def accuracy_text(value: float) -> str:
    """accuracy.txt of a foolbox20 run scoring `value` %."""
    return f"accuracy={value:.3f}%, good={round(value * SAMPLES / 100)}, total={SAMPLES}"


def make_record(value: float = 100.0, valid: bool = True, test_run: bool = True,
                finished: str = "2026-01-01T00:00:00+00:00", system_id: str = "box", mode: str = "PerformanceOnly",
                scenario: str = "Offline", status: str = "completed", log_dir: str = "/logs/x",
                config: ResolvedConfig | None = None, engine_sha256: str | None = None,
                data_sha256: str | None = None, **fields: Any) -> RunRecord:
    """A record of resnet50 on the embedded default as the harness writes it: a completed PerformanceOnly run at
    `value` (higher is better), or an AccuracyOnly one at `value` %; `fields` given on the command line. The
    engine's manifest records `engine_sha256` and the record the data set's manifest `data_sha256` where given."""
    config = config or resolved_config(system_id, Scenario(scenario), **fields)
    outcome: dict[str, Any] = {}
    if status == "completed":
        outcome = {"loadgen": LoadGenRecord(version="6.0.17"), "valid": valid,
                   "submittable": valid and not test_run}
        if mode == "AccuracyOnly":
            good = round(value * SAMPLES / 100)
            outcome["accuracy"] = AccuracyRecord(metric="top-1", value=value, text=accuracy_text(value), good=good,
                                                 total=SAMPLES)
        else:
            outcome |= {"metric": Metric("samples per second", value, "samples/s", True),
                        "result_validity": "VALID" if valid else "INVALID"}
    else:
        outcome["error"] = f"{status} for the test"
    return RunRecord(
        status=status, benchmark="resnet50", model=config["model"], dataset=config["dataset"], division="open",
        scenario=Scenario(scenario), test_mode=TestMode(mode), test_run=test_run,
        system=SystemRecord(id=system_id, known=True, description=system_id, system_type="edge"),
        config=ConfigRecord(workload_setting=config.workload.name, fields=dict(config.values),
                            sources=dict(config.sources), system_id=system_id, config_class="test", match="exact",
                            benchmark_defaults=dict(config.benchmark_defaults)),
        engine=EngineRecord(path="engine.onnx", manifest={"runtime_version": "onnxruntime 1.0", "calibration": None}
                            | ({"engine_sha256": engine_sha256} if engine_sha256 else {})),
        data=None if data_sha256 is None else DataRecord(directory="/scratch/preprocessed_data/foolbox20",
                                                         manifest_sha256=data_sha256),
        invocation=Invocation(action="run_harness", typed=tuple(f"--{k}={v}" for k, v in fields.items())),
        rules_version="v6.1", log_dir=log_dir, started=finished, finished=finished, **outcome)


def write_record(run_dir: Path, value: float, valid: bool = True, test_run: bool = True,
                 finished: str = "2026-01-01T00:00:00+00:00", system_id: str = "box", mode: str = "PerformanceOnly",
                 **fields: Any) -> Path:
    """A completed Offline run of the embedded default in `run_dir`: PerformanceOnly at `value` samples/s, or
    AccuracyOnly at `value` % (its logs, accuracy log and accuracy.txt as the harness leaves them)."""
    validity = "VALID" if valid else "INVALID"
    if mode == "AccuracyOnly":
        values = accuracy_values("Offline", qsl_reported_total_count=SAMPLES, effective_accuracy_sample_count=SAMPLES)
        write(run_dir / "mlperf_log_detail.txt", detail_text(values))
        write(run_dir / "mlperf_log_summary.txt", summary_text({**values, "result_validity": validity}))
        good = round(value * SAMPLES / 100)
        write(run_dir / "mlperf_log_accuracy.json", json.dumps(accuracy_entries(
            [(index, 1 if index < good else 0) for index in range(SAMPLES)])))
        write(run_dir / "accuracy.txt", accuracy_text(value) + "\n")
    else:
        write_run(run_dir, perf_values("Offline", result_samples_per_second=value, result_validity=validity))
    (run_dir / "user.conf").write_text("*.Offline.min_duration = 6000\n")
    record = make_record(value, valid, test_run, finished, system_id, mode, log_dir=str(run_dir), **fields)
    write_metadata(run_dir, record.replace(log_sha256=log_digests(run_dir)))
    return run_dir


def write_compliance_record(run_dir: Path, test: str, benchmark: str = "resnet50", model: str = "mobilenet_v2",
                            dataset: str = "foolbox20", scenario: str = "Offline") -> Path:
    """metadata.json of a completed compliance run in `run_dir`, as the harness writes it: with the sha256 of the
    LoadGen logs it left there (the ones its compliance folder lays out)."""
    record = make_record(scenario=scenario, log_dir=str(run_dir)).replace(
        benchmark=benchmark, model=model, dataset=dataset, purpose="audit", audit_test=test,
        log_sha256=log_digests(run_dir))
    return write_metadata(run_dir, record)


def compliance_run(folder: Path, test: str, **record: Any) -> Path:
    """The attempt under `folder`/runs/ whose logs the compliance folder lays out (performance/run_1/, accuracy/),
    as run_audit_harness leaves it: those logs and the run's record of their sha256."""
    run_dir = folder / "runs" / "2026.01.01-00.00.00-attempt1"
    run_dir.mkdir(parents=True)
    for laid_out in (folder / "performance" / "run_1" / "mlperf_log_summary.txt",
                     folder / "performance" / "run_1" / "mlperf_log_detail.txt",
                     folder / "accuracy" / "mlperf_log_accuracy.json"):
        if laid_out.is_file():
            (run_dir / laid_out.name).write_bytes(laid_out.read_bytes())
    write_compliance_record(run_dir, test, **record)
    return run_dir


def record_staged_compliance(tree: Path, paths: Any) -> None:
    """What stage_compliance records in the staging tree of `paths` for each compliance folder of a hand-made
    exported `tree` (the sha256 of the logs it lays out), as if it had staged them from recorded runs."""
    from code.common.fileio import sha256_file
    from code.common.submission.compliance_evidence import COMPLIANCE_PROVENANCE

    for scenario_dir in sorted({test.parent for test in tree.glob("*/*/results/*/*/*/TEST*")}):
        entries = {}
        for test in sorted(scenario_dir.glob("TEST*")):
            logs = [test / "performance" / "run_1" / "mlperf_log_summary.txt",
                    test / "performance" / "run_1" / "mlperf_log_detail.txt",
                    test / "accuracy" / "mlperf_log_accuracy.json"]
            entries[test.name] = {"log_sha256": {log.name: sha256_file(log) for log in logs if log.is_file()}}
        staged = paths.staging / scenario_dir.relative_to(tree)
        staged.mkdir(parents=True, exist_ok=True)
        (staged / COMPLIANCE_PROVENANCE).write_text(json.dumps(entries))
