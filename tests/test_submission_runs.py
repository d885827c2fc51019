"""Which runs are staged: choices from metadata records, measurements, and the staging refusals."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from code.common.constants import Scenario, SystemType
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.submission.measurements import calibration_markdown, run_args
from code.common.submission.runs import choose_runs
from code.common.submission.staging import missing_scenarios, stage_scenario

from .synthetic_logs import offline_detail

RULES = get_round()
FIELDS = {"model": "mobilenet_v2", "dataset": "foolbox20", "backend": "onnxruntime", "precision": "fp32"}


def record(mode="PerformanceOnly", value=100.0, valid=True, test_run=False, status="completed", finished="1",
           scenario="Offline", log_dir="/logs/x", **fields) -> dict:
    return {"status": status, "purpose": "submission", "system": {"id": "box"}, "benchmark": "resnet50",
            "scenario": scenario, "test_mode": mode, "valid": valid, "test_run": test_run, "finished": finished,
            "division": "open", "log_dir": log_dir, "_path": f"{log_dir}/metadata.json",
            "metric": {"value": value, "higher_is_better": True},
            "config": {"fields": {**FIELDS, **fields}, "workload_setting": "lwis_k_99_MaxP",
                       "sources": {"model": "command line", "batch_size": "config class"}}}


def test_best_valid_performance_and_matching_latest_accuracy():
    records = [record(value=90, finished="1"), record(value=120, finished="2"), record(value=150, valid=False),
               record(value=200, status="failed"), record(value=300, status="interrupted"),
               record(value=400, test_run=True),
               record("AccuracyOnly", finished="3"), record("AccuracyOnly", finished="5", precision="int8"),
               record("AccuracyOnly", finished="4")]
    choice = choose_runs(records, allow_test_runs=False)[("box", "resnet50", Scenario.Offline)]
    assert choice.performance["metric"]["value"] == 120
    assert choice.accuracy["finished"] == "4"   # the int8 run computes something else
    reasons = " | ".join(choice.passed_over)
    for why in ("INVALID run", "failed run", "interrupted run", "test run (--test_run; stage it with --allow_test_runs"):
        assert why in reasons


def test_dry_runs_take_test_runs_but_never_failed_ones():
    records = [record(value=400, test_run=True, valid=False), record(value=500, status="failed", test_run=True)]
    choice = choose_runs(records, allow_test_runs=True)[("box", "resnet50", Scenario.Offline)]
    assert choice.performance["metric"]["value"] == 400
    assert choose_runs(records[1:], allow_test_runs=True)[("box", "resnet50", Scenario.Offline)].performance is None


def test_latency_scenarios_prefer_lower_latency():
    records = [record(scenario="SingleStream", value=5.0), record(scenario="SingleStream", value=4.0)]
    for r in records:
        r["metric"]["higher_is_better"] = False
    choice = choose_runs(records, False)[("box", "resnet50", Scenario.SingleStream)]
    assert choice.performance["metric"]["value"] == 4.0


def test_run_args_repeat_the_command_line_fields():
    assert run_args(record(test_run=True)) == \
        "--benchmarks=resnet50 --scenarios=Offline --model=mobilenet_v2 --test_run"


def test_calibration_markdown_describes_what_was_used():
    fp32 = record()
    int8 = record(precision="int8")
    int8["engine"] = {"manifest": {"calibration": {"dataset": "imagenet_sample", "count": 100, "method": "MinMax",
                                                   "cache_sha256": "ab" * 32}}}
    text = calibration_markdown([fp32, int8])
    assert "fp32, no calibration" in text
    assert "MinMax over 100 images of the calibration list of `imagenet_sample`" in text


def test_missing_required_scenarios_are_reported():
    lines = missing_scenarios(RULES, SystemType.edge, {("box", "resnet50"): {Scenario.Offline}})
    assert [line.split(":")[0] for line in lines] == ["box resnet50 SingleStream", "box resnet50 MultiStream"]


def _staged_run(tmp_path: Path, name: str, value: float) -> dict:
    run_dir = offline_detail(tmp_path / name, value)
    (run_dir / "mlperf_log_summary.txt").write_text(f"run {name}\n")
    return record(value=value, log_dir=str(run_dir))


def test_staging_never_replaces_a_better_result_silently(tmp_path):
    paths = Paths.create(scratch=tmp_path / "s", log_dir=tmp_path / "l", repo=tmp_path / "repo")
    key = ("box", "resnet50", Scenario.Offline)
    good, worse = _staged_run(tmp_path, "good", 200.0), _staged_run(tmp_path, "worse", 150.0)
    choice = choose_runs([good], False)[key]
    with pytest.raises(UserError, match="run `make generate_conf_files` first"):
        stage_scenario(paths, RULES, "Org", key, choice, print)
    measured = paths.measurements_dir("box", "resnet", Scenario.Offline)
    measured.mkdir(parents=True)
    for name in ("measurements.json", "user.conf", "README.md"):
        (measured / name).write_text(json.dumps({"x": 1}))
    log: list[str] = []
    dest = stage_scenario(paths, RULES, "Org", key, choice, log.append)
    assert dest == tmp_path / "repo/build/submission-staging/open/Org/results/box/resnet/Offline"
    assert (dest / "performance/run_1/mlperf_log_summary.txt").read_text() == "run good\n"
    stage_scenario(paths, RULES, "Org", key, choose_runs([worse], False)[key], log.append)
    assert (dest / "performance/run_1/mlperf_log_summary.txt").read_text() == "run good\n"
    assert "kept the staged performance run, which is better than" in log[-1]
    best = _staged_run(tmp_path, "best", 250.0)
    stage_scenario(paths, RULES, "Org", key, choose_runs([best], False)[key], log.append)
    assert (dest / "performance/run_1/mlperf_log_summary.txt").read_text() == "run best\n"
    assert any("replacing the staged performance run with the better" in line for line in log)


def test_stage_compliance_copies_passed_tests_and_names_the_missing_ones(tmp_path):
    from code.common.submission.staging import stage_compliance_for

    paths = Paths.create(repo=tmp_path)
    passed = paths.compliance_log_dir("TEST01", "box", "resnet50", Scenario.Offline)
    (passed / "runs" / "attempt1").mkdir(parents=True)
    (passed / "verify_performance.txt").write_text("ratio = 0.99\nTEST PASS\n")
    (passed / "verify_accuracy.txt").write_text("TEST PASS\n")
    lines = {}
    for division in ("closed", "open"):
        results = paths.results_dir(paths.staging, division, "Org", "box", "resnet", Scenario.Offline)
        lines[division] = stage_compliance_for(paths, RULES, results, "box", "resnet50", Scenario.Offline,
                                               lambda _: None)
        assert sorted(p.name for p in (results / "TEST01").iterdir()) == ["verify_accuracy.txt",
                                                                          "verify_performance.txt"]
    assert lines["closed"] == ['box resnet50 Offline TEST04: no verdict; run make run_audit_harness '
                               'RUN_ARGS="--benchmarks=resnet50 --scenarios=Offline"']
    assert "no verdict (optional in the open division)" in lines["open"][0]
    (passed / "verify_accuracy.txt").write_text("TEST FAIL\n")
    failed = stage_compliance_for(paths, RULES, results, "box", "resnet50", Scenario.Offline, lambda _: None)
    assert "verify_accuracy.txt says TEST FAIL; not staged" in failed[0]
