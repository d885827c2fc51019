"""A corpus of small generated submission trees and compliance log pairs, each with the verdict the round's
official tools give it (recorded by running them: tools/submission/submission_checker/main.py "main" and
submission_checker_old.py "old" with --version v6.1; compliance/TEST01 and TEST04 verify_*.py).

The toolkit must agree with them: its checker passes a tree exactly when both official checkers pass it, and its
verification of a log pair gives the official script's verdict. `tests/test_official_agreement.py` asserts both;
with MLPERF_INFERENCE_DIR pointing at a checkout of the inference repository it also re-runs the official tools on
the whole corpus, so the recorded verdicts can be re-validated against a newer checkout in one command:

    MLPERF_INFERENCE_DIR=/path/to/inference make test RUN_ARGS= PYTEST_ARGS="-k official"
"""
from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ORG, SYSTEM = "Org", "cpu_sys"
SEEDS = {"effective_qsl_rng_seed": 2085463073848966840, "effective_sample_index_rng_seed": 2747215439041700203,
         "effective_schedule_rng_seed": 16159082839903944936}
EDGE = ("SingleStream", "MultiStream", "Offline")
HASH = "hash=" + "ab" * 32
PASS, FAIL, CRASH = "pass", "fail", "crash"
ABSENT = "<absent>"   # a detail-log value that makes the key unlogged (LoadGen logs some keys only when they apply)
# compliance/TEST06/run_verification.py's verify_accuracy.txt of a passing run (Offline writes "Skipped").
TEST06_PASS = ("First token check pass: True\nEOS check pass: True\nSample length check pass: True\n"
               "TEST06 verification complete\n")


# -- LoadGen-shaped logs ------------------------------------------------------------------------------
def mllog(key: str, value: Any, error: bool = False) -> str:
    return ":::MLLOG " + json.dumps({"key": key, "value": value, "time_ms": 0.0, "namespace": "mlperf::logging",
                                     "event_type": "POINT_IN_TIME",
                                     "metadata": {"is_error": error, "is_warning": False, "file": "loadgen.cc",
                                                  "line_no": 1, "pid": 1, "tid": 1}})


COMPLIANCE_DATETIME = "2026-11-20T11:00:00Z"   # a compliance run's start, after the submission run's


def perf_values(scenario: str, **changes: Any) -> dict[str, Any]:
    """What LoadGen 6.0.17 logs for a VALID 600 s resnet50 performance run of `scenario` (the keys the checkers
    and the compliance scripts read)."""
    values: dict[str, Any] = {
        "loadgen_version": "6.0.17 @ d6147c7eb7", "test_datetime": "2026-11-20T10:00:00Z",
        "sut_name": "PySUT", "effective_scenario": scenario, "effective_test_mode": "PerformanceOnly",
        **SEEDS, "effective_min_duration_ms": 600000, "effective_max_duration_ms": 0,
        "effective_performance_sample_count": 1024, "qsl_reported_total_count": 50000,
        "qsl_reported_performance_count": 1024, "effective_sample_concatenate_permutation": False,
        "effective_min_query_count": {"Offline": 1}.get(scenario, 662),
        "effective_samples_per_query": {"Offline": 24576 * 4, "MultiStream": 8}.get(scenario, 1),
        "effective_target_latency_ns": 15000000 if scenario == "Server" else 0,
        "requested_use_token_latencies": False, "result_validity": "VALID", "result_min_duration_met": True,
        "result_min_queries_met": True, "result_perf_constraints_met": True, "num_errors": 0,
        "result_99.00_percentile_latency_ns": 9000000, "result_90.00_percentile_latency_ns": 8000000,
    }
    if scenario == "Offline":
        values.update(result_samples_per_second=163.84)
    else:
        values.update(early_stopping_met=True, early_stopping_result=" * Run successful.",
                      result_qps_with_loadgen_overhead=120.0, result_qps_without_loadgen_overhead=121.0,
                      result_query_count=72000, result_mean_latency_ns=7000000,
                      result_mean_query_latency_ns=52000000)
    if scenario == "SingleStream":
        values.update(early_stopping_latency_ss=8200000, early_stopping_latency_ms=9100000)
    if scenario == "MultiStream":
        values.update(early_stopping_latency_ms=60000000, early_stopping_latency_ss=0,
                      **{"result_99.00_percentile_per_query_latency_ns": 59000000})
    if scenario == "Server":
        values.update(result_completed_samples_per_sec=99.5, result_scheduled_samples_per_sec=100.0)
    values.update(changes)
    return {key: value for key, value in values.items() if value != ABSENT}


def accuracy_values(scenario: str, **changes: Any) -> dict[str, Any]:
    values = {"loadgen_version": "6.0.17 @ d6147c7eb7", "effective_scenario": scenario,
              "effective_test_mode": "AccuracyOnly", **SEEDS, "effective_min_duration_ms": 600000,
              "effective_performance_sample_count": 1024, "qsl_reported_total_count": 50000,
              "effective_accuracy_sample_count": 50000, "num_errors": 0}
    values.update(changes)
    return values


def detail_text(values: dict[str, Any], errors: dict[str, Any] | None = None,
                duplicates: dict[str, Any] | None = None) -> str:
    """`duplicates` are logged once more *before* the real value (the checkers read the first one)."""
    lines = [mllog(k, v) for k, v in (duplicates or {}).items()]
    lines += [mllog(k, v) for k, v in values.items()]
    lines += [mllog(k, v, error=True) for k, v in (errors or {}).items()]
    return "\n".join(lines) + "\n"


def summary_text(values: dict[str, Any]) -> str:
    """mlperf_log_summary.txt as LoadGen writes it, with the lines TEST04 reads."""
    scenario = values["effective_scenario"]
    lines = ["================================================", "MLPerf Results Summary",
             "================================================", f"SUT name : {values.get('sut_name', 'PySUT')}",
             f"Scenario : {scenario}", f"Mode     : {values.get('effective_test_mode', 'PerformanceOnly')}"]
    if scenario == "Offline":
        lines.append(f"Samples per second: {values.get('result_samples_per_second', 0)}")
    if scenario == "Server":
        lines.append(f"Completed samples per second    : {values.get('result_completed_samples_per_sec', 0)}")
    if scenario == "Offline" and "result_tokens_per_second" in values:
        lines.append(f"Tokens per second: {values['result_tokens_per_second']}")
    if scenario == "Server" and "result_completed_tokens_per_second" in values:
        lines.append(f"Completed tokens per second: {values['result_completed_tokens_per_second']}")
    if scenario == "SingleStream":
        lines.append(f"90.0th percentile latency (ns) : {values.get('result_90.00_percentile_latency_ns')}")
    if scenario == "MultiStream":
        lines.append(f"99.0th percentile latency (ns) : {values.get('result_99.00_percentile_latency_ns')}")
    lines.append(f"Result is : {values.get('result_validity', 'VALID')}")
    if scenario == "SingleStream":
        lines += ["", "Early Stopping Result:",
                  f" * Early stopping 90.0th percentile estimate: {values.get('early_stopping_latency_ss')}",
                  f" * Early stopping 99.0th percentile estimate: {values.get('early_stopping_latency_ms')}"]
    if scenario == "MultiStream":
        lines += ["", "Early Stopping Result:",
                  f" * Early stopping 99.0th percentile estimate: {values.get('early_stopping_latency_ms')}"]
    if scenario == "Server":
        lines += ["", f"target_latency (ns): {values.get('effective_target_latency_ns')}"]
    return "\n".join(lines) + "\n"


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_run(folder: Path, values: dict[str, Any], errors: dict | None = None,
              duplicates: dict | None = None) -> None:
    write(folder / "mlperf_log_detail.txt", detail_text(values, errors, duplicates))
    write(folder / "mlperf_log_summary.txt", summary_text(values))


# -- submission trees ---------------------------------------------------------------------------------
def system_json(division: str, system_type: str) -> dict[str, Any]:
    return {
        "division": division, "submitter": ORG, "status": "available", "system_name": "A 2-core CPU box",
        "number_of_nodes": "1", "host_processor_model_name": "AMD EPYC 7B13", "host_processors_per_node": "1",
        "host_processor_core_count": "2", "host_memory_capacity": "24 GB", "host_storage_capacity": "100 GB",
        "host_storage_type": "SSD", "accelerators_per_node": "0", "accelerator_model_name": "N/A",
        "accelerator_memory_capacity": "N/A", "framework": "ONNX Runtime 1.31.1", "operating_system": "Debian 12",
        "system_type": system_type, "other_software_stack": "Python 3.11, LoadGen 6.0.17",
        "host_processor_frequency": "", "host_processor_caches": "", "host_memory_configuration": "1x 24 GB",
        "host_processor_interconnect": "", "host_networking": "N/A", "host_networking_topology": "N/A",
        "accelerator_frequency": "", "accelerator_host_interconnect": "N/A", "accelerator_interconnect": "N/A",
        "accelerator_interconnect_topology": "", "accelerator_memory_configuration": "N/A",
        "accelerator_on-chip_memories": "", "cooling": "air", "hw_notes": "", "sw_notes": "",
        "host_network_card_count": "0", "system_type_detail": "",
    }


@dataclass
class TreeSpec:
    """One resnet submission of one system. Folders maps a scenario folder name to the scenario of its logs."""

    division: str = "closed"
    system_type: str = "edge"
    folders: dict[str, str] = field(default_factory=lambda: {s: s for s in EDGE})
    benchmark: str = "resnet"
    system: dict[str, Any] = field(default_factory=dict)          # fields changed (None: removed)
    perf: dict[str, Any] = field(default_factory=dict)            # detail values changed in every submission run
    perf_by_folder: dict[str, dict[str, Any]] = field(default_factory=dict)
    perf_errors: dict[str, Any] | None = None
    perf_duplicates: dict[str, Any] | None = None
    accuracy: dict[str, Any] = field(default_factory=dict)
    accuracy_txt: str = f"accuracy=76.456%, good=38228, total=50000\n{HASH}\n"
    accuracy_json_bytes: int = 8002
    measurements: dict[str, Any] = field(default_factory=dict)
    test01_verify_accuracy: str = ("num_acc_log_entries = 50000\nnum_acc_log_duplicate_keys = 0\n"
                                   "num_acc_log_data_mismatch = 0\nnum_perf_log_entries = 4096\n"
                                   "num_perf_log_qsl_idx_match = 4096\nnum_perf_log_data_mismatch = 0\n"
                                   "num_missing_qsl_idxs = 0\nTEST PASS\n\n")
    test01_accuracy_files: dict[str, str] | None = None           # TEST01/accuracy/ (None: json + accuracy.txt)
    verify_performance: str = "Verifying performance.\nReference score = 163.84\nTest score = 160.1\nTEST PASS\n"
    compliance: bool | None = None                                 # None: in closed only
    compliance_tests: tuple[str, ...] | None = None               # None: resnet's TEST01 + TEST04, else TEST01
    test06_verify_accuracy: str = TEST06_PASS                      # TEST06/verify_accuracy.txt
    extra_files: dict[str, str] = field(default_factory=dict)     # relative to the tree root
    edit: Callable[[Path], None] | None = None                    # last word on the tree


def build_tree(root: Path, spec: TreeSpec) -> Path:
    shutil.rmtree(root, ignore_errors=True)
    org = root / spec.division / ORG
    system = system_json(spec.division, spec.system_type)
    for key, value in spec.system.items():
        if value is None:
            system.pop(key, None)
        else:
            system[key] = value
    write(org / "systems" / f"{SYSTEM}.json", json.dumps(system, indent=2))
    write(org / "src" / "README.md", "The toolkit's code.\n")
    write(org / "documentation" / "calibration.md", "# Calibration\nNone: fp32 weights.\n")
    for folder_name, logged in spec.folders.items():
        folder = org / "results" / SYSTEM / spec.benchmark / folder_name
        values = perf_values(logged, **spec.perf, **spec.perf_by_folder.get(folder_name, {}))
        if spec.perf_errors:
            values["num_errors"] = len(spec.perf_errors)   # LoadGen counts what it flagged
        write_run(folder / "performance" / "run_1", values, spec.perf_errors, spec.perf_duplicates)
        acc = folder / "accuracy"
        acc_values = accuracy_values(logged, **spec.accuracy)
        write(acc / "mlperf_log_detail.txt", detail_text(acc_values))
        write(acc / "mlperf_log_summary.txt", summary_text({**acc_values, "result_validity": "VALID"}))
        # Valid JSON of the size under test (the official checkers read only the size).
        write(acc / "mlperf_log_accuracy.json", "[" + " " * (spec.accuracy_json_bytes - 2) + "]")
        write(acc / "accuracy.txt", spec.accuracy_txt)
        measurements = {"input_data_types": "fp32", "retraining": "no", "starting_weights_filename":
                        "resnet50_v1.onnx", "weight_data_types": "fp32", "weight_transformations": "none"}
        measurements.update(spec.measurements)
        write(folder / "measurements.json", json.dumps(measurements))
        write(folder / "user.conf", f"resnet50.{logged}.target_qps = 160\n")
        write(folder / "README.md", "# resnet\nmake run_harness ...\n")
        if spec.compliance if spec.compliance is not None else spec.division == "closed":
            tests = spec.compliance_tests if spec.compliance_tests is not None else \
                ("TEST01", "TEST04") if spec.benchmark == "resnet" else ("TEST01",)
            for test in (t for t in tests if t in ("TEST01", "TEST04")):
                # A run of its own (started later), with the submission run's figures.
                write_run(folder / test / "performance" / "run_1",
                          perf_values(logged, **{"test_datetime": COMPLIANCE_DATETIME, **spec.perf}))
                write(folder / test / "verify_performance.txt", spec.verify_performance)
            if "TEST01" in tests:
                write(folder / "TEST01" / "verify_accuracy.txt", spec.test01_verify_accuracy)
                files = spec.test01_accuracy_files or {"mlperf_log_accuracy.json": "[]", "accuracy.txt":
                                                       f"accuracy=76.5%, good=3133, total=4096\n{HASH}\n"}
                for name, text in files.items():
                    write(folder / "TEST01" / "accuracy" / name, text)
            if "TEST06" in tests:
                # compliance/TEST06/run_verification.py's output: the verdict and the sampled responses.
                text = spec.test06_verify_accuracy
                if logged == "Offline":
                    text = text.replace("First token check pass: True", "First token check pass: Skipped")
                write(folder / "TEST06" / "verify_accuracy.txt", text)
                write(folder / "TEST06" / "accuracy" / "mlperf_log_accuracy.json", "[]")
    for relative, text in spec.extra_files.items():
        write(root / relative, text)
    if spec.edit is not None:
        spec.edit(root)
    return root


def _remove(*relative: str) -> Callable[[Path], None]:
    def edit(root: Path) -> None:
        for rel in relative:
            for path in root.glob(rel):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    return edit


def _mkdir(relative: str) -> Callable[[Path], None]:
    return lambda root: (root / relative).mkdir(parents=True, exist_ok=True)


@dataclass(frozen=True)
class TreeCase:
    name: str
    spec: TreeSpec
    main: str                       # verdict of submission_checker/main.py: pass, fail or crash
    old: str                        # verdict of submission_checker_old.py
    says: str = ""                  # a phrase the toolkit's error must hold when either rejects
    # Where one official checker rejects a tree by a defect of its own (a crash on a table it lacks), the toolkit
    # follows the other and says so in a warning: `toolkit_pass` and the phrase of that warning.
    toolkit_pass: bool | None = None
    warns: str = ""

    @property
    def official_pass(self) -> bool:
        return self.main == PASS and self.old == PASS

    @property
    def expected_pass(self) -> bool:
        return self.official_pass if self.toolkit_pass is None else self.toolkit_pass


R = f"closed/{ORG}/results/{SYSTEM}/resnet"
L = f"closed/{ORG}/results/{SYSTEM}/llama3.1-8b"
PART3_FAIL = ("num_acc_log_entries = 50000\nnum_acc_log_duplicate_keys = 0\nnum_acc_log_data_mismatch = 0\n"
              "num_perf_log_entries = 4096\nnum_perf_log_qsl_idx_match = 4096\nnum_perf_log_data_mismatch = 12\n"
              "num_missing_qsl_idxs = 0\nTEST FAIL\n\n")


def _part3(baseline: str, compliance: str) -> dict[str, str]:
    return {"mlperf_log_accuracy.json": "[]", "accuracy.txt": f"accuracy={compliance}%, good=1, total=4096\n{HASH}\n",
            "baseline_accuracy.txt": f"accuracy={baseline}%, good=1, total=4096\n",
            "compliance_accuracy.txt": f"accuracy={compliance}%, good=1, total=4096\n"}


def _spec(**kwargs: Any) -> TreeSpec:
    return TreeSpec(**copy.deepcopy(kwargs))


def _model(benchmark: str, performance_sample_count: int, dataset_size: int, accuracy_txt: str,
           folders: tuple[str, ...], **kwargs: Any) -> TreeSpec:
    """A tree of another benchmark: its sample counts, its accuracy line, its scenarios."""
    perf = {"effective_performance_sample_count": performance_sample_count, **kwargs.pop("perf", {})}
    accuracy = {"effective_accuracy_sample_count": dataset_size, "qsl_reported_total_count": dataset_size}
    return _spec(benchmark=benchmark, perf=perf, accuracy=accuracy, accuracy_txt=accuracy_txt,
                 folders={f: f for f in folders}, **kwargs)


# LoadGen 6.0.17's keys of a run with token latencies (results.cc, test_settings_internal.cc), per scenario of the
# logs; the bounds are mlperf.conf's llama3_1-8b (Server) ones, in ns.
LLM_SERVER = {"requested_use_token_latencies": True, "effective_target_latency_ns": 0,
              "requested_server_ttft_latency": 2000000000, "requested_server_tpot_latency": 100000000,
              "result_first_token_99.00_percentile_latency_ns": 1500000000,
              "result_time_per_output_token_99.00_percentile_ns": 80000000,
              "result_completed_tokens_per_second": 1800.5}
LLM_INTERACTIVE = {**LLM_SERVER, "requested_server_ttft_latency": 500000000, "requested_server_tpot_latency": 30000000,
                   "result_first_token_99.00_percentile_latency_ns": 400000000,
                   "result_time_per_output_token_99.00_percentile_ns": 25000000}
LLM_OFFLINE = {"requested_use_token_latencies": True, "result_tokens_per_second": 2500.25}
LLM_SINGLESTREAM = {"requested_use_token_latencies": True, "requested_server_ttft_latency": 2000000000,
                    "requested_server_tpot_latency": 100000000,
                    "result_first_token_99.00_percentile_latency_ns": 90000000,
                    "result_time_per_output_token_99.00_percentile_ns": 20000000,
                    "result_completed_tokens_per_second": 60.5}
LLM_BY_FOLDER = {"Offline": LLM_OFFLINE, "Server": LLM_SERVER, "Interactive": LLM_INTERACTIVE,
                 "SingleStream": LLM_SINGLESTREAM}


def rouge_line(rouge1: str = "38.8638", rouge2: str = "16.2134", rouge_l: str = "24.5295",
               rouge_lsum: str = "35.8712", gen_len: str = "8167000", gen_num: int = 13368) -> str:
    """accuracy.txt of language/llama3.1-8b/evaluation.py: a `Results` heading and one printed dict."""
    return (f"\nResults\n\n{{'rouge1': '{rouge1}', 'rouge2': '{rouge2}', 'rougeL': '{rouge_l}', "
            f"'rougeLsum': '{rouge_lsum}', 'gen_len': {gen_len}, 'gen_num': {gen_num}}}\n{HASH}\n")


def _llm(benchmark: str = "llama3.1-8b", folders: dict[str, str] | None = None, **kwargs: Any) -> TreeSpec:
    """An LLM tree: Offline + Server of llama3.1-8b on a datacenter system (SingleStream + Offline of the edge
    variant on an edge one), folder -> scenario of its logs, each run with the token-latency keys of its folder's
    scenario, equal-issue mode as mlperf.conf sets it, the ROUGE accuracy line and TEST06 (datacenter only)."""
    edge = benchmark.endswith("-edge")
    folders = folders or ({"SingleStream": "SingleStream", "Offline": "Offline"} if edge
                          else {"Offline": "Offline", "Server": "Server"})
    size = 5000 if edge else 13368
    changes = kwargs.pop("perf_by_folder", {})
    by_folder = {name: {**LLM_BY_FOLDER[name], **changes.get(name, {})} for name in folders}
    perf = {"effective_performance_sample_count": size, "effective_sample_concatenate_permutation": True,
            **kwargs.pop("perf", {})}
    kwargs.setdefault("accuracy_txt", rouge_line("39.5", "16.5", "24.9", "36.5", "3051000", 5000) if edge
                      else rouge_line())
    kwargs.setdefault("system_type", "edge" if edge else "datacenter")
    kwargs.setdefault("compliance_tests", () if edge else ("TEST06",))
    return _spec(benchmark=benchmark, perf=perf, perf_by_folder=by_folder, folders=folders,
                 accuracy={"effective_accuracy_sample_count": size, "qsl_reported_total_count": size}, **kwargs)


TREE_CASES: tuple[TreeCase, ...] = (
    # -- baselines ------------------------------------------------------------------------------------
    TreeCase("closed_edge_clean", _spec(), PASS, PASS),
    TreeCase("open_edge_clean", _spec(division="open"), PASS, PASS),
    # -- 1. benchmarks outside the system type's suite ------------------------------------------------
    # resnet is edge-only in v6.1. The old checker rejects it on a datacenter system in every division ("has an
    # invalid model"); main.py looks the suite up only in the closed division, where it crashes (no scenario list),
    # and accepts it in the open one: the toolkit takes the old checker's verdict and says main.py's.
    TreeCase("closed_resnet_on_datacenter", _spec(system_type="datacenter"), CRASH, FAIL, "main.py crashes on it"),
    TreeCase("open_resnet_on_datacenter", _spec(division="open", system_type="datacenter"), PASS, FAIL,
             "main.py accepts it in the open division"),
    TreeCase("closed_resnet_offline_server_on_datacenter",
             _spec(system_type="datacenter", folders={"Offline": "Offline", "Server": "Server"}), CRASH, FAIL,
             "submission_checker_old.py rejects it (\"has an invalid model resnet, system_type=datacenter\") and "
             "main.py crashes on it"),
    TreeCase("open_resnet_offline_server_on_datacenter",
             _spec(division="open", system_type="datacenter", folders={"Offline": "Offline", "Server": "Server"}),
             PASS, FAIL, "main.py accepts it in the open division"),
    TreeCase("closed_resnet_datacenter_edge_without_server", _spec(system_type="datacenter,edge"), FAIL, FAIL,
             "Server is required"),
    TreeCase("closed_resnet_datacenter_edge_with_server",
             _spec(system_type="datacenter,edge", folders={s: s for s in (*EDGE, "Server")}), PASS, PASS),
    # -- 2. missing scenarios and inference -----------------------------------------------------------
    TreeCase("closed_missing_multistream", _spec(folders={"SingleStream": "SingleStream", "Offline": "Offline"}),
             FAIL, FAIL, "MultiStream is required"),
    TreeCase("open_missing_multistream", _spec(division="open", folders={"SingleStream": "SingleStream",
                                                                         "Offline": "Offline"}), PASS, PASS),
    TreeCase("closed_multistream_inferred_from_singlestream",
             _spec(folders={"SingleStream": "SingleStream", "MultiStream": "SingleStream", "Offline": "Offline"}),
             PASS, PASS),
    TreeCase("closed_offline_inferred_from_multistream",
             _spec(folders={"SingleStream": "SingleStream", "MultiStream": "MultiStream", "Offline": "MultiStream"}),
             PASS, PASS),
    TreeCase("closed_singlestream_from_offline_logs",
             _spec(folders={"SingleStream": "Offline", "MultiStream": "MultiStream", "Offline": "Offline"}),
             FAIL, PASS, "effective_scenario is Offline but the folder is SingleStream"),
    TreeCase("closed_inferred_multistream_without_estimate",
             _spec(folders={"SingleStream": "SingleStream", "MultiStream": "SingleStream", "Offline": "Offline"},
                   perf_by_folder={"MultiStream": {"early_stopping_latency_ms": 0}}),
             FAIL, FAIL, "no MultiStream result can be inferred"),
    # -- 3. extra scenario folders --------------------------------------------------------------------
    TreeCase("closed_extra_server_on_edge", _spec(folders={s: s for s in (*EDGE, "Server")}), FAIL, FAIL,
             "neither required nor optional"),
    TreeCase("open_extra_server_on_edge", _spec(division="open", folders={s: s for s in (*EDGE, "Server")}),
             PASS, PASS),
    # -- 4. TEST01 Part III ---------------------------------------------------------------------------
    TreeCase("closed_part3_within_delta",
             _spec(test01_verify_accuracy=PART3_FAIL, test01_accuracy_files=_part3("76.50", "76.00")), PASS, PASS),
    TreeCase("closed_part3_over_delta",
             _spec(test01_verify_accuracy=PART3_FAIL, test01_accuracy_files=_part3("76.50", "74.00")), FAIL, FAIL,
             "Part III"),
    TreeCase("closed_part3_files_missing", _spec(test01_verify_accuracy=PART3_FAIL), FAIL, FAIL, "Part III"),
    TreeCase("closed_test01_pass_with_part3_files",
             _spec(test01_accuracy_files=_part3("76.50", "76.00")), PASS, FAIL, "must hold exactly"),
    # -- 6. accuracy coverage ---------------------------------------------------------------------------
    TreeCase("open_accuracy_on_part_of_the_data_set",
             _spec(division="open", accuracy={"effective_accuracy_sample_count": 500,
                                              "qsl_reported_total_count": 500}), FAIL, PASS, "not the whole data set"),
    TreeCase("closed_accuracy_on_part_of_the_data_set",
             _spec(accuracy={"effective_accuracy_sample_count": 500, "qsl_reported_total_count": 500}), FAIL, FAIL,
             "not the whole data set"),
    TreeCase("open_accuracy_without_a_readable_value",
             _spec(division="open", accuracy_txt=f"top1 76.5\n{HASH}\n"), PASS, FAIL, "matching the round's pattern"),
    TreeCase("closed_accuracy_below_target",
             _spec(accuracy_txt=f"accuracy=70.000%, good=35000, total=50000\n{HASH}\n"), FAIL, FAIL,
             "below the closed-division target"),
    TreeCase("open_accuracy_below_target",
             _spec(division="open", accuracy_txt=f"accuracy=70.000%, good=35000, total=50000\n{HASH}\n"), PASS, PASS),
    TreeCase("closed_missing_hash", _spec(accuracy_txt="accuracy=76.456%, good=38228, total=50000\n"), FAIL, FAIL,
             "hash=<sha256>"),
    TreeCase("open_missing_hash", _spec(division="open", accuracy_txt="accuracy=76.456%, good=38228, total=50000\n"),
             PASS, PASS),
    TreeCase("open_untruncated_accuracy_log", _spec(division="open", accuracy_json_bytes=12000), FAIL, PASS,
             "bytes allowed"),
    # -- 7. system_type spellings and enumerated fields -------------------------------------------------
    TreeCase("closed_system_type_capitalised", _spec(system_type="Edge"), CRASH, FAIL, "system_type"),
    TreeCase("open_system_type_capitalised", _spec(division="open", system_type="Edge"), FAIL, FAIL, "system_type"),
    TreeCase("closed_system_type_with_space", _spec(system_type="datacenter, edge"), CRASH, FAIL, "system_type"),
    TreeCase("closed_status_capitalised", _spec(system={"status": "Available"}), PASS, PASS),
    TreeCase("closed_status_unknown", _spec(system={"status": "research"}), FAIL, FAIL, "status"),
    TreeCase("closed_division_capitalised", _spec(system={"division": "Closed"}), PASS, FAIL, "field division"),
    # -- 8. falsy values --------------------------------------------------------------------------------
    TreeCase("closed_accelerators_number_zero", _spec(system={"accelerators_per_node": 0}), FAIL, FAIL,
             "accelerators_per_node"),
    TreeCase("closed_accelerators_not_a_number", _spec(system={"accelerators_per_node": "N/A"}), CRASH, PASS,
             "not a whole number"),
    TreeCase("closed_cooling_empty", _spec(system={"cooling": ""}), FAIL, FAIL, "cooling"),
    TreeCase("closed_is_network_false_string", _spec(system={"is_network": "false"}), FAIL, PASS, "is_network"),
    TreeCase("closed_retraining_false", _spec(measurements={"retraining": False}), FAIL, FAIL, "retraining"),
    # -- 9. yolo-style and Server bounds: resnet Server bound -------------------------------------------
    TreeCase("closed_server_bound_exceeded",
             _spec(system_type="datacenter,edge", folders={s: s for s in (*EDGE, "Server")},
                   perf_by_folder={"Server": {"effective_target_latency_ns": 20000000}}), FAIL, FAIL,
             "effective_target_latency_ns"),
    TreeCase("closed_offline_samples_per_query_low", _spec(perf_by_folder={"Offline": {"effective_samples_per_query":
                                                                                       1000}}), FAIL, FAIL,
             "effective_samples_per_query"),
    TreeCase("open_offline_samples_per_query_low",
             _spec(division="open", perf_by_folder={"Offline": {"effective_samples_per_query": 1000}}), PASS, FAIL,
             "effective_samples_per_query"),
    TreeCase("closed_yolo_clean", _model("yolo-99", 64, 1525, f"mAP=53.2\n{HASH}\n", EDGE), PASS, CRASH,
             toolkit_pass=True, warns="old checker (submission_checker_old.py) has no yolo"),
    TreeCase("closed_yolo_total_line", _model("yolo-99", 64, 1525, f"'Total': 53.2\n{HASH}\n", EDGE), PASS, CRASH,
             toolkit_pass=True, warns="old checker (submission_checker_old.py) has no yolo"),
    TreeCase("closed_yolo_offline_samples_per_query_low",
             _model("yolo-99", 64, 1525, f"mAP=53.2\n{HASH}\n", EDGE,
                    perf_by_folder={"Offline": {"effective_samples_per_query": 1000}}), FAIL, CRASH,
             "effective_samples_per_query"),
    TreeCase("closed_3d_unet_dice_spacing",
             _model("3d-unet-99", 43, 43, f"Accuracy:  mean  =  0.86300, kidney = 0.9, tumor = 0.8\n{HASH}\n",
                    ("SingleStream", "Offline"), perf={"effective_sample_concatenate_permutation": True}),
             PASS, PASS),
    TreeCase("closed_3d_unet_without_equal_issue",
             _model("3d-unet-99", 43, 43, f"Accuracy: mean = 0.86300\n{HASH}\n", ("SingleStream", "Offline")),
             PASS, FAIL, "sample_concatenate_permutation"),
    # -- 12. what the official tools accept -------------------------------------------------------------
    TreeCase("closed_optional_fields_empty", _spec(system={"hw_notes": "", "system_type_detail": ""}), PASS, PASS),
    # -- smaller: first occurrence of a key, LoadGen validity and errors, layout ------------------------------
    TreeCase("closed_duplicate_key_first_wins", _spec(perf_duplicates={"effective_min_duration_ms": 1000}), FAIL, FAIL,
             "effective_min_duration_ms is 1000"),
    TreeCase("closed_invalid_run", _spec(perf={"result_validity": "INVALID", "result_perf_constraints_met": False}),
             PASS, FAIL, "result_validity is INVALID"),
    TreeCase("closed_early_stopping_not_met", _spec(perf={"early_stopping_met": False}), FAIL, PASS,
             "early_stopping_met"),
    TreeCase("closed_loadgen_error", _spec(perf_errors={"error_invalid_config": "Multiple conf files are used"}),
             PASS, FAIL, "LoadGen logged"),
    TreeCase("closed_short_run", _spec(perf={"effective_min_duration_ms": 10000}), FAIL, FAIL, "short run"),
    TreeCase("closed_extra_file_in_run_folder",
             _spec(extra_files={f"{R}/Offline/performance/run_1/notes.txt": "x\n"}), PASS, FAIL, "notes.txt"),
    TreeCase("closed_empty_folder", _spec(edit=_mkdir(f"closed/{ORG}/documentation/empty")), PASS, FAIL, "empty"),
    TreeCase("closed_hidden_file", _spec(extra_files={f"closed/{ORG}/src/.gitkeep": ""}), PASS, FAIL, "hidden"),
    TreeCase("closed_file_in_root", _spec(extra_files={"notes.txt": "x\n"}), PASS, CRASH, "beside the division"),
    TreeCase("closed_code_instead_of_src",
             _spec(edit=lambda root: (root / "closed" / ORG / "src").rename(root / "closed" / ORG / "code")),
             FAIL, FAIL, "src/"),
    TreeCase("closed_lowercase_scenario_folders",
             _spec(folders={"singlestream": "SingleStream", "multistream": "MultiStream", "offline": "Offline"}),
             PASS, PASS),
    TreeCase("closed_missing_test04", _spec(edit=_remove(f"{R}/*/TEST04")), FAIL, FAIL, "TEST04/ is missing"),
    TreeCase("closed_test04_failed",
             _spec(verify_performance="Verifying performance.\nreference score = 100\ntest score = 130\n"
                                      "TEST FAIL: Test score invalid\n"), FAIL, FAIL, "no TEST PASS line"),
    # -- LLMs: llama3.1-8b (datacenter) and llama3.1-8b-edge ----------------------------------------------
    TreeCase("closed_llama_offline_server_clean", _llm(), PASS, PASS),
    TreeCase("closed_llama_offline_interactive_clean", _llm(folders={"Offline": "Offline", "Interactive": "Server"}),
             PASS, PASS),
    TreeCase("closed_llama_all_three_on_datacenter_edge",
             _llm(folders={"Offline": "Offline", "Server": "Server", "Interactive": "Server"},
                  system_type="datacenter,edge"), PASS, PASS),
    TreeCase("closed_llama_offline_only", _llm(folders={"Offline": "Offline"}), FAIL, FAIL, "needs one of"),
    TreeCase("open_llama_offline_only", _llm(division="open", folders={"Offline": "Offline"}), PASS, PASS),
    TreeCase("closed_llama_missing_offline", _llm(folders={"Server": "Server"}), FAIL, FAIL, "Offline is required"),
    # main.py holds an Interactive folder to Server's bounds (its logs say Server), the old checker to Interactive's.
    TreeCase("closed_llama_interactive_ttft_over_its_bound",
             _llm(folders={"Offline": "Offline", "Interactive": "Server"},
                  perf_by_folder={"Interactive": {"result_first_token_99.00_percentile_latency_ns": 600000000}}),
             PASS, FAIL, "not below the Interactive bound"),
    TreeCase("closed_llama_server_tpot_over", _llm(perf_by_folder={"Server": {
        "result_time_per_output_token_99.00_percentile_ns": 120000000}}), FAIL, FAIL, "time per output token"),
    # LoadGen fails a run whose p99 is over the bound; the checkers want it strictly below.
    TreeCase("closed_llama_server_ttft_at_the_bound", _llm(perf_by_folder={"Server": {
        "result_first_token_99.00_percentile_latency_ns": 2000000000}}), FAIL, FAIL, "not below the Server bound"),
    TreeCase("closed_llama_server_without_ttft", _llm(perf_by_folder={"Server": {
        "result_first_token_99.00_percentile_latency_ns": ABSENT}}), FAIL, FAIL, "no 99th percentile"),
    TreeCase("closed_llama_without_token_latencies", _llm(perf_by_folder={"Offline": {
        "requested_use_token_latencies": ABSENT}}), FAIL, FAIL, "requested_use_token_latencies"),
    # main.py reads tokens/s (RESULT_FIELD_BENCHMARK_OVERWRITE v6.1); the old checker's table stops at v5.1 and reads
    # samples/s for an LLM too.
    TreeCase("closed_llama_offline_without_tokens_per_second", _llm(perf_by_folder={"Offline": {
        "result_tokens_per_second": ABSENT}}), FAIL, PASS, "result_tokens_per_second"),
    TreeCase("closed_llama_without_equal_issue", _llm(perf={"effective_sample_concatenate_permutation": False}),
             PASS, FAIL, "sample_concatenate_permutation"),
    TreeCase("closed_llama_interactive_from_offline_logs",
             _llm(folders={"Offline": "Offline", "Interactive": "Offline"}), FAIL, FAIL, "effective_scenario"),
    TreeCase("closed_llama_rouge2_below_target", _llm(accuracy_txt=rouge_line(rouge2="15.5")), FAIL, FAIL,
             "ROUGE2 15.5 is below"),
    TreeCase("closed_llama_gen_len_over_upper_limit", _llm(accuracy_txt=rouge_line(gen_len="9000000")), FAIL, FAIL,
             "above the upper limit"),
    TreeCase("closed_llama_gen_len_below_target", _llm(accuracy_txt=rouge_line(gen_len="7000000")), FAIL, FAIL,
             "GEN_LEN 7000000 is below"),
    TreeCase("closed_llama_gen_len_missing",
             _llm(accuracy_txt=rouge_line().replace("'gen_len': 8167000, ", "")), FAIL, FAIL, "no GEN_LEN value"),
    TreeCase("open_llama_rouge_below_target", _llm(division="open", accuracy_txt=rouge_line(rouge1="30.0")),
             PASS, PASS),
    TreeCase("closed_llama_test06_missing", _llm(compliance_tests=()), FAIL, FAIL, "TEST06/ is missing"),
    TreeCase("closed_llama_test06_eos_failed",
             _llm(test06_verify_accuracy=TEST06_PASS.replace("EOS check pass: True", "EOS check pass: False")
                  .replace("complete", "failed")), FAIL, FAIL, "EOS check pass"),
    TreeCase("closed_llama_test06_length_failed",
             _llm(test06_verify_accuracy=TEST06_PASS.replace("Sample length check pass: True",
                                                             "Sample length check pass: False")),
             FAIL, FAIL, "Sample length check pass"),
    TreeCase("closed_llama_edge_clean", _llm("llama3.1-8b-edge"), PASS, PASS),
    TreeCase("closed_llama_edge_with_failed_test06",
             _llm("llama3.1-8b-edge", compliance_tests=("TEST06",),
                  test06_verify_accuracy=TEST06_PASS.replace("EOS check pass: True", "EOS check pass: False")),
             PASS, PASS, warns="do not ask TEST06"),
    TreeCase("closed_llama_edge_on_datacenter", _llm("llama3.1-8b-edge", system_type="datacenter"), CRASH, FAIL,
             "not in the v6.1 datacenter"),
    TreeCase("closed_llama_edge_missing_singlestream", _llm("llama3.1-8b-edge", folders={"Offline": "Offline"}),
             FAIL, FAIL, "SingleStream is required"),
)


# -- compliance log pairs -------------------------------------------------------------------------------
@dataclass(frozen=True)
class PerformancePair:
    name: str
    test: str                      # TEST01 or TEST04
    reference: dict[str, Any]      # detail values of the submission run
    compliance: dict[str, Any]     # detail values of the compliance run
    official: str                  # pass or fail: the script's verdict


def _ss(latency: int, **more: Any) -> dict[str, Any]:
    return perf_values("SingleStream", early_stopping_latency_ss=latency, **more)


def _ms(latency: int, **more: Any) -> dict[str, Any]:
    return perf_values("MultiStream", early_stopping_latency_ms=latency, **more)


def _off(rate: float, **more: Any) -> dict[str, Any]:
    return perf_values("Offline", result_samples_per_second=rate, **more)


def _srv(rate: float, **more: Any) -> dict[str, Any]:
    return perf_values("Server", result_completed_samples_per_sec=rate, **more)


PERFORMANCE_PAIRS: tuple[PerformancePair, ...] = (
    # TEST01: raw figures, two-sided, 10 % (20 % at or below 0.2 ms SS / 1.6 ms MS).
    PerformancePair("t01_offline_5pct_slower", "TEST01", _off(1000.0), _off(950.0), PASS),
    PerformancePair("t01_offline_11pct_faster", "TEST01", _off(1000.0), _off(1110.0), FAIL),
    PerformancePair("t01_singlestream_10_5pct_slower", "TEST01", _ss(8_000_000), _ss(8_840_000), FAIL),
    PerformancePair("t01_singlestream_9pct_faster", "TEST01", _ss(8_000_000), _ss(7_280_000), PASS),
    PerformancePair("t01_singlestream_fast_19pct", "TEST01", _ss(150_000), _ss(178_000), PASS),
    PerformancePair("t01_multistream_fast_25pct", "TEST01", _ms(1_500_000), _ms(1_875_000), FAIL),
    PerformancePair("t01_server_same_rate", "TEST01", _srv(99.5), _srv(98.0), PASS),
    PerformancePair("t01_server_other_bound", "TEST01", _srv(99.5),
                    _srv(98.0, effective_target_latency_ns=10_000_000), FAIL),
    PerformancePair("t01_invalid_compliance", "TEST01", _off(1000.0), _off(1000.0, result_validity="INVALID"), FAIL),
    PerformancePair("t01_scenarios_differ", "TEST01", _off(1000.0), _ss(8_000_000), FAIL),
    # TEST04: rates from the summary, one-sided strict `test < ref * (1 + t)`, 10 % Offline/Server, 20 % SS/MS.
    PerformancePair("t04_offline_9pct_faster", "TEST04", _off(1000.0), _off(1090.0), PASS),
    PerformancePair("t04_offline_10pct_faster", "TEST04", _off(1000.0), _off(1100.0), FAIL),
    PerformancePair("t04_offline_much_slower", "TEST04", _off(1000.0), _off(500.0), PASS),
    PerformancePair("t04_singlestream_15pct_faster", "TEST04", _ss(8_000_000), _ss(6_956_522), PASS),
    PerformancePair("t04_singlestream_25pct_faster", "TEST04", _ss(8_000_000), _ss(6_400_000), FAIL),
    PerformancePair("t04_multistream_18pct_faster", "TEST04", _ms(60_000_000), _ms(50_847_458), PASS),
    PerformancePair("t04_server_12pct_faster", "TEST04", _srv(100.0), _srv(112.0), FAIL),
    PerformancePair("t04_invalid_reference", "TEST04", _off(1000.0, result_validity="INVALID"), _off(1000.0), FAIL),
)


@dataclass(frozen=True)
class AccuracyPair:
    name: str
    reference: tuple[tuple[int, int], ...]     # (qsl_idx, int32 response) of the accuracy run
    compliance: tuple[tuple[int, int], ...]    # of the compliance run
    official: str


ACCURACY_PAIRS: tuple[AccuracyPair, ...] = (
    AccuracyPair("identical", ((0, 5), (1, 7), (2, 9)), ((2, 9), (0, 5)), PASS),
    AccuracyPair("one_differs", ((0, 5), (1, 7), (2, 9)), ((2, 9), (1, 8)), FAIL),
    AccuracyPair("missing_qsl_idx_counted_not_failed", ((0, 5), (1, 7)), ((0, 5), (3, 1)), PASS),
    AccuracyPair("nothing_matches", ((0, 5),), ((3, 1),), FAIL),
    AccuracyPair("empty_compliance_log", ((0, 5),), (), FAIL),
    AccuracyPair("repeated_compliance_entry_compared_with_itself", ((0, 5),), ((0, 5), (0, 6)), FAIL),
)


def accuracy_log(pairs: tuple[tuple[int, int], ...]) -> list[dict[str, Any]]:
    return [{"seq_id": seq, "qsl_idx": index, "data": int(value).to_bytes(4, "little", signed=True).hex().upper()}
            for seq, (index, value) in enumerate(pairs)]


# -- TEST06 accuracy logs -------------------------------------------------------------------------------
@dataclass(frozen=True)
class SampledCase:
    """A TEST06 compliance run's sampled responses and the verify_accuracy.txt compliance/TEST06/run_verification.py
    writes for them with its default EOS id 2 (`-s <scenario>`, no `-e`), recorded by running it."""

    name: str
    scenario: str
    # qsl_idx, tokens, first token, count
    entries: tuple[tuple[int, tuple[int, ...], tuple[int, ...] | None, int | None], ...]
    first_token: str                # the three lines' values: True, False or Skipped
    eos: str
    length: str
    # With `-e 2` on its command line the script compares tokens with the string "2": never equal, EOS always passes.
    eos_with_cli_id: str = "True"

    @property
    def official_text(self) -> str:
        ok = self.first_token != "False" and self.eos == "True" and self.length == "True"
        return (f"First token check pass: {self.first_token}\nEOS check pass: {self.eos}\n"
                f"Sample length check pass: {self.length}\nTEST06 verification {'complete' if ok else 'failed'}\n")


TEST06_EOS = 2
TEST06_CASES: tuple[SampledCase, ...] = (
    SampledCase("server_pass", "Server", ((3, (5, 6, 2), (5,), None), (9, (7, 8), (7,), None)), "True", "True", "True"),
    SampledCase("server_two_trailing_eos", "Server", ((3, (5, 6, 2, 2), (5,), None),), "True", "False", "True"),
    SampledCase("server_count_mismatch", "Server", ((3, (5, 6, 2), (5,), 4),), "True", "True", "False"),
    SampledCase("server_first_token_mismatch", "Server", ((3, (5, 6, 2), (6,), None),), "False", "True", "True"),
    SampledCase("offline_first_token_not_logged", "Offline", ((3, (5, 6, 2), None, None), (4, (8, 2), None, None)),
               "Skipped", "True", "True"),
    SampledCase("interactive_without_token_data", "Interactive", ((3, (5, 6, 2), None, None),), "False", "True",
               "True"),
    # The script never looks at the first token: an output of two EOS passes.
    SampledCase("two_eos_only", "Server", ((3, (2, 2), (2,), None),), "True", "True", "True"),
    SampledCase("eos_inside", "Server", ((3, (5, 2, 7, 2), (5,), None),), "True", "True", "True"),
    SampledCase("empty_output", "Server", ((3, (), (), None),), "True", "True", "True"),
    SampledCase("offline_three_trailing_eos", "Offline", ((3, (5, 2, 2, 2), None, None),), "Skipped", "False",
               "True"),
)


def sampled_log(case: SampledCase) -> list[dict[str, Any]]:
    """The case's accuracy-log entries, as LoadGen logs an LLM run's (seq_id, qsl_idx, data, token_data,
    token_count; no token_data in Offline), int32 tokens."""
    from tests.synthetic_logs import token_entry

    return [token_entry(seq, index, list(tokens), None if first is None else list(first), count)
            for seq, (index, tokens, first, count) in enumerate(case.entries)]
