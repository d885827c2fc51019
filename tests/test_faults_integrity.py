"""Fault injection, integrity of results: logs edited after the run are refused at staging, and a submission tree
edited after staging (a summary, an accuracy.txt, a cut accuracy log) fails check_submission, which re-scores each
accuracy.txt from the full accuracy log.

The trees go through the real chain's code: staged logs, truncate_results' backups and cut, export_submission,
check_submission with the toolkit's folders; the accuracy logs score against the real foolbox20 labels."""
from __future__ import annotations

import hashlib
import json
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from code.common.benchmark_api import get_benchmark
from code.common.constants import Scenario
from code.common.errors import UserError
from code.common.records.metadata import RunRecord, log_digests
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.submission.checker import check_submission
from code.common.submission.cross_checks import PROVENANCE, same_number, summary_problems, write_provenance
from code.common.submission.export import export_tree
from code.common.submission.measurements import readme
from code.common.records.runs import Choice
from code.common.submission.staging import stage_scenario
from code.common.submission.truncate import truncated_text
from code.common.submission.truncate import truncate_tree
from code.resnet50.models import facts
from tests.run_records import make_record, resolved_config
from tests.official_corpus import ORG, SYSTEM, TreeSpec, accuracy_values, build_tree, detail_text, \
    perf_values, write_run

RULES = get_round("v6.1")
MODEL, DATASET = "mobilenet_v2", "foolbox20"
EDITED = "the logs disagree: the tree was edited after the run"
OWN = "an integrity check of the toolkit's own"


def accuracy_log(paths: Paths, wrong: int = 2, repeats: int = 10) -> tuple[str, str]:
    """(an mlperf_log_accuracy.json for foolbox20 with `wrong` wrong answers, its accuracy.txt line). Each sample
    is logged `repeats` times (the scorer counts the first), so the log is long enough to be cut."""
    labels = get_benchmark("resnet50").preprocessed(MODEL, DATASET, paths).labels
    offset = facts(MODEL).label_offset
    answers = [int(label) + offset + (1 if index < wrong else 0) for index, label in enumerate(labels)]
    entries = [{"seq_id": seq, "qsl_idx": index % len(answers),
                "data": answers[index % len(answers)].to_bytes(4, "little", signed=True).hex().upper()}
               for seq, index in enumerate(range(len(answers) * repeats))]
    good = len(answers) - wrong
    return json.dumps(entries), f"accuracy={100 * good / len(answers):.3f}%, good={good}, total={len(answers)}"


@pytest.fixture
def chain(scratch: Path, tmp_path: Path) -> Paths:
    """An open-division tree staged, truncated and exported as the chain does, with provenance and backups."""
    paths = Paths.create(scratch=scratch, log_dir=tmp_path / "logs", repo=tmp_path / "repo")
    build_tree(paths.staging, TreeSpec(division="open"))
    text, line = accuracy_log(paths)
    for scenario_dir in (paths.staging / "open" / ORG / "results" / SYSTEM / "resnet").iterdir():
        accuracy = scenario_dir / "accuracy"
        (accuracy / "mlperf_log_accuracy.json").write_text(text)
        (accuracy / "accuracy.txt").write_text(line + "\n")
        record = make_record(90.0, system_id=SYSTEM, mode="AccuracyOnly", config=resolved_config(SYSTEM),
                             log_dir=str(tmp_path / "logs" / scenario_dir.name))
        write_provenance(scenario_dir, record, accuracy / "mlperf_log_accuracy.json")
    truncate_tree(paths.staging, paths.full_results, RULES, lambda _: None)
    (paths.repo / "README.md").write_text("the code\n")
    export_tree(paths.staging, paths.submission, [paths.repo / "README.md"], paths.repo, lambda _: None)
    return paths


def scenario(paths: Paths, name: str = "Offline") -> Path:
    return paths.submission / "open" / ORG / "results" / SYSTEM / "resnet" / name


def integrity_errors(paths: Paths, with_folders: bool = True) -> list[str]:
    """The errors check_submission finds, as `path: message`; with_folders: given the toolkit's folders."""
    report = check_submission(paths.submission, RULES, paths=paths if with_folders else None)
    return [f"{f.path}: {f.message}" for f in report.errors]


def test_the_chain_tree_passes_every_integrity_check(chain):
    cut = scenario(chain) / "accuracy" / "mlperf_log_accuracy.json"
    assert len(cut.read_text()) == 2 * RULES.accuracy_log_keep_chars + 7   # truncate_results did cut it
    assert not (scenario(chain) / PROVENANCE).exists()                     # provenance stays in staging
    report = check_submission(chain.submission, RULES, paths=chain)
    assert report.findings == (), report.text()


# -- summary against detail ---------------------------------------------------------------------------------
@pytest.mark.parametrize("folder, old, new", [
    ("Offline", "Samples per second: 163.84", "Samples per second: 263.84"),
    ("Offline", "Result is : VALID", "Result is : INVALID"),
    ("SingleStream", "90.0th percentile estimate: 8200000", "90.0th percentile estimate: 7200000"),
    ("MultiStream", "99.0th percentile estimate: 60000000", "99.0th percentile estimate: 6e+07x"),
])
def test_edited_summary_fails_the_check(chain, folder, old, new):
    summary = scenario(chain, folder) / "performance" / "run_1" / "mlperf_log_summary.txt"
    assert old in summary.read_text()
    summary.write_text(summary.read_text().replace(old, new))
    for with_folders in (True, False):   # needs nothing beside the tree
        errors = integrity_errors(chain, with_folders)
        assert len(errors) == 1, errors
        assert errors[0].startswith(f"open/{ORG}/results/{SYSTEM}/resnet/{folder}/performance/run_1/"
                                    f"mlperf_log_summary.txt: {EDITED}")
        assert "mlperf_log_detail.txt" in errors[0] and OWN in errors[0] and "make stage_results" in errors[0]


def test_summary_figures_compare_as_numbers(tmp_path):
    values = perf_values("Offline", result_samples_per_second=163.8449)
    write_run(tmp_path, values)   # printed as 163.8449
    assert summary_problems(tmp_path) == []
    (tmp_path / "mlperf_log_summary.txt").write_text(
        (tmp_path / "mlperf_log_summary.txt").read_text().replace("163.8449", "163.845"))
    assert summary_problems(tmp_path) == []   # LoadGen's own rounding
    (tmp_path / "mlperf_log_summary.txt").write_text(
        (tmp_path / "mlperf_log_summary.txt").read_text().replace("163.845", "163.9"))
    assert len(summary_problems(tmp_path)) == 1
    assert same_number(Decimal("1.23457e+06"), 1234567.8) and not same_number(Decimal("99.87"), 99.9)


# -- accuracy.txt against its log -----------------------------------------------------------------------------
def test_edited_accuracy_value_fails_the_check(chain):
    txt = scenario(chain) / "accuracy" / "accuracy.txt"
    txt.write_text(txt.read_text().replace("accuracy=90.000%", "accuracy=95.000%"))
    errors = integrity_errors(chain)
    assert len(errors) == 1, errors
    assert errors[0].startswith(f"open/{ORG}/results/{SYSTEM}/resnet/Offline/accuracy/accuracy.txt: {EDITED}")
    assert "gives 95.000" in errors[0] and "scores accuracy=90.000%, good=18, total=20" in errors[0]


def test_edited_hash_line_fails_the_check(chain):
    txt = scenario(chain) / "accuracy" / "accuracy.txt"
    txt.write_text(txt.read_text().split("hash=")[0] + "hash=" + "0" * 64 + "\n")
    [error] = integrity_errors(chain)
    assert "hash= line of accuracy.txt is not the sha256 of the full log" in error


def test_swapped_backup_and_log_fail_the_check(chain):
    """A backup replaced by another log with a matching hash= line: not the log that was staged."""
    text, _ = accuracy_log(chain, wrong=0)
    offline = Path("open") / ORG / "results" / SYSTEM / "resnet" / "Offline" / "accuracy"
    (chain.full_results / offline / "mlperf_log_accuracy.json").write_text(text)
    (chain.submission / offline / "mlperf_log_accuracy.json").write_text(
        truncated_text(text, RULES.accuracy_log_keep_chars))
    txt = chain.submission / offline / "accuracy.txt"
    txt.write_text(f"accuracy=100.000%, good=20, total=20\nhash={hashlib.sha256(text.encode()).hexdigest()}\n")
    [error] = integrity_errors(chain)
    assert "is not the one stage_results staged" in error


# -- accuracy logs that do not parse ---------------------------------------------------------------------------
def test_cut_accuracy_log_without_hash_fails_even_without_the_toolkit_folders(chain):
    accuracy = scenario(chain) / "accuracy"
    log = accuracy / "mlperf_log_accuracy.json"
    log.write_text(log.read_text()[:1000])
    (accuracy / "accuracy.txt").write_text("accuracy=90.000%, good=18, total=20\n")
    for with_folders in (True, False):
        errors = [e for e in integrity_errors(chain, with_folders) if "mlperf_log_accuracy.json:" in e]
        assert len(errors) == 1, errors
        assert "does not parse" in errors[0] and "holds no hash= line" in errors[0] and OWN in errors[0]


def test_log_cut_otherwise_than_truncate_results_fails_the_check(chain):
    log = scenario(chain) / "accuracy" / "mlperf_log_accuracy.json"
    log.write_text(log.read_text()[:5000])   # the hash= line stays
    [error] = integrity_errors(chain)
    assert "is not what truncate_results makes of the full log" in error


def test_without_the_data_set_accuracy_is_not_rescored_but_said_so(chain, tmp_path):
    elsewhere = Paths.create(scratch=tmp_path / "empty", log_dir=chain.log_dir, repo=chain.repo)
    report = check_submission(chain.submission, RULES, paths=elsewhere)
    assert report.passed and len(report.warnings) == 3, report.text()
    assert all("was not re-scored, the data set is not at hand" in f.message for f in report.warnings)


def test_without_its_backup_a_cut_log_is_not_verified_but_said_so(chain):
    offline = Path("open") / ORG / "results" / SYSTEM / "resnet" / "Offline" / "accuracy"
    (chain.full_results / offline / "mlperf_log_accuracy.json").unlink()
    report = check_submission(chain.submission, RULES, paths=chain)
    assert report.passed and len(report.warnings) == 1, report.text()
    assert report.warnings[0].path == f"{offline}/mlperf_log_accuracy.json"
    assert "its full log is not at" in report.warnings[0].message


def test_a_tree_truncated_elsewhere_gets_the_checks_the_tree_allows(chain):
    """No backups and no staging tree in this checkout: the in-tree checks still catch an edited summary."""
    shutil.rmtree(chain.full_results)
    shutil.rmtree(chain.staging)
    assert check_submission(chain.submission, RULES, paths=chain).findings == ()
    summary = scenario(chain) / "performance" / "run_1" / "mlperf_log_summary.txt"
    summary.write_text(summary.read_text().replace("Samples per second: 163.84", "Samples per second: 200"))
    assert len(integrity_errors(chain)) == 1


# -- staging refuses logs changed after the run ---------------------------------------------------------------
def run_record(log_dir: Path, mode: str) -> RunRecord:
    """The record of a completed Offline run of the embedded default (163.84 samples/s, or 90 %), with the digests
    of the logs in `log_dir`."""
    record = make_record(163.84 if mode == "PerformanceOnly" else 90.0, test_run=False, system_id=SYSTEM, mode=mode, log_dir=str(log_dir),
                         config=resolved_config(SYSTEM, model=MODEL, dataset=DATASET))
    return record.replace(log_sha256=log_digests(log_dir))


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Paths, Choice]:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path / "repo")
    performance = tmp_path / "logs" / "Offline" / "PerformanceOnly"
    write_run(performance, perf_values("Offline"))
    accuracy = tmp_path / "logs" / "Offline" / "AccuracyOnly"
    accuracy.mkdir(parents=True)
    (accuracy / "mlperf_log_detail.txt").write_text(detail_text(accuracy_values("Offline")))
    (accuracy / "mlperf_log_summary.txt").write_text("\nNo warnings encountered during test.\n")
    (accuracy / "mlperf_log_accuracy.json").write_text("[]")
    (accuracy / "accuracy.txt").write_text("accuracy=90.000%, good=18, total=20\n")
    measured = paths.measurements_dir(SYSTEM, "resnet", Scenario.Offline)
    measured.mkdir(parents=True)
    for name in ("measurements.json", "user.conf"):
        (measured / name).write_text("{}\n")
    chosen = run_record(performance, "PerformanceOnly")
    (measured / "README.md").write_text(readme(chosen))
    return paths, Choice(performance=chosen, accuracy=run_record(accuracy, "AccuracyOnly"))


def stage(paths: Paths, choice: Choice) -> list[str]:
    lines: list[str] = []
    stage_scenario(paths, RULES, ORG, (SYSTEM, "resnet50", Scenario.Offline), choice, lines.append)
    return lines


def test_unchanged_logs_are_staged_with_their_provenance(runs):
    paths, choice = runs
    lines = stage(paths, choice)
    staged = paths.results_dir(paths.staging, "open", ORG, SYSTEM, "resnet", Scenario.Offline)
    assert (staged / "performance" / "run_1" / "mlperf_log_summary.txt").is_file()
    assert json.loads((staged / PROVENANCE).read_text())["model"] == MODEL
    assert not any(line.startswith("note:") for line in lines)


@pytest.mark.parametrize("mode, name", [("PerformanceOnly", "mlperf_log_summary.txt"),
                                        ("PerformanceOnly", "mlperf_log_detail.txt"),
                                        ("AccuracyOnly", "mlperf_log_accuracy.json"),
                                        ("AccuracyOnly", "accuracy.txt")])
def test_a_log_changed_after_the_run_is_refused_at_staging(runs, mode, name):
    paths, choice = runs
    changed = paths.log_dir / "Offline" / mode / name
    changed.write_text(changed.read_text().replace("163.84", "263.84").replace("[]", "[ ]")
                       .replace("90.000", "95.000"))
    with pytest.raises(UserError) as refused:
        stage(paths, choice)
    assert refused.value.exit_code == 1
    assert str(changed) in str(refused.value) and "changed after the run" in str(refused.value)
    assert "make run_harness" in str(refused.value)
    assert not paths.staging.exists()   # nothing of the scenario was copied


def test_a_run_recorded_without_digests_is_staged_with_a_note(runs):
    paths, choice = runs
    choice.performance = choice.performance.replace(log_sha256={})
    lines = stage(paths, choice)
    assert any(line.startswith("note:") and "staged unverified" in line for line in lines), lines


def test_a_missing_log_is_refused_at_staging(runs):
    paths, choice = runs
    (paths.log_dir / "Offline" / "PerformanceOnly" / "mlperf_log_summary.txt").unlink()
    with pytest.raises(UserError, match="mlperf_log_summary.txt is missing") as refused:
        stage(paths, choice)
    assert refused.value.exit_code == 1


@pytest.mark.parametrize("refusal", ["changed log", "stale measurements"])
def test_a_refusal_after_an_earlier_stage_leaves_nothing_of_the_scenario(runs, tmp_path, refusal):
    paths, choice = runs
    stage(paths, choice)
    staged = paths.results_dir(paths.staging, "open", ORG, SYSTEM, "resnet", Scenario.Offline)
    (staged / "TEST01").mkdir()            # verified against the run staged then
    if refusal == "changed log":
        summary = paths.log_dir / "Offline" / "PerformanceOnly" / "mlperf_log_summary.txt"
        summary.write_text(summary.read_text().replace("163.84", "263.84"))
    else:
        readme_file = paths.measurements_dir(SYSTEM, "resnet", Scenario.Offline) / "README.md"
        readme_file.write_text("written for another run\n")
    with pytest.raises(UserError) as refused:
        stage(paths, choice)
    assert refused.value.exit_code == 1
    message = str(refused.value)
    assert f"The copy of {SYSTEM} resnet Offline staged earlier ({staged}) was removed" in message
    assert not staged.exists() and not (paths.staging / "open" / ORG / "results" / SYSTEM).exists()
    dest = export_tree(paths.staging, tmp_path / "exported", [], tmp_path, lambda _: None)
    assert not list(dest.rglob("mlperf_log_summary.txt"))    # a later export packs no stale result of it
