"""qwen3.6-27b on the endpoints harness: the plan make run makes of it (SingleStream, the endpoints client, never
LoadGen), the replay cut to what a short context holds, and one test run by the harness's own load generator with
a recording client in place of the real one (not on PyPI), its record keeping the client and the gates."""
from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.common.constants import Scenario, TestMode
from code.common.errors import UserError
from code.common.harness.plugins.endpoints import EndpointsHarness
from code.common.records.metadata import COMPLETED, read_metadata, write_metadata
from code.common.records.record import ConfigRecord, RunRecord, SystemRecord
from code.common.endpoints_client.workload import ClientWorkload
from code.main import main
from code.qwen3_6 import replay
from tests.test_endpoints_run import fake_client


def test_make_run_plans_qwen3_6_singlestream_on_the_endpoints_client(tmp_path, capsys):
    lines: list[str] = []
    status = main(["--action=run", "--benchmarks=qwen3.6-27b", "--dry_run", f"--scratch_path={tmp_path / 's'}",
                   f"--log_dir={tmp_path / 'logs'}"], log=lines.append)
    said = "\n".join(lines) + capsys.readouterr().err
    assert status == 0, said[-2000:]
    assert "qwen3.6-27b SingleStream PerformanceOnly" in said and "qwen3.6-27b SingleStream AccuracyOnly" in said
    assert "Offline" not in said


def test_a_loadgen_harness_is_refused_for_qwen3_6_naming_the_endpoints_harness(tmp_path, capsys):
    status = main(["--action=run_harness", "--benchmarks=qwen3.6-27b", "--scenarios=singlestream",
                   "--harness_type=openai", "--dry_run", f"--scratch_path={tmp_path / 's'}",
                   f"--log_dir={tmp_path / 'logs'}"], log=lambda _: None)
    assert status == 2
    assert ("qwen3.6-27b runs on the MLCommons endpoints client only (the round has no LoadGen result of it): add "
            "--harness_type=endpoints") in capsys.readouterr().err


def conversation(name: str, turns: int, words: int) -> list[dict]:
    rows = [{"conversation_id": name, "turn": 1, "role": "user", "content": "w " * words, "system": "s",
             "tools": [{"type": "function"}]}]
    for turn in range(turns):
        rows.append({"conversation_id": name, "turn": 2 + 2 * turn, "role": "assistant", "reasoning_content": "r",
                     "tool_calls": [{"function": {"name": "bash", "arguments": "{}"}}]})
        rows.append({"conversation_id": name, "turn": 3 + 2 * turn, "role": "tool", "tool_results": ["w " * words]})
    return rows


def words(text: str) -> int:
    return len(text.split())


def test_the_replay_is_cut_after_the_last_assistant_turn_the_context_holds():
    rows = conversation("a", 5, 100) + conversation("b", 5, 400) + conversation("c", 1, 1000)
    cut = replay.trim(rows, words, budget_tokens=500)
    kept = replay.conversations(cut.rows)
    # a: its history grows ~100 words a turn, b: ~400, c's first prompt alone is over the budget
    assert list(kept) == ["a", "b"] and (cut.conversations, cut.recorded_turns) == (2, 10)
    assert [r["role"] for r in kept["b"]] == ["user", "assistant"]      # its second turn's prompt is ~830 words
    assert all(rows[-1]["role"] == "assistant" for rows in kept.values())
    assert cut.assistant_turns == sum(r["role"] == "assistant" for r in cut.rows) == 4 + 1
    short = replay.trim(rows, words, budget_tokens=10_000, max_conversations=1, max_turns=2)
    assert [r["role"] for r in short.rows] == ["user", "assistant", "tool", "assistant"]
    with pytest.raises(UserError, match="No conversation of the agentic replay fits in 50 prompt tokens"):
        replay.trim(rows, words, budget_tokens=50)


class FakeBenchmark:
    """What the harness asks of a benchmark the client serves."""

    name = "qwen3.6-27b"
    models = {"smollm2-135m-instruct": SimpleNamespace(served_name="HuggingFaceTB/SmolLM2-135M-Instruct")}
    generates_tokens = True

    def endpoints_workload(self, model, accuracy, fields, paths, run_dir, test_run):
        return ClientWorkload(datasets=({"name": "bfcl_v4::function_calling", "type": "accuracy"},),
                              model_params={"temperature": 0, "max_new_tokens": int(fields["max_output_tokens"])},
                              targets={"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32},
                              samples_required=995, notes=("the substitute",))


def a_spec(tmp_path: Path, mode: TestMode) -> SimpleNamespace:
    return SimpleNamespace(label=f"qwen3.6-27b SingleStream {mode.value}", benchmark="qwen3.6-27b",
                           scenario="SingleStream", scenario_enum=Scenario.SingleStream,
                           model="smollm2-135m-instruct", mode_enum=mode,
                           fields={"max_output_tokens": 64}, test_run=True, rules_version="v6.1",
                           harness_options={"endpoints": ["http://127.0.0.1:9"]})


@pytest.mark.parametrize("mode", [TestMode.AccuracyOnly, TestMode.PerformanceOnly])
def test_the_harness_runs_the_client_and_its_record_keeps_the_client_and_the_gates(tmp_path, mode, monkeypatch):
    monkeypatch.setenv("CALLS", str(tmp_path / "calls.jsonl"))
    client = fake_client(tmp_path)
    client_dir = Path(client.venv)
    (client_dir / "endpoints-client.json").write_text(json.dumps(client.as_dict()))
    paths = SimpleNamespace(endpoints_venv=client_dir)
    run_dir = tmp_path / "run"
    outcome = EndpointsHarness().run_own_test(a_spec(tmp_path, mode), FakeBenchmark(), paths, run_dir)
    ran = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()][-1]
    assert ran["endpoints"] == ["http://127.0.0.1:9"] and ran["model"] == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert ("--accuracy-only" in ran["argv"]) == (mode is TestMode.AccuracyOnly)
    record = RunRecord(status=COMPLETED, benchmark="qwen3.6-27b", model="smollm2-135m-instruct",
                       dataset="qwen3_6_agentic_replay", division="open", scenario=Scenario.SingleStream,
                       test_mode=mode, system=SystemRecord(id="x"),
                       config=ConfigRecord(workload_setting="endpoints_k_99_MaxP", fields={}, sources={}),
                       log_dir=str(run_dir), test_run=True, **outcome)
    write_metadata(run_dir, record)
    again = read_metadata(run_dir / "metadata.json")
    assert again.load_generator["commit"] == client.commit and again.load_generator["python_version"] == "3.12.1"
    assert again.endpoints[0].port == 9 and again.endpoints[0].model == "HuggingFaceTB/SmolLM2-135M-Instruct"
    assert again.submittable is False and "a test run (--test_run): shortened, never submittable" in again.reasons
    if mode is TestMode.AccuracyOnly:
        assert again.accuracy.metrics == {"overall_accuracy": 86.0, "normalized_single_turn_score": 87.0}
        assert again.accuracy.meets_target is True and again.valid is True
        assert "overall_accuracy=86.00" in again.accuracy.text
    else:
        assert again.metric.name == "90th percentile latency (too few queries for early stopping)"
        assert (again.metric.value, again.metric.unit) == (4500.0, "ms") and again.result_validity == "VALID"
    assert "# the substitute" in (run_dir / "client.yaml").read_text()


def test_the_harness_refuses_to_start_without_the_clients_environment(tmp_path):
    with pytest.raises(UserError, match=r'make build RUN_ARGS="--harness_type=endpoints"') as error:
        EndpointsHarness().run_own_test(a_spec(tmp_path, TestMode.AccuracyOnly), FakeBenchmark(),
                                        SimpleNamespace(endpoints_venv=tmp_path / "none"), tmp_path / "run")
    assert error.value.exit_code == 2


@pytest.mark.parametrize("accuracy", [False, True])
def test_qwen3_6_gives_the_client_the_reference_blocks_the_cut_replay_and_its_notes(tmp_path, monkeypatch, accuracy):
    from code.common.paths import Paths
    from code.qwen3_6.benchmark import BENCHMARK, BFCL_BLOCK, REPLAY

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    folder = paths.dataset_dir(REPLAY)
    folder.mkdir(parents=True)
    replay.write_rows(conversation("a", 3, 100) + conversation("b", 3, 100), folder / replay.REPLAY_FILE)
    monkeypatch.setattr(type(BENCHMARK), "serving_folder",
                        lambda self, model, paths, log, remake=False: SimpleNamespace(folder=tmp_path / "hf",
                                                                                      max_model_len=4096))
    monkeypatch.setattr(type(BENCHMARK), "tokenizer",
                        lambda self, model, paths: SimpleNamespace(encode=lambda text, add_bos: text.split()))
    workload = BENCHMARK.endpoints_workload("smollm2-135m-instruct", accuracy, {"max_output_tokens": 64}, paths,
                                            tmp_path / "run", test_run=True)
    performance = workload.datasets[0]
    assert performance["type"] == "performance" and performance["path"] == str(tmp_path / "run" / "replay_cut.jsonl")
    assert performance["agentic_inference"]["num_trajectories_to_issue"] == 1      # a test run: one conversation
    cut = replay.read_rows(tmp_path / "run" / "replay_cut.jsonl")
    assert [r["role"] for r in cut] == ["user", "assistant", "tool", "assistant"]     # and 2 turns
    assert workload.model_params == {"temperature": 0, "seed": 42, "max_new_tokens": 64}
    assert workload.tokenizer is None          # the substitute: the client's tokenizer warm-up is not for small CPUs
    assert any("not a qwen3.6-27b result" in note for note in workload.notes)
    assert any("1 of 20 conversations, 2 of 1007 assistant turns" in note for note in workload.notes)
    if accuracy:
        bfcl = workload.datasets[1]
        assert bfcl["accuracy_config"] == BFCL_BLOCK["accuracy_config"]
        # a test run: the round's rates scaled down without the floor, one sample of each of the 12 subsets
        assert bfcl["generate_params"]["categories"] == BFCL_BLOCK["generate_params"]["categories"]
        assert "subset_floor" not in bfcl["generate_params"] and "max_samples" not in bfcl["generate_params"]
        assert workload.accuracy_subset.samples == 12
        assert all(n == 1 for parts in workload.accuracy_subset.counts.values() for n in parts.values())
        assert any("not its 995-sample score: 12 samples, 3 groups, 12 parts" in note for note in workload.notes)
        assert workload.targets == {"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32}
        assert workload.samples_required == 995
    else:
        assert len(workload.datasets) == 1 and workload.targets == {}
