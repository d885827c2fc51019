"""Which runs are staged: choices from metadata records, measurements, and the staging refusals."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from code.common.benchmark_api import get_benchmark
from code.common.constants import AccuracyTarget, Scenario, SystemType
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.records.metadata import EngineRecord, RunRecord
from code.common.records.record import EndpointRecord
from code.common.records.reproduce import record_selection, reproduce_command
from code.common.submission.measurements import calibration_markdown
from code.common.records.runs import choose_runs
from code.common.submission.staging import stage_scenario

from .run_records import compliance_run, make_record, resolved_config
from .synthetic_logs import offline_detail

RULES = get_round()
FIELDS = {"model": "mobilenet_v2", "dataset": "foolbox20", "backend": "onnxruntime", "precision": "fp32"}


def record(mode="PerformanceOnly", value=100.0, valid=True, test_run=False, status="completed", finished="1",
           scenario="Offline", log_dir="/logs/x", **fields) -> RunRecord:
    """A run of the embedded default whose model was typed on the command line."""
    config = resolved_config("box", Scenario(scenario), model=FIELDS["model"], **fields)
    return make_record(value, valid, test_run, finished, mode=mode, scenario=scenario, status=status,
                       log_dir=log_dir, config=config)


def test_best_valid_performance_and_matching_latest_accuracy():
    records = [record(value=90, finished="1"), record(value=120, finished="2"), record(value=150, valid=False),
               record(value=200, status="failed"), record(value=300, status="interrupted"),
               record(value=400, test_run=True),
               record("AccuracyOnly", finished="3"), record("AccuracyOnly", finished="5", precision="int8"),
               record("AccuracyOnly", finished="4")]
    choice = choose_runs(records, allow_test_runs=False)[("box", "resnet50", Scenario.Offline)]
    assert choice.performance.metric.value == 120
    assert choice.accuracy.finished == "4"   # the int8 run computes something else
    reasons = " | ".join(choice.passed_over)
    for why in ("INVALID run", "failed run", "interrupted run", "test run (--test_run; stage it with --allow_test_runs"):
        assert why in reasons


def served(run: RunRecord, model: str, engine: str = "vllm", version: str = "0.10.1", folder: str = "") -> RunRecord:
    """`run` as the openai harness records it: no engine file (an empty manifest), one server of `model`."""
    extras = {"serving_engine": engine, "serving_engine_version": version, "served_models": [model]}
    if folder:
        extras["model_folder_sha256"] = folder
    return run.replace(engine=EngineRecord(path="", manifest={}),
                       endpoints=(EndpointRecord(host="127.0.0.1", port=8000, protocol="http", model=model,
                                                 extras=extras),))


@pytest.mark.parametrize("accuracy_server, pairs", [
    ({"model": "HuggingFaceTB/SmolLM2-135M-Instruct"}, True),
    ({"model": "Qwen/Qwen2.5-0.5B-Instruct"}, False),                                    # another served model
    ({"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "engine": "sglang"}, False),       # another serving engine
    ({"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "version": "0.11.0"}, False),      # another version of it
    ({"model": "HuggingFaceTB/SmolLM2-135M-Instruct", "folder": "ab" * 32}, False),      # another model folder
])
def test_serving_engine_runs_pair_by_what_their_servers_served(accuracy_server, pairs):
    performance = served(record(finished="2"), "HuggingFaceTB/SmolLM2-135M-Instruct")
    accuracy = served(record("AccuracyOnly", finished="3"), **accuracy_server)
    choice = choose_runs([performance, accuracy], allow_test_runs=False)[("box", "resnet50", Scenario.Offline)]
    assert (choice.accuracy is accuracy) is pairs
    if not pairs:
        assert choice.accuracy is None
        assert ", not HuggingFaceTB/SmolLM2-135M-Instruct on vllm 0.10.1)" in choice.other_accuracy[0]


def test_a_serving_engine_run_never_pairs_with_an_in_process_one():
    performance = served(record(finished="2"), "HuggingFaceTB/SmolLM2-135M-Instruct")
    accuracy = record("AccuracyOnly", finished="3").replace(engine=EngineRecord(path="", manifest={}))
    choice = choose_runs([performance, accuracy], allow_test_runs=False)[("box", "resnet50", Scenario.Offline)]
    assert choice.accuracy is None
    assert "other servers (no server, not HuggingFaceTB/SmolLM2-135M-Instruct on vllm 0.10.1)" in \
        choice.other_accuracy[0]


def test_dry_runs_take_test_runs_but_never_failed_ones():
    records = [record(value=400, test_run=True, valid=False), record(value=500, status="failed", test_run=True)]
    choice = choose_runs(records, allow_test_runs=True)[("box", "resnet50", Scenario.Offline)]
    assert choice.performance.metric.value == 400
    assert choose_runs(records[1:], allow_test_runs=True)[("box", "resnet50", Scenario.Offline)].performance is None


def test_latency_scenarios_prefer_lower_latency():
    records = [record(scenario="SingleStream", value=5.0), record(scenario="SingleStream", value=4.0)]
    records = [r.replace(metric=dataclasses.replace(r.metric, higher_is_better=False)) for r in records]
    choice = choose_runs(records, False)[("box", "resnet50", Scenario.SingleStream)]
    assert choice.performance.metric.value == 4.0


def test_reproduce_command_repeats_the_given_fields():
    assert reproduce_command(record(test_run=True)) == 'make run_harness RUN_ARGS="--benchmarks=resnet50 ' \
        '--scenarios=Offline --model=mobilenet_v2 --test_run --test_mode=PerformanceOnly"'
    assert record_selection(record(test_run=True)).without_test().run_args() == \
        "--benchmarks=resnet50 --scenarios=Offline --model=mobilenet_v2 --test_run"


def test_calibration_markdown_describes_what_was_used():
    fp32 = record()
    int8 = record(precision="int8")
    int8 = int8.replace(engine=EngineRecord(path="e.onnx", manifest={"calibration": {
        "dataset": "imagenet_sample", "count": 100, "method": "MinMax", "cache_sha256": "ab" * 32}}))
    text = calibration_markdown([fp32, int8])
    assert "fp32, no calibration" in text
    assert "MinMax over 100 images of the calibration list of `imagenet_sample`" in text


def test_edge_scenarios_are_inferred_only_as_the_rules_allow(tmp_path):
    from code.common.submission.staging import infer_scenario, inferable_sources

    staged = {Scenario.SingleStream, Scenario.Offline}
    assert inferable_sources(RULES, SystemType.edge, Scenario.MultiStream, staged) == [Scenario.SingleStream]
    assert inferable_sources(RULES, SystemType.datacenter, Scenario.MultiStream, staged) == []
    assert inferable_sources(RULES, SystemType.edge, Scenario.SingleStream, {Scenario.Offline}) == []
    results = tmp_path / "resnet"
    (results / "SingleStream" / "performance" / "run_1").mkdir(parents=True)
    (results / "SingleStream" / "performance" / "run_1" / "mlperf_log_detail.txt").write_text("ss\n")
    (results / "SingleStream" / "TEST01").mkdir()
    dest = infer_scenario(results, Scenario.SingleStream, Scenario.MultiStream)
    assert (dest / "performance" / "run_1" / "mlperf_log_detail.txt").read_text() == "ss\n"
    assert not (dest / "TEST01").exists()   # compliance is verified and staged per folder by stage_compliance


def _staged_run(tmp_path: Path, name: str, value: float) -> RunRecord:
    run_dir = offline_detail(tmp_path / name, value)
    (run_dir / "mlperf_log_summary.txt").write_text(f"run {name}\n")
    return record(value=value, log_dir=str(run_dir))


def test_staging_stages_the_chosen_run_and_says_what_it_replaces(tmp_path):
    from code.common.submission.measurements import readme

    paths = Paths.create(scratch=tmp_path / "s", log_dir=tmp_path / "l", repo=tmp_path / "repo")
    key = ("box", "resnet50", Scenario.Offline)
    good, worse = _staged_run(tmp_path, "good", 200.0), _staged_run(tmp_path, "worse", 150.0)
    choice = choose_runs([good], False)[key]
    with pytest.raises(UserError, match="run `make generate_conf_files` first"):
        stage_scenario(paths, RULES, "Org", key, choice, print)
    measured = paths.measurements_dir("box", "resnet", Scenario.Offline)
    measured.mkdir(parents=True)
    for name in ("measurements.json", "user.conf"):
        (measured / name).write_text(json.dumps({"x": 1}))
    (measured / "README.md").write_text("# written for another configuration\n")
    with pytest.raises(UserError, match="another configuration than the run chosen"):
        stage_scenario(paths, RULES, "Org", key, choice, print)
    (measured / "README.md").write_text(readme(good))
    log: list[str] = []
    dest = stage_scenario(paths, RULES, "Org", key, choice, log.append)
    assert dest == tmp_path / "repo/build/submission-staging/open/Org/results/box/resnet/Offline"
    assert (dest / "performance/run_1/mlperf_log_summary.txt").read_text() == "run good\n"
    # The ranking chose another run (the good one's logs went away, say): it is what gets staged, said aloud.
    stage_scenario(paths, RULES, "Org", key, choose_runs([worse], False)[key], log.append)
    assert (dest / "performance/run_1/mlperf_log_summary.txt").read_text() == "run worse\n"
    assert any("replacing the staged performance run with the chosen" in line for line in log)


def _compliance_fixture(tmp_path: Path, staged_rate: float = 160.0, audited_rate: float = 161.0,
                        compliance_rate: float = 158.0, responses: dict | None = None):
    """A staged Offline result and the TEST01 folder run_audit_harness lays out, as official logs."""
    from tests.official_corpus import accuracy_log, perf_values, write_run

    paths = Paths.create(repo=tmp_path)
    results = paths.results_dir(paths.staging, "closed", "Org", "box", "resnet", Scenario.Offline)
    write_run(results / "performance" / "run_1", perf_values("Offline", result_samples_per_second=staged_rate))
    (results / "accuracy").mkdir(parents=True)
    full = accuracy_log(((0, 1), (1, 2), (2, 3)))
    (results / "accuracy" / "mlperf_log_accuracy.json").write_text(json.dumps(full))
    folder = paths.compliance_log_dir("TEST01", "box", "resnet50", Scenario.Offline)
    audited = tmp_path / "audited"
    write_run(audited, perf_values("Offline", result_samples_per_second=audited_rate))
    write_run(folder / "performance" / "run_1", perf_values("Offline", result_samples_per_second=compliance_rate))
    (folder / "accuracy").mkdir(parents=True)
    sampled = accuracy_log(tuple((responses or {0: 1, 2: 3}).items()))
    (folder / "accuracy" / "mlperf_log_accuracy.json").write_text(json.dumps(sampled))
    (folder / "accuracy" / "accuracy.txt").write_text("accuracy=100.000%, good=2, total=2\n")
    (folder / "verify_performance.txt").write_text("TEST PASS\n")
    (folder / "verify_accuracy.txt").write_text("TEST PASS\n")
    from code.common.fileio import sha256_file
    (folder / "verified_against.json").write_text(json.dumps({
        "performance_detail_sha256": sha256_file(audited / "mlperf_log_detail.txt"),
        "accuracy_log_sha256": sha256_file(results / "accuracy" / "mlperf_log_accuracy.json")}))
    compliance_run(folder, "TEST01")
    return paths, results, folder


def _stage(paths, results, log=None):
    from code.common.submission.staging import stage_compliance_for

    return stage_compliance_for(paths, RULES, results, "box", "resnet50", Scenario.Offline, AccuracyTarget.k_99,
                                get_benchmark("resnet50").response, log.append if log is not None else (lambda _: None))


def test_stage_compliance_verifies_against_the_staged_runs(tmp_path):
    paths, results, folder = _compliance_fixture(tmp_path)
    log: list[str] = []
    problems = _stage(paths, results, log)
    assert problems == ['box resnet50 Offline TEST04: no compliance run; run make run_audit_harness '
                        'RUN_ARGS="--benchmarks=resnet50 --scenarios=Offline"']
    staged = results / "TEST01"
    assert sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()) == [
        "accuracy/accuracy.txt", "accuracy/mlperf_log_accuracy.json", "performance/run_1/mlperf_log_detail.txt",
        "performance/run_1/mlperf_log_summary.txt", "verify_accuracy.txt", "verify_performance.txt"]
    assert (staged / "verify_performance.txt").read_text() == ("Verifying performance.\nReference score = 160.0\n"
                                                               "Test score = 158.0\nTEST PASS\n")
    assert "verified again against the staged run, which differs from the audited one" in log[0]


def test_a_verdict_that_fails_against_the_staged_run_is_not_staged(tmp_path):
    paths, results, folder = _compliance_fixture(tmp_path)
    _stage(paths, results)
    assert (results / "TEST01").is_dir()
    # A faster performance run is staged later: the compliance run is now 21 % slower than it.
    from tests.official_corpus import perf_values, write_run
    write_run(results / "performance" / "run_1", perf_values("Offline", result_samples_per_second=200.0))
    [problem, _] = _stage(paths, results)
    assert "against the staged performance run the test fails (158 vs 200 samples/s" in problem
    assert "removed the TEST01/ staged earlier" in problem and not (results / "TEST01").exists()


def test_differing_responses_need_a_part3_result_of_the_staged_accuracy_run(tmp_path):
    paths, results, folder = _compliance_fixture(tmp_path, responses={0: 1, 2: 9})
    (folder / "verify_accuracy.txt").write_text("TEST FAIL\n")     # what verify_accuracy.py says of them
    [problem, _] = _stage(paths, results)
    assert "1 of 2 sampled responses differ from the accuracy run, and no Part III result was computed" in problem
    (folder / "accuracy" / "baseline_accuracy.txt").write_text("accuracy=76.500%, good=2, total=2\n")
    (folder / "accuracy" / "compliance_accuracy.txt").write_text("accuracy=76.000%, good=1, total=2\n")
    (folder / "verify_accuracy.txt").write_text("TEST FAIL\n")
    assert len(_stage(paths, results)) == 1
    assert sorted(p.name for p in (results / "TEST01" / "accuracy").iterdir()) == [
        "accuracy.txt", "baseline_accuracy.txt", "compliance_accuracy.txt", "mlperf_log_accuracy.json"]
    assert (results / "TEST01" / "verify_accuracy.txt").read_text().rstrip().endswith("TEST FAIL")
    # Part III computed against another accuracy run does not count.
    (results / "accuracy" / "mlperf_log_accuracy.json").write_text("[]")
    [problem, _] = _stage(paths, results)
    assert "no sampled response has a counterpart" in problem or "another accuracy run" in problem


# -- stage_results: what the round lets into the submission of a system type ------------------------------------
def _stage_results(tmp_path: Path, infer: bool = False):
    from types import SimpleNamespace

    from code.actions.submission import StageResults

    logs: list[str] = []
    ctx = SimpleNamespace(rules=RULES, args=SimpleNamespace(infer_scenarios=infer), log=logs.append,
                          paths=Paths.create(repo=tmp_path))
    return StageResults(ctx), logs


def test_stage_results_refuses_benchmarks_and_scenarios_outside_the_suite(tmp_path):
    from code.common.records.runs import Choice

    handler, _ = _stage_results(tmp_path)
    closed = Choice(performance=record().replace(division="closed"))
    why = handler._refusal(("box", "resnet50", Scenario.Offline), closed, SystemType.datacenter)
    assert why.startswith("resnet is not in the v6.1 datacenter suite")
    why = handler._refusal(("box", "resnet50", Scenario.Server), closed, SystemType.edge)
    assert why.startswith("box resnet Server: the closed division has no Server for resnet on a edge system")
    assert handler._refusal(("box", "resnet50", Scenario.Server), closed, SystemType.datacenter_edge) is None
    open_ = Choice(performance=record())
    assert handler._refusal(("box", "resnet50", Scenario.Server), open_, SystemType.edge) is None


@pytest.mark.parametrize("infer", [False, True])
def test_stage_results_infers_edge_scenarios_only_when_asked(tmp_path, infer):
    handler, logs = _stage_results(tmp_path, infer)
    results = tmp_path / "resnet"
    (results / "SingleStream" / "performance" / "run_1").mkdir(parents=True)
    (results / "SingleStream" / "performance" / "run_1" / "mlperf_log_detail.txt").write_text("ss\n")
    staged = {("box", "resnet50"): {Scenario.SingleStream, Scenario.Offline}}
    missing = handler._fill_missing(SystemType.edge, staged, {("box", "resnet50"): results})
    assert (results / "MultiStream").is_dir() == infer
    if infer:
        assert missing == [] and "inferred from the staged SingleStream run (--infer_scenarios)" in logs[0]
    else:
        [line] = missing
        assert line.startswith("box resnet50 MultiStream: required for edge systems and not staged")
        assert 'infer it from SingleStream with RUN_ARGS="--infer_scenarios"' in line
    assert handler._fill_missing(SystemType.datacenter_edge, {("box", "resnet50"): {Scenario.SingleStream}},
                                 {("box", "resnet50"): results}) != []


def test_a_damaged_verification_record_never_stops_stage_compliance(tmp_path):
    paths, results, folder = _compliance_fixture(tmp_path)
    (folder / "verified_against.json").write_text('{"performance_detail_sha2')
    log: list[str] = []
    problems = _stage(paths, results, log)
    assert len(problems) == 1 and "TEST04" in problems[0]          # TEST01 staged: verified again from its logs
    assert (results / "TEST01" / "verify_performance.txt").is_file()
    assert any("verified_against.json cannot be read" in line for line in log)


def test_a_result_refused_by_stage_results_takes_its_earlier_staged_copy_with_it(tmp_path):
    from code.common.records.runs import Choice

    handler, logs = _stage_results(tmp_path)
    handler.ctx.args.submitter = "Org"
    paths = handler.ctx.paths
    earlier = paths.results_dir(paths.staging, "closed", "Org", "box", "resnet", Scenario.Server)
    (earlier / "performance" / "run_1").mkdir(parents=True)
    (earlier / "performance" / "run_1" / "mlperf_log_summary.txt").write_text("an earlier Server run\n")
    systems = paths.submitter_root(paths.staging, "closed", "Org") / "systems"
    systems.mkdir(parents=True)
    (systems / "box.json").write_text("{}\n")
    closed = Choice(performance=record(scenario="Server").replace(division="closed"))
    handler.choices = lambda: {("box", "resnet50", Scenario.Server): closed}
    handler._system_type = lambda: SystemType.edge      # the closed division has no Server for an edge system
    with pytest.raises(UserError, match="Nothing staged") as refused:
        handler.handle()
    assert refused.value.exit_code == 1
    [line] = [line for line in logs if line.startswith("not staged:")]
    assert "the closed division has no Server for resnet on a edge system" in line
    assert f"The copy of box resnet50 Server staged earlier ({earlier}) was removed" in line
    assert not earlier.exists() and not (systems / "box.json").exists()


def test_a_written_verdict_its_logs_do_not_give_is_refused(tmp_path):
    from code.common.submission.staging import EvidenceProblem

    paths, results, folder = _compliance_fixture(tmp_path, staged_rate=160.0, compliance_rate=100.0)
    # Audited against the staged run itself, 37 % slower than it, and the verdict edited to a pass.
    from code.common.fileio import sha256_file
    against = json.loads((folder / "verified_against.json").read_text())
    against["performance_detail_sha256"] = sha256_file(results / "performance" / "run_1" / "mlperf_log_detail.txt")
    (folder / "verified_against.json").write_text(json.dumps(against))
    [problem, _] = _stage(paths, results)
    assert isinstance(problem, EvidenceProblem)
    assert "verify_performance.txt says TEST PASS, but its logs give TEST FAIL (100 vs 160 samples/s" in problem
    assert not (results / "TEST01").exists()


def test_a_compliance_log_changed_after_its_run_is_refused_and_the_earlier_copy_goes(tmp_path):
    from code.common.submission.staging import EvidenceProblem

    paths, results, folder = _compliance_fixture(tmp_path)
    assert len(_stage(paths, results)) == 1 and (results / "TEST01").is_dir()
    cut = folder / "accuracy" / "mlperf_log_accuracy.json"
    cut.write_text(json.dumps(json.loads(cut.read_text())[:1]))      # one sampled response of two left
    [problem, _] = _stage(paths, results)
    assert isinstance(problem, EvidenceProblem)
    assert f"{cut} is not the mlperf_log_accuracy.json the compliance run wrote" in problem
    assert "removed the TEST01/ staged earlier" in problem and not (results / "TEST01").exists()
