"""wan-2.2-t2v-a14b on the MLCommons endpoints client (code/wan/endpoints.py): the YAML as the reference examples
write it (videogen, the prompts as a JSONL, the VBench accuracy block with its scorer pointed at the toolkit's
VBench), one test through the harness with a recording videogen client (the real one is not on PyPI), the audit
videos written from the videos the client scored, staged into accuracy/videos/ and read by the toolkit's checks; a
client whose VBench cannot run, and a missing video, stage nothing. With MLCOMMONS_ENDPOINTS_DIR and .venv-endpoints,
the real client checks the YAML."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from code.common.constants import Scenario, TestMode
from code.common.endpoints_client.run import CLIENT_YAML
from code.common.errors import UserError
from code.common.harness.plugins.endpoints import EndpointsHarness
from code.common.paths import Paths
from code.common.records.metadata import COMPLETED
from code.common.records.record import ConfigRecord, RunRecord, SystemRecord
from code.common.rules import get_round
from code.common.fileio import sha256_file
from code.common.submission.endpoints_tree import audit_files, stage_endpoints_scenario
from code.wan import datasets
from code.wan import reference as ref
from code.wan.benchmark import BENCHMARK
from code.wan.endpoints import PROMPTS_JSONL, staged_name
from tests.test_endpoints_run import fake_client

V6_1 = get_round("v6.1")
AUDITS = audit_files(V6_1.benchmark(ref.NAME).checked_compliance_tests)   # the client's TEST04 verdict
MP4 = b"\x00\x00\x00\x18ftypmp42" + bytes(16)
REQUEST = {"negative_prompt": ref.NEGATIVE_PROMPT, "size": "64x64", "seconds": 0.5, "fps": 16,
           "num_inference_steps": 20, "guidance_scale": 4.0, "guidance_scale_2": 3.0, "seed": 42, "num_frames": 9,
           "boundary_ratio": 0.875, "output_format": "mp4", "response_format": "video_bytes"}

# What the real client does with a videogen YAML, in short: the validate-yaml check; the performance phase (the
# JSONL's rows, n_samples_to_issue of them); for --accuracy-only the videos of the accuracy block staged as its
# VBenchScorer stages them (<report>/vbench_videos/<prompt>-0.mp4), then the scorer's call of its runner through the
# block's uv_executable, exactly as VBenchScorer makes it; the score the mean of the six dimensions.
VIDEOGEN_CLIENT = """\
import json, os, subprocess, sys
from pathlib import Path
import yaml
argv = sys.argv[1:]
config = Path(argv[argv.index("--config") + 1])
document = yaml.safe_load(config.read_text())
with open(os.environ["CALLS"], "a") as calls:
    calls.write(json.dumps({"argv": argv, "document": document}) + "\\n")
if argv[0] == "validate-yaml":
    sys.exit(0)
report = Path(document["report_dir"])
(report / "performance").mkdir(parents=True, exist_ok=True)
(report / "accuracy").mkdir(parents=True, exist_ok=True)
(report / "config.yaml").write_text(config.read_text())
perf = next(b for b in document["datasets"] if b["type"] == "performance")
rows = [json.loads(line) for line in Path(perf["path"]).read_text().splitlines()]
issued = document["settings"]["runtime"].get("n_samples_to_issue") or len(rows)
(report / "performance" / "result_summary.json").write_text(json.dumps(
    {"n_samples_issued": issued, "n_samples_completed": issued, "n_samples_failed": 0, "state": "complete",
     "complete": True, "qps": 0.5, "duration_ns": 2000000000 * issued,
     "latency": {"percentiles": {"90.0": 2.0e9}, "early_stopping_percentiles": {"90.0": None}}}))
scores = []
if "--accuracy-only" in argv:
    block = next(b for b in document["datasets"] if b["type"] == "accuracy")
    staged = report / "vbench_videos"
    staged.mkdir(exist_ok=True)
    skip = os.environ.get("SKIP_PROMPT")
    for row in rows[:block["samples"]]:
        if row["prompt"] != skip:
            (staged / (row["prompt"].replace("/", "_")[:200] + "-0.mp4")).write_bytes(VIDEO)
    if os.environ.get("SCORE"):
        score = float(os.environ["SCORE"])
    else:
        extras = block["accuracy_config"]["extras"]
        project = extras["vbench_project_path"]
        out = report / "vbench_results"
        done = subprocess.run([extras["uv_executable"], "run", "--project", project, "python",
                               project + "/vbench_runner.py", "--videos-dir", str(staged), "--out-dir", str(out),
                               "--name", "vbench_" + block["name"], "--dims", "subject_consistency,"
                               "background_consistency,motion_smoothness,dynamic_degree,appearance_style,scene"],
                              capture_output=True, text=True)
        if done.returncode != 0:
            print(f"RuntimeError: VBench subprocess exited with code {done.returncode}; Last 50 lines:")
            print(done.stdout + done.stderr)
            sys.exit(1)
        score = 0.0
    scores = [{"dataset_name": block["name"], "dataset_type": "accuracy", "score": score,
               "total_samples": block["samples"]}]
(report / "accuracy" / "accuracy_results.json").write_text(json.dumps({"accuracy_scores": scores}))
audit = document.get("audit")
if audit is not None:    # its output-caching audit after the performance phase; a failed one exits 1 (CLIError)
    (report / "audit").mkdir(exist_ok=True)
    passed = not os.environ.get("AUDIT_FAIL")
    (report / "audit" / "audit_output_caching_test.json").write_text(json.dumps(
        {"test": audit["test"], "passed": passed, "reference_qps": 0.5, "audit_qps": 0.5 if passed else 0.9,
         **({} if passed else {"reason": "audit_qps 0.9 >= reference_qps 0.5 * 1.1"})}))
    if not passed:
        print("Compliance audit output_caching_test FAILED")
        sys.exit(1)
""".replace("VIDEO", repr(MP4))


@pytest.fixture
def prompt_paths(tmp_path) -> Paths:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    if not datasets.official_file(paths, ref.PROMPTS_FILE).is_file():
        pytest.skip(f"the reference's prompts are not beside the repository "
                    f"({datasets.official_file(paths, ref.PROMPTS_FILE)})")
    datasets.download_data(datasets.DATASET, paths, lambda line: None)
    return paths


class Wan(type(BENCHMARK)):
    """The benchmark with the substitute's request fields, without its model files."""

    def serving_request(self, model, paths):
        return dict(REQUEST)


def render(paths: Paths, run_dir: Path, scenario: str, accuracy: bool, test_run: bool, count: int) -> dict:
    from code.common.endpoints_client.config_yaml import as_mapping
    from code.common.endpoints_client.run import client_test

    workload = Wan().endpoints_workload("wan-2.2-substitute", accuracy, {"total_sample_count": count}, paths,
                                        run_dir, test_run, scenario=scenario)
    test = client_test("t", f"wan-2.2-t2v-a14b-{scenario}", "wan-2.2-substitute", workload, V6_1, accuracy,
                       test_run)
    return as_mapping(test.config)


def test_the_yaml_is_the_reference_examples_videogen_yaml(prompt_paths, tmp_path):
    offline = render(prompt_paths, tmp_path / "o", "Offline", False, False, 248)
    assert offline["type"] == "offline" and offline["endpoint_config"]["api_type"] == "videogen"
    assert offline["model_params"] == {"name": "wan-2.2-substitute", "max_new_tokens": 1, "streaming": "off"}
    assert offline["settings"]["load_pattern"] == {"type": "max_throughput"}
    assert offline["settings"]["runtime"]["n_samples_to_issue"] == 248
    assert offline["settings"]["runtime"]["dataloader_random_seed"] == V6_1.seeds.sample_index_rng_seed
    assert offline["settings"]["runtime"]["min_duration_ms"] == V6_1.min_duration_ms
    (block,) = offline["datasets"]
    assert block == {"name": "wan22_perf", "path": str(tmp_path / "o" / PROMPTS_JSONL), "type": "performance",
                     "samples": 248}
    rows = [json.loads(line) for line in (tmp_path / "o" / PROMPTS_JSONL).read_text().splitlines()]
    assert len(rows) == 248 and rows[0]["prompt"] == datasets.prompt_set(datasets.DATASET, prompt_paths).prompts[0]
    # The toolkit's videogen payload, its videos written by the server where the client reads them.
    assert rows[0] == {"prompt": rows[0]["prompt"], **REQUEST, "response_format": "video_path"}

    single = render(prompt_paths, tmp_path / "s", "SingleStream", False, True, 4)
    assert single["type"] == "online"
    assert single["settings"]["load_pattern"] == {"type": "concurrency", "target_concurrency": 1}
    assert single["settings"]["runtime"]["n_samples_to_issue"] == 2 and single["settings"]["runtime"][
        "min_duration_ms"] == 0
    # The reference's audit blocks (the submission YAMLs) after the data sets; one video a phase for a test run.
    assert list(offline)[list(offline).index("datasets") + 1] == "audit"
    assert offline["audit"] == {"test": "output_caching_test", "samples": 144, "audit_samples": 144,
                                "sample_index": 3, "threshold": 0.10}
    assert single["audit"] == {"test": "output_caching_test", "samples": 4, "audit_samples": 4, "sample_index": 3,
                               "threshold": 0.20}
    with pytest.raises(UserError, match=r"repeats prompt 3 and this run has 3 prompt\(s\); run it with "
                                        r"--total_sample_count=4") as error:
        render(prompt_paths, tmp_path / "few", "Offline", False, True, 3)
    assert error.value.exit_code == 2

    accuracy = render(prompt_paths, tmp_path / "a", "Offline", True, True, 4)
    perf, vbench = accuracy["datasets"]
    assert perf["type"] == "performance" and "n_samples_to_issue" not in accuracy["settings"]["runtime"]
    assert "audit" not in accuracy    # the audit runs with the performance test only
    extras = vbench["accuracy_config"].pop("extras")
    assert vbench == {"name": "wan22_vbench", "path": str(tmp_path / "a" / PROMPTS_JSONL), "type": "accuracy",
                      "samples": 4, "accuracy_config": {"eval_method": "vbench", "ground_truth": "prompt",
                                                        "num_repeats": 1}}
    project = Path(extras["vbench_project_path"])
    assert (project / "vbench_runner.py").is_file() and os.access(extras["uv_executable"], os.X_OK)


def a_spec(mode: TestMode, scenario: str, count: int) -> SimpleNamespace:
    return SimpleNamespace(label=f"wan-2.2-t2v-a14b {scenario} {mode.value}", benchmark="wan-2.2-t2v-a14b",
                           scenario=scenario, scenario_enum=Scenario(scenario), model="wan-2.2-substitute",
                           mode_enum=mode, fields={"total_sample_count": count}, test_run=count < 248,
                           rules_version="v6.1", harness_options={"endpoints": ["http://127.0.0.1:9"]})


class WithClient:
    """The test's paths with the recording client's environment."""

    def __init__(self, paths: Paths, venv: Path) -> None:
        self.paths, self.endpoints_venv = paths, venv

    def __getattr__(self, name: str):
        return getattr(self.paths, name)


def run_test(tmp_path: Path, paths: Paths, mode: TestMode, count: int, folder: str, scenario: str = "Offline",
             **env) -> tuple[dict, Path]:
    client = fake_client(tmp_path / folder)
    script = Path(client.venv) / "bin" / "inference-endpoint"
    script.write_text(f"#!{sys.executable}\n{VIDEOGEN_CLIENT}")
    (Path(client.venv) / "endpoints-client.json").write_text(json.dumps(client.as_dict()))
    paths = WithClient(paths, Path(client.venv))
    run_dir = tmp_path / folder / "run"
    old = dict(os.environ)
    os.environ.update({"CALLS": str(tmp_path / folder / "calls.jsonl"), **env})
    try:
        return EndpointsHarness().run_own_test(a_spec(mode, scenario, count), Wan(), paths, run_dir), run_dir
    finally:
        os.environ.clear()
        os.environ.update(old)


def record(run_dir: Path, mode: TestMode, outcome: dict) -> RunRecord:
    return RunRecord(status=COMPLETED, benchmark="wan-2.2-t2v-a14b", model="wan-2.2-substitute",
                     dataset="vbench_prompts", division="open", scenario=Scenario.Offline, test_mode=mode,
                     system=SystemRecord(id="x"), log_dir=str(run_dir), test_run=False,
                     config=ConfigRecord(workload_setting="endpoints_k_99_MaxP", fields={}, sources={}), **outcome)


def test_a_client_run_stages_with_its_audit_videos_and_the_checks_read_them(prompt_paths, tmp_path):
    from code.common.submission.checker_rules import ScenarioContext
    from code.common.submission.endpoints_checks import check_endpoints_scenario

    performance, perf_dir = run_test(tmp_path, prompt_paths, TestMode.PerformanceOnly, 248, "perf")
    assert performance["result_validity"] == "VALID" and performance["metric"].value == 0.5
    accuracy, acc_dir = run_test(tmp_path, prompt_paths, TestMode.AccuracyOnly, 248, "acc", SCORE="0.71")
    assert accuracy["valid"] and accuracy["accuracy"].metrics == {"score": 0.71}
    prompts = datasets.prompt_set(datasets.DATASET, prompt_paths).prompts
    assert sorted(p.name for p in (acc_dir / "videos").iterdir()) == sorted(
        [f"{i}.mp4" for i in ref.AUDIT_IDS] + ["captions.txt"])
    assert (acc_dir / "videos" / "130.mp4").read_bytes() == MP4
    assert f"130: {prompts[130]}\n" in (acc_dir / "videos" / "captions.txt").read_text()

    measured = tmp_path / "measured"
    measured.mkdir()
    (measured / "measurements.json").write_text("{}")
    (measured / "README.md").write_text("# wan\n")
    lines: list[str] = []
    dest = stage_endpoints_scenario(tmp_path / "tree", "x wan Offline", record(perf_dir, TestMode.PerformanceOnly,
                                                                               performance),
                                    record(acc_dir, TestMode.AccuracyOnly, accuracy), measured, lines.append,
                                    dict(V6_1.benchmark(ref.NAME).accuracy_artefacts), AUDITS)
    assert "with its videos/" in lines[-1] and "and its audit audit_output_caching_test.json" in lines[-1]
    assert json.loads((dest / "audit" / "audit_output_caching_test.json").read_text())["passed"] is True
    assert (dest / "accuracy" / "videos" / "238.mp4").read_bytes() == MP4
    assert yaml.safe_load((dest / "config.yaml").read_text())["endpoint_config"]["api_type"] == "videogen"

    reports: list[tuple] = []
    ctx = ScenarioContext(lambda *a: reports.append(a), V6_1, "closed", dest, Scenario.Offline, ref.NAME,
                          V6_1.benchmark(ref.NAME), None, True)
    check_endpoints_scenario(ctx)
    assert reports == []
    # main.py's compliance_endpoints_check asks the client's own TEST04 audit of a wan endpoints tree.
    verdict = (dest / "audit" / "audit_output_caching_test.json").read_text()
    (dest / "audit" / "audit_output_caching_test.json").unlink()
    check_endpoints_scenario(ctx)
    assert [(r[0], r[1].name) for r in reports] == [("error", "audit_output_caching_test.json")]
    assert "after the performance phase of a performance test on the endpoints harness" in reports[0][2]
    assert reports[0][2].endswith(f'--benchmarks={ref.NAME} --scenarios=Offline --harness_type=endpoints '
                                  f'--test_mode=PerformanceOnly" then make stage_results.')
    (dest / "audit" / "audit_output_caching_test.json").write_text(verdict)
    reports.clear()
    (dest / "accuracy" / "videos" / "238.mp4").unlink()
    check_endpoints_scenario(ctx)
    assert [r[0] for r in reports] == ["error"] and "lacks 238" in reports[0][2]


def test_a_single_stream_run_reports_its_latency_in_seconds_as_the_checker_does(prompt_paths, tmp_path):
    outcome, run_dir = run_test(tmp_path, prompt_paths, TestMode.PerformanceOnly, 4, "ss", "SingleStream")
    assert (outcome["metric"].value, outcome["metric"].unit) == (2.0, "s")
    document = yaml.safe_load((run_dir / CLIENT_YAML).read_text())
    assert document["settings"]["load_pattern"] == {"type": "concurrency", "target_concurrency": 1}


def test_a_missing_video_or_a_client_whose_vbench_cannot_run_stages_nothing(prompt_paths, tmp_path, monkeypatch,
                                                                          capsys):
    prompts = datasets.prompt_set(datasets.DATASET, prompt_paths).prompts
    with pytest.raises(UserError, match=r"has no video of prompt 59 .*is missing"):
        run_test(tmp_path, prompt_paths, TestMode.AccuracyOnly, 248, "gap", SCORE="0.71", SKIP_PROMPT=prompts[59])
    monkeypatch.delenv("VBENCH_CACHE_DIR", raising=False)
    with pytest.raises(UserError, match=r"exited with status 1; nothing is staged") as error:
        run_test(tmp_path, prompt_paths, TestMode.AccuracyOnly, 4, "novbench")
    # The client's scorer ran the toolkit's runner, which said why there is no score.
    log = (tmp_path / "novbench" / "run" / "client.log").read_text()
    assert "No VBench score of" in log and "VBENCH_CACHE_DIR names no folder" in log
    assert "note: VBench cannot run here (VBENCH_CACHE_DIR names no folder" in capsys.readouterr().out
    assert not (tmp_path / "novbench" / "run" / "videos").exists()
    assert error.value.exit_code == 1


def test_a_staged_run_without_its_videos_stages_nothing(prompt_paths, tmp_path):
    accuracy, acc_dir = run_test(tmp_path, prompt_paths, TestMode.AccuracyOnly, 248, "acc", SCORE="0.71")
    performance, perf_dir = run_test(tmp_path, prompt_paths, TestMode.PerformanceOnly, 248, "perf")
    (acc_dir / "videos" / "12.mp4").unlink()
    measured = tmp_path / "measured"
    measured.mkdir()
    (measured / "measurements.json").write_text("{}")
    (measured / "README.md").write_text("# wan\n")
    with pytest.raises(UserError, match=r"videos lacks 12 .*is not staged") as error:
        stage_endpoints_scenario(tmp_path / "tree", "x", record(perf_dir, TestMode.PerformanceOnly, performance),
                                 record(acc_dir, TestMode.AccuracyOnly, accuracy), measured, print,
                                 dict(V6_1.benchmark(ref.NAME).accuracy_artefacts))
    assert error.value.exit_code == 1 and not (tmp_path / "tree").exists()


def test_a_missing_or_failed_audit_stages_nothing(prompt_paths, tmp_path):
    with pytest.raises(UserError, match=r"exited with status 1; nothing is staged") as error:
        run_test(tmp_path, prompt_paths, TestMode.PerformanceOnly, 4, "failed", AUDIT_FAIL="1")
    assert error.value.exit_code == 1
    assert "Compliance audit output_caching_test FAILED" in (tmp_path / "failed" / "run" / "client.log").read_text()

    performance, perf_dir = run_test(tmp_path, prompt_paths, TestMode.PerformanceOnly, 4, "perf")
    measured = tmp_path / "measured"
    measured.mkdir()
    (measured / "measurements.json").write_text("{}")
    (measured / "README.md").write_text("# wan\n")
    verdict = perf_dir / "report" / "audit" / "audit_output_caching_test.json"

    def stage() -> None:
        with pytest.raises(UserError) as refused:
            stage_endpoints_scenario(tmp_path / "tree", "x", record(perf_dir, TestMode.PerformanceOnly, performance),
                                     None, measured, print, {}, AUDITS)
        assert refused.value.exit_code == 1 and not (tmp_path / "tree").exists()
        return str(refused.value)

    # A verdict that says failed (its sha256 the one recorded, as a client that exits 0 on it would leave it).
    verdict.write_text(json.dumps({"test": "output_caching_test", "passed": False, "reason": "too fast"}))
    performance["load_generator"]["report_sha256"]["audit/audit_output_caching_test.json"] = sha256_file(verdict)
    assert "is a failed audit (too fast), so x is not staged; run the performance test again" in stage()
    verdict.write_text("{}")
    assert "changed after the run" in stage()
    verdict.unlink()
    assert "is missing: the client ran no output_caching_test audit" in stage()


def test_the_real_client_accepts_the_wan_yaml(prompt_paths, tmp_path):
    checkout = os.environ.get("MLCOMMONS_ENDPOINTS_DIR")
    venv = Path(__file__).resolve().parents[1] / ".venv-endpoints"
    if not checkout or not (venv / "bin" / "inference-endpoint").is_file():
        pytest.skip("set MLCOMMONS_ENDPOINTS_DIR to a checkout of mlcommons/endpoints and make build "
                    "RUN_ARGS=\"--harness_type=endpoints\" to have the real client check wan's YAML")
    from code.common.endpoints_client.config_yaml import render as render_yaml
    from code.common.endpoints_client.run import client_test

    for scenario, accuracy in (("Offline", True), ("SingleStream", False)):
        run_dir = tmp_path / scenario
        workload = Wan().endpoints_workload("wan-2.2-substitute", accuracy, {"total_sample_count": 4},
                                            prompt_paths, run_dir, True, scenario=scenario)
        test = client_test("t", f"wan-{scenario}", "wan-2.2-substitute", workload, V6_1, accuracy, True)
        assert (test.config.audit is None) is accuracy    # the performance test's YAML carries the audit block
        (run_dir / CLIENT_YAML).write_text(render_yaml(test.config))
        done = subprocess.run([str(venv / "bin" / "inference-endpoint"), "validate-yaml", "--config",
                               str(run_dir / CLIENT_YAML)], capture_output=True, text=True, timeout=600,
                              env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert done.returncode == 0, done.stdout + done.stderr


def test_a_given_server_of_another_model_is_refused_before_the_client_runs(prompt_paths, tmp_path):
    import http.server
    import threading

    class Models(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802  (http.server's name)
            body = json.dumps({"object": "list", "data": [{"id": "Qwen/Qwen3.6-27B"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    spec = a_spec(TestMode.PerformanceOnly, "Offline", 4)
    spec.harness_options = {"endpoints": [f"http://127.0.0.1:{server.server_port}"]}
    client = fake_client(tmp_path / "other")
    (Path(client.venv) / "bin" / "inference-endpoint").write_text(f"#!{sys.executable}\n{VIDEOGEN_CLIENT}")
    (Path(client.venv) / "endpoints-client.json").write_text(json.dumps(client.as_dict()))
    calls = tmp_path / "other" / "calls.jsonl"
    os.environ["CALLS"] = str(calls)
    try:
        with pytest.raises(UserError, match=r"serves Qwen/Qwen3.6-27B, not wan-2.2-substitute \(its /v1/models\)"):
            EndpointsHarness().run_own_test(spec, Wan(), WithClient(prompt_paths, Path(client.venv)),
                                            tmp_path / "other" / "run")
    finally:
        server.shutdown()
        del os.environ["CALLS"]
    assert [json.loads(line)["argv"][0] for line in calls.read_text().splitlines()] == ["validate-yaml"]
    assert not (tmp_path / "other" / "run" / "report").exists()


def _wan_plan_context(tmp_path, *flags):
    return endpoints_plan_context(tmp_path, ref.NAME, "wan-2.2-substitute", *flags)


def endpoints_plan_context(tmp_path, benchmark: str, model: str, *flags):
    """The run_harness context the plan is made in, on the endpoints harness, on a recorded 2-core machine."""
    from code.actions import ACTIONS
    from code.actions.base import Context
    from code.common.arguments import parse_run_args
    from code.main import available_benchmarks
    from tests.conftest import recorded_detector

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    argv = ["--action=run_harness", f"--benchmarks={benchmark}", "--harness_type=endpoints", f"--model={model}",
            *flags]
    args = parse_run_args(argv, list(ACTIONS), available_benchmarks(paths, get_round()), list(get_round().benchmarks))
    system = recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()
    return Context(args=args, paths=paths, rules=get_round(), detect=lambda: system, log=lambda _: None)


def _wan_earlier(ctx, scenario: Scenario, metric: float, unit: str):
    from code.common.harness.planned import EarlierRun

    fields = ctx.resolve(ref.NAME, scenario, TestMode.PerformanceOnly).values
    return EarlierRun(folder=Path(f"/logs/earlier-{scenario.value}"), system_id=ctx.system.system_id,
                      benchmark=ref.NAME, scenario=scenario.value, test_mode="PerformanceOnly", audit_test=None,
                      purpose="submission", status=COMPLETED, valid=True, test_run=False, fields=fields,
                      metric=metric, finished="2026-01-01T00:00:00", metric_unit=unit, test_s=130.0, measured_s=100.0)


def test_the_plan_counts_the_videos_the_client_asks_at_the_earlier_client_tests_pace(tmp_path):
    """Offline at one over the earlier run's samples/s, SingleStream at its latency in seconds (wan's unit), each
    the client's own count of videos (the performance phase and the TEST04 audit's two phases, not LoadGen's
    sizing), with the earlier test's start-up."""
    from code.common.harness.plan import FROM_CONFIG, MEASURED, plan_entry
    from code.wan.endpoints import REFERENCE_AUDIT, TEST_RUN_AUDIT_SAMPLES

    ctx = _wan_plan_context(tmp_path, "--scenarios=Offline,SingleStream")
    runs = [_wan_earlier(ctx, Scenario.Offline, 0.04, "samples/s"),
            _wan_earlier(ctx, Scenario.SingleStream, 30.0, "s")]
    offline = plan_entry(ctx, ref.NAME, Scenario.Offline, TestMode.PerformanceOnly, runs)
    single = plan_entry(ctx, ref.NAME, Scenario.SingleStream, TestMode.PerformanceOnly, runs)
    accuracy = plan_entry(ctx, ref.NAME, Scenario.Offline, TestMode.AccuracyOnly, runs)
    audits = {scenario: counts["samples"] + counts["audit_samples"] for scenario, counts in REFERENCE_AUDIT.items()}
    assert (offline.queries, single.queries, accuracy.queries) == (ref.PROMPT_COUNT + audits["Offline"],
                                                                   50 + audits["SingleStream"], ref.PROMPT_COUNT)
    assert offline.duration_s == pytest.approx(30 + offline.queries / 0.04)
    assert single.duration_s == pytest.approx(30 + single.queries * 30.0)
    assert offline.speed.source == MEASURED and "25 s per sample, 0.04 samples/s" in offline.speed.basis
    assert "30 s per query, the 90th percentile latency in /logs/earlier-SingleStream" in single.speed.basis
    lines = "\n".join(offline.lines() + single.lines())
    assert f"videos: {ref.PROMPT_COUNT} of the performance phase (Offline: every prompt once), then the TEST04 " \
           f"audit's 144 + 144" in lines
    assert "the client's counts (n_samples_to_issue, the audit's) end the pass" in lines
    quick = plan_entry(_wan_plan_context(tmp_path, "--scenarios=Offline", "--test_run"), ref.NAME, Scenario.Offline,
                       TestMode.PerformanceOnly, [])
    assert quick.queries == 1 + 2 * TEST_RUN_AUDIT_SAMPLES and quick.speed.source == FROM_CONFIG
    assert "offline_expected_qps" in quick.speed.basis
