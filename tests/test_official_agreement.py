"""The toolkit judges every corpus tree and log pair as the round's official tools do (tests/official_corpus.py).

The recorded official verdicts are facts, read off the official tools; the MLPERF_INFERENCE_DIR tests re-run those
tools on the corpus so the facts can be checked against any checkout in one command.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from code.common.audit.verify import compare_accuracy_logs, verify_performance, verify_test01_accuracy
from code.common.rules import get_round
from code.common.submission.checker import check_submission
from tests.official_corpus import (ACCURACY_PAIRS, CRASH, PASS, PERFORMANCE_PAIRS, TREE_CASES, AccuracyPair,
                                   PerformancePair, TreeCase, accuracy_log, build_tree, write_run)
from tests.official_tools import NOT_AT_HAND, inference_dir, run_checker, run_verify_accuracy, run_verify_performance

RULES = get_round("v6.1")
needs_checkout = pytest.mark.skipif(inference_dir() is None,
                                    reason=f"{NOT_AT_HAND}: the official tools were not re-run")


def test_the_official_tools_beside_the_repository_are_used():
    """With ../shared/mlcommons-inference beside the repository, every session compares with the official tools
    (conftest points MLPERF_INFERENCE_DIR at it unless the user points it elsewhere): none of the comparisons is
    skipped for want of them."""
    from tests.conftest import OFFICIAL_MARKER, OFFICIAL_TOOLS

    if not (OFFICIAL_TOOLS / OFFICIAL_MARKER).is_file():
        pytest.skip(f"{OFFICIAL_TOOLS} is absent: the official tools are not beside the repository")
    assert inference_dir() is not None


def _ids(items) -> list[str]:
    return [item.name for item in items]


def test_corpus_names_are_unique():
    for items in (TREE_CASES, PERFORMANCE_PAIRS, ACCURACY_PAIRS):
        assert len(set(_ids(items))) == len(items)


def test_corpus_holds_both_verdicts_and_a_crash():
    assert any(c.official_pass for c in TREE_CASES) and any(not c.official_pass for c in TREE_CASES)
    assert any(CRASH in (c.main, c.old) for c in TREE_CASES)
    # Cases where the two official checkers disagree are in the corpus: the toolkit takes the stricter one, except
    # where the stricter one fails by a defect of its own, which each such case names.
    assert any(c.main != c.old for c in TREE_CASES)
    assert all(c.warns for c in TREE_CASES if c.toolkit_pass is not None)


@pytest.mark.parametrize("case", TREE_CASES, ids=_ids(TREE_CASES))
def test_toolkit_checker_agrees(case: TreeCase, tmp_path: Path):
    tree = build_tree(tmp_path / "tree", case.spec)
    report = check_submission(tree, RULES)
    assert report.passed == case.expected_pass, report.text()
    if not case.expected_pass:
        assert any(case.says in f.message for f in report.errors), report.text()
    if case.warns:
        assert any(case.warns in f.message for f in report.warnings), report.text()


@pytest.mark.parametrize("pair", PERFORMANCE_PAIRS, ids=_ids(PERFORMANCE_PAIRS))
def test_toolkit_performance_verification_agrees(pair: PerformancePair, tmp_path: Path):
    write_run(tmp_path / "reference", pair.reference)
    write_run(tmp_path / "compliance", pair.compliance)
    check = verify_performance(RULES.compliance_tests[pair.test], tmp_path / "reference", tmp_path / "compliance")
    assert check.passed == (pair.official == PASS), check.text
    assert check.text.splitlines()[-1].startswith("TEST PASS" if check.passed else "TEST FAIL")


@pytest.mark.parametrize("pair", ACCURACY_PAIRS, ids=_ids(ACCURACY_PAIRS))
def test_toolkit_accuracy_verification_agrees(pair: AccuracyPair):
    comparison = compare_accuracy_logs(accuracy_log(pair.reference), accuracy_log(pair.compliance),
                                       np.dtype(np.int32))
    check = verify_test01_accuracy(comparison)
    assert check.passed == (pair.official == PASS), check.text
    lines = [line for line in check.text.splitlines() if line]
    assert lines[0].startswith("num_acc_log_entries = ") and lines[-1] == check.verdict


# -- the official tools themselves, when a checkout is at hand --------------------------------------------
@needs_checkout
def test_official_checkers_give_the_recorded_verdicts(tmp_path: Path):
    wrong = []
    for case in TREE_CASES:
        tree = build_tree(tmp_path / case.name / "tree", case.spec)
        for which, recorded in (("main", case.main), ("old", case.old)):
            verdict, output = run_checker(inference_dir(), tree, which, tmp_path / case.name / which)
            if verdict != recorded:
                wrong.append(f"{case.name}: {which} says {verdict}, recorded {recorded}\n{output[-1500:]}")
    assert not wrong, "\n\n".join(wrong)


@needs_checkout
def test_official_performance_scripts_give_the_recorded_verdicts(tmp_path: Path):
    wrong = []
    for pair in PERFORMANCE_PAIRS:
        write_run(tmp_path / pair.name / "reference", pair.reference)
        write_run(tmp_path / pair.name / "compliance", pair.compliance)
        verdict, output = run_verify_performance(inference_dir(), pair.test, tmp_path / pair.name / "reference",
                                                 tmp_path / pair.name / "compliance")
        if verdict != pair.official:
            wrong.append(f"{pair.name}: {verdict}, recorded {pair.official}\n{output}")
    assert not wrong, "\n\n".join(wrong)


@needs_checkout
def test_official_accuracy_script_gives_the_recorded_verdicts(tmp_path: Path):
    wrong = []
    for pair in ACCURACY_PAIRS:
        reference, compliance = tmp_path / f"{pair.name}-reference.json", tmp_path / f"{pair.name}-compliance.json"
        reference.write_text(json.dumps(accuracy_log(pair.reference)))
        compliance.write_text(json.dumps(accuracy_log(pair.compliance)))
        verdict, output = run_verify_accuracy(inference_dir(), reference, compliance, "int32")
        if verdict != pair.official:
            wrong.append(f"{pair.name}: {verdict}, recorded {pair.official}\n{output}")
    assert not wrong, "\n\n".join(wrong)


def test_checkout_detection(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("MLPERF_INFERENCE_DIR", str(tmp_path))
    assert inference_dir() is None
    (tmp_path / "tools" / "submission").mkdir(parents=True)
    (tmp_path / "tools" / "submission" / "submission_checker_old.py").write_text("")
    assert inference_dir() == tmp_path
    shutil.rmtree(tmp_path / "tools")
