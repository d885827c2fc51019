"""Fault injection, compliance evidence put into a tree by hand: every TEST0x folder of the tree is verified, not
only those stage_compliance staged. A folder copied in (a failing TEST07 with its verdict edited to PASS, a TEST01
holding the submission run's own logs), evidence whose compliance run left no record, and a log that is a link or a
folder are refused by make check_submission and make stage_compliance, each naming the file."""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from code.common.paths import ACCURACY_LOG, DETAIL_LOG, SUMMARY_LOG, VERIFY_ACCURACY, Paths
from code.common.submission.checker import check_submission
from code.common.submission.staging import EvidenceProblem, _compliance_run
from tests import multiple_choice_benchmark as mc
from tests.run_records import record_staged_compliance
from tests.test_audit_test07_test09 import (RULES, _offline, compliance_folder, gpt_oss_submission, length_log,
                                            write_log)
from tests.test_checker import make_tree

NOT_STAGED = "was not staged by make stage_compliance from a recorded compliance run"


@pytest.fixture(autouse=True, scope="module")
def multiple_choice():
    mc.register()


def errors_at(report, *parts: str) -> list[str]:
    """The messages of the errors whose path holds every one of `parts`."""
    return [e.message for e in report.errors if all(part in e.path for part in parts)]


# -- make check_submission --------------------------------------------------------------------------------------
def test_a_failing_test07_with_an_edited_verdict_copied_in_is_refused(tmp_path, monkeypatch):
    """TEST07 scoring 0 (threshold 60.698), its verify_accuracy.txt saying TEST PASS, copied into a tree whose
    staging tree holds no record of it: the official checkers and the tree alone pass it; the check does not."""
    tree = gpt_oss_submission(tmp_path / "tree", "TEST PASS\n", "TEST PASS\n")
    write_log(_offline(tree) / "TEST07" / "accuracy", mc.answers_log(mc.COMPLIANCE_DATASET, 0))
    monkeypatch.setattr("code.common.benchmark_api.get_benchmark", lambda name: mc.BENCHMARK)
    assert check_submission(tree, RULES).passed
    paths = Paths.create(repo=tmp_path / "repo")
    report = check_submission(tree, RULES, paths=paths)
    [message] = errors_at(report, "Offline/TEST07")
    assert message.startswith(f"TEST07/ {NOT_STAGED} ({paths.staging} holds no record of it with the sha256 of its "
                              f"logs)") and "make run_audit_harness" in message
    # With the record stage_compliance keeps (the sha256 of the logs, model and data set), it is scored again.
    record_staged_compliance(tree, paths)
    provenance = paths.staging / _offline(tree).relative_to(tree) / ".compliance_provenance.json"
    entries = json.loads(provenance.read_text())
    entries["TEST07"].update(model="gpt-oss-120b", dataset=mc.COMPLIANCE_DATASET)
    provenance.write_text(json.dumps(entries))
    [message] = errors_at(check_submission(tree, RULES, paths=paths), "Offline/TEST07")
    assert message.startswith("verify_accuracy.txt says TEST PASS, but its logs give TEST FAIL (accuracy 0 over 40 "
                              "samples: below the threshold 60.698)")


def test_a_test01_holding_the_submission_runs_own_logs_is_refused(tmp_path):
    tree = make_tree(tmp_path / "tree")
    offline = tree / "closed/Org/results/cpu_sys/resnet/Offline"
    for name in (SUMMARY_LOG, DETAIL_LOG):
        shutil.copy2(offline / "performance/run_1" / name, offline / "TEST01/performance/run_1" / name)
    for report in (check_submission(tree, RULES), check_submission(tree, RULES, paths=Paths.create(repo=tmp_path))):
        [message] = errors_at(report, "Offline/TEST01/performance/run_1/mlperf_log_detail.txt")
        assert f"is the submission run's own {DETAIL_LOG} ({offline / 'performance/run_1' / DETAIL_LOG}), not one a " \
               f"compliance run wrote" in message


def test_evidence_that_cannot_be_derived_again_fails_the_check(tmp_path):
    """A resnet tree with a record of each compliance folder: TEST04 is derived from its logs; TEST01's accuracy
    logs were cut and their full copies are not at hand, so its accuracy verdict cannot be derived: named."""
    tree = make_tree(tmp_path / "tree")
    paths = Paths.create(repo=tmp_path / "repo")
    record_staged_compliance(tree, paths)
    report = check_submission(tree, RULES, paths=paths)
    assert not any(NOT_STAGED in e.message for e in report.errors), report.text()
    for scenario in ("Offline", "SingleStream", "MultiStream"):
        [message] = errors_at(report, f"{scenario}/TEST01/{VERIFY_ACCURACY}")
        assert message.startswith(f"{VERIFY_ACCURACY} cannot be verified: an {ACCURACY_LOG} it compares was cut and "
                                  f"its full copy is not in the backups of truncate_results")
    assert not errors_at(report, "TEST04"), report.text()


@pytest.mark.parametrize("fault", ["folder", "dangling link", "link", "missing"])
def test_a_log_that_is_not_a_readable_file_is_named(tmp_path, fault):
    tree = gpt_oss_submission(tmp_path / "tree", "TEST PASS\n", "TEST PASS\n")
    log = _offline(tree) / "TEST09" / "accuracy" / ACCURACY_LOG
    make_fault(log, fault, tmp_path)
    paths = Paths.create(repo=tmp_path / "repo")
    record_staged_compliance(tree, paths)
    report = check_submission(tree, RULES, paths=paths)
    said = {"folder": f"{log} is a folder (or other non-file) where the log should be",
            "dangling link": f"{log} is a link to {tmp_path / 'gone.json'}, which does not exist",
            "link": f"{log} is a link to {tmp_path / 'elsewhere.json'}, and a submission holds the file itself",
            "missing": f"{log} is missing, and TEST09's verdict is derived from it"}[fault]
    assert any(message.startswith(said) for message in errors_at(report, "Offline/TEST09/accuracy")), report.text()
    assert not report.passed


def make_fault(log: Path, fault: str, outside: Path) -> None:
    """The log replaced by a folder holding it, a link to nothing or to a copy in `outside`, or removed."""
    content = log.read_bytes()
    log.unlink()
    if fault == "folder":
        log.mkdir()
        (log / "entries.json").write_bytes(content)
    elif fault == "dangling link":
        os.symlink(outside / "gone.json", log)
    elif fault == "link":
        (outside / "elsewhere.json").write_bytes(content)
        os.symlink(outside / "elsewhere.json", log)


def test_compliance_folders_outside_their_place_or_benchmark_are_refused(tmp_path):
    tree = make_tree(tmp_path / "tree")
    org = tree / "closed/Org"
    shutil.copytree(org / "results/cpu_sys/resnet/Offline/TEST01", org / "compliance/cpu_sys/resnet/Offline/TEST01")
    shutil.copytree(org / "results/cpu_sys/resnet/Offline/TEST01", org / "results/cpu_sys/resnet/Offline/TEST06")
    report = check_submission(tree, RULES)
    [stray] = errors_at(report, "compliance/cpu_sys/resnet/Offline/TEST01")
    assert stray.startswith("TEST01 lies outside a results/<system>/<benchmark>/<scenario>/ folder")
    [other] = errors_at(report, "results/cpu_sys/resnet/Offline/TEST06")
    assert other.startswith("TEST06/ is not a compliance test of resnet50 in v6.1")


# -- make stage_compliance ---------------------------------------------------------------------------------------
def test_stage_compliance_refuses_logs_whose_run_left_no_record(tmp_path):
    """The compliance run's record deleted and the TEST09 log cut: refused (exit 1), not staged unverified."""
    source = compliance_folder(tmp_path / "TEST09", "TEST09", length_log([1278] * 31))
    shutil.rmtree(source / "runs")
    cut = source / "accuracy" / ACCURACY_LOG
    cut.write_text(cut.read_text()[:len(cut.read_text()) // 2])
    record, problem = _compliance_run(source, "label", lambda line: None)
    assert record is None and isinstance(problem, EvidenceProblem)
    assert problem.startswith(f"no record of the compliance run that wrote {source}'s logs")


@pytest.mark.parametrize("fault", ["folder", "dangling link", "link"])
def test_stage_compliance_refuses_a_log_that_is_not_a_readable_file(tmp_path, fault):
    source = compliance_folder(tmp_path / "TEST09", "TEST09", length_log([1278] * 5))
    log = source / "accuracy" / ACCURACY_LOG
    make_fault(log, fault, tmp_path)
    _, problem = _compliance_run(source, "label", lambda line: None)
    assert isinstance(problem, EvidenceProblem) and problem.startswith(f"{log} is a ")
