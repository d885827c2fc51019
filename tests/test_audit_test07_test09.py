"""TEST07 and TEST09 (gpt-oss-120b): the rules' audit.config lines and bounds, the verdicts on generated accuracy
logs (pass, fail, the bounds themselves, damaged logs), the verdict files the checkers read, staging, and the
official run_verification.py scripts run on the same logs when a checkout is at hand (MLPERF_INFERENCE_DIR)."""
from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from code.actions.audit import compliance_dataset
from code.common.audit.audit_config import audit_config_setting
from code.common.audit.evidence import compliance_record
from code.common.audit.test07 import find_score, score_test07, verify_test07
from code.common.audit.test09 import output_lengths, verify_test09
from code.common.audit.verdicts import verdict_problems, write_verified_against
from code.common.constants import AccuracyTarget
from code.common.paths import ACCURACY_LOG, DETAIL_LOG, SUMMARY_LOG, VERIFY_ACCURACY, VERIFY_OUTPUT_LEN
from code.common.rules import get_round
from code.common.constants import Scenario
from code.common.paths import Paths
from code.common.submission.staging import EvidenceProblem, _compliance_run, _stage_logged, stage_compliance_for
from code.common.submission.truncate import truncate_tree
from tests import multiple_choice_benchmark as mc
from tests.conftest import REPO
from tests.official_tools import NOT_AT_HAND, inference_dir, run_test07_verification, run_test09_verification
from tests.run_records import compliance_run, write_compliance_record
from tests.synthetic_logs import token_entry

RULES = get_round("v6.1")
TEST07, TEST09 = RULES.compliance_tests["TEST07"], RULES.compliance_tests["TEST09"]
GPT_OSS = RULES.benchmark("gpt-oss-120b")
LOW, HIGH = TEST09.output_token_bounds
needs_checkout = pytest.mark.skipif(inference_dir() is None,
                                    reason=f"{NOT_AT_HAND}: the official scripts were not run")


@pytest.fixture(autouse=True, scope="module")
def multiple_choice():
    mc.register()


def length_log(lengths: list[int], indices: list[int] | None = None) -> list[dict]:
    """An accuracy log whose entry k has lengths[k] int32 tokens (qsl_idx k unless `indices` says otherwise)."""
    indices = list(range(len(lengths))) if indices is None else indices
    return [token_entry(seq, index, [5] * n) for seq, (index, n) in enumerate(zip(indices, lengths))]


# -- the rules ------------------------------------------------------------------------------------------
def test_gpt_oss_runs_test07_and_test09_and_the_checkers_ask_both():
    assert GPT_OSS.compliance_tests == ("TEST07", "TEST09")
    assert GPT_OSS.checked_compliance_tests == ("TEST07", "TEST09")   # models_TEST07 / models_TEST09 of v6.1
    assert [b for b, r in RULES.benchmarks.items() if {"TEST07", "TEST09"} & set(r.compliance_tests)] == \
        ["gpt-oss-120b"]
    for test in (TEST07, TEST09):
        assert not test.compares_performance and not test.samples_accuracy and not test.checks_output_tokens


def test_audit_config_lines_are_the_rounds_and_carry_the_verdicts_bounds():
    # compliance/TEST07/gpt-oss-120b/audit.config and TEST09/gpt-oss-120b/audit.config, comments left out.
    assert TEST07.audit_config == (
        "*.*.mode = 2", "*.*.accuracy_log_rng_seed = 720381539243781796", "*.*.accuracy_log_sampling_target = 990",
        "*.*.min_query_count = 990", "*.*.min_duration = 0", "*.*.performance_issue_unique = 1",
        "*.*.sample_concatenate_permutation = 0", "*.*.test07_accuracy_threshold = 60.698")
    assert TEST09.audit_config == (
        "*.*.mode = 2", "*.*.accuracy_log_rng_seed = 720381539243781796",
        "*.*.accuracy_log_sampling_target = 10000", "*.*.min_query_count = 6396", "*.*.min_duration = 0",
        "*.*.performance_issue_unique = 1", "*.*.sample_concatenate_permutation = 0",
        "*.*.test09_min_output_tokens = 1150.38", "*.*.test09_max_output_tokens = 1406.02")
    assert audit_config_setting(TEST07.audit_config, "test07_accuracy_threshold") == TEST07.accuracy_threshold \
        == 60.698
    assert (audit_config_setting(TEST09.audit_config, "test09_min_output_tokens"),
            audit_config_setting(TEST09.audit_config, "test09_max_output_tokens")) == TEST09.output_token_bounds \
        == (1150.38, 1406.02)
    # Every response of the whole data set is logged: 990 GPQA questions, the 6396 prompts of the performance set.
    assert TEST07.accuracy_log_sampling_target == 990
    assert TEST09.accuracy_log_sampling_target >= GPT_OSS.dataset_size == 6396
    assert TEST07.score_pattern == r"'exact_match':\s*([\d.]+)"


@needs_checkout
@pytest.mark.parametrize("test", ["TEST07", "TEST09"])
def test_audit_config_lines_are_the_official_files_line_for_line(test):
    path = inference_dir() / "compliance" / test / "gpt-oss-120b" / "audit.config"
    lines = [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]
    assert tuple(lines) == RULES.compliance_tests[test].audit_config


def test_audit_config_settings_are_read_as_the_scripts_read_them():
    lines = ["# *.*.test09_min_output_tokens = 1", "gpt-oss-120b.Offline.test09_min_output_tokens = 7.5  # cut",
             "test09_max_output_tokens = 9", "*.*.test09_max_output_tokens = oops"]
    assert audit_config_setting(lines, "test09_min_output_tokens") == 7.5
    assert audit_config_setting(lines, "test09_max_output_tokens") is None   # two dotted parts; no number


# -- TEST09 ---------------------------------------------------------------------------------------------
def test_test09_passes_a_mean_within_the_bounds_and_writes_the_scripts_file():
    check = verify_test09(length_log([1200, 1300, 1250, 1278]), TEST09.output_token_bounds)
    assert check.passed and check.summary == "mean output 1257.00 tokens over 4 logged responses: within " \
                                             "[1150.38, 1406.02]"
    assert check.text == (
        f"{'=' * 80}\nTEST09: Verify Output Token Length in Performance Mode\n{'=' * 80}\n\n"
        f"Output Token Length Statistics\n{'-' * 40}\nTotal samples: 4\nMean output tokens: 1257.00\n"
        f"Min output tokens: 1200\nMax output tokens: 1300\nStd deviation: 37.38\n\n"
        f"{'=' * 80}\nVerification Results\n{'=' * 80}\nMean output tokens: 1257.00\nMin threshold: 1150.38\n"
        f"Max threshold: 1406.02\nMin check pass: True\nMax check pass: True\n\nTEST PASS\n")


@pytest.mark.parametrize("lengths, passed, where", [
    ([1100, 1150], False, "below"),                         # 1125: outputs cut short
    ([1500, 1400], False, "above"),                         # 1450
    ([1150] * 62 + [1151] * 38, True, "within"),            # 1150.38 exactly: the bounds are inclusive
    ([1150] * 63 + [1151] * 37, False, "below"),            # 1150.37
    ([1406] * 98 + [1407] * 2, True, "within"),             # 1406.02 exactly
    ([1406] * 97 + [1407] * 3, False, "above"),             # 1406.03
])
def test_test09_bounds(lengths, passed, where):
    check = verify_test09(length_log(lengths), TEST09.output_token_bounds)
    assert check.passed is passed and f": {where} [1150.38, 1406.02]" in check.summary
    assert check.text.endswith("TEST PASS\n" if passed else "TEST FAIL\n")
    assert f"Min check pass: {where != 'below'}\nMax check pass: {where != 'above'}\n" in check.text


def test_test09_counts_every_logged_entry_as_the_script_does():
    # No dedup by qsl_idx: a repeated sample counts each time it was logged (the summary says so).
    check = verify_test09(length_log([1000, 1000, 1600], [3, 3, 4]), TEST09.output_token_bounds)
    assert check.passed and "1200.00 tokens over 3 logged responses, 1 of them repeats of a qsl_idx" in check.summary
    # One token per 4 bytes, a trailing partial token dropped; an empty output counts 0.
    entries = [{"qsl_idx": 0, "data": "01000000" "02000000" "0300"}, {"qsl_idx": 1, "data": ""}]
    assert output_lengths(entries) == ((2, 0), None)


@pytest.mark.parametrize("entries, says", [
    ({"qsl_idx": 0}, "not LoadGen's JSON array"),
    ([], "holds no entry"),
    ([{"qsl_idx": 4, "data": "XYZ0"}], "entry 0 (qsl_idx 4): its data is not hex"),
    ([{"qsl_idx": 4}], "entry 0 (qsl_idx 4) has no hex 'data' string"),
])
def test_test09_fails_a_damaged_log_saying_what_is_wrong(entries, says):
    check = verify_test09(entries, TEST09.output_token_bounds)
    assert not check.passed and says in check.summary
    assert f"Error: {check.summary}" in check.text and check.text.endswith("TEST FAIL\n")


# -- TEST07 ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("score, passed", [("62.150", True), ("60.698", True), ("60.697", False), ("0.000", False)])
def test_test07_passes_a_score_at_least_the_threshold(score, passed):
    output = f"Total samples evaluated: 990\n\n\nPrinting for submission_checker:\n\n'exact_match': {score}\n"
    check = verify_test07(output, TEST07.accuracy_threshold, TEST07.score_pattern, samples=990)
    assert check.passed is passed
    assert check.text == output + (f"\n{'=' * 80}\nTEST07 Verification Summary\n{'=' * 80}\nAccuracy score: "
                                   f"{float(score)}\nAccuracy threshold: 60.698\nAccuracy check pass: {passed}\n"
                                   f"{'TEST PASS' if passed else 'TEST FAIL'}\n")
    assert check.summary == f"accuracy {float(score):g} over 990 samples: {'at least' if passed else 'below'} " \
                            f"the threshold 60.698"


def test_test07_reads_the_first_score_and_fails_without_one():
    assert find_score("'exact_match': 58.1\n'exact_match': 70.0\n", TEST07.score_pattern) == 58.1
    assert find_score("{'exact_match': 61.5, 'tokens_per_sample': 1200.0}", TEST07.score_pattern) == 61.5
    check = verify_test07("exact_match = 70.0\n", TEST07.accuracy_threshold, TEST07.score_pattern)
    assert not check.passed and "no score matching" in check.summary
    assert check.text.endswith("TEST07 Verification Summary\n" + "=" * 80 +
                               "\nError: Could not parse accuracy score\nTEST FAIL\n")


def write_log(folder: Path, entries) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ACCURACY_LOG
    path.write_text(json.dumps(entries) if not isinstance(entries, str) else entries)
    return path


@pytest.mark.parametrize("right, passed", [(25, True), (24, False), (40, True)])   # 62.5 %, 60 %, 100 %
def test_test07_scores_the_compliance_data_set_with_the_benchmarks_scorer(tmp_path, right, passed):
    log = write_log(tmp_path, mc.answers_log(mc.COMPLIANCE_DATASET, right))
    check = score_test07(mc.BENCHMARK, "none", mc.COMPLIANCE_DATASET, log, None, TEST07.accuracy_threshold,
                         TEST07.score_pattern)
    assert check.passed is passed
    score = right / 40 * 100
    assert f"'exact_match': {score:.3f}\n\n{'=' * 80}\nTEST07 Verification Summary" in check.text
    assert f"accuracy {score:g} over 40 samples" in check.summary
    # Scored against the performance set's answers instead, the same responses score otherwise.
    other = score_test07(mc.BENCHMARK, "none", mc.DATASET, log, None, TEST07.accuracy_threshold, TEST07.score_pattern)
    assert other.text != check.text


@pytest.mark.parametrize("content, says", [
    (None, "is missing: the compliance run logged no response"),
    ('[{"seq_id": 0, "qsl_idx": 0, "data": "64000000"},\n', "cannot be read as JSON"),
    ("[]", "holds no entry"),
    ('{"qsl_idx": 0}', "not LoadGen's JSON array"),
    ('[{"seq_id": 0, "data": "64000000"}]', "the accuracy scorer of choices-compliance refused"),
])
def test_test07_fails_a_missing_or_damaged_log_saying_what_is_wrong(tmp_path, content, says):
    log = tmp_path / ACCURACY_LOG if content is None else write_log(tmp_path, content)
    check = score_test07(mc.BENCHMARK, "none", mc.COMPLIANCE_DATASET, log, None, TEST07.accuracy_threshold,
                         TEST07.score_pattern)
    assert not check.passed and says in check.summary, check.summary
    assert check.text.endswith("Error: Could not parse accuracy score\nTEST FAIL\n")


def test_test07_runs_on_the_data_set_the_benchmark_names():
    assert compliance_dataset(mc.NAME, "TEST07", mc.DATASET) == mc.COMPLIANCE_DATASET
    assert compliance_dataset(mc.NAME, "TEST07", "elsewhere") is None
    assert compliance_dataset("resnet50", "TEST07", "imagenet") is None   # a packaged benchmark names none


# -- the verdict files, as the checkers read them ----------------------------------------------------------
@pytest.mark.parametrize("test, name", [("TEST07", VERIFY_ACCURACY), ("TEST09", VERIFY_OUTPUT_LEN)])
def test_verdict_files_pass_with_the_scripts_test_pass(tmp_path, test, name):
    spec = RULES.compliance_tests[test]
    judge = lambda: verdict_problems(tmp_path, spec, GPT_OSS, AccuracyTarget.k_99, RULES)  # noqa: E731
    assert judge()[0][1] == f"{name} is missing or unreadable"
    (tmp_path / name).write_text("Accuracy check pass: False\nTEST FAIL\n")
    assert judge()[0][1] == f"{name} has no TEST PASS line (it ends with 'TEST FAIL')"
    (tmp_path / name).write_text("scorer says TEST PASS\nTEST FAIL\n")   # the checkers would take it; not here
    assert "holds TEST PASS but does not end with it" in judge()[0][1]
    (tmp_path / name).write_text("Accuracy check pass: True\nTEST PASS\n")
    assert judge() == []


# -- staging --------------------------------------------------------------------------------------------
def issued(count: int) -> dict:
    """The detail log values of a performance run of gpt-oss-120b Offline that issued `count` samples."""
    from tests.official_corpus import LLM_OFFLINE, perf_values

    return perf_values("Offline", generated_query_count=1, generated_samples_per_query=count, **LLM_OFFLINE)


def compliance_folder(folder: Path, test: str, entries: list[dict], verdict: str | None = None) -> Path:
    """A compliance folder as run_audit_harness lays it out, verified against a made-up submission run, with the
    record of the compliance run whose logs it lays out."""
    from tests.official_corpus import write_run

    log = write_log(folder / "accuracy", entries)
    write_run(folder / "performance" / "run_1", issued(len(entries)))
    if verdict is not None:
        (folder / (VERIFY_ACCURACY if test == "TEST07" else VERIFY_OUTPUT_LEN)).write_text(verdict)
    reference = folder.parent / "reference"
    reference.mkdir(exist_ok=True)
    (reference / DETAIL_LOG).write_text("detail\n")
    write_verified_against(folder, str(reference), reference / DETAIL_LOG, judged_log=log)
    compliance_run(folder, test, benchmark="gpt-oss-120b", model="gpt-oss-120b",
                   dataset=mc.COMPLIANCE_DATASET if test == "TEST07" else mc.DATASET)
    return folder


def stage(test: str, source: Path, results: Path) -> str | None:
    results.mkdir(parents=True, exist_ok=True)
    return _stage_logged(RULES, test, source, results, GPT_OSS, AccuracyTarget.k_99, mc.BENCHMARK.response,
                         lambda _: None, "label", record=compliance_record(source), scorer=mc.BENCHMARK)


def test_staging_verifies_test09_again_and_lays_it_out_as_the_script_does(tmp_path):
    source = compliance_folder(tmp_path / "TEST09", "TEST09", length_log([1278] * 5))
    assert stage("TEST09", source, tmp_path / "results") is None
    staged = tmp_path / "results" / "TEST09"
    assert sorted(str(p.relative_to(staged)) for p in staged.rglob("*") if p.is_file()) == [
        "accuracy/mlperf_log_accuracy.json", "performance/run_1/mlperf_log_detail.txt",
        "performance/run_1/mlperf_log_summary.txt", "verify_output_len.txt"]
    assert (staged / VERIFY_OUTPUT_LEN).read_text().endswith("TEST PASS\n")
    short = compliance_folder(tmp_path / "short" / "TEST09", "TEST09", length_log([900] * 5))
    assert stage("TEST09", short, tmp_path / "results2") == \
        f"the test fails (mean output 900.00 tokens over 5 logged responses: below [1150.38, 1406.02], " \
        f"{short / 'accuracy' / ACCURACY_LOG})"
    assert not (tmp_path / "results2" / "TEST09").exists()


def test_staging_scores_test07_again_and_stages_what_its_log_scores(tmp_path):
    entries = mc.answers_log(mc.COMPLIANCE_DATASET, 30)
    scored = score_test07(mc.BENCHMARK, "none", mc.COMPLIANCE_DATASET, write_log(tmp_path / "scored", entries), None,
                          TEST07.accuracy_threshold, TEST07.score_pattern)
    source = compliance_folder(tmp_path / "TEST07", "TEST07", entries, scored.text)
    assert stage("TEST07", source, tmp_path / "results") is None
    assert (tmp_path / "results" / "TEST07" / VERIFY_ACCURACY).read_text() == scored.text
    failed = compliance_folder(tmp_path / "failed" / "TEST07", "TEST07", mc.answers_log(mc.COMPLIANCE_DATASET, 24),
                               "'exact_match': 60.000\nAccuracy check pass: False\nTEST FAIL\n")
    assert stage("TEST07", failed, tmp_path / "results3").startswith("the test fails (accuracy 60 over 40 samples")


def test_an_edited_test07_verdict_is_refused_naming_the_file_and_both_verdicts(tmp_path):
    """A verify_accuracy.txt edited from TEST FAIL to TEST PASS over a log that scores 0."""
    entries = mc.answers_log(mc.COMPLIANCE_DATASET, 0)
    scored = score_test07(mc.BENCHMARK, "none", mc.COMPLIANCE_DATASET, write_log(tmp_path / "scored", entries), None,
                          TEST07.accuracy_threshold, TEST07.score_pattern)
    assert not scored.passed
    source = compliance_folder(tmp_path / "TEST07", "TEST07", entries, scored.text.replace("TEST FAIL", "TEST PASS"))
    results = tmp_path / "results"
    (results / "TEST07").mkdir(parents=True)                # staged earlier
    problem = stage("TEST07", source, results)
    assert isinstance(problem, EvidenceProblem)
    assert problem.startswith("verify_accuracy.txt says TEST PASS, but its logs give TEST FAIL (accuracy 0 over 40 "
                              "samples: below the threshold 60.698)")


def test_a_cut_test09_log_is_refused_against_its_runs_record_and_its_count(tmp_path):
    """A TEST09 accuracy log cut from 31 responses to 2: the run's record holds the digest of the log it wrote, and
    its detail log the 31 samples it issued."""
    source = compliance_folder(tmp_path / "TEST09", "TEST09", length_log([1278] * 31))
    cut = source / "accuracy" / ACCURACY_LOG
    write_log(cut.parent, json.loads(cut.read_text())[:2])
    lines: list[str] = []
    record, problem = _compliance_run(source, "label", lines.append)
    assert isinstance(problem, EvidenceProblem) and record is not None
    assert f"{cut} is not the {ACCURACY_LOG} the compliance run wrote" in problem
    # Counted against the samples the run issued, the cut log fails even without a record of its digest.
    problem = stage("TEST09", source, tmp_path / "results")
    assert "the accuracy log holds 2 responses, but the run issued 31 samples" in problem
    assert not (tmp_path / "results" / "TEST09").exists()


def test_stage_compliance_refuses_the_cut_test09_log_and_removes_the_earlier_copy(tmp_path, monkeypatch):
    folder, outcome, results, problems = _audit(tmp_path, monkeypatch, "TEST09", length_log([1278] * 31))
    assert outcome.passed and (results / "TEST09").is_dir()
    cut = folder / "accuracy" / ACCURACY_LOG
    write_log(cut.parent, json.loads(cut.read_text())[:2])
    problems = stage_compliance_for(Paths.create(repo=tmp_path / "repo"), RULES, results, "box", "gpt-oss-120b",
                                    Scenario.Offline, AccuracyTarget.k_99, mc.BENCHMARK.response, lambda _: None,
                                    scorer=mc.BENCHMARK)
    [refused] = [p for p in problems if "TEST09" in p]
    assert isinstance(refused, EvidenceProblem) and f"{cut} is not the {ACCURACY_LOG}" in refused
    assert "removed the TEST09/ staged earlier" in refused and not (results / "TEST09").exists()


# -- the official scripts on the same logs -------------------------------------------------------------------
TEST09_CASES = {"within": [1200, 1300, 1250, 1278], "below": [1100, 1150], "above": [1500, 1400],
                "lower_bound": [1150] * 62 + [1151] * 38, "under_lower_bound": [1150] * 63 + [1151] * 37,
                "upper_bound": [1406] * 98 + [1407] * 2, "over_upper_bound": [1406] * 97 + [1407] * 3,
                "repeated_sample": [1000, 1000, 1600], "with_empty_output": [0, 1500, 1500, 1800]}


@needs_checkout
def test_official_test09_script_gives_the_toolkits_verdict_and_file(tmp_path):
    wrong = []
    for name, lengths in TEST09_CASES.items():
        entries = length_log(lengths, [0, 0, 1] if name == "repeated_sample" else None)
        write_log(tmp_path / name / "logs", entries)
        text, status, output = run_test09_verification(inference_dir(), tmp_path / name / "logs",
                                                       tmp_path / name / "out", tmp_path / name / "work")
        check = verify_test09(entries, TEST09.output_token_bounds)
        if text != check.text or (status == 0) != check.passed:
            wrong.append(f"{name}: official exit {status}\n{text}\ntoolkit\n{check.text}\n{output[-800:]}")
    assert not wrong, "\n\n".join(wrong)


def loadgen_text(entries: list[dict], closed: bool = True) -> str:
    """An accuracy log as LoadGen writes it: `[`, one entry a line each followed by a comma but the last, `]`; a run
    cut short leaves the closing bracket out."""
    lines = [json.dumps(e) + ("," if i < len(entries) - 1 else "") for i, e in enumerate(entries)]
    return "[\n" + "\n".join(lines) + ("\n]\n" if closed else "\n")


@needs_checkout
def test_where_the_toolkit_is_stricter_than_the_official_test09_script(tmp_path):
    entries = length_log([1278] * 6)
    cases = {"cut_short": (loadgen_text(entries, closed=False), 0),   # the script salvages the entries: TEST PASS
             "not_hex": (json.dumps(entries + [{"qsl_idx": 9, "data": "ZZ"}]), 1),   # counted as 0 tokens there
             "empty": ("[]", 1)}                                       # the script stops, no verdict file
    for name, (text, status) in cases.items():
        write_log(tmp_path / name / "logs", text)
        official, code, output = run_test09_verification(inference_dir(), tmp_path / name / "logs",
                                                         tmp_path / name / "out", tmp_path / name / "work")
        assert code == status, output
        assert (official is not None) is (name != "empty"), output
        try:
            mine = verify_test09(json.loads(text), TEST09.output_token_bounds)
        except ValueError as error:     # read_accuracy_log's error: run_audit_harness says the log cannot be read
            assert name == "cut_short" and "Expecting" in str(error)
            continue
        assert not mine.passed and mine.text.endswith("TEST FAIL\n")
    # The entry that is not hex counts 0 tokens there, pulling the mean of 7 entries to 1095.43: a fail both ways.
    assert "Mean output tokens: 1095.43" in (tmp_path / "not_hex" / "out" / "TEST09" / VERIFY_OUTPUT_LEN).read_text()


@needs_checkout
def test_official_test07_script_gives_the_toolkits_verdict_and_file(tmp_path):
    wrong = []
    scorer = f"cd {shlex.quote(str(REPO))} && {shlex.quote(sys.executable)} -B -m tests.multiple_choice_benchmark " \
             f"{mc.COMPLIANCE_DATASET} {{accuracy_log}}"
    for right in (40, 25, 24, 0):
        name = f"right_{right}"
        log = write_log(tmp_path / name / "logs", mc.answers_log(mc.COMPLIANCE_DATASET, right))
        text, output = run_test07_verification(inference_dir(), tmp_path / name / "logs", tmp_path / name / "out",
                                               scorer, tmp_path / name / "work")
        check = score_test07(mc.BENCHMARK, "none", mc.COMPLIANCE_DATASET, log, None, TEST07.accuracy_threshold,
                             TEST07.score_pattern)
        if text != check.text or (text is not None and ("TEST PASS" in text) != check.passed):
            wrong.append(f"{name}: official\n{text}\ntoolkit\n{check.text}\n{output[-800:]}")
    assert not wrong, "\n\n".join(wrong)


def test_generated_logs_hold_int32_tokens():
    entry = length_log([3])[0]
    assert np.frombuffer(bytes.fromhex(entry["data"]), np.int32).tolist() == [5, 5, 5]


# -- truncation: the whole compliance logs are cut as tools/submission/truncate_accuracy_log.py cuts them ----------
def gpt_oss_tree(root: Path) -> Path:
    scenario = root / "closed" / "ACME" / "results" / "sys1" / "gpt-oss-120b" / "Offline"
    write_log(scenario / "accuracy", length_log([1300] * 30))
    (scenario / "accuracy" / "accuracy.txt").write_text("'exact_match': 83.500")
    write_log(scenario / "TEST07" / "accuracy", mc.answers_log(mc.COMPLIANCE_DATASET, 30, tokens=60))
    (scenario / "TEST07" / VERIFY_ACCURACY).write_text("TEST PASS\n")
    write_log(scenario / "TEST09" / "accuracy", length_log([1278] * 20))
    (scenario / "TEST09" / VERIFY_OUTPUT_LEN).write_text("TEST PASS\n")
    return scenario


def test_truncation_cuts_the_test07_and_test09_logs_and_writes_their_hash(tmp_path):
    scenario = gpt_oss_tree(tmp_path / "tree")
    full = {test: (scenario / test / "accuracy" / ACCURACY_LOG).read_bytes() for test in ("TEST07", "TEST09")}
    report = truncate_tree(tmp_path / "tree", tmp_path / "backup", RULES, lambda _: None)
    assert len(report.truncated) == 3
    for test, original in full.items():
        folder = scenario / test / "accuracy"
        assert (folder / "accuracy.txt").read_text() == f"hash={hashlib.sha256(original).hexdigest()}\n"
        assert len((folder / ACCURACY_LOG).read_text()) == 2 * RULES.accuracy_log_keep_chars + 7
        backup = tmp_path / "backup" / folder.relative_to(tmp_path / "tree")
        assert sorted(p.name for p in backup.iterdir()) == [ACCURACY_LOG]
        assert (backup / ACCURACY_LOG).read_bytes() == original
    assert truncate_tree(tmp_path / "tree", tmp_path / "backup", RULES, lambda _: None).truncated == []


@needs_checkout
def test_truncation_of_test07_and_test09_is_the_official_scripts(tmp_path):
    gpt_oss_tree(tmp_path / "tree")
    shutil.copytree(tmp_path / "tree", tmp_path / "mine")
    truncate_tree(tmp_path / "mine", tmp_path / "backup", RULES, lambda _: None)
    script = inference_dir() / "tools" / "submission" / "truncate_accuracy_log.py"
    done = subprocess.run([sys.executable, "-B", str(script), "--input", str(tmp_path / "tree"), "--output",
                           str(tmp_path / "official"), "--submitter", "ACME"], capture_output=True, text=True,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    files = lambda root: {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file()}  # noqa: E731
    assert files(tmp_path / "mine") == files(tmp_path / "official")


# -- the checkers on a gpt-oss-120b tree ---------------------------------------------------------------------
def _compliance_folders(root: Path, test07: str | None, test09: str | None) -> None:
    """TEST07/ and TEST09/ of each scenario as run_verification.py lays them out, with the given verdict lines."""
    from tests.official_corpus import ORG, SYSTEM, write, write_run

    for scenario in ("Offline", "Server"):
        folder = root / "closed" / ORG / "results" / SYSTEM / "gpt-oss-120b" / scenario
        for test, name, verdict, text in (
                ("TEST07", VERIFY_ACCURACY, test07, "'exact_match': 62.100\n\n" + "=" * 80 +
                 "\nTEST07 Verification Summary\n" + "=" * 80 + "\nAccuracy score: 62.1\n"),
                ("TEST09", VERIFY_OUTPUT_LEN, test09, "Mean output tokens: 1278.20\nMin check pass: True\n")):
            if verdict is None:
                continue
            write(folder / test / name, text + verdict)
            if test == "TEST09":   # four responses of the reference's mean length, of the four samples issued
                write(folder / test / "accuracy" / ACCURACY_LOG, json.dumps(length_log([1278] * 4)))
                write_run(folder / test / "performance" / "run_1", issued(4))
                continue
            write(folder / test / "accuracy" / ACCURACY_LOG, "[]")
            (folder / test / "performance" / "run_1").mkdir(parents=True)
            for log in (SUMMARY_LOG, DETAIL_LOG):   # the submission run's figures, from a run of its own
                text = (folder / "performance" / "run_1" / log).read_text()
                write(folder / test / "performance" / "run_1" / log, text.replace("T10:00:00Z", "T11:00:00Z"))


GPT_OSS_TREES = {   # name: (TEST07 verdict line, TEST09 verdict line, main.py's verdict)
    "both_pass": ("TEST PASS\n", "TEST PASS\n", True),
    "test07_fails": ("TEST FAIL\n", "TEST PASS\n", False),
    "test09_fails": ("TEST PASS\n", "TEST FAIL\n", False),
    "test07_missing": (None, "TEST PASS\n", False),
    "test09_missing": ("TEST PASS\n", None, False),
}


def gpt_oss_submission(root: Path, test07: str | None, test09: str | None) -> Path:
    import functools

    from tests.official_corpus import HASH, _llm, build_tree

    spec = _llm("gpt-oss-120b", accuracy_txt=f"{{'exact_match': 83.500, 'tokens_per_sample': 9950.0}}\n{HASH}\n",
                compliance_tests=(), perf={"effective_performance_sample_count": 6396},
                perf_by_folder={"Server": {"requested_server_ttft_latency": 3_000_000_000,
                                           "requested_server_tpot_latency": 80_000_000,
                                           "result_time_per_output_token_99.00_percentile_ns": 70_000_000}},
                edit=functools.partial(_compliance_folders, test07=test07, test09=test09))
    spec.accuracy = {"effective_accuracy_sample_count": 4395, "qsl_reported_total_count": 4395}
    return build_tree(root, spec)


@pytest.mark.parametrize("name", GPT_OSS_TREES)
def test_toolkit_checker_asks_test07_and_test09_as_main_py_does(tmp_path, name):
    from code.common.submission.checker import check_submission

    test07, test09, passes = GPT_OSS_TREES[name]
    report = check_submission(gpt_oss_submission(tmp_path / "tree", test07, test09), RULES)
    assert report.passed is passes, report.text()
    if not passes:
        test = "TEST07" if "test07" in name else "TEST09"
        assert all(test in str(f.path) for f in report.errors), report.text()
        assert any(f"--audit_test={test}" in f.message for f in report.errors), report.text()


@needs_checkout
def test_main_py_gives_the_recorded_verdicts_on_the_gpt_oss_trees(tmp_path):
    """submission_checker/main.py, the checker of record for gpt-oss-120b: submission_checker_old.py rejects every
    closed gpt-oss-120b result of v6.1 (it wants a verify_performance.txt in TEST07/ and TEST09/, which their
    scripts never write, and raises `NotImplemented` on TEST07's accuracy check)."""
    from tests.official_tools import CRASH, run_checker

    wrong = []
    for name, (test07, test09, passes) in GPT_OSS_TREES.items():
        tree = gpt_oss_submission(tmp_path / name / "tree", test07, test09)
        verdict, output = run_checker(inference_dir(), tree, "main", tmp_path / name / "main")
        if verdict != ("pass" if passes else "fail"):
            wrong.append(f"{name}: main.py says {verdict}\n{output[-1500:]}")
    tree = gpt_oss_submission(tmp_path / "old" / "tree", "TEST PASS\n", "TEST PASS\n")
    verdict, output = run_checker(inference_dir(), tree, "old", tmp_path / "old" / "old")
    assert verdict == CRASH and "verify_performance.txt is missing" in output, output[-1500:]
    assert not wrong, "\n\n".join(wrong)


# -- run_audit_harness lays the verdicts out; stage_compliance stages them ---------------------------------------
def _audit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, test: str, entries: list[dict]):
    """A TEST07 / TEST09 compliance run of gpt-oss-120b Offline verified by run_audit_harness (the benchmark: the
    multiple-choice one of the tests, TEST07's run on its compliance data set)."""
    import types

    from code.actions.audit import RunAuditHarness
    from code.common.audit.references import Reference
    from code.common.constants import Scenario
    from code.common.paths import Paths
    from tests.official_corpus import LLM_OFFLINE, perf_values, write_run

    paths = Paths.create(repo=tmp_path / "repo")
    reference, run_dir = tmp_path / "submission_run", tmp_path / "compliance_run"
    write_run(reference, perf_values("Offline", **LLM_OFFLINE))
    write_run(run_dir, issued(len(entries)))
    write_log(run_dir, entries)
    write_compliance_record(run_dir, test, benchmark="gpt-oss-120b", model="gpt-oss-120b",
                            dataset=mc.COMPLIANCE_DATASET if test == "TEST07" else mc.DATASET)
    monkeypatch.setattr("code.actions.audit.get_benchmark", lambda name: mc.BENCHMARK)
    handler = RunAuditHarness.__new__(RunAuditHarness)
    handler.ctx = types.SimpleNamespace(paths=paths, log=lambda line: None)
    record = types.SimpleNamespace(completed=True, benchmark="gpt-oss-120b", model="gpt-oss-120b",
                                   dataset=mc.COMPLIANCE_DATASET if test == "TEST07" else mc.DATASET,
                                   config=types.SimpleNamespace(fields={}), scenario=Scenario.Offline)
    folder = paths.compliance_log_dir(test, "box", "gpt-oss-120b", Scenario.Offline)
    folder.mkdir(parents=True)
    outcome = handler._verify(f"{test} gpt-oss-120b Offline", RULES.compliance_tests[test], record,
                              Reference(types.SimpleNamespace(log_dir=str(reference)), None), run_dir, folder)
    results = paths.results_dir(paths.staging, "closed", "Org", "box", "gpt-oss-120b", Scenario.Offline)
    write_run(results / "performance" / "run_1", perf_values("Offline", **LLM_OFFLINE))
    lines: list[str] = []
    problems = stage_compliance_for(paths, RULES, results, "box", "gpt-oss-120b", Scenario.Offline,
                                    AccuracyTarget.k_99, mc.BENCHMARK.response, lines.append, scorer=mc.BENCHMARK)
    return folder, outcome, results, problems


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def test_audit_scores_test07_on_the_compliance_set_and_staging_stages_it(tmp_path, monkeypatch):
    folder, outcome, results, problems = _audit(tmp_path, monkeypatch, "TEST07",
                                                mc.answers_log(mc.COMPLIANCE_DATASET, 30))
    assert outcome.passed and outcome.summary == "accuracy PASS: accuracy 75 over 40 samples: at least the " \
                                                 "threshold 60.698"
    assert _files(folder) == ["accuracy/mlperf_log_accuracy.json", "performance/run_1/mlperf_log_detail.txt",
                              "performance/run_1/mlperf_log_summary.txt", "verified_against.json",
                              "verify_accuracy.txt"]
    assert (folder / VERIFY_ACCURACY).read_text().endswith("Accuracy check pass: True\nTEST PASS\n")
    assert [p for p in problems if "TEST07" in p] == []   # TEST09 was not run: it is the one missing
    assert _files(results / "TEST07") == ["accuracy/mlperf_log_accuracy.json",
                                          "performance/run_1/mlperf_log_detail.txt",
                                          "performance/run_1/mlperf_log_summary.txt", "verify_accuracy.txt"]
    assert any("TEST09: no compliance run" in p for p in problems)


def test_audit_fails_test07_below_the_threshold_and_staging_refuses_it(tmp_path, monkeypatch):
    folder, outcome, results, problems = _audit(tmp_path, monkeypatch, "TEST07",
                                                mc.answers_log(mc.COMPLIANCE_DATASET, 24))
    assert not outcome.passed and "accuracy 60 over 40 samples: below the threshold 60.698" in outcome.summary
    assert (folder / VERIFY_ACCURACY).read_text().endswith("Accuracy check pass: False\nTEST FAIL\n")
    assert any("TEST07: the test fails (accuracy 60 over 40 samples: below the threshold 60.698" in p
               for p in problems)
    assert not (results / "TEST07").exists()


@pytest.mark.parametrize("length, passed", [(1278, True), (1000, False)])
def test_audit_judges_test09_and_staging_verifies_it_again(tmp_path, monkeypatch, length, passed):
    folder, outcome, results, problems = _audit(tmp_path, monkeypatch, "TEST09", length_log([length] * 12))
    assert outcome.passed is passed and outcome.summary.startswith(f"output length {'PASS' if passed else 'FAIL'}: "
                                                                   f"mean output {length}.00 tokens over 12")
    assert (folder / VERIFY_OUTPUT_LEN).read_text().endswith("TEST PASS\n" if passed else "TEST FAIL\n")
    assert (results / "TEST09").exists() is passed
    if passed:
        assert (results / "TEST09" / VERIFY_OUTPUT_LEN).read_text() == (folder / VERIFY_OUTPUT_LEN).read_text()
    else:
        assert any("TEST09: the test fails (mean output 1000.00 tokens" in p for p in problems)


# -- check_submission derives the verdicts again --------------------------------------------------------------
def _offline(tree: Path) -> Path:
    from tests.official_corpus import ORG, SYSTEM

    return tree / "closed" / ORG / "results" / SYSTEM / "gpt-oss-120b" / "Offline"


def test_check_submission_counts_a_cut_test09_log_against_its_run(tmp_path):
    from code.common.submission.checker import check_submission

    tree = gpt_oss_submission(tmp_path / "tree", "TEST PASS\n", "TEST PASS\n")
    assert check_submission(tree, RULES).passed
    cut = _offline(tree) / "TEST09" / "accuracy" / ACCURACY_LOG
    written = hashlib.sha256(cut.read_bytes()).hexdigest()
    write_log(cut.parent, json.loads(cut.read_text())[:2])
    report = check_submission(tree, RULES)
    [error] = report.errors
    assert error.path.endswith("Offline/TEST09/verify_output_len.txt")
    assert "verify_output_len.txt says TEST PASS, but its logs give TEST FAIL (the accuracy log holds 2 responses, " \
           "but the run issued 4 samples" in error.message
    # With the toolkit's folders, against the digest its compliance run recorded (as stage_compliance staged it).
    from code.common.submission.compliance_evidence import COMPLIANCE_PROVENANCE

    paths = Paths.create(repo=tmp_path / "repo")
    staged = paths.staging / _offline(tree).relative_to(tree)
    staged.mkdir(parents=True)
    (staged / COMPLIANCE_PROVENANCE).write_text(json.dumps({"TEST09": {"log_sha256": {ACCURACY_LOG: written}}}))
    errors = check_submission(tree, RULES, paths=paths).errors
    # The other compliance folders have no record of their runs in the staging tree: refused, each named.
    assert sorted(e.path.split("gpt-oss-120b/")[1] for e in errors if "was not staged by make stage_compliance"
                  in e.message) == ["Offline/TEST07", "Server/TEST07", "Server/TEST09"]
    [error] = [e for e in errors if "Offline/TEST09" in e.path]
    assert error.path.endswith("Offline/TEST09/accuracy/mlperf_log_accuracy.json")
    assert f"{cut} is not the {ACCURACY_LOG} the compliance run wrote" in error.message


def test_check_submission_scores_an_edited_test07_verdict_again(tmp_path, monkeypatch):
    """A verify_accuracy.txt edited from TEST FAIL to TEST PASS over a log that scores 0 against 60.698."""
    from code.common.submission.checker import check_submission
    from code.common.submission.compliance_evidence import COMPLIANCE_PROVENANCE

    paths = Paths.create(repo=tmp_path / "repo")
    tree = gpt_oss_submission(tmp_path / "tree", "TEST PASS\n", "TEST PASS\n")
    write_log(_offline(tree) / "TEST07" / "accuracy", mc.answers_log(mc.COMPLIANCE_DATASET, 0))
    staged = paths.staging / _offline(tree).relative_to(tree)
    staged.mkdir(parents=True)
    test07 = _offline(tree) / "TEST07"
    logs = {log.name: hashlib.sha256(log.read_bytes()).hexdigest() for log in
            (test07 / "accuracy" / ACCURACY_LOG, test07 / "performance" / "run_1" / DETAIL_LOG)}
    (staged / COMPLIANCE_PROVENANCE).write_text(json.dumps(
        {"TEST07": {"model": "gpt-oss-120b", "dataset": mc.COMPLIANCE_DATASET, "log_sha256": logs}}))
    monkeypatch.setattr("code.common.benchmark_api.get_benchmark", lambda name: mc.BENCHMARK)
    assert check_submission(tree, RULES).passed       # the tree alone: the official checkers' verdict
    report = check_submission(tree, RULES, paths=paths)
    [error] = [e for e in report.errors if "Offline/TEST07" in e.path]
    assert error.path.endswith("Offline/TEST07/verify_accuracy.txt")
    assert "verify_accuracy.txt says TEST PASS, but its logs give TEST FAIL (accuracy 0 over 40 samples: below the " \
           "threshold 60.698)" in error.message


def test_make_stage_compliance_exits_1_on_a_cut_test09_log(tmp_path, monkeypatch):
    import types

    from code.actions.submission import StageCompliance
    from code.common.errors import UserError

    folder, outcome, results, _ = _audit(tmp_path, monkeypatch, "TEST09", length_log([1278] * 31))
    assert (results / "TEST09").is_dir()
    cut = folder / "accuracy" / ACCURACY_LOG
    write_log(cut.parent, json.loads(cut.read_text())[:2])
    lines: list[str] = []
    ctx = types.SimpleNamespace(paths=Paths.create(repo=tmp_path / "repo"), rules=RULES, log=lines.append,
                                args=types.SimpleNamespace(submitter="Org"))
    with pytest.raises(UserError, match="1 compliance test was refused") as refused:
        StageCompliance(ctx).handle()
    assert refused.value.exit_code == 1
    assert any(line.startswith("not staged:") and str(cut) in line for line in lines), lines
    assert not (results / "TEST09").exists()
