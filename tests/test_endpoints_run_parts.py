"""The parts of a run on the endpoints client: the YAML the toolkit writes, the client as a child process (a small
recording script stands in for it), and the gates on the report folder it leaves. With MLCOMMONS_ENDPOINTS_DIR set
and the client's environment made (make build RUN_ARGS="--harness_type=endpoints"), the real client checks the
YAML too."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from code.common.endpoints_client.child import ClientInterrupted, run_client, validate
from code.common.endpoints_client.config_yaml import ClientConfig, as_mapping, render
from code.common.endpoints_client.environment import CHECKOUT_VARIABLE, read_stamp
from code.common.endpoints_client.gates import accuracy_gates, performance_gates
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round

V6_1 = get_round("v6.1")
BFCL_BLOCK = {"name": "bfcl_v4::function_calling", "type": "accuracy",
              "generate_params": {"categories": ["non_live", "live", "hallucination"],
                                  "category_sample_pct": {"non_live": 62, "live": 10, "hallucination": 10},
                                  "subset_floor": 25},
              "accuracy_config": {"eval_method": "bfcl_v4", "ground_truth": "ground_truth",
                                  "extractor": "function_call_extractor", "num_repeats": 1}}


def qwen3_6_like(report_dir: str = "report", **changes) -> ClientConfig:
    values = dict(name="qwen3.6-27b-SingleStream", served_model="smollm2-135m-instruct",
                  endpoints=("http://127.0.0.1:8000",), datasets=(BFCL_BLOCK,), report_dir=report_dir,
                  sample_index_rng_seed=V6_1.seeds.sample_index_rng_seed,
                  schedule_rng_seed=V6_1.seeds.schedule_rng_seed, min_duration_ms=V6_1.min_duration_ms,
                  model_params={"temperature": 0, "seed": 42, "max_new_tokens": 1024},
                  worker_initialization_timeout_s=60.0)
    return ClientConfig(**{**values, **changes})


def test_the_yaml_carries_what_the_checker_reads_and_the_reference_blocks():
    text = render(qwen3_6_like())
    assert text.startswith("# Written by the toolkit's endpoints harness.\n# seeds and min_duration_ms follow")
    data = yaml.safe_load(text)
    runtime = data["settings"]["runtime"]
    assert runtime == {"min_duration_ms": 600_000, "max_duration_ms": 0,
                       "scheduler_random_seed": 16159082839903944936, "dataloader_random_seed": 2747215439041700203}
    assert data["settings"]["client"]["worker_initialization_timeout"] == 300.0       # raised to the floor
    assert data["settings"]["service_ready_timeout_s"] == 300.0
    assert data["settings"]["load_pattern"] == {"type": "agentic_inference", "target_concurrency": 1}
    assert data["datasets"] == [BFCL_BLOCK]
    assert data["model_params"] == {"name": "smollm2-135m-instruct", "temperature": 0, "seed": 42,
                                    "max_new_tokens": 1024}
    assert data["endpoint_config"] == {"endpoints": ["http://127.0.0.1:8000"], "api_type": "openai", "api_key": None}
    assert as_mapping(qwen3_6_like(n_samples_to_issue=5))["settings"]["runtime"]["n_samples_to_issue"] == 5
    with pytest.raises(ValueError, match="at least one endpoint"):
        qwen3_6_like(endpoints=())
    with pytest.raises(ValueError, match="below min_duration_ms"):
        qwen3_6_like(max_duration_ms=1000)


def client_script(tmp_path: Path, body: str, name: str = "client.py") -> list[str]:
    script = tmp_path / name
    script.write_text(body)
    return [sys.executable, str(script)]


RECORDING = """\
import json, os, sys
print("issuing 3 samples", flush=True)
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "pythonpath": os.environ.get("PYTHONPATH")}) + "\\n")
print("done", flush=True)
sys.exit(int(os.environ.get("EXIT", "0")))
"""


def test_the_client_runs_as_a_child_its_output_shown_and_logged(tmp_path):
    calls, shown = tmp_path / "calls.jsonl", []
    command = client_script(tmp_path, RECORDING)
    env = {**os.environ, "CALLS": str(calls), "PYTHONPATH": "/toolkit"}
    run_client(command, ["benchmark", "from-config", "--config", "x.yaml"], tmp_path / "client.log", cwd=tmp_path,
               env=env, show=shown.append)
    call = json.loads(calls.read_text())
    assert call == {"argv": ["benchmark", "from-config", "--config", "x.yaml"], "cwd": str(tmp_path),
                    "pythonpath": None}                     # the toolkit's own packages are not the client's
    assert shown == ["issuing 3 samples", "done"]
    assert "issuing 3 samples\ndone\n" in (tmp_path / "client.log").read_text()


def test_a_client_that_fails_or_is_killed_is_one_sentence_with_its_log(tmp_path):
    command = client_script(tmp_path, RECORDING)
    env = {**os.environ, "CALLS": str(tmp_path / "calls"), "EXIT": "3"}
    with pytest.raises(UserError, match=r"exited with status 3; nothing is staged from this run\. The end of its "
                                        r"log .*:\nissuing 3 samples\ndone$") as error:
        run_client(command, [], tmp_path / "client.log", env=env, show=lambda _: None)
    assert error.value.exit_code == 1
    killed = client_script(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "killed.py")
    with pytest.raises(UserError, match="was killed by SIGKILL"):
        run_client(killed, [], tmp_path / "client.log", show=lambda _: None)
    with pytest.raises(UserError, match=r"The client's check of the YAML the toolkit wrote .*exited with status 3"):
        validate(command, tmp_path / "x.yaml", tmp_path / "validate.log", env=env)


STUBBORN = """\
import os, signal, subprocess, sys, time
# A worker of the client that ignores SIGINT, as any process started in the background by a shell does; its
# stderr is still the client's output.
child = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                                                "print('ready', flush=True); time.sleep(600)"], stdout=subprocess.PIPE)
child.stdout.readline()   # from here on it ignores SIGINT
open(os.environ["PIDS"], "w").write(f"{os.getpid()} {child.pid}")
def stop(*_):
    open(os.environ["STOPPED"], "w").write("SIGINT")
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
print("running", flush=True)
time.sleep(600)
"""


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


def test_ctrl_c_hands_sigint_to_the_clients_group_and_ends_it(tmp_path):
    pids, stopped = tmp_path / "pids", tmp_path / "stopped"
    command = client_script(tmp_path, STUBBORN)

    def interrupt(line: str) -> None:
        if line == "running":
            raise KeyboardInterrupt

    with pytest.raises(ClientInterrupted, match="was stopped; its log"):
        run_client(command, [], tmp_path / "client.log", env={**os.environ, "PIDS": str(pids),
                                                              "STOPPED": str(stopped)}, show=interrupt, grace_s=5)
    assert stopped.read_text() == "SIGINT"
    client, worker = (int(p) for p in pids.read_text().split())
    deadline = time.monotonic() + 10
    while not (gone(client) and gone(worker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(client) and gone(worker)
    assert "[stopped by the toolkit" in (tmp_path / "client.log").read_text()


def write_report(folder: Path, *, failed: int = 0, missing: int = 0, overall: float = 86.0,
                 normalized: float = 87.0, total: int = 995) -> Path:
    (folder / "performance").mkdir(parents=True)
    (folder / "accuracy").mkdir()
    (folder / "performance" / "result_summary.json").write_text(json.dumps(
        {"n_samples_issued": 1007, "n_samples_completed": 1007 - failed, "n_samples_failed": failed,
         "state": "complete", "complete": True, "qps": 0.1}))
    (folder / "scores.json").write_text(json.dumps(
        {"turns": {"issued": 1007, "observed": 1006 - missing, "expected": 1006, "missing": missing}}))
    (folder / "accuracy" / "accuracy_results.json").write_text(json.dumps({"accuracy_scores": [
        {"dataset_type": "performance", "score": 0.4},
        # as the client at ea332753 writes BFCL's entry: the scalar score a fraction, the breakdown in percent
        {"dataset_name": "bfcl_v4::function_calling", "dataset_type": "accuracy", "score": overall / 100,
         "total_samples": total,
         "breakdown": {"overall_accuracy": overall, "normalized_single_turn_score": str(normalized),
                       "category_scores": {"non_live": 0.0, "live": 0.0, "hallucination": 100.0},
                       "unscored_subsets": {}, "total_samples": total, "issued_samples": total,
                       "subset_scores": {}}}]}))
    return folder


TARGETS = {"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32}


def test_the_gates_pass_a_good_report_and_name_each_failure(tmp_path):
    good = write_report(tmp_path / "good")
    assert all(g.passed for g in performance_gates(good) + accuracy_gates(good, TARGETS, 995))
    bad = write_report(tmp_path / "bad", failed=2, missing=3, normalized=80.0, total=990)
    failed = {g.name: g.detail for g in performance_gates(bad) + accuracy_gates(bad, TARGETS, 995) if not g.passed}
    assert failed == {"no failed samples": "2 of 1007 issued failed", "every sample completed": "1005 of 1007 completed",
                      "no missing turns": "3 missing, 1003 of 1006 scorable turns observed (1007 issued)",
                      "normalized_single_turn_score >= 85.32": "80.00", "995 samples scored": "990 scored"}
    assert accuracy_gates(good, {"overall_accuracy": 86.5})[0].line() == "FAIL  overall_accuracy >= 86.50: 86.00"


def test_a_missing_or_edited_report_is_an_error_naming_the_file(tmp_path):
    with pytest.raises(UserError, match=r"left no performance/result_summary.json .* the run did not finish") as error:
        performance_gates(tmp_path)
    assert error.value.exit_code == 1
    folder = write_report(tmp_path / "r")
    (folder / "performance" / "result_summary.json").write_text('{"n_samples_issued": 3,')
    with pytest.raises(UserError, match="damaged or was edited"):
        performance_gates(folder)
    (folder / "performance" / "result_summary.json").write_text('{"n_samples_issued": "3"}')
    with pytest.raises(UserError, match="has no count n_samples_issued"):
        performance_gates(folder)
    (folder / "accuracy" / "accuracy_results.json").write_text('{"accuracy_scores": []}')
    with pytest.raises(UserError, match="holds no accuracy score"):
        accuracy_gates(folder, TARGETS)


CLIENT = read_stamp(Paths.create().endpoints_venv) if os.environ.get(CHECKOUT_VARIABLE) else None


@pytest.mark.skipif(CLIENT is None, reason=f"{CHECKOUT_VARIABLE} does not point at a checkout of mlcommons/endpoints "
                                           "with its environment made (make build RUN_ARGS=\"--harness_type=endpoints\")")
def test_the_real_client_accepts_the_yaml(tmp_path):
    replay = {"name": "agentic_coding", "type": "performance",
              "path": str(Path(CLIENT.checkout) / "examples" / "11_Edge_Agentic_Example" / "agentic_coding_2.5h.jsonl"),
              "accuracy_config": {"eval_method": "agentic_inference_inline"},
              "agentic_inference": {"turn_timeout_s": 600.0, "num_trajectories_to_issue": 20}}
    config = tmp_path / "client.yaml"
    config.write_text(render(qwen3_6_like(str(tmp_path / "report"), datasets=(replay, BFCL_BLOCK))))
    validate(CLIENT.command, config, tmp_path / "validate.log")
    assert "Config valid: qwen3.6-27b-SingleStream" in (tmp_path / "validate.log").read_text()


@pytest.mark.skipif(CLIENT is None, reason=f"{CHECKOUT_VARIABLE} does not point at a checkout of mlcommons/endpoints "
                                           "with its environment made (make build RUN_ARGS=\"--harness_type=endpoints\")")
def test_the_real_client_replays_a_turn_against_a_loopback_server_and_the_gates_read_its_report(tmp_path):
    """The first turn of the round's agentic replay (its first conversation's prompt and recorded answer), sent by
    the real client to the toolkit's loopback server; the client's report passes the performance gates. (Minutes:
    the client's services import transformers.)"""
    from code.common.processes import free_port

    recorded = Path(CLIENT.checkout) / "examples" / "11_Edge_Agentic_Example" / "agentic_coding_2.5h.jsonl"
    replay = tmp_path / "replay.jsonl"
    replay.write_text("".join(recorded.read_text().splitlines(keepends=True)[:2]))
    port = free_port("127.0.0.1")
    server = subprocess.Popen([sys.executable, "-m", "code.common.serving.fake_server", "--port", str(port),
                               "--model", "tiny"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline().startswith("listening on")
        block = {"name": "agentic_coding", "type": "performance", "path": str(replay),
                 "accuracy_config": {"eval_method": "agentic_inference_inline"},
                 "agentic_inference": {"turn_timeout_s": 120.0, "num_trajectories_to_issue": 1}}
        config = tmp_path / "client.yaml"
        config.write_text(render(qwen3_6_like(str(tmp_path / "report"), datasets=(block,), min_duration_ms=0,
                                              served_model="tiny", endpoints=(f"http://127.0.0.1:{port}",))))
        run_client(CLIENT.command, ["benchmark", "from-config", "--config", str(config)], tmp_path / "client.log",
                   cwd=tmp_path, show=lambda _: None)
    finally:
        server.terminate()
        server.wait(timeout=30)
    gates = performance_gates(tmp_path / "report")
    assert [g.name for g in gates] == ["run complete", "no failed samples", "every sample completed",
                                       "no missing turns"]
    assert all(g.passed for g in gates), [g.line() for g in gates]
