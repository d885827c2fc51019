"""Staging an endpoints tree (submission/endpoints_tree.py) from recorded runs of the client: config.yaml and
performance/ from the performance run's report, accuracy/ from the accuracy run's, measurements.json and README.md;
an edited or missing report file stages nothing; and the official v6.1 checker's endpoints parser reads the staged
folder (where the official tools are beside the repository)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from code.common.constants import Scenario, TestMode
from code.common.endpoints_client.run import report_digests
from code.common.errors import UserError
from code.common.records.metadata import COMPLETED
from code.common.records.record import ConfigRecord, RunRecord, SystemRecord
from code.common.rules import get_round
from code.common.submission.endpoints_tree import stage_endpoints_scenario
from tests.test_endpoints_run_parts import write_report

V6_1 = get_round("v6.1")


def client_config(report: Path) -> None:
    """The YAML as the client writes it into its report (what the checker reads the seeds and duration from)."""
    (report / "config.yaml").write_text(yaml.safe_dump({
        "name": "qwen3.6-27b-SingleStream", "type": "online",
        "settings": {"runtime": {"min_duration_ms": V6_1.min_duration_ms, "max_duration_ms": 0,
                                 "scheduler_random_seed": V6_1.seeds.schedule_rng_seed,
                                 "dataloader_random_seed": V6_1.seeds.sample_index_rng_seed},
                     "load_pattern": {"type": "agentic_inference", "target_concurrency": 1}}}))


def recorded_run(folder: Path, mode: TestMode) -> RunRecord:
    report = write_report(folder / "report")
    client_config(report)
    return RunRecord(status=COMPLETED, benchmark="qwen3.6-27b", model="qwen3.6-27b", dataset="qwen3_6_agentic_replay",
                     division="closed", scenario=Scenario.SingleStream, test_mode=mode, system=SystemRecord(id="x"),
                     config=ConfigRecord(workload_setting="endpoints_k_99_MaxP", fields={}, sources={}),
                     log_dir=str(folder), valid=True, submittable=True,
                     load_generator={"commit": "ea3327530376fef63d706f4105612e17c2c80a8d", "client_version": "0.1.0",
                                     "report_dir": str(report), "report_sha256": report_digests(report)})


@pytest.fixture
def runs(tmp_path):
    measured = tmp_path / "measurements"
    measured.mkdir()
    (measured / "measurements.json").write_text(json.dumps({
        "input_data_types": "int64", "retraining": "No", "starting_weights_filename": "Qwen/Qwen3.6-27B",
        "weight_data_types": "bf16", "weight_transformations": "none (served as published)"}))
    (measured / "README.md").write_text("# qwen3.6-27b SingleStream\n")
    return (recorded_run(tmp_path / "perf", TestMode.PerformanceOnly),
            recorded_run(tmp_path / "acc", TestMode.AccuracyOnly), measured)


def test_an_endpoints_tree_takes_each_phase_from_its_run(tmp_path, runs):
    performance, accuracy, measured = runs
    lines: list[str] = []
    dest = stage_endpoints_scenario(tmp_path / "tree", "x qwen3.6-27b SingleStream", performance, accuracy, measured,
                                    lines.append)
    staged = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert staged == ["README.md", "accuracy/accuracy_results.json", "config.yaml", "measurements.json",
                      "performance/result_summary.json"]
    assert (dest / "config.yaml").read_bytes() == (Path(performance.log_dir) / "report" / "config.yaml").read_bytes()
    assert (dest / "accuracy" / "accuracy_results.json").read_bytes() == \
        (Path(accuracy.log_dir) / "report" / "accuracy" / "accuracy_results.json").read_bytes()
    assert "staged the endpoints client's performance run" in lines[-1]


def test_an_edited_or_missing_report_file_stages_nothing(tmp_path, runs):
    performance, accuracy, measured = runs
    summary = Path(performance.log_dir) / "report" / "performance" / "result_summary.json"
    summary.write_text(summary.read_text().replace('"n_samples_failed": 0', '"n_samples_failed": 00'))
    with pytest.raises(UserError, match=r"result_summary.json changed after the run .* is not staged") as error:
        stage_endpoints_scenario(tmp_path / "tree", "x", performance, accuracy, measured, print)
    assert error.value.exit_code == 1 and not (tmp_path / "tree").exists()
    (Path(accuracy.log_dir) / "report" / "accuracy" / "accuracy_results.json").unlink()
    with pytest.raises(UserError, match="accuracy_results.json is missing"):
        stage_endpoints_scenario(tmp_path / "tree", "x", recorded_run(tmp_path / "p2", TestMode.PerformanceOnly),
                                 accuracy, measured, print)
    (measured / "README.md").unlink()
    with pytest.raises(UserError, match="run `make generate_conf_files` first"):
        stage_endpoints_scenario(tmp_path / "tree", "x", performance, accuracy, measured, print)


CHECKER = Path(os.environ.get("MLPERF_INFERENCE_DIR", "")) / "tools" / "submission"

PARSE = """\
import json, sys
from submission_checker.parsers.endpoints_parser import EndpointsParser
perf, acc = EndpointsParser(sys.argv[1], "performance"), EndpointsParser(sys.argv[1], "accuracy")
print(json.dumps({k: perf[k] for k in ("effective_sample_index_rng_seed", "effective_schedule_rng_seed",
                                       "effective_min_duration_ms")}
                 | {"accuracy_sample_count": acc["effective_accuracy_sample_count"]}))
"""


@pytest.mark.skipif(not (CHECKER / "submission_checker" / "parsers" / "endpoints_parser.py").is_file(),
                    reason="the official v6.1 submission checker is not beside the repository (MLPERF_INFERENCE_DIR)")
def test_the_official_checkers_endpoints_parser_reads_the_staged_tree(tmp_path, runs):
    performance, accuracy, measured = runs
    dest = stage_endpoints_scenario(tmp_path / "tree", "x", performance, accuracy, measured, print)
    done = subprocess.run([sys.executable, "-c", PARSE, str(dest)], cwd=CHECKER, capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    read = json.loads(done.stdout.strip().splitlines()[-1])
    assert read == {"effective_sample_index_rng_seed": V6_1.seeds.sample_index_rng_seed,
                    "effective_schedule_rng_seed": V6_1.seeds.schedule_rng_seed,
                    "effective_min_duration_ms": V6_1.min_duration_ms, "accuracy_sample_count": 995}


def test_generate_conf_files_writes_no_user_conf_for_a_run_of_the_client(tmp_path, runs):
    import dataclasses

    from code.common.paths import Paths
    from code.common.submission.measurements import write_measurements
    from code.qwen3_6.benchmark import BENCHMARK

    performance = dataclasses.replace(runs[0], model="smollm2-135m-instruct", division="open", config=ConfigRecord(
        workload_setting="endpoints_k_99_MaxP", fields={"model": "smollm2-135m-instruct", "precision": "fp32",
                                                        "dataset": "qwen3_6_agentic_replay"}, sources={}))
    paths = Paths.create(scratch=tmp_path / "s", log_dir=tmp_path / "logs", repo=tmp_path / "repo")
    folder = write_measurements(paths, performance, V6_1.benchmark("qwen3.6-27b"), BENCHMARK)
    assert sorted(p.name for p in folder.iterdir()) == ["README.md", "measurements.json"]
    assert "the MLCommons endpoints client 0.1.0 (ea332753)" in (folder / "README.md").read_text()


def findings(folder: Path, allow_test_runs: bool = False) -> list[tuple[str, str, str]]:
    from code.common.constants import AccuracyTarget
    from code.common.submission.checker_rules import ScenarioContext
    from code.common.submission.endpoints_checks import check_any_scenario

    found: list[tuple[str, str, str]] = []
    ctx = ScenarioContext(lambda level, path, message: found.append((level, path.name, message)), V6_1, "closed",
                          folder, Scenario.SingleStream, "qwen3.6-27b", V6_1.benchmark("qwen3.6-27b"),
                          AccuracyTarget.k_99, allow_test_runs)
    check_any_scenario(ctx)
    return found


def test_the_toolkits_checker_reads_an_endpoints_tree_as_the_official_one_does(tmp_path, runs):
    performance, accuracy, measured = runs
    dest = stage_endpoints_scenario(tmp_path / "tree", "x", performance, accuracy, measured, print)
    assert findings(dest) == []                      # no user.conf asked, no LoadGen log looked for
    config = yaml.safe_load((dest / "config.yaml").read_text())
    config["settings"]["runtime"] |= {"min_duration_ms": 0, "dataloader_random_seed": 42}
    (dest / "config.yaml").write_text(yaml.safe_dump(config))
    results = json.loads((dest / "accuracy" / "accuracy_results.json").read_text())
    results["accuracy_scores"][1]["total_samples"] = 8           # a test run's subset
    (dest / "accuracy" / "accuracy_results.json").write_text(json.dumps(results))
    found = findings(dest)
    assert [(level, name) for level, name, _ in found] == [("error", "config.yaml")] * 2 + [
        ("error", "accuracy_results.json")]
    assert "not the round's sample_index_rng_seed 2747215439041700203 (the checker's seeds_check)" in found[0][2]
    assert "min_duration_ms is 0, below the round's 600000" in found[1][2]
    assert "scored 8 samples, not the round's 995" in found[2][2]
    # each fix is the command that makes the run again on the client: the performance test, or the accuracy one
    assert found[0][2].endswith('--harness_type=endpoints --test_mode=PerformanceOnly" then make stage_results.')
    assert found[2][2].endswith('--harness_type=endpoints --test_mode=AccuracyOnly" then make stage_results.')
    assert 'make run_harness RUN_ARGS="--benchmarks=' in found[2][2]
    relaxed = findings(dest, allow_test_runs=True)
    assert [level for level, _, _ in relaxed] == ["error", "warning", "warning"]   # a wrong seed stays an error
    (dest / "accuracy" / "accuracy_results.json").unlink()
    assert any("accuracy_results.json is missing" in message and "--test_mode=AccuracyOnly" in message
               for _, _, message in findings(dest))
