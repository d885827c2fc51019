"""One test on the endpoints client, end to end (endpoints_client/run.py): the YAML checked by the client before any
server starts, a local server started where no endpoints are given and stopped whatever happens, the client run as
a child with the server's endpoint, the gates applied to its report and the run's record written. A recording
client stands in for the real one (not on PyPI): it writes the report files the real client writes."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import yaml

from code.common.endpoints_client.config_yaml import ClientConfig
from code.common.endpoints_client.environment import ClientEnvironment
from code.common.endpoints_client.run import CLIENT_RUN, CLIENT_YAML, ClientTest, run_on_client
from code.common.errors import UserError

RECORDING_CLIENT = """\
import json, os, sys
from pathlib import Path
import yaml
argv = sys.argv[1:]
config = Path(argv[argv.index("--config") + 1])
document = yaml.safe_load(config.read_text())
with open(os.environ["CALLS"], "a") as calls:
    calls.write(json.dumps({"argv": argv, "endpoints": document["endpoint_config"]["endpoints"],
                            "model": document["model_params"]["name"]}) + "\\n")
if argv[0] == "validate-yaml":
    if os.environ.get("REFUSE"):
        print("Config error: datasets.0.path: field required")
        sys.exit(2)
    print(f"Config valid: {document['name']}")
    sys.exit(0)
print("Results: 2/2 successful", flush=True)
report = Path(document["report_dir"])
(report / "performance").mkdir(parents=True, exist_ok=True)
(report / "accuracy").mkdir(parents=True, exist_ok=True)
(report / "config.yaml").write_text(config.read_text())
failed = int(os.environ.get("FAILED", "0"))
(report / "performance" / "result_summary.json").write_text(json.dumps(
    {"n_samples_issued": 2, "n_samples_completed": 2 - failed, "n_samples_failed": failed, "state": "complete",
     "complete": True, "qps": 0.25, "duration_ns": 8000000000,
     "latency": {"percentiles": {"90.0": 4500000000.0}, "early_stopping_percentiles": {"90.0": None}}}))
(report / "accuracy" / "accuracy_results.json").write_text(json.dumps({"accuracy_scores": [
    {"dataset_name": "performance", "dataset_type": "performance", "score": 0.5, "total_samples": 2}]}))
if "--accuracy-only" in argv and os.environ.get("ACCURACY_RESULTS"):      # a recorded report of the real client
    (report / "accuracy" / "accuracy_results.json").write_text(Path(os.environ["ACCURACY_RESULTS"]).read_text())
elif "--accuracy-only" in argv:
    overall = float(os.environ.get("OVERALL", "86.0"))
    (report / "accuracy" / "accuracy_results.json").write_text(json.dumps({"accuracy_scores": [
        {"dataset_name": "bfcl_v4::function_calling", "dataset_type": "accuracy", "score": overall / 100,
         "total_samples": 995, "breakdown": {"overall_accuracy": overall, "normalized_single_turn_score": 87.0}}]}))
sys.exit(int(os.environ.get("EXIT", "0")))
"""

TARGETS = {"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32}


def fake_client(tmp_path: Path) -> ClientEnvironment:
    script = tmp_path / "venv" / "bin" / "inference-endpoint"
    script.parent.mkdir(parents=True)
    script.write_text(f"#!{sys.executable}\n{RECORDING_CLIENT}")
    script.chmod(0o755)
    return ClientEnvironment(venv=str(tmp_path / "venv"), interpreter="/usr/bin/python3.12", python_version="3.12.1",
                             interpreter_found_by="pyenv", client_version="0.1.0",
                             commit="ea3327530376fef63d706f4105612e17c2c80a8d", checkout="/endpoints",
                             modified=False, extras=("bfcl",), lock_sha256="0" * 64)


class FakeServer:
    def __init__(self, events: list[str]) -> None:
        self.events = events
        events.append("started")

    endpoint = "http://127.0.0.1:8765"
    served_name = "HuggingFaceTB/SmolLM2-135M-Instruct"

    def stop(self) -> None:
        self.events.append("stopped")


def a_test(accuracy: bool = False) -> ClientTest:
    config = ClientConfig(name="qwen3.6-27b-SingleStream", served_model="Qwen/Qwen3.6-27B", endpoints=("x",),
                          datasets=({"name": "bfcl_v4::function_calling", "type": "accuracy"},), report_dir="",
                          sample_index_rng_seed=1, schedule_rng_seed=2, min_duration_ms=0)
    return ClientTest(label="qwen3.6-27b SingleStream", config=config, accuracy=accuracy, targets=TARGETS,
                      samples_required=995, notes=("the substitute model",))


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "CALLS": str(tmp_path / "calls.jsonl")}


def calls(tmp_path: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]


def test_a_run_checks_the_yaml_starts_the_server_runs_the_client_and_stops_the_server(tmp_path, env):
    events, shown = [], []
    client = fake_client(tmp_path)
    outcome = run_on_client(client, a_test(), tmp_path / "run", start_server=lambda: FakeServer(events),
                            show=shown.append, env=env)
    validated, ran = calls(tmp_path)
    assert validated["argv"][0] == "validate-yaml" and validated["endpoints"] == ["http://127.0.0.1:8000"]
    assert ran["argv"] == ["benchmark", "from-config", "--config", str(tmp_path / "run" / CLIENT_YAML)]
    assert ran["endpoints"] == ["http://127.0.0.1:8765"]               # the local server's, and its served name
    assert ran["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert events == ["started", "stopped"]
    assert outcome.passed and outcome.figures["qps"] == 0.25 and outcome.figures["tool_call_iou"] == 0.5
    assert outcome.figures["latency_p90_ms"] == 4500.0 and "early_stopping_latency_p90_ms" not in outcome.figures
    text = (tmp_path / "run" / CLIENT_YAML).read_text()
    assert "# the substitute model\n" in text and "# seeds and min_duration_ms follow" in text
    assert yaml.safe_load(text)["report_dir"] == str(tmp_path / "run" / "report")
    record = json.loads((tmp_path / "run" / CLIENT_RUN).read_text())
    assert record["client"]["commit"] == client.commit and record["client"]["python_version"] == "3.12.1"
    assert set(record["report_sha256"]) == {"config.yaml", "performance/result_summary.json",
                                            "accuracy/accuracy_results.json"}
    assert record["passed"] is True and [g["name"] for g in record["gates"]] == [
        "run complete", "no failed samples", "every sample completed"]
    assert "qwen3.6-27b SingleStream: PASS  no failed samples: 0 of 2 issued failed" in shown


def test_an_accuracy_run_on_given_endpoints_reports_each_figure_and_its_gate(tmp_path, env):
    outcome = run_on_client(fake_client(tmp_path), a_test(accuracy=True), tmp_path / "run",
                            endpoints=("http://node1:8000",), env={**env, "OVERALL": "11.26"}, show=lambda _: None)
    assert calls(tmp_path)[1]["argv"][-1] == "--accuracy-only"
    assert calls(tmp_path)[1]["endpoints"] == ["http://node1:8000"]
    assert outcome.figures["overall_accuracy"] == 11.26 and outcome.figures["normalized_single_turn_score"] == 87.0
    assert not outcome.passed
    assert [g.line() for g in outcome.gates if not g.passed] == ["FAIL  overall_accuracy >= 83.64: 11.26"]


def test_failed_samples_fail_the_gates_though_the_client_exits_0(tmp_path, env):
    outcome = run_on_client(fake_client(tmp_path), a_test(), tmp_path / "run", endpoints=("http://node1:8000",),
                            env={**env, "FAILED": "1"}, show=lambda _: None)
    assert not outcome.passed
    assert json.loads((tmp_path / "run" / CLIENT_RUN).read_text())["passed"] is False


def test_a_refused_yaml_starts_no_server_and_a_failing_client_leaves_none(tmp_path, env):
    events = []
    with pytest.raises(UserError, match="The client's check of the YAML the toolkit wrote .*exited with status 2"):
        run_on_client(fake_client(tmp_path), a_test(), tmp_path / "run", start_server=lambda: FakeServer(events),
                      env={**env, "REFUSE": "1"}, show=lambda _: None)
    assert events == []
    with pytest.raises(UserError, match=r"The MLCommons endpoints client \(qwen3.6-27b SingleStream\) exited with "
                                        r"status 3; nothing is staged"):
        run_on_client(fake_client(tmp_path / "again"), a_test(), tmp_path / "run2",
                      start_server=lambda: FakeServer(events), env={**env, "EXIT": "3"}, show=lambda _: None)
    assert events == ["started", "stopped"]
    assert not (tmp_path / "run2" / CLIENT_RUN).exists()


def test_a_stopped_test_ends_the_clients_it_runs(tmp_path):
    """A stop of the test's process (its watcher calls the harness's `interrupted`, then exits) ends the client's
    own process group too: nothing is left behind."""
    import threading
    import time

    from code.common.harness.plugins.endpoints import EndpointsHarness
    from code.common.endpoints_client.child import run_client
    from tests.test_endpoints_run_parts import STUBBORN, client_script, gone

    pids, stopped = tmp_path / "pids", tmp_path / "stopped"
    command = client_script(tmp_path, STUBBORN)
    ended: list[BaseException] = []

    def run() -> None:
        try:
            run_client(command, [], tmp_path / "client.log", env={**os.environ, "PIDS": str(pids),
                                                                  "STOPPED": str(stopped)}, show=lambda _: None)
        except BaseException as error:  # noqa: BLE001  what the test's thread ended with
            ended.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 60
    while not pids.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    EndpointsHarness().interrupted()
    thread.join(timeout=60)
    assert stopped.read_text() == "SIGINT" and isinstance(ended[0], UserError)
    client, worker = (int(p) for p in pids.read_text().split())
    while not (gone(client) and gone(worker)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert gone(client) and gone(worker)
