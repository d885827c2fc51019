"""The submission checker on small hand-made trees: a clean one passes, each broken rule is refused with a fix."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from code.common.constants import AccuracyTarget, Scenario, SystemType
from code.common.rules import get_round
from code.common.submission.checker import CheckReport, check_submission, resolve_benchmark
from tests.official_corpus import COMPLIANCE_DATETIME, summary_text
from tests.synthetic_logs import write_detail

RULES = get_round("v6.1")
RESNET = RULES.benchmark("resnet50")
EDGE_SCENARIOS = ("SingleStream", "MultiStream", "Offline")
ORG, SYSTEM = "Org", "cpu_sys"
# Every message must name its fix: a make target, or a field/file to set, fill in, add, write or rename.
FIX = re.compile(r"make \w+|\b(set|fill (it )?in|add|write|rename|remove|point|drop|move)\b")


def seeds() -> dict[str, int]:
    return {f"effective_{k}": v for k, v in dataclasses.asdict(RULES.seeds).items()}


def perf_values(scenario: str) -> dict:
    values = {"loadgen_version": "6.0.17 @ d6147c7eb7", "effective_scenario": scenario,
              "effective_test_mode": "PerformanceOnly", "effective_min_duration_ms": RULES.min_duration_ms,
              **seeds(), "effective_performance_sample_count": RESNET.performance_sample_count,
              "effective_samples_per_query": {"Offline": RESNET.offline_min_samples, "MultiStream": 8}.get(scenario, 1),
              "result_validity": "VALID", "result_min_duration_met": True, "result_min_queries_met": True,
              "early_stopping_met": True, "num_errors": 0}
    if scenario == "Offline":
        values["result_samples_per_second"] = 1234.5
    else:
        values.update(result_qps_with_loadgen_overhead=500.0, result_query_count=300000,
                      early_stopping_latency_ss=2_000_000, early_stopping_latency_ms=9_000_000)
    return values


def accuracy_values(scenario: str) -> dict:
    return {"effective_scenario": scenario, "effective_test_mode": "AccuracyOnly", **seeds(),
            "qsl_reported_total_count": RESNET.dataset_size, "effective_accuracy_sample_count": RESNET.dataset_size,
            "effective_min_duration_ms": RULES.min_duration_ms, "num_errors": 0}


def system_json(division: str, system_type: str) -> dict:
    values = {name: f"{name} value" for name in RULES.system_json_fields}
    values.update(division=division, submitter=ORG, status="available", system_name="A 2-core CPU box",
                  number_of_nodes=1, host_processors_per_node=1, host_processor_core_count=2,
                  accelerators_per_node="0", system_type=system_type)
    return values


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


HASH = "hash=" + hashlib.sha256(b"full accuracy log").hexdigest()
TWEAKS = {"system", "system_type", "perf", "perf_errors", "accuracy", "accuracy_txt", "accuracy_json_bytes",
          "verify", "omit", "benchmark_folder"}


def make_tree(tmp_path: Path, division: str = "closed", scenarios: tuple[str, ...] = EDGE_SCENARIOS,
              **tweaks) -> Path:
    """An exported resnet tree for one edge system. Tweaks: system (fields to override, None deletes),
    system_type, perf / perf_errors / accuracy (detail-log values merged into every main run), accuracy_txt,
    accuracy_json_bytes, verify (text of every verify_*.txt), omit (paths under each scenario folder to leave out),
    benchmark_folder."""
    unknown = set(tweaks) - TWEAKS
    if unknown:
        raise TypeError(f"unknown tweaks {unknown}")
    root = tmp_path / "submission"
    org = root / division / ORG
    system = system_json(division, tweaks.get("system_type", "edge"))
    for key, value in tweaks.get("system", {}).items():
        if value is None:
            system.pop(key, None)
        else:
            system[key] = value
    write(org / "systems" / f"{SYSTEM}.json", json.dumps(system))
    write(org / "src" / "README.md", "Implementation: the toolkit's code/ folder.\n")
    if division == "closed":
        write(org / "documentation" / "calibration.md", "# Calibration\nINT8 with 500 images.\n")
    omit = set(tweaks.get("omit", ()))
    verify = tweaks.get("verify", "measured 1000 reference 1000\nTEST PASS\n")
    for scenario in scenarios:
        folder = org / "results" / SYSTEM / tweaks.get("benchmark_folder", "resnet") / scenario
        write_detail(folder / "performance" / "run_1", {**perf_values(scenario), **tweaks.get("perf", {})},
                     tweaks.get("perf_errors"))
        # The lines TEST04's verify_performance.py reads (scenario, rate or latency), and a VALID result.
        write(folder / "performance" / "run_1" / "mlperf_log_summary.txt",
              summary_text({**perf_values(scenario), "result_validity": "VALID"}))
        acc = folder / "accuracy"
        write_detail(acc, {**accuracy_values(scenario), **tweaks.get("accuracy", {})})
        write(acc / "mlperf_log_summary.txt", "accuracy mode\n")
        write(acc / "mlperf_log_accuracy.json", "[" + "x" * (tweaks.get("accuracy_json_bytes", 8002) - 2) + "]")
        write(acc / "accuracy.txt", tweaks.get("accuracy_txt", f"accuracy=76.456%, good=38228, total=50000\n{HASH}\n"))
        write(folder / "measurements.json", json.dumps({
            "input_data_types": "int8", "retraining": "no", "starting_weights_filename": "resnet50_v1.onnx",
            "weight_data_types": "int8", "weight_transformations": "quantization"}))
        write(folder / "user.conf", f"resnet50.{scenario}.min_duration = 600000\n")
        write(folder / "README.md", "# resnet\nmake run_harness ...\n")
        if division == "closed":
            for test in RESNET.compliance_tests:
                tdir = folder / test
                write_detail(tdir / "performance" / "run_1",   # a run of its own, with the same figures
                             {**perf_values(scenario), "test_datetime": COMPLIANCE_DATETIME})
                write(tdir / "performance" / "run_1" / "mlperf_log_summary.txt", summary_text(perf_values(scenario)))
                write(tdir / "verify_performance.txt", verify)
                if test == "TEST01":
                    write(tdir / "verify_accuracy.txt", verify)
                    write(tdir / "accuracy" / "mlperf_log_accuracy.json", "[]")
                    write(tdir / "accuracy" / "accuracy.txt", f"accuracy=76.5%, good=3133, total=4096\n{HASH}\n")
        for relative in omit:
            target = folder / relative
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
    return root


def check(root: Path, **kwargs) -> CheckReport:
    report = check_submission(root, RULES, **kwargs)
    for finding in report.findings:
        assert finding.level in ("error", "warning")
        assert FIX.search(finding.message), f"no fix named: {finding.message}"
        assert not finding.path.startswith("/"), finding.path
    return report


def messages(report: CheckReport, level: str = "error") -> list[str]:
    return [f"{f.path}: {f.message}" for f in report.findings if f.level == level]


def test_clean_closed_edge_tree_passes(tmp_path):
    report = check(make_tree(tmp_path))
    assert report.findings == () and report.checked == 3
    assert report.summary() == "0 errors, 0 warnings in 3 results folders: PASS"
    assert report.text() == report.summary()


def test_open_tree_without_compliance_or_calibration_passes(tmp_path):
    report = check(make_tree(tmp_path, division="open"))
    assert report.findings == () and report.passed


def test_alias_benchmark_folder_is_accepted(tmp_path):
    assert check(make_tree(tmp_path, benchmark_folder="resnet50")).findings == ()


def test_invalid_run_is_refused(tmp_path):
    root = make_tree(tmp_path, scenarios=("SingleStream",), system_type="edge",
                     perf={"result_validity": "INVALID", "early_stopping_met": False,
                           "result_invalid_reason": "Reduce target QPS"})
    report = check(root)
    [error] = [m for m in messages(report) if "result_validity" in m]
    assert "SingleStream/performance/run_1/mlperf_log_detail.txt" in error and "Reduce target QPS" in error
    assert "make run_harness" in error and "make stage_results" in error
    # A run INVALID only for being short is a warning with allow_test_runs ...
    assert any("result_validity" in m for m in messages(check(root, allow_test_runs=True), "warning"))


def test_latency_bound_failure_stays_an_error_with_test_runs(tmp_path):
    root = make_tree(tmp_path, perf={"result_validity": "INVALID", "result_perf_constraints_met": False})
    assert len([m for m in messages(check(root, allow_test_runs=True)) if "result_validity" in m]) == 3


def test_loadgen_error_is_refused(tmp_path):
    root = make_tree(tmp_path, perf_errors={"error_invalid_config": "Multiple conf files are used"})
    errors = messages(check(root, allow_test_runs=True))
    logged = [m for m in errors if "LoadGen logged 1 error(s)" in m and "Multiple conf" in m]
    # TEST01's verify_performance.py stops on a reference run with errors: its TEST PASS is not what the logs give.
    derived = [m for m in errors if "TEST01/verify_performance.txt: verify_performance.txt says TEST PASS, but its "
                                    "logs give TEST FAIL (LoadGen reported errors in" in m]
    assert len(logged) == 3 and len(derived) == 3 and len(errors) == 6, errors


def test_wrong_seeds_are_refused(tmp_path):
    errors = messages(check(make_tree(tmp_path, perf={"effective_qsl_rng_seed": 123})))
    assert len(errors) == 3 and all("qsl_rng_seed differs from the v6.1 seeds" in m for m in errors)


def test_short_run_is_an_error_and_a_warning_with_test_runs(tmp_path):
    root = make_tree(tmp_path, perf={"effective_min_duration_ms": 10000})
    report = check(root)
    assert len(report.errors) == 3 and all("short run, not valid for submission" in f.message for f in report.errors)
    relaxed = check(root, allow_test_runs=True)
    assert not relaxed.errors and len(relaxed.warnings) == 3 and relaxed.passed
    assert relaxed.summary() == "0 errors, 3 warnings in 3 results folders: PASS"


def test_small_sample_counts_are_errors_unless_test_runs(tmp_path):
    root = make_tree(tmp_path, perf={"effective_performance_sample_count": 20, "effective_samples_per_query": 1000})
    errors = messages(check(root))
    assert sum("effective_performance_sample_count is 20" in m for m in errors) == 3
    assert next(m for m in errors if "effective_samples_per_query" in m).startswith(
        "closed/Org/results/cpu_sys/resnet/Offline/performance/run_1/")
    assert not check(root, allow_test_runs=True).errors
    # The old checker asks the Offline minimum in the open division too.
    assert any("samples_per_query" in m for m in messages(check(make_tree(tmp_path / "o", "open",
               perf={"effective_samples_per_query": 1000}))))


def test_missing_multistream_on_edge_is_refused_in_closed_with_the_inference_named(tmp_path):
    report = check(make_tree(tmp_path, scenarios=("SingleStream", "Offline")))
    [error] = messages(report)
    assert error.startswith("closed/Org/results/cpu_sys/resnet/MultiStream: MultiStream is required")
    assert "--scenarios=MultiStream" in error and 'RUN_ARGS="--infer_scenarios"' in error
    open_report = check(make_tree(tmp_path / "o", division="open", scenarios=("SingleStream", "Offline")))
    assert open_report.passed and "accepts the benchmark without it" in messages(open_report, "warning")[0]


def test_missing_singlestream_is_an_error(tmp_path):
    errors = messages(check(make_tree(tmp_path, scenarios=("MultiStream", "Offline"))))
    assert errors == [('closed/Org/results/cpu_sys/resnet/SingleStream: SingleStream is required for system_type edge '
                       'but missing (the official checkers reject the whole benchmark without it); run make '
                       'run_harness RUN_ARGS="--benchmarks=resnet50 --scenarios=SingleStream" then make '
                       'stage_results.')]


def test_datacenter_edge_system_needs_server(tmp_path):
    errors = messages(check(make_tree(tmp_path, system_type="datacenter,edge")))
    assert len(errors) == 1 and "Server is required for system_type datacenter,edge" in errors[0]


@pytest.mark.parametrize("field, value, expected", [
    ("host_memory_capacity", "", "field host_memory_capacity is empty"),
    ("cooling", None, "field cooling is missing"),
    ("accelerators_per_node", 0, "field accelerators_per_node is 0"),
    ("number_of_nodes", 0, "field number_of_nodes is 0"),
    ("submitter", "Other", "field submitter is 'Other' but the folder is 'Org'"),
    ("status", "available soon", "field status is 'available soon'"),
    ("system_type", "mobile", "field system_type is 'mobile'"),
])
def test_system_json_fields(tmp_path, field, value, expected):
    report = check(make_tree(tmp_path, system={field: value}))
    errors = messages(report)
    assert len(errors) == 1 and errors[0].startswith(f"closed/Org/systems/{SYSTEM}.json: {expected}")
    assert f"systems/{SYSTEM}." in report.errors[0].message   # the file to edit: the json or its overrides


def test_cpu_only_zero_string_is_fine(tmp_path):
    assert check(make_tree(tmp_path, system={"accelerators_per_node": "0"})).findings == ()


def test_missing_hash_line_is_refused(tmp_path):
    errors = messages(check(make_tree(tmp_path, scenarios=EDGE_SCENARIOS,
                                      accuracy_txt="accuracy=76.456%, good=38228, total=50000\n")))
    assert errors[0] == ("closed/Org/results/cpu_sys/resnet/MultiStream/accuracy/accuracy.txt: accuracy.txt has no "
                         "hash=<sha256> line of the full accuracy log; run make truncate_results.")


def test_oversize_accuracy_log_is_refused(tmp_path):
    size = RULES.accuracy_log_max_bytes + 1
    errors = messages(check(make_tree(tmp_path, accuracy_json_bytes=size)))
    assert len(errors) == 3 and all(f"is {size} bytes" in m and "make truncate_results" in m for m in errors)
    assert not check(make_tree(tmp_path / "ok", accuracy_json_bytes=RULES.accuracy_log_max_bytes)).findings


def test_accuracy_below_closed_target_is_refused_but_not_in_open(tmp_path):
    low = f"accuracy=70.000%, good=35000, total=50000\n{HASH}\n"
    errors = messages(check(make_tree(tmp_path, accuracy_txt=low)))
    threshold = RESNET.accuracy_threshold(AccuracyTarget.k_99)
    assert len(errors) == 3 and all(f"70 is below the closed-division target {threshold:.6g}" in m for m in errors)
    assert check(make_tree(tmp_path / "open", division="open", accuracy_txt=low)).findings == ()


def test_accuracy_without_a_value_is_refused(tmp_path):
    errors = messages(check(make_tree(tmp_path, division="open", accuracy_txt=f"good=1\n{HASH}\n")))
    assert len(errors) == 3 and all("no top-1 accuracy (%) line" in m for m in errors)


def test_accuracy_on_part_of_the_data_set(tmp_path):
    partial = {"effective_accuracy_sample_count": 20, "qsl_reported_total_count": 20}
    low = f"accuracy=50.000%, good=10, total=20\n{HASH}\n"
    root = make_tree(tmp_path, accuracy=partial, accuracy_txt=low)
    errors = messages(check(root))
    assert sum("covered 20 samples (effective_accuracy_sample_count), not the whole data set of 50000" in m
               for m in errors) == 3
    assert sum("below the closed-division target" in m for m in errors) == 3
    relaxed = check(root, allow_test_runs=True)
    assert relaxed.passed and len(relaxed.warnings) == 6
    # main.py asks the whole data set in the open division too.
    open_root = make_tree(tmp_path / "o", division="open", accuracy=partial, accuracy_txt=low)
    assert len(check(open_root).errors) == 3 and check(open_root, allow_test_runs=True).passed


def test_missing_test04_in_closed_is_refused(tmp_path):
    errors = messages(check(make_tree(tmp_path, omit=("TEST04",))))
    assert len(errors) == 3
    for scenario, error in zip(sorted(EDGE_SCENARIOS), errors):
        assert error.startswith(f"closed/Org/results/cpu_sys/resnet/{scenario}/TEST04: ")
        assert "make run_audit_harness" in error and "--audit_test=TEST04" in error and "make stage_compliance" in error


def test_compliance_parts(tmp_path):
    errors = messages(check(make_tree(tmp_path, omit=("TEST01/accuracy/accuracy.txt", "TEST04/performance/run_1"),
                                      verify="delta 30 %\nTEST FAIL\n")))
    assert sum("verify_performance.txt has no TEST PASS line (it ends with 'TEST FAIL')" in m for m in errors) == 6
    assert any(m.startswith("closed/Org/results/cpu_sys/resnet/Offline/TEST01/accuracy: accuracy/ lacks "
                            "accuracy.txt, baseline_accuracy.txt, compliance_accuracy.txt") for m in errors)
    assert any("TEST04/performance/run_1/mlperf_log_detail.txt: mlperf_log_detail.txt is missing" in m for m in errors)


def test_compliance_folders_are_not_read_in_open(tmp_path):
    root = make_tree(tmp_path, division="open")
    folder = root / "open" / ORG / "results" / SYSTEM / "resnet" / "Offline" / "TEST04"
    write(folder / "verify_performance.txt", "TEST FAIL\n")
    report = check(root)
    assert report.passed and not report.findings


def test_missing_files_and_empty_conf(tmp_path):
    root = make_tree(tmp_path, omit=("performance/run_1/mlperf_log_detail.txt", "accuracy/accuracy.txt", "README.md"))
    folder = root / "closed" / ORG / "results" / SYSTEM / "resnet" / "Offline"
    write(folder / "user.conf", "  \n")
    write(folder / "measurements.json", json.dumps({"input_data_types": "int8"}))
    errors = messages(check(root))
    assert any(m.startswith("closed/Org/results/cpu_sys/resnet/Offline/performance/run_1/mlperf_log_detail.txt: "
                            "mlperf_log_detail.txt is missing; run make run_harness") for m in errors)
    assert any("Offline/accuracy/accuracy.txt: accuracy.txt is missing" in m and "--test_mode=AccuracyOnly" in m
               for m in errors)
    assert any("user.conf: user.conf is empty" in m for m in errors)
    assert any("Offline/README.md: README.md is missing" in m for m in errors)
    assert sum("measurements.json has no" in m for m in errors) == 4


def test_layout_rules(tmp_path):
    root = make_tree(tmp_path)
    org = root / "closed" / ORG
    (org / "documentation" / "calibration.md").unlink()
    (org / "src" / "README.md").unlink()
    (root / "network").mkdir()
    (org / "results" / SYSTEM / "mobilenet").mkdir()
    (org / "results" / SYSTEM / "resnet" / "Offline_old").mkdir()
    errors = messages(check(root))
    assert any(m.startswith("closed/Org/documentation/calibration.md: ") for m in errors)
    assert any(m.startswith("closed/Org/src: src/ is missing or empty") for m in errors)
    assert any(m.startswith("network: division folder 'network'") for m in errors)
    assert any(m.startswith("closed/Org/results/cpu_sys/mobilenet: benchmark folder 'mobilenet'") for m in errors)
    assert any(m.startswith("closed/Org/results/cpu_sys/resnet/Offline_old: 'Offline_old' is not a scenario folder")
               for m in errors)
    assert any(m.startswith("closed/Org/src: src/ is empty, and the official checker refuses empty folders")
               for m in errors)


def test_round_model_without_a_table_gets_generic_checks_and_a_warning(tmp_path):
    report = check(make_tree(tmp_path, scenarios=("Offline",), system_type="datacenter", benchmark_folder="rgat"))
    assert report.passed and report.checked == 1
    assert [f.path for f in report.warnings] == ["closed/Org/results/cpu_sys/rgat"]


def test_malformed_tree_never_crashes(tmp_path):
    root = make_tree(tmp_path, scenarios=("Offline",), system_type="datacenter")
    org = root / "closed" / ORG
    folder = org / "results" / SYSTEM / "resnet" / "Offline"
    write(org / "systems" / f"{SYSTEM}.json", "{not json")
    (folder / "performance" / "run_1" / "mlperf_log_detail.txt").write_bytes(b"\xff\xfe garbage\n:::MLLOG {bad\n")
    write_detail(folder / "accuracy", {"effective_scenario": 7, "qsl_reported_total_count": "many",
                                       "num_errors": "x"})
    write(folder / "measurements.json", "[1, 2]")
    (folder / "TEST01" / "verify_accuracy.txt").unlink()
    (folder / "TEST01" / "verify_accuracy.txt").mkdir()
    report = check(root)
    text = report.text()
    assert text.splitlines()[-1] == report.summary() and report.summary().endswith(": FAIL")
    assert f"ERROR closed/Org/systems/{SYSTEM}.json: {SYSTEM}.json is not readable JSON" in text
    assert "holds no :::MLLOG records" in text and "holds a JSON list, not an object" in text
    assert "effective_scenario is 7 but the folder is Offline" in text
    assert "verify_accuracy.txt is missing" in text
    assert check_submission(tmp_path / "nowhere", RULES).summary() == "1 error, 0 warnings in 0 results folders: FAIL"


def test_text_lists_every_finding(tmp_path):
    report = check(make_tree(tmp_path, scenarios=("SingleStream", "Offline"), perf={"effective_min_duration_ms": 1},
                             system={"cooling": ""}))
    lines = report.text().splitlines()
    assert len(lines) == len(report.findings) + 1
    assert lines[0] == f"ERROR closed/Org/systems/{SYSTEM}.json: field cooling is empty; set it in " \
                       f"systems/{SYSTEM}.overrides.json of the toolkit and run make generate_conf_files " \
                       f"stage_results export_submission."
    assert lines[1].startswith("ERROR closed/Org/results/cpu_sys/resnet/Offline/performance/run_1/")
    assert any(line.startswith("ERROR closed/Org/results/cpu_sys/resnet/MultiStream: ") for line in lines)
    assert lines[-1].endswith("in 2 results folders: FAIL")


def test_benchmark_folders_map_to_targets():
    assert resolve_benchmark(RULES, "resnet").target is AccuracyTarget.k_99
    assert resolve_benchmark(RULES, "resnet50").key == "resnet50"
    assert resolve_benchmark(RULES, "bert-99.9").target is AccuracyTarget.k_99_9
    assert resolve_benchmark(RULES, "bert") is None   # two targets: the alias would be ambiguous
    assert resolve_benchmark(RULES, "rgat").rules is None
    assert resolve_benchmark(RULES, "mobilenet") is None
    assert RESNET.required_scenarios[SystemType.edge] == tuple(Scenario(s) for s in EDGE_SCENARIOS)
