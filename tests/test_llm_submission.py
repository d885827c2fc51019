"""TEST06 and the LLM results of a submission: verification, verdict files, staging, the checker, truncation.

The official verdicts are facts recorded by running the round's tools (compliance/TEST06/run_verification.py, the
two submission checkers: tests/official_corpus.py, whose LLM trees tests/test_official_agreement.py also checks);
with MLPERF_INFERENCE_DIR the tests below run run_verification.py again.
"""
from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import numpy as np
import pytest

from code.actions.audit import RunAuditHarness
from code.common.audit.references import Reference
from code.common.audit.test06 import verify_test06
from code.common.audit.verdicts import VERIFIED_AGAINST, read_verified_against, token_verdict_problems
from code.common.benchmark_api import ResponseFormat
from code.common.constants import AccuracyTarget, Scenario
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.submission.checker import check_submission
from code.common.submission.staging import EvidenceProblem, stage_compliance_for
from code.common.submission.truncate import truncate_tree
from tests.official_corpus import (HASH, LLM_INTERACTIVE, TEST06_CASES, TEST06_EOS, TEST06_PASS, SampledCase, _llm,
                                   build_tree, perf_values, rouge_line, sampled_log, write_run)
from tests.official_tools import NOT_AT_HAND, inference_dir, run_test06_verification
from tests.run_records import write_compliance_record
from tests.synthetic_logs import token_entry
from tests.test_checker import FIX

RULES = get_round("v6.1")
TEST06 = RULES.compliance_tests["TEST06"]
RESPONSE = ResponseFormat(dtype="int32", fields=("token_id",), records_per_sample=None, typical_records=128)
EOS_ID = 128009          # Llama 3.1 Instruct's <|eot_id|>: any id the caller gives counts
needs_checkout = pytest.mark.skipif(inference_dir() is None,
                                    reason=f"{NOT_AT_HAND}: run_verification.py was not run again")


# -- the verification ----------------------------------------------------------------------------------------
def test_sampled_responses_that_keep_the_rules_pass():
    entries = [token_entry(0, 3, [791, 1296, EOS_ID], [791]), token_entry(1, 8, [40, 41, 42], [40])]
    check = verify_test06(entries, Scenario.Server, [EOS_ID])
    assert check.passed and check.text == TEST06_PASS
    assert check.summary == "2 sampled responses: first tokens as reported, at most one trailing EOS, token counts " \
                            "as reported"


def test_two_trailing_eos_fail():
    check = verify_test06([token_entry(0, 3, [791, EOS_ID, EOS_ID], [791])], Scenario.Interactive, [EOS_ID])
    assert not check.passed and "EOS check pass: False" in check.text.splitlines()
    assert check.text.endswith("TEST06 verification failed\n")
    assert check.summary == f"qsl_idx 3 ends with 2 end-of-sequence tokens ({EOS_ID}); at most one may end an output"


def test_a_token_count_that_is_not_the_output_length_fails():
    check = verify_test06([token_entry(0, 5, [791, 1296, EOS_ID], [791], count=2)], Scenario.Server, [EOS_ID])
    assert not check.passed and "Sample length check pass: False" in check.text.splitlines()
    assert check.summary == "qsl_idx 5 reports 2 tokens but its output has 3"


def test_a_first_token_other_than_the_outputs_fails_except_in_offline():
    server = verify_test06([token_entry(0, 5, [791, 1296], [792])], Scenario.Server, [EOS_ID])
    assert not server.passed and server.text.startswith("First token check pass: False\n")
    assert "first token reported on its own is 792 but the output's token 0 is 791" in server.summary
    # Offline logs no first token (LoadGen's accuracy entries have no token_data there): the check is skipped.
    offline = verify_test06([token_entry(0, 5, [791, 1296])], Scenario.Offline, [EOS_ID])
    assert offline.passed and offline.text.startswith("First token check pass: Skipped\n")


def test_several_eos_ids_each_count():
    # The tokenizer of an instruct model has several end tokens; two different ones in a row still end twice.
    check = verify_test06([token_entry(0, 3, [791, 128001, 128009], [791])], Scenario.Server, [128001, 128009])
    assert not check.passed
    assert verify_test06([token_entry(0, 3, [791, 128001, 128009], [791])], Scenario.Server, [128009]).passed


def test_an_empty_log_is_refused_though_the_script_passes_it():
    check = verify_test06([], Scenario.Server, [EOS_ID])
    assert not check.passed and "holds no sampled response" in check.summary
    with pytest.raises(ValueError, match="end-of-sequence"):
        verify_test06([token_entry(0, 1, [5])], Scenario.Server, [])


@pytest.mark.parametrize("case", TEST06_CASES, ids=[c.name for c in TEST06_CASES])
def test_verdict_text_is_the_scripts(case: SampledCase):
    check = verify_test06(sampled_log(case), Scenario(case.scenario), [TEST06_EOS])
    assert check.text == case.official_text
    assert check.passed == case.official_text.endswith("complete\n")


@needs_checkout
def test_run_verification_gives_the_recorded_texts(tmp_path: Path):
    wrong = []
    for case in TEST06_CASES:
        folder = tmp_path / case.name
        folder.mkdir()
        (folder / "mlperf_log_accuracy.json").write_text(json.dumps(sampled_log(case)))
        text = run_test06_verification(inference_dir(), folder, case.scenario, folder / "out")
        if text != case.official_text:
            wrong.append(f"{case.name}: {text!r}, recorded {case.official_text!r}")
        with_id = run_test06_verification(inference_dir(), folder, case.scenario, folder / "cli", TEST06_EOS)
        if with_id is None or f"EOS check pass: {case.eos_with_cli_id}\n" not in with_id:
            wrong.append(f"{case.name} with -e {TEST06_EOS}: {with_id!r}")
    assert not wrong, "\n".join(wrong)


# -- verdict files -----------------------------------------------------------------------------------------
def test_verdict_file_needs_the_three_passing_lines(tmp_path: Path):
    # compliance_check.py (main.py) and check_compliance_acc_dir (old): the lines, stripped, not the last one.
    (tmp_path / "verify_accuracy.txt").write_text(TEST06_PASS.replace("complete", "failed"))
    assert token_verdict_problems(tmp_path) == []
    (tmp_path / "verify_accuracy.txt").write_text(TEST06_PASS.replace("First token check pass: True",
                                                                      "First token check pass: Skipped"))
    assert token_verdict_problems(tmp_path) == []
    (tmp_path / "verify_accuracy.txt").write_text(TEST06_PASS.replace("EOS check pass: True", "EOS check pass: False"))
    ((path, problem),) = token_verdict_problems(tmp_path)
    assert "no passing line for: EOS check pass" in problem
    (tmp_path / "verify_accuracy.txt").unlink()
    assert "missing" in token_verdict_problems(tmp_path)[0][1]


# -- the audit lays TEST06 out; staging copies it as run_verification.py does -------------------------------
def _audit(tmp_path: Path, tokens: list[int], scenario: Scenario = Scenario.Interactive,
           monkeypatch: pytest.MonkeyPatch | None = None) -> tuple[Paths, Path, object]:
    """A TEST06 compliance run verified by run_audit_harness, with the benchmark's EOS id from its generation
    settings (a stand-in for the tokenizer's)."""
    paths = Paths.create(repo=tmp_path / "repo")
    reference = tmp_path / "submission_run"
    write_run(reference, perf_values("Server", **LLM_INTERACTIVE))
    run_dir = tmp_path / "compliance_run"
    write_run(run_dir, perf_values("Server", **LLM_INTERACTIVE))
    (run_dir / "mlperf_log_accuracy.json").write_text(json.dumps([token_entry(0, 7, tokens, tokens[:1])]))
    write_compliance_record(run_dir, "TEST06", benchmark="llama3.1-8b", model="llama3.1-8b-instruct",
                            dataset="cnn_dailymail", scenario="Server")
    benchmark = types.SimpleNamespace(generation=lambda model, fields, paths: types.SimpleNamespace(
        eos_token_ids=(128001, EOS_ID)), response=RESPONSE)
    monkeypatch.setattr("code.actions.audit.get_benchmark", lambda name: benchmark)
    handler = RunAuditHarness.__new__(RunAuditHarness)
    handler.ctx = types.SimpleNamespace(paths=paths, log=lambda line: None)
    record = types.SimpleNamespace(completed=True, benchmark="llama3.1-8b", model="llama3.1-8b-instruct",
                                   config=types.SimpleNamespace(fields={}), scenario=scenario)
    folder = paths.compliance_log_dir("TEST06", "box", "llama3.1-8b", scenario)
    folder.mkdir(parents=True)
    outcome = handler._verify("TEST06 llama3.1-8b Interactive", TEST06, record,
                              Reference(types.SimpleNamespace(log_dir=str(reference)), None), run_dir, folder)
    return paths, folder, outcome


def _staged_interactive(paths: Paths) -> Path:
    results = paths.results_dir(paths.staging, "closed", "Org", "box", "llama3.1-8b", Scenario.Interactive)
    write_run(results / "performance" / "run_1", perf_values("Server", **LLM_INTERACTIVE))   # LoadGen says Server
    return results


def _stage(paths: Paths, results: Path, lines: list[str]) -> list[str]:
    return stage_compliance_for(paths, RULES, results, "box", "llama3.1-8b", Scenario.Interactive,
                                AccuracyTarget.k_99, RESPONSE, lines.append)


def test_audit_and_staging_lay_out_test06_as_the_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    paths, folder, outcome = _audit(tmp_path, [791, 1296, EOS_ID], monkeypatch=monkeypatch)
    assert outcome.passed and outcome.summary.startswith("tokens PASS: 1 sampled response")
    assert (folder / "verify_accuracy.txt").read_text() == TEST06_PASS
    assert (folder / "accuracy" / "mlperf_log_accuracy.json").is_file()
    assert read_verified_against(folder)["eos_token_ids"] == [128001, EOS_ID]
    results, lines = _staged_interactive(paths), []
    assert _stage(paths, results, lines) == []
    # tools/submission/directory_structure_samples/.../llama2-70b-99/Interactive/TEST06: these two files only.
    staged = sorted(p.relative_to(results / "TEST06").as_posix() for p in (results / "TEST06").rglob("*")
                    if p.is_file())
    assert staged == ["accuracy/mlperf_log_accuracy.json", "verify_accuracy.txt"]
    assert (results / "TEST06" / "verify_accuracy.txt").read_text() == TEST06_PASS
    assert "verified again: 1 sampled response" in lines[0]


def test_a_failing_test06_is_not_staged_and_an_earlier_one_goes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    paths, folder, outcome = _audit(tmp_path, [791, EOS_ID, EOS_ID], monkeypatch=monkeypatch)
    assert not outcome.passed and "EOS check pass: False" in (folder / "verify_accuracy.txt").read_text()
    results = _staged_interactive(paths)
    (results / "TEST06").mkdir()
    (results / "TEST06" / "verify_accuracy.txt").write_text(TEST06_PASS)
    (problem,) = _stage(paths, results, [])
    assert "the test fails (qsl_idx 7 ends with 2 end-of-sequence tokens" in problem
    assert "removed the TEST06/ staged earlier" in problem and not (results / "TEST06").exists()
    assert "--scenarios=Interactive" in problem


def test_staging_checks_the_log_again_not_the_recorded_verdict(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    paths, folder, _ = _audit(tmp_path, [791, 1296, EOS_ID], monkeypatch=monkeypatch)
    bad = [token_entry(0, 7, [791, EOS_ID, EOS_ID], [791])]
    (folder / "accuracy" / "mlperf_log_accuracy.json").write_text(json.dumps(bad))   # replaced after the audit
    (problem,) = _stage(paths, _staged_interactive(paths), [])
    assert f"{folder / 'accuracy' / 'mlperf_log_accuracy.json'} is not the mlperf_log_accuracy.json the " \
           f"compliance run wrote" in problem
    # Without the run's record of its digests, the logs cannot be verified: refused, never staged unverified.
    (tmp_path / "compliance_run" / "metadata.json").unlink()
    (problem,) = _stage(paths, _staged_interactive(paths), [])
    assert isinstance(problem, EvidenceProblem) and "no record of the compliance run that wrote" in problem
    # A run that wrote that very log (its record holds its digest): the log is verified again and fails, and the
    # verdict file that says it passes is refused, naming both verdicts.
    shutil.copy2(folder / "accuracy" / "mlperf_log_accuracy.json", tmp_path / "compliance_run")
    write_compliance_record(tmp_path / "compliance_run", "TEST06", benchmark="llama3.1-8b",
                            model="llama3.1-8b-instruct", dataset="cnn_dailymail", scenario="Server")
    (problem,) = _stage(paths, _staged_interactive(paths), [])
    assert "verify_accuracy.txt says TEST PASS, but its logs give TEST FAIL (qsl_idx 7 ends with 2" in problem
    (folder / "verify_accuracy.txt").write_text(TEST06_PASS.replace("EOS check pass: True", "EOS check pass: False"))
    (problem,) = _stage(paths, _staged_interactive(paths), [])
    assert "the test fails" in problem
    (folder / "verify_accuracy.txt").write_text(TEST06_PASS)
    # Without recorded EOS ids the verdict cannot be verified again: refused, never staged as written.
    against = read_verified_against(folder)
    del against["eos_token_ids"]
    (folder / VERIFIED_AGAINST).write_text(json.dumps(against))
    (problem,) = _stage(paths, _staged_interactive(paths), [])
    assert isinstance(problem, EvidenceProblem) and "records no EOS token ids" in problem


# -- the checker and the truncation on LLM trees ----------------------------------------------------------------
def test_llm_findings_name_their_fix(tmp_path: Path):
    spec = _llm(folders={"Offline": "Offline", "Interactive": "Server"},
                perf_by_folder={"Interactive": {"result_time_per_output_token_99.00_percentile_ns": 35000000}},
                accuracy_txt=f"{{'rouge1': '38.9', 'rouge2': '16.2', 'rougeL': '24.5', 'rougeLsum': '35.9', "
                             f"'gen_len': 9100000, 'gen_num': 13368}}\n{HASH}\n")
    report = check_submission(build_tree(tmp_path / "tree", spec), RULES)
    errors = [f.message for f in report.errors]
    assert any("time per output token is 35 ms, not below the Interactive bound of 30 ms" in e for e in errors)
    assert any("GEN_LEN 9100000 is above the upper limit 8984408.4 (110 % of 8167644)" in e for e in errors)
    assert all(FIX.search(f.message) for f in report.findings), report.text()


def test_an_interactive_folder_of_server_logs_is_its_own_run(tmp_path: Path):
    spec = _llm(folders={"Offline": "Offline", "Interactive": "Server"})
    report = check_submission(build_tree(tmp_path / "tree", spec), RULES)
    assert report.passed and not report.warnings, report.text()
    assert report.checked == 2


def test_truncation_leaves_test06_accuracy_alone(tmp_path: Path):
    # tools/submission/truncate_accuracy_log.py truncates accuracy/ and TEST01 (TEST07, TEST09) only.
    tree = build_tree(tmp_path / "tree", _llm(accuracy_txt="{'rouge1': '38.9'}\n"))
    sampled = json.dumps([token_entry(i, i, list(range(100)), [0]) for i in range(30)])
    for scenario in ("Offline", "Server"):
        folder = tree / "closed" / "Org" / "results" / "cpu_sys" / "llama3.1-8b" / scenario
        (folder / "accuracy" / "mlperf_log_accuracy.json").write_text("[" + " " * 20000 + "]")
        (folder / "TEST06" / "accuracy" / "mlperf_log_accuracy.json").write_text(sampled)
    report = truncate_tree(tree, tmp_path / "backup", RULES, lambda line: None)
    assert len(report.truncated) == 2 and all(p.name == "accuracy" and p.parent.name in ("Offline", "Server")
                                              for p in report.truncated)
    test06 = tree / "closed" / "Org" / "results" / "cpu_sys" / "llama3.1-8b" / "Server" / "TEST06" / "accuracy"
    assert (test06 / "mlperf_log_accuracy.json").read_text() == sampled and not (test06 / "accuracy.txt").exists()


def test_a_sampled_log_is_never_rescored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    from code.common.submission import cross_checks

    calls = []
    monkeypatch.setattr(cross_checks.AccuracyCheck, "_score", lambda self, provenance, log: calls.append(log))
    monkeypatch.setattr(cross_checks.AccuracyCheck, "_provenance", lambda self: {"benchmark": "llama3.1-8b"})
    # accuracy.txt without a hash= line: the logs are whole, so the integrity checks score them (stubbed here).
    tree = build_tree(tmp_path / "tree", _llm(accuracy_txt=rouge_line().replace(f"{HASH}\n", "")))
    (tmp_path / "scratch").mkdir()
    check_submission(tree, RULES, paths=Paths.create(repo=tmp_path, scratch=tmp_path / "scratch"))
    assert sorted(Path(log).parent.parent.name for log in calls) == ["Offline", "Server"], calls


def test_response_dtype_is_the_benchmarks():
    # run_verification.py --dtype int32 (the reference SUT writes int32 token ids): int64 bytes read as int32 differ.
    entry = token_entry(0, 1, [791, EOS_ID], [791], dtype="int64")
    entry["token_count"] = 2
    assert not verify_test06([entry], Scenario.Server, [EOS_ID], np.int32).passed
    assert verify_test06([entry], Scenario.Server, [EOS_ID], np.int64).passed


def test_measurements_of_the_closed_llm_pass_the_checkers():
    from code.common.benchmark_api import get_benchmark
    from code.common.submission.measurements import measurements, measurements_problems

    record = types.SimpleNamespace(config=types.SimpleNamespace(fields={"model": "llama3.1-8b-instruct",
                                                                        "precision": "fp32"}),
                                   engine=None, benchmark="llama3.1-8b", scenario=Scenario.Interactive)
    values = measurements(record, types.SimpleNamespace(models=get_benchmark("llama3.1-8b").models))
    assert measurements_problems(values) == [] and values["weight_data_types"] == "fp32"
