"""The accuracy scoring of gpt-oss-120b and deepseek-r1 (code/reasoning_eval): extractors, MATH-500 grader,
sandboxed LiveCodeBench runs and the figures, against facts of the official v6.1 evaluation scripts.

The expected values below were produced by the official functions themselves (language/deepseek-r1/
eval_accuracy.py and language/gpt-oss-120b/eval_accuracy.py of mlcommons/inference, with PRM800K's grader at the
submodule's commit 7ecc794) on the same inputs; the test_official_* tests rerun that comparison on the official
tools MLPERF_INFERENCE_DIR points at (conftest points it at ../shared/mlcommons-inference, which holds both
eval_accuracy.py files; the MATH-500 grader and lcb_runner need a checkout of mlcommons/inference with its
submodules initialised). The official rows of the DeepSeek-R1 data set come from ../shared/data (skipped, naming
the path, where it is absent). No GPQA data is used: its texts here are synthetic.
"""
from __future__ import annotations

import base64
import importlib.util
import json
import os
import pickle
import re
import runpy
import shutil
import sys
import time
import types
import zlib
from pathlib import Path

import pytest

from code.common.errors import UserError
from code.reasoning_eval import extract
from code.reasoning_eval.code_runner import Limits, run_solution
from code.reasoning_eval.lcb_tests import (SOURCE_OFFICIAL, SOURCE_PUBLIC_ONLY, SOURCE_STATEMENT, ProblemTests,
                                          LcbTest, decode_test_cases, problem_tests, lcb_problem_tests,
                                          statement_example_tests)
from code.common.constants import AccuracyTarget
from code.common.paths import Paths
from code.common.rules import get_round
from code.reasoning_eval.scoring import DATASET_REPEATS, gpt_oss_final_score, score_deepseek, score_gpt_oss
from tests.official_tools import NOT_AT_HAND, inference_dir

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
DEEPSEEK_ROWS = SHARED_DATA / "deepseek_r1_sample" / "mlperf_official_rows.jsonl"
GPT_OSS_SAMPLE = SHARED_DATA / "gpt_oss_120b_sample" / "gpt_oss_120b_acc_sample.jsonl"
FAST = Limits(seconds_per_test=2)

# submission_checker/constants.py (v6.1), ACC_PATTERN: what the checker reads in accuracy.txt for both.
ACC_PATTERN = {"exact_match": r".*'exact_match':\s([\d.]+).*",
               "TOKENS_PER_SAMPLE": r".*'tokens_per_sample':\s([\d.]+).*"}


def _harmony(analysis: str, final: str) -> str:
    return (f"<|channel|>analysis<|message|>{analysis}<|end|><|start|>assistant<|channel|>final<|message|>{final}"
            f"<|return|>")


# (text, deepseek-r1's parse_multiple_choice(text, 'D'), gpt-oss-120b's) - synthetic GPQA-style outputs.
GPQA_FACTS = [
    (_harmony("Option A looks right. Answer: A", "**B**"), "A", "B"),
    (_harmony("hmm", "The correct option is (C)."), None, None),
    (_harmony("", "Answer: D"), "D", "D"),
    ("<|channel|>analysis<|message|>x<|end|><|channel|>final 明<|message|>c) because<|return|>", None, "C"),
    ("Reasoning... FINAL ANSWER: (B)", "B", "B"),
    ("Answer: E", None, None),
    (_harmony("ANSWER: A", "no idea"), "A", "A"),
    ("['ANSWER: C']", "C", "C"),
    ("The answer is B", None, None),
    (_harmony("x", "Answer. b"), None, "B"),
    ("ANSWER: A\\nlater ANSWER = d", "D", "A"),
    (_harmony("", ""), None, None),
]
# (text, deepseek-r1's parse_multiple_choice(text, 'J'), gpt-oss-120b's) - MMLU-Pro style.
MMLU_FACTS = [
    ("... so the answer is (J).", "J", "J"),
    ("Answer: I", "I", "I"),
    ("I think A is wrong. Answer: C. Done", "C", "I"),       # gpt-oss: a letter at the start of the section wins
    (_harmony("answer: B", "I pick G"), "B", "I"),
    ("nothing here", None, None),
]
# (text, parse_aime_answer(text)) - the same in both scripts.
AIME_FACTS = [("so \\boxed{70}", 70), ("\\boxed{ 588 } then \\boxed{16}", 16), ("Answer: 12.5", None),
              ("answer: 999", 999), ("\\boxed{1000}", None), ("Answer:\n 42", 42), ("\\boxed{x}\nAnswer: 7", 7)]
# (text, deepseek-r1's parse_code(text), gpt-oss-120b's)
CODE_FACTS = [
    ("```python\nprint(1)\n```\nthen\n```python\nprint(2)\n```", "print(1)", "print(2)"),
    (_harmony("```python\nbad\n```", "```\npython\nx=1\n```"), "bad", "x=1"),
    ("```py\nx=2\n```", None, "x=2"),
    ("no code", None, None),
    (_harmony("```python\nfrom_analysis()\n```", "no code in final"), "from_analysis()", "from_analysis()"),
]
# (given, ground truth, evaluate_math500(given, ground truth)) - the same in both scripts.
MATH_FACTS = [
    ("0.5", "\\frac{1}{2}", True), ("\\dfrac{1}{2}", "\\frac12", True), ("10\\text{ cm}", "10", True),
    ("2/4", "\\frac{1}{2}", False), ("(1,2)", "[1,2]", False), ("\\sqrt{2}/2", "\\frac{\\sqrt2}{2}", True),
    ("1,000", "1000", True), ("5 \\text{ degrees}", "5", True), ("x=3", "3", True), ("6.0", "6", True),
    ("3.14159", "\\pi", False), ("5^\\circ", "5", True), ("\\$5", "5", True), ("50\\%", "50", True),
    ("(-\\infty, 3]", "(-\\infty,3]", True), ("7\\frac{3}{4}", "7 3/4", True), ("\\text{Evelyn}", "Evelyn", True),
    ("2\\sqrt{2}", "\\sqrt{8}", True), ("\\frac{6}{8}", "\\frac34", False), ("0.75", "\\frac34", True),
    ("3 million", "3000000", False), ("x^2+1", "1+x^2", True), ("\\left( 1, 2 \\right)", "(1,2)", True),
    ("2.99999999", "2", False),
]


@pytest.fixture
def math_libraries() -> None:
    for module in ("sympy", "pylatexenc"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed: this environment predates requirements/main.txt's pin of it "
                        f"(any make target installs the lock)")


def _jsonl(path: Path) -> list[dict]:
    if not path.is_file():
        pytest.skip(f"{path} is absent: the shared evaluation data lives beside the repository")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- extractors -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text,deepseek,gpt_oss", GPQA_FACTS)
def test_gpqa_extractors(text: str, deepseek: str | None, gpt_oss: str | None) -> None:
    assert extract.deepseek_multiple_choice(text, "D") == deepseek
    assert extract.gpt_oss_multiple_choice(text, "D") == gpt_oss


@pytest.mark.parametrize("text,deepseek,gpt_oss", MMLU_FACTS)
def test_mmlu_pro_extractors(text: str, deepseek: str | None, gpt_oss: str | None) -> None:
    assert extract.deepseek_multiple_choice(text, "J") == deepseek
    assert extract.gpt_oss_multiple_choice(text, "J") == gpt_oss


@pytest.mark.parametrize("text,expected", AIME_FACTS)
def test_aime_extractor(text: str, expected: int | None) -> None:
    assert extract.aime_answer(text) == expected


@pytest.mark.parametrize("text,deepseek,gpt_oss", CODE_FACTS)
def test_code_extractors_first_versus_last_block(text: str, deepseek: str | None, gpt_oss: str | None) -> None:
    assert extract.deepseek_code(text) == deepseek
    assert extract.gpt_oss_code(text) == gpt_oss


def test_missing_texts_extract_nothing() -> None:
    for missing in (None, float("nan"), "", "   "):
        assert extract.aime_answer(missing) is None
        assert extract.boxed_answer(missing) is None
        assert extract.gpt_oss_multiple_choice(missing, "D") is None
        assert extract.deepseek_code(missing) is None
    assert extract.boxed_answer("x \\boxed{\\frac{1}{2}} and \\boxed{ {a}+b }") == "{a}+b"
    assert extract.boxed_answer("\\boxed{unclosed") is None
    assert extract.harmony_final_section("plain") == "plain"


def test_official_rows_extract_their_reference_answers(math_libraries: None) -> None:
    """deepseek-r1's extractors on the reference outputs of the official rows give the rows' ref_extracted_answer
    exactly, and each check passes (ref_accuracy 100)."""
    from code.reasoning_eval import evaluators as ev

    rows = _jsonl(DEEPSEEK_ROWS)
    table = ev.deepseek_evaluators()
    assert sorted(r["dataset"] for r in rows) == ["aime1983", "livecodebench", "math500", "mmlu_pro"]
    for row in rows:
        evaluator = ev.evaluator_for(row["dataset"], table, "deepseek-r1")
        extracted = evaluator.extract(row["ref_output"])
        assert extracted == row["ref_extracted_answer"], row["dataset"]
        assert row["ref_accuracy"] == 100.0
        if evaluator.check == ev.AIME:
            assert ev.check_aime(extracted, row["ground_truth"])
        elif evaluator.check == ev.CHOICE:
            assert ev.check_choice(extracted, row["ground_truth"], evaluator.options)
        elif evaluator.check == ev.MATH:
            assert ev.check_math(extracted, row["ground_truth"])
        else:
            outcome = run_solution(extracted, problem_tests(row), FAST)
            assert outcome.passed, outcome.summary


def test_aime_ground_truths_of_the_gpt_oss_sample() -> None:
    from code.reasoning_eval import evaluators as ev

    rows = [r for r in _jsonl(GPT_OSS_SAMPLE) if r["dataset"] == "aime25"]
    assert len(rows) == 30
    for row in rows:
        truth = row["ground_truth"]
        boxed = extract.aime_answer(_harmony("maybe \\boxed{1}", f"The answer is \\boxed{{{truth}}}."))
        assert boxed == int(truth) and ev.check_aime(boxed, truth)
        assert extract.aime_answer(f"...\nAnswer: {truth}") == int(truth)
        assert not ev.check_aime(extract.aime_answer(f"\\boxed{{{(int(truth) + 1) % 1000}}}"), truth)


# -- MATH-500 ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("given,truth,expected", MATH_FACTS)
def test_math_grader_agrees_with_prm800k(math_libraries: None, given: str, truth: str, expected: bool) -> None:
    from code.reasoning_eval.evaluators import check_math

    assert check_math(given, truth) is expected


def test_math_normalisations(math_libraries: None) -> None:
    from code.reasoning_eval.math_grader import grade_answer, mathd_normalize, prm_normalize, split_elements

    assert mathd_normalize("\\dfrac12") == "\\frac{1}{2}"
    assert mathd_normalize("0.5") == "\\frac{1}{2}"
    assert mathd_normalize("k = 3/4") == "\\frac{3}{4}"
    assert mathd_normalize("\\frac") == "\\frac"           # gives up: compared as written
    assert prm_normalize("12 \\text{ inches}") == "12" and prm_normalize("5 meters") == "5"
    assert prm_normalize("3 \\text{ cm}^2") == "3^2"         # the unit goes, its power stays
    assert prm_normalize("1,234,567") == "1234567"
    assert split_elements("(1,2]") == ["1", "2"]
    assert grade_answer(None, "1") is False
    assert grade_answer("1", "1") is True


# -- LiveCodeBench ----------------------------------------------------------------------------------

OFFICIAL_STATEMENT_SOLUTION = "class Solution:\n    def maximumTripletValue(self, nums):\n        return {body}"


@pytest.fixture
def triplet_problem() -> ProblemTests:
    row = _jsonl(DEEPSEEK_ROWS)[0]
    assert row["dataset"] == "livecodebench"
    return problem_tests(row)


def test_statement_examples_are_the_tests_where_none_are_given(triplet_problem: ProblemTests) -> None:
    assert triplet_problem.source == SOURCE_STATEMENT and not triplet_problem.official
    assert triplet_problem.method == "maximumTripletValue"
    assert [(t.input, t.output) for t in triplet_problem.tests] == [
        ("[12,6,1,2,7]", "77"), ("[1,10,3,4,19]", "133"), ("[1,2,3]", "0")]


@pytest.mark.parametrize("body,verdict", [
    ("1", False),                                                       # wrong answer (functional: False)
    ("next(x for x in iter(int, 1) if x)", -3),                         # runs forever: the per-test limit
    ("1 // 0", -4),                                                     # crashes
    ("__import__('os').fork()", -4),                                    # forks: disabled
    ("__import__('subprocess').Popen(['sleep', '60'])", -4),            # spawns: disabled
])
def test_bad_solutions_fail_within_the_limit(triplet_problem: ProblemTests, body: str, verdict: int) -> None:
    started = time.monotonic()
    outcome = run_solution(OFFICIAL_STATEMENT_SOLUTION.format(body=body), triplet_problem, Limits(seconds_per_test=1))
    assert not outcome.passed
    assert outcome.verdicts[-1] is verdict if isinstance(verdict, bool) else outcome.verdicts[-1] == verdict
    assert time.monotonic() - started < Limits(seconds_per_test=1).wall_seconds(3)


def test_a_solution_ignoring_its_alarm_is_killed_by_the_wall_clock(triplet_problem: ProblemTests) -> None:
    marker = f"{os.getpid() % 1000 + 300}.25"          # a sleep no one else runs
    code = ("import signal, os\nsignal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
            f"os.posix_spawn('/bin/sleep', ['sleep', '{marker}'], {{}})\nwhile True: pass\n")
    outcome = run_solution(code, triplet_problem, Limits(seconds_per_test=0.5))
    assert outcome.verdicts == (-1, -1, -1) and "wall-clock" in outcome.detail
    assert not outcome.passed
    assert not _processes_running(["sleep", marker]), "the solution's process group outlived it"


def _processes_running(command: list[str]) -> list[int]:
    wanted = ("\0".join(command) + "\0").encode()
    deadline = time.monotonic() + 5
    while True:
        found = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit() and (entry / "cmdline").read_bytes() == wanted:
                    found.append(int(entry.name))
            except OSError:
                continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_a_solution_exiting_the_interpreter_counts_as_crashed(triplet_problem: ProblemTests) -> None:
    outcome = run_solution("import os\nos._exit(3)\n", triplet_problem, FAST)
    assert outcome.verdicts == (-1, -1, -1) and "exit status 3" in outcome.detail


STDIN_STATEMENT = """Given N integers, print their sum.

Sample Input 1

3
1 2 3

Sample Output 1

6

1+2+3 = 6.

Sample Input 2

1
-5

Sample Output 2

-5
"""


def test_stdin_problem_from_statement_examples() -> None:
    problem = statement_example_tests("abc001_a", STDIN_STATEMENT)
    assert problem.method is None and len(problem.tests) == 2
    good = "n = int(input())\nprint(sum(map(int, input().split())))\n"
    main_guarded = ("import sys\ndef main():\n    data = sys.stdin.read().split()\n    print(sum(map(int, data[1:])))\n"
                    "if __name__ == '__main__':\n    main()\n")
    assert run_solution(good, problem, FAST).passed
    assert run_solution(main_guarded, problem, FAST).passed
    assert run_solution("print(6)", problem, FAST).verdicts == (True, -2)
    if importlib.util.find_spec("numpy") is not None:       # importable as in lcb_runner's process; stderr ignored
        with_numpy = ("import numpy as np, sys\nprint('debug', file=sys.stderr)\ninput()\n"
                      "print(int(np.sum(list(map(int, input().split())))))\n")
        assert run_solution(with_numpy, problem, FAST).passed
    assert run_solution("print('6.000')", problem, FAST).verdicts[0] is True          # numbers compare as Decimal


def test_statement_arguments_follow_the_method_parameters() -> None:
    statement = ('Example 1:\n\nInput: s = "a, b = c", k = 2\nOutput: "ab"\nExplanation: ...\n\n'
                 'Example 2:\n\nInput: k = 3, s = "q"\nOutput: true\n\nExample 3:\n\nInput: s = x\nOutput: 1\n')
    starter = "class Solution:\n    def f(self, s: str, k: int) -> str:\n        "
    problem = statement_example_tests("7", statement, starter)
    assert problem.method == "f"          # example 3 is no JSON: left out
    assert [(t.input, t.output) for t in problem.tests] == [('"a, b = c"\n2', '"ab"'), ('"q"\n3', "true")]


def test_no_readable_examples_is_an_error_naming_the_data() -> None:
    with pytest.raises(UserError, match="code_generation_lite"):
        statement_example_tests("x", "no examples here", "class Solution:\n    def f(self, a):\n        ")


def _private_column(cases: list[dict]) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


def test_official_tests_decode_safely_and_grade() -> None:
    public = [{"input": "[12,6,1,2,7]", "output": "77", "testtype": "functional"}]
    private = [{"input": "[1,2,3]", "output": "0", "testtype": "functional"},
               {"input": "[1000000,1,1000000]", "output": "999999000000", "testtype": "functional"}]
    row = {"question_id": "3154", "public_test_cases": json.dumps(public),
           "private_test_cases": _private_column(private), "metadata": json.dumps({"func_name": "maximumTripletValue"})}
    problem = lcb_problem_tests(row)
    assert problem.source == SOURCE_OFFICIAL and problem.official and len(problem.tests) == 3
    assert problem.tests[2] == LcbTest("[1000000,1,1000000]", "999999000000", "functional")
    assert decode_test_cases(json.dumps(private)) == private
    only_public = lcb_problem_tests({**row, "private_test_cases": ""})
    assert only_public.source == SOURCE_PUBLIC_ONLY
    reference = _jsonl(DEEPSEEK_ROWS)[0]["ref_extracted_answer"]
    assert run_solution(reference, problem, FAST).passed
    # the data set row's columns are used before the statement, looked up by question_id
    assert problem_tests({"ground_truth": "3154", "question": "?"}, row).official


def test_lcb_releases_are_read_from_the_files_the_user_brings(tmp_path: Path) -> None:
    from code.reasoning_eval.lcb_tests import RELEASE_FILES, load_lcb_problems

    assert RELEASE_FILES["release_v1"] == ("test.jsonl",)
    assert RELEASE_FILES["release_v6"][-1] == "test6.jsonl" and len(RELEASE_FILES["release_v6"]) == 6
    with pytest.raises(UserError, match="test.jsonl, test2.jsonl in .*code_generation_lite"):
        load_lcb_problems(tmp_path, "release_v2")
    cases = [{"input": "[1,2,3]", "output": "0", "testtype": "functional"}]
    row = {"question_id": "3154", "public_test_cases": json.dumps(cases), "private_test_cases": _private_column(cases),
           "metadata": json.dumps({"func_name": "maximumTripletValue"})}
    (tmp_path / "test.jsonl").write_text(json.dumps(row) + "\n" + json.dumps({**row, "question_id": "9"}) + "\n")
    problems = load_lcb_problems(tmp_path, "release_v1", {"3154"})
    assert list(problems) == ["3154"] and problem_tests({"ground_truth": "3154"}, problems["3154"]).official


class _Exploit:
    def __reduce__(self):
        return (os.getenv, ("HOME",))


def test_a_pickle_naming_a_callable_is_refused() -> None:
    hostile = base64.b64encode(zlib.compress(pickle.dumps(_Exploit()))).decode()
    with pytest.raises(UserError, match="only plain values"):
        decode_test_cases(hostile, "x")
    not_text = base64.b64encode(zlib.compress(pickle.dumps([1, 2]))).decode()
    with pytest.raises(UserError, match="not the tests' JSON text"):
        decode_test_cases(not_text, "x")


# -- figures and accuracy.txt -----------------------------------------------------------------------

def _checker_values(text: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {name: [] for name in ACC_PATTERN}
    for line in text.splitlines():
        for name, pattern in ACC_PATTERN.items():
            match = re.match(pattern, line)
            if match:
                found[name].append(match.group(1))
    return found


def test_gpt_oss_final_score_weights_repeats() -> None:
    rows = ([{"dataset": "aime25", "ground_truth": "70"}] * 16 + [{"dataset": "gpqa_diamond", "ground_truth": "B"}] * 10
            + [{"dataset": "AIME_extra", "ground_truth": "5"}] * 2)
    texts = (["\\boxed{70}"] * 10 + ["\\boxed{7}"] * 6 + [_harmony("A?", "B")] * 5 + [_harmony("", "C")] * 4 + [None]
             + ["Answer: 5", "none"])
    score = score_gpt_oss(rows, texts, list(range(28)))
    by_name = {d.name: d for d in score.datasets}
    assert (by_name["aime25"].correct, by_name["aime25"].total, by_name["aime25"].repeats) == (10, 16, 8)
    gpqa = by_name["gpqa_diamond"]
    assert (gpqa.correct, gpqa.total, gpqa.evaluated, gpqa.repeats) == (5, 10, 9, 5)
    assert (by_name["aime_extra"].correct, by_name["aime_extra"].repeats) == (1, 1)
    # (10/8 + 1/1 + 5/5) / (16/8 + 2/1 + 10/5) x 100
    assert gpt_oss_final_score(score.datasets)[2] == pytest.approx(3.25 / 6 * 100)
    assert score.exact_match == 54.167 and score.tokens_per_sample == 13.5 and score.samples == 28
    assert "'exact_match': 54.167" in score.text.splitlines()
    assert _checker_values(score.text) == {"exact_match": ["54.167"], "TOKENS_PER_SAMPLE": ["13.5"]}
    assert DATASET_REPEATS == {"aime25": 8, "gpqa_diamond": 5, "livecodebench_v6": 3}
    result = score.accuracy_result()
    assert (result.metric, result.value, result.samples) == ("exact_match", 54.167, 28)


def test_deepseek_exact_match_is_the_mean_of_rows(math_libraries: None) -> None:
    rows = ([{"dataset": "math500", "ground_truth": "\\frac{1}{2}"}] * 3
            + [{"dataset": "mmlu_pro", "ground_truth": "C"}] * 3
            + [{"dataset": "aime1983", "ground_truth": "12", "gt_output": "13"}])
    texts = ["\\boxed{0.5}", "\\boxed{2/4}", "no box", "ANSWER: C", "answer is (c)", "Answer: D", "\\boxed{13}"]
    score = score_deepseek(rows, texts, [10, 20, 30, 40, 50, 60, 71])
    assert [v.correct for v in score.verdicts] == [True, False, False, True, True, False, True]
    # pandas' mean, sum / count: 400 / 7 (57.142857142857146, where 4 / 7 * 100 is 57.14285714285714)
    assert score.exact_match == 400 / 7 and score.tokens_per_sample == 281 / 7
    line = "{'exact_match': 57.142857142857146, 'tokens_per_sample': 40.142857142857146, 'num-samples': 7}"
    assert line in score.text.splitlines()
    assert _checker_values(score.text) == {"exact_match": ["57.142857142857146"],
                                           "TOKENS_PER_SAMPLE": ["40.142857142857146"]}


def test_lcb_rows_say_which_tests_graded_them() -> None:
    row = _jsonl(DEEPSEEK_ROWS)[0]
    good = row["ref_output"]
    score = score_deepseek([row, row], [good, "```python\nclass Solution: pass\n```"], [5, 7], limits=FAST)
    assert [v.correct for v in score.verdicts] == [True, False] and score.exact_match == 50.0
    assert any("statement's examples only" in note for note in score.notes)
    assert "statement's examples only" in score.text


def test_unknown_datasets_and_mismatched_lengths_are_refused() -> None:
    with pytest.raises(UserError, match="no evaluator"):
        score_deepseek([{"dataset": "squad", "ground_truth": "x"}], ["x"], [1])
    with pytest.raises(UserError, match="nothing to score"):
        score_gpt_oss([], [], [])
    with pytest.raises(ValueError):
        score_gpt_oss([{"dataset": "aime25", "ground_truth": "1"}], ["x", "y"], [1])


def accuracy_targets(benchmark: str) -> dict[str, tuple[float | None, float | None]]:
    """The round's bounds per checker metric, as the rules table (the one place that keeps them) gives them."""
    bounds = get_round("v6.1").benchmark(benchmark).accuracy_bounds(AccuracyTarget.k_99)
    return {bound.name: (bound.minimum, bound.maximum) for bound in bounds}


def test_targets_of_the_round() -> None:
    assert accuracy_targets("deepseek-r1")["exact_match"][0] == pytest.approx(0.99 * 81.3582)
    assert accuracy_targets("deepseek-r1")["TOKENS_PER_SAMPLE"] == pytest.approx((0.9 * 3886.2274, 1.1 * 3886.2274))
    assert accuracy_targets("gpt-oss-120b")["TOKENS_PER_SAMPLE"][1] == pytest.approx(1.1 * 9999)


@pytest.mark.skipif(inference_dir() is None,
                    reason=f"{NOT_AT_HAND}: the checker's constants were not read")
def test_recorded_checker_facts_match_the_official_constants() -> None:
    constants = inference_dir() / "tools" / "submission" / "submission_checker" / "constants.py"
    official = runpy.run_path(str(constants))
    assert {name: official["ACC_PATTERN"][name] for name in ACC_PATTERN} == ACC_PATTERN
    config = official["MODEL_CONFIG"]["v6.1"]
    for model in ("deepseek-r1", "gpt-oss-120b"):
        target, upper = config["accuracy-target"][model], config["accuracy-upper-limit"][model]
        ours = accuracy_targets(model)
        assert target[0] == "exact_match" and ours["exact_match"][0] == pytest.approx(target[1])
        assert upper[0] == "TOKENS_PER_SAMPLE" and ours["TOKENS_PER_SAMPLE"][1] == pytest.approx(upper[1])
    deepseek_target = config["accuracy-target"]["deepseek-r1"]
    assert deepseek_target[2] == "TOKENS_PER_SAMPLE"
    assert accuracy_targets("deepseek-r1")["TOKENS_PER_SAMPLE"][0] == pytest.approx(deepseek_target[3])


# -- the official functions themselves --------------------------------------------------------------

def _official_scorers() -> Path:
    """The official tools MLPERF_INFERENCE_DIR points at, when they hold both benchmarks' eval_accuracy.py."""
    checkout = inference_dir()
    if checkout is None:
        pytest.skip(f"{NOT_AT_HAND}: the official eval_accuracy.py files were not run")
    for benchmark in ("deepseek-r1", "gpt-oss-120b"):
        script = checkout / "language" / benchmark / "eval_accuracy.py"
        if not script.is_file():
            pytest.skip(f"{script} is absent: point MLPERF_INFERENCE_DIR at a checkout of mlcommons/inference")
    return checkout


def _official_module(checkout: Path, benchmark: str, work: Path, monkeypatch: pytest.MonkeyPatch):
    """The benchmark's eval_accuracy.py, imported from a copy beside its prm800k submodule (transformers, which
    only its log reader needs, is replaced by an empty module where it is not installed)."""
    source = checkout / "language" / benchmark
    folder = work / benchmark
    folder.mkdir()
    shutil.copy(source / "eval_accuracy.py", folder / "eval_accuracy.py")
    prm800k = (source / "submodules" / "prm800k").resolve()
    if prm800k.is_dir():
        (folder / "submodules").mkdir()
        (folder / "submodules" / "prm800k").symlink_to(prm800k)
    if "transformers" not in sys.modules and importlib.util.find_spec("transformers") is None:
        stand_in = types.ModuleType("transformers")
        stand_in.AutoTokenizer = None
        monkeypatch.setitem(sys.modules, "transformers", stand_in)
    name = f"official_{benchmark.replace('-', '_')}"
    spec = importlib.util.spec_from_file_location(name, folder / "eval_accuracy.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_official_extractors_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    checkout = _official_scorers()
    deepseek = _official_module(checkout, "deepseek-r1", tmp_path, monkeypatch)
    gpt_oss = _official_module(checkout, "gpt-oss-120b", tmp_path, monkeypatch)
    for text, want_deepseek, want_gpt_oss in GPQA_FACTS:
        assert deepseek.parse_multiple_choice(text, "D") == want_deepseek == extract.deepseek_multiple_choice(text, "D")
        assert gpt_oss.parse_multiple_choice(text, "D") == want_gpt_oss == extract.gpt_oss_multiple_choice(text, "D")
    for text, want_deepseek, want_gpt_oss in MMLU_FACTS:
        assert deepseek.parse_multiple_choice(text, "J") == want_deepseek
        assert gpt_oss.parse_multiple_choice(text, "J") == want_gpt_oss
    for text, want in AIME_FACTS:
        assert deepseek.parse_aime_answer(text) == gpt_oss.parse_aime_answer(text) == want
    for text, want_deepseek, want_gpt_oss in CODE_FACTS:
        assert deepseek.parse_code(text) == want_deepseek and gpt_oss.parse_code(text) == want_gpt_oss
    for row in _jsonl(DEEPSEEK_ROWS):
        text = row["ref_output"]
        assert deepseek.parse_boxed_math(text) == extract.boxed_answer(text)
        assert gpt_oss.parse_code(text) == extract.gpt_oss_code(text)
        assert gpt_oss.parse_multiple_choice(text, "J") == extract.gpt_oss_multiple_choice(text, "J")


def test_official_math500_grader_agrees(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        math_libraries: None) -> None:
    checkout = _official_scorers()
    for benchmark in ("deepseek-r1", "gpt-oss-120b"):
        grader = checkout / "language" / benchmark / "submodules" / "prm800k" / "prm800k" / "grading" / "grader.py"
        if not grader.is_file():
            pytest.skip(f"{grader} is absent (PRM800K's grader is a git submodule of mlcommons/inference, not among "
                        f"the official files copied beside the repository): point MLPERF_INFERENCE_DIR at a checkout "
                        f"after `git submodule update --init language/{benchmark}/submodules/prm800k`")
    deepseek = _official_module(checkout, "deepseek-r1", tmp_path, monkeypatch)
    gpt_oss = _official_module(checkout, "gpt-oss-120b", tmp_path, monkeypatch)
    from code.reasoning_eval.evaluators import check_math

    for given, truth, want in MATH_FACTS:
        assert deepseek.evaluate_math500(given, truth) is want
        assert gpt_oss.evaluate_math500(given, truth) is want
    # every pair of the MATH-500 sample's answers and a few forms of them, both ways round
    sample = SHARED_DATA / "deepseek_r1_sample" / "deepseek_r1_sample.jsonl"
    answers = [r["ground_truth"] for r in _jsonl(sample) if r["dataset"] == "math500"]
    answers += ["0.5", "\\frac12", "(1,2)", "[1,2)", "10\\text{ cm}", "\\sqrt3", "7 3/4", "\\pi", "2\\pi", "x^2+1"]
    for given in answers:
        for truth in answers:
            assert deepseek.evaluate_math500(given, truth) == check_math(given, truth), (given, truth)


# lcb_runner's evaluate_generations_by_problem (the official scripts' code execution) on one solution, in a process
# of its own: its reliability_guard disables os functions of the process it runs in.
LCB_PROBE = """
import json, sys
job = json.loads(sys.stdin.read())
sys.path.insert(0, job["lcb"])
from lcb_runner.evaluation.compute_code_generation_metrics import evaluate_generations_by_problem
results, _ = evaluate_generations_by_problem([[job["code"]], job["sample"], False, job["timeout"]])
print("RESULT:" + json.dumps([bool(r) if r is True or r is False else int(r) for r in results[0]]))
"""


def _lcb_verdicts(lcb: Path, problem: ProblemTests, code: str, timeout: int) -> list:
    import subprocess

    sample = {"input_output": json.dumps({"inputs": [t.input for t in problem.tests],
                                          "outputs": [t.output for t in problem.tests], "fn_name": problem.method})}
    job = json.dumps({"lcb": str(lcb), "sample": sample, "code": code, "timeout": timeout})
    done = subprocess.run([sys.executable, "-c", LCB_PROBE], input=job, capture_output=True, text=True, timeout=120,
                          check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT:")]
    assert lines, done.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT:"):])


def test_lcb_runner_gives_the_same_verdicts(triplet_problem: ProblemTests) -> None:
    lcb = _official_scorers() / "language" / "deepseek-r1" / "submodules" / "LiveCodeBench"
    if not (lcb / "lcb_runner" / "evaluation" / "testing_util.py").is_file():
        pytest.skip(f"{lcb} is absent (lcb_runner is a git submodule of mlcommons/inference, not among the official "
                    f"files copied beside the repository): point MLPERF_INFERENCE_DIR at a checkout after "
                    f"`git submodule update --init language/deepseek-r1/submodules/LiveCodeBench`")
    stdin_problem = statement_example_tests("abc001_a", STDIN_STATEMENT)
    reference = _jsonl(DEEPSEEK_ROWS)[0]["ref_extracted_answer"]
    cases = [(triplet_problem, reference)]
    cases += [(triplet_problem, OFFICIAL_STATEMENT_SOLUTION.format(body=body))
              for body in ("1", "next(x for x in iter(int, 1) if x)", "1 // 0", "__import__('os').fork()")]
    cases += [(stdin_problem, code) for code in ("n = int(input())\nprint(sum(map(int, input().split())))\n",
                                                 "print(6)", "print('6.000')", "import sys\nprint(sys.stdin.read())",
                                                 "import numpy\ninput()\nprint(numpy.sum([int(x) for x in "
                                                 "input().split()]))")]
    for problem, code in cases:
        ours = run_solution(code, problem, Limits(seconds_per_test=1)).verdicts
        assert list(ours) == _lcb_verdicts(lcb, problem, code, timeout=1), code
    # A solution that ends the interpreter fails in both; lcb_runner's check_correctness then raises on its empty
    # metadata and the caller records [-2], where this runner records -1 for every test, as check_correctness
    # means to.
    exiting = "import os\nos._exit(3)\n"
    assert _lcb_verdicts(lcb, triplet_problem, exiting, timeout=1) == [-2]
    assert run_solution(exiting, triplet_problem, Limits(seconds_per_test=1)).verdicts == (-1, -1, -1)


# -- accuracy logs ----------------------------------------------------------------------------------

VOCABULARY = ["<|channel|>final<|message|>", "\\boxed{70}", "\\boxed{5}", "<|return|>", "ANSWER: B", " "]


def _write_log(path: Path, responses: list[tuple[int, list[int]]]) -> Path:
    import numpy as np

    entries = [{"seq_id": n, "qsl_idx": index, "data": np.asarray(ids, "<i4").tobytes().hex().upper()}
               for n, (index, ids) in enumerate(responses)]
    path.write_text(json.dumps(entries))
    return path


class _Vocabulary:
    """A tokenizer of the words of VOCABULARY, one id each: decoded as the benchmarks' scorers decode."""

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(VOCABULARY[int(i)] for i in ids)


def _task_data(paths: Paths, benchmark, dataset: str, rows: list[dict]) -> None:
    """`rows` as the data set's file, where make download_data would link it."""
    data = benchmark.task_dataset(dataset)
    target = data.directory(paths) / data.files["all"]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("".join(json.dumps(row) + "\n" for row in rows))


def test_accuracy_logs_count_repeats_as_each_script_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run path (Benchmark.score): deepseek-r1's script counts a sample's first entry, gpt-oss-120b's every
    entry; each benchmark's scorer gets the decoded responses of the items its log names."""
    from code.common.benchmark_api import get_benchmark

    paths = Paths(repo=tmp_path / "repo", scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    deepseek, gpt_oss = get_benchmark("deepseek-r1"), get_benchmark("gpt-oss-120b")
    rows = [{"dataset": "aime25", "ground_truth": "70"}, {"dataset": "aime25", "ground_truth": "6"}]
    _task_data(paths, deepseek, "deepseek_r1_sample",
               [{**row, "dataset": "aime1983", "text_input": "?"} for row in rows])
    _task_data(paths, gpt_oss, "gpt_oss_sample", [{**row, "question": "?"} for row in rows])
    for benchmark in (deepseek, gpt_oss):
        monkeypatch.setattr(benchmark, "tokenizer", lambda model, paths: _Vocabulary())
    log = _write_log(tmp_path / "mlperf_log_accuracy.json", [(0, [0, 1, 3]), (1, [2]), (0, [2, 2, 2, 2])])

    scored = deepseek.score("smollm2-135m-instruct", "deepseek_r1_sample", log, paths)
    assert (scored.samples, scored.get("exact_match"), scored.get("TOKENS_PER_SAMPLE")) == (2, 50.0, 2.0)
    scored = gpt_oss.score("smollm2-135m-instruct", "gpt_oss_sample", log, paths)   # 1 of 3 right, repeats 8
    assert (scored.samples, scored.get("exact_match"), scored.get("TOKENS_PER_SAMPLE")) == (3, 33.333, 8 / 3)
    _task_data(paths, gpt_oss, "gpt_oss_sample", [{**rows[0], "question": "?"}])
    with pytest.raises(UserError, match="outside the data set's 1 samples"):
        gpt_oss.score("smollm2-135m-instruct", "gpt_oss_sample", log, paths)
    (tmp_path / "odd.json").write_text(json.dumps([{"qsl_idx": 0, "data": "0102"}]))
    with pytest.raises(UserError, match="not a whole number"):
        gpt_oss.score("smollm2-135m-instruct", "gpt_oss_sample", tmp_path / "odd.json", paths)
