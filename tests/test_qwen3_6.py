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
    # estimated as tests on the client, not as LoadGen's (test_the_plan_* below)
    assert "on the MLCommons endpoints client" in said and "of tests (their start-up as each says)" in said


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

    def endpoints_workload(self, model, accuracy, fields, paths, run_dir, test_run, *, scenario=""):
        return ClientWorkload(datasets=({"name": "bfcl_v4::function_calling", "type": "accuracy"},),
                              model_params={"temperature": 0, "max_new_tokens": int(fields["max_output_tokens"])},
                              targets={"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32},
                              samples_required=995, notes=("the substitute",))

    def endpoints_artefacts(self, model, fields, paths, report_dir, run_dir):
        """None for qwen3.6-27b (GenerativeBenchmark's default)."""


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
        assert "not its 995-sample score: 12 samples, 3 groups, 12 parts" in workload.accuracy_subset.line()
        assert workload.targets == {"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32}
        assert workload.samples_required == 995
    else:
        assert len(workload.datasets) == 1 and workload.targets == {}


# -- the short accuracy pass: a stratified BFCL v4 subset ----------------------------------------------------------
def test_the_recorded_subset_sizes_make_the_rounds_995_samples_in_12_subsets_of_3_categories():
    from code.qwen3_6 import bfcl
    from code.qwen3_6.benchmark import BFCL_BLOCK, BFCL_SAMPLES

    counts = bfcl.round_counts()
    assert sum(sum(parts.values()) for parts in counts.values()) == BFCL_SAMPLES == 995
    assert list(counts) == BFCL_BLOCK["generate_params"]["categories"] and bfcl.minimum() == 12
    assert counts["live"]["live_parallel"] == 16 and counts["non_live"]["simple_python"] == 248   # floor, 62 %


@pytest.mark.parametrize("asked", [12, 13, 40, 100, 500, 994])
def test_a_stratified_subset_keeps_a_head_of_every_subset_of_the_995_and_no_more_than_asked(asked):
    from code.qwen3_6 import bfcl

    params, subset = bfcl.stratified(asked)
    whole = bfcl.round_counts()
    assert subset.samples <= asked and subset.of_samples == 995
    assert set(params) == {"categories", "category_sample_pct"}        # the client's own parameters, no floor
    for category, parts in subset.counts.items():
        for name, count in parts.items():
            assert 1 <= count <= whole[category][name]      # every subset, each a head of its part of the 995
    assert bfcl.counts(params["category_sample_pct"], None) == subset.counts     # what the client keeps of them
    assert bfcl.stratified(asked) == (params, subset)                            # chosen deterministically
    if asked == 12:
        assert all(count == 1 for parts in subset.counts.values() for count in parts.values())
    if asked == 100:
        assert subset.samples == 100 and sum(subset.counts["non_live"].values()) > sum(subset.counts["live"].values())


def test_fewer_accuracy_samples_than_one_per_subset_are_refused_naming_the_least(tmp_path):
    from code.qwen3_6.benchmark import accuracy_samples

    assert accuracy_samples({}, test_run=False) is None                      # the round's 995
    assert accuracy_samples({"total_sample_count": 995}, test_run=False) is None
    assert accuracy_samples({}, test_run=True) == 12
    assert accuracy_samples({"total_sample_count": 200}, test_run=False) == 200
    assert accuracy_samples({"total_sample_count": 200}, test_run=True) == 12
    with pytest.raises(UserError, match=r"at least one sample of each of BFCL v4's 12 subsets: give "
                                        r"--total_sample_count=12 or more") as refused:
        accuracy_samples({"total_sample_count": 5}, test_run=False)
    assert refused.value.exit_code == 2


def test_the_real_client_builds_the_stratified_subset_the_toolkit_asked_for(tmp_path):
    """With the client's environment: its own BFCLv4.generate, given the block's parameters, keeps exactly the
    counts the toolkit chose (and the round's block the 995)."""
    import subprocess

    from code.common.paths import Paths
    from code.qwen3_6 import bfcl
    from code.qwen3_6.benchmark import BFCL_BLOCK

    python = Paths.create().endpoints_venv / "bin" / "python"
    if not os.environ.get("MLCOMMONS_ENDPOINTS_DIR") or not python.is_file():
        pytest.skip("MLCOMMONS_ENDPOINTS_DIR does not point at a checkout of mlcommons/endpoints with its "
                    "environment made (make build RUN_ARGS=\"--harness_type=endpoints\")")
    params, subset = bfcl.stratified(40)
    script = ("import collections, json, sys\nfrom pathlib import Path\n"
              "from inference_endpoint.dataset_manager.predefined.bfcl_v4 import BFCLv4\n"
              "blocks = json.loads(sys.argv[1])\n"
              "print(json.dumps([dict(collections.Counter(BFCLv4.generate(Path(sys.argv[2]), **b)['subset'])) "
              "for b in blocks]))\n")
    done = subprocess.run([str(python), "-c", script, json.dumps([params, BFCL_BLOCK["generate_params"]]),
                           str(tmp_path)], capture_output=True, text=True, timeout=600, check=True)
    built, whole = json.loads(done.stdout.strip().splitlines()[-1])
    assert built == {name: n for parts in subset.counts.values() for name, n in parts.items()}
    assert whole == {name: n for parts in bfcl.round_counts().values() for name, n in parts.items()}


# -- the plan of a test on the client ------------------------------------------------------------------------------
def _plan_context(tmp_path: Path, *flags: str):
    from code.actions import ACTIONS
    from code.actions.base import Context
    from code.common.arguments import parse_run_args
    from code.common.paths import Paths
    from code.common.rules import get_round
    from code.main import available_benchmarks
    from tests.conftest import recorded_detector

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    argv = ["--action=run_harness", "--benchmarks=qwen3.6-27b", "--scenarios=SingleStream",
            "--harness_type=endpoints", "--model=smollm2-135m-instruct", *flags]
    args = parse_run_args(argv, list(ACTIONS), available_benchmarks(paths, get_round()), list(get_round().benchmarks))
    system = recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()
    return Context(args=args, paths=paths, rules=get_round(), detect=lambda: system, log=lambda _: None)


def _earlier(ctx, p90_ms: float | None, test_s: float, measured_s: float, samples: int | None = None):
    from code.common.harness.planned import EarlierRun

    mode = TestMode.AccuracyOnly if samples else TestMode.PerformanceOnly
    fields = ctx.resolve("qwen3.6-27b", Scenario.SingleStream, mode).values
    return EarlierRun(folder=Path(f"/logs/earlier-{mode.value}"), system_id=ctx.system.system_id,
                      benchmark="qwen3.6-27b", scenario="SingleStream", test_mode=mode.value, audit_test=None,
                      purpose="submission", status=COMPLETED, valid=True, test_run=True, fields=fields, metric=p90_ms,
                      finished="2026-01-01T00:00:00", metric_unit="ms" if p90_ms else "", test_s=test_s,
                      measured_s=measured_s, accuracy_samples=samples)


def test_the_plan_counts_a_test_runs_replay_turns_and_bfcl_subset_at_the_configs_latency(tmp_path):
    from code.common.harness.plan import FROM_CONFIG, plan_entry

    ctx = _plan_context(tmp_path, "--test_run")
    latency_s = ctx.resolve("qwen3.6-27b", Scenario.SingleStream)["single_stream_expected_latency_ns"] / 1e9
    performance = plan_entry(ctx, "qwen3.6-27b", Scenario.SingleStream, TestMode.PerformanceOnly, [])
    accuracy = plan_entry(ctx, "qwen3.6-27b", Scenario.SingleStream, TestMode.AccuracyOnly, [])
    assert (performance.queries, accuracy.queries) == (2, 12)       # 2 turns of 1 conversation; 1 of each subset
    assert performance.duration_s == pytest.approx(2 * latency_s)
    assert accuracy.duration_s == pytest.approx(12 * latency_s)
    assert performance.speed.source == FROM_CONFIG and "single_stream_expected_latency_ns" in performance.speed.basis
    lines = "\n".join(performance.lines() + accuracy.lines())
    assert "2 queries on the MLCommons endpoints client" in lines
    assert "at most 2 assistant turns of the agentic replay, 1 conversation" in lines
    assert "12 BFCL v4 samples (a stratified subset of the 995" in lines
    assert "start-up (the YAML's check, the server's and the client's start" in lines and "not measured" in lines


def test_the_plan_of_a_full_pass_takes_the_earlier_client_tests_latency_and_start_up(tmp_path):
    from code.common.harness.plan import MEASURED, plan_entry

    ctx = _plan_context(tmp_path)
    runs = [_earlier(ctx, p90_ms=20_000.0, test_s=400.0, measured_s=100.0)]
    performance = plan_entry(ctx, "qwen3.6-27b", Scenario.SingleStream, TestMode.PerformanceOnly, runs)
    accuracy = plan_entry(ctx, "qwen3.6-27b", Scenario.SingleStream, TestMode.AccuracyOnly, runs)
    assert (performance.queries, accuracy.queries) == (1007, 995)
    assert performance.duration_s == pytest.approx(300 + 1007 * 20)      # the start-up, then every turn once
    assert accuracy.duration_s == pytest.approx(300 + 995 * 20)
    assert performance.speed.source == MEASURED and "/logs/earlier-PerformanceOnly" in performance.speed.basis
    lines = "\n".join(performance.lines())
    assert "min_duration_ms 600000 (the v6.1 checker's) does not lengthen it: the client issues each recorded " \
           "turn once" in lines
    assert "with 300 s of start-up" in lines
    fewer = plan_entry(_plan_context(tmp_path, "--total_sample_count=100"), "qwen3.6-27b", Scenario.SingleStream,
                       TestMode.AccuracyOnly, [])
    assert fewer.queries == 100



RECORDED_SUBSET = Path(__file__).parent / "fixtures" / "endpoints" / "qwen3_6_bfcl_subset_accuracy_results.json"


def test_a_short_passs_subset_is_printed_recorded_and_labelled_never_the_995_sample_score(tmp_path, monkeypatch,
                                                                                          capsys):
    """The real client's report of a test run's 12-sample subset (recorded from make run with the substitute),
    returned by the recording client: the subset's counts before the run, its scores by category after, the gate
    on the subset passing and the 995-sample gate failing."""
    from code.qwen3_6 import bfcl

    _, subset = bfcl.stratified(bfcl.minimum())

    class SubsetBenchmark(FakeBenchmark):
        def endpoints_workload(self, model, accuracy, fields, paths, run_dir, test_run, *, scenario=""):
            return ClientWorkload(datasets=({"name": "bfcl_v4::function_calling", "type": "accuracy"},),
                                  targets={"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32},
                                  samples_required=995, accuracy_subset=subset)

    monkeypatch.setenv("CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("ACCURACY_RESULTS", str(RECORDED_SUBSET))
    client = fake_client(tmp_path)
    (Path(client.venv) / "endpoints-client.json").write_text(json.dumps(client.as_dict()))
    run_dir = tmp_path / "run"
    outcome = EndpointsHarness().run_own_test(a_spec(tmp_path, TestMode.AccuracyOnly), SubsetBenchmark(),
                                              SimpleNamespace(endpoints_venv=Path(client.venv)), run_dir)
    shown = capsys.readouterr().out
    before = "a subset of the accuracy set, not its 995-sample score: 12 samples, 3 groups, 12 parts"
    assert before in shown and shown.index(before) < shown.index("MLCommons endpoints client 0.1.0")
    assert "non_live 6 (simple_python 1, simple_java 1" in shown and "hallucination 2 (irrelevance 1" in shown
    recorded = json.loads(RECORDED_SUBSET.read_text())["accuracy_scores"][0]["breakdown"]
    scores = f"non_live {recorded['category_scores']['non_live']:.2f} (simple_python " \
             f"{recorded['subset_scores']['simple_python']:.2f} of 1"
    assert "scores on the subset of 12 of 995 samples (not the full score)" in shown and scores in shown
    gates = {gate["name"]: gate for gate in outcome["load_generator"]["gates"]}
    assert gates["the subset asked (12 samples)"]["passed"] is True
    assert gates["995 samples scored"]["passed"] is False and outcome["valid"] is False
    assert outcome["load_generator"]["accuracy_subset"]["counts"]["live"] == {
        "live_simple": 1, "live_multiple": 1, "live_parallel": 1, "live_parallel_multiple": 1}
    assert outcome["load_generator"]["figures"]["category_scores.hallucination"] == \
        recorded["category_scores"]["hallucination"]
    assert outcome["accuracy"].text.startswith(before) and scores in outcome["accuracy"].text
    assert outcome["accuracy"].metrics == {"overall_accuracy of the 12-sample subset": 16.67,    # the summary's
                                           "normalized_single_turn_score of the 12-sample subset": 33.33}
    assert outcome["durations"].measured_s == 517.603       # the client's duration_s of the scored samples
    record = json.loads((run_dir / "client_run.json").read_text())
    assert record["accuracy_subset"]["samples"] == 12 and record["accuracy_subset"]["of_samples"] == 995


def test_a_report_missing_a_subset_of_the_one_asked_fails_the_subset_gate():
    from code.common.endpoints_client.gates import subset_gate
    from code.qwen3_6 import bfcl

    _, subset = bfcl.stratified(bfcl.minimum())
    figures = {"total_samples": 8.0, **{f"subset_scores.{name}": 100.0 for name in ("irrelevance", "live_irrelevance")}}
    gate = subset_gate(figures, subset)
    assert not gate.passed
    assert gate.detail.startswith("8 of 12 samples scored, 2 of 12 parts (none of live_multiple, live_parallel, ")


def test_the_plan_of_an_accuracy_test_takes_the_earlier_accuracy_tests_own_pace_and_start_up(tmp_path):
    """The figures of make run's test run here (a load of 7 to 12): the accuracy test's 1284.4 s, of which the
    client scored its 12 samples in 517.6 s."""
    from code.common.harness.plan import plan_entry

    ctx = _plan_context(tmp_path, "--test_run")
    runs = [_earlier(ctx, p90_ms=14_330.7, test_s=591.9, measured_s=58.3),
            _earlier(ctx, p90_ms=None, test_s=1284.4, measured_s=517.6, samples=12)]
    accuracy = plan_entry(ctx, "qwen3.6-27b", Scenario.SingleStream, TestMode.AccuracyOnly, runs)
    assert accuracy.duration_s == pytest.approx(1284.4)          # 766.8 s of start-up, 12 samples at 43.1 s
    assert "43.1 s per sample, 518 s for 12 samples in /logs/earlier-AccuracyOnly" in accuracy.speed.basis
    performance = plan_entry(ctx, "qwen3.6-27b", Scenario.SingleStream, TestMode.PerformanceOnly, runs)
    assert performance.duration_s == pytest.approx(591.9 - 58.3 + 2 * 14.3307)
