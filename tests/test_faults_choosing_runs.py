"""Fault injection, choosing runs: an INVALID run with the best figure among VALID ones, test runs beside full
ones, a damaged record among good ones. VALID always beats INVALID, and the staged run, the audited run and the
README's reproduction command are one run."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.audit.references import find_references
from code.common.constants import Scenario
from code.common.errors import UserError
from code.common.records.metadata import read_metadata
from code.common.records.reproduce import reproduce_command
from code.common.records.runs import choose_runs, load_records, rank
from code.common.systems import SystemDetector, match_system
from tests.conftest import REPO
from tests.run_records import make_record, resolved_config, write_record

KEY = ("box", "resnet50", Scenario.Offline)


def _chosen(root: Path, allow_test_runs: bool):
    return choose_runs(load_records([root], lambda _: None), allow_test_runs)[KEY]


def _audited(root: Path, **fields):
    return find_references([root], "box", resolved_config(**fields), lambda _: None).performance


def test_valid_beats_an_invalid_run_with_a_better_figure(tmp_path: Path) -> None:
    write_record(tmp_path / "valid_100", 100.0, finished="2026-01-01T00:00:01+00:00")
    best = write_record(tmp_path / "valid_120", 120.0, finished="2026-01-01T00:00:02+00:00")
    write_record(tmp_path / "invalid_500", 500.0, valid=False, finished="2026-01-01T00:00:03+00:00")
    chosen = _chosen(tmp_path, allow_test_runs=True).performance
    assert chosen.log_dir == str(best)
    assert _audited(tmp_path).log_dir == str(best)


def test_only_invalid_test_runs_give_the_best_of_them_in_a_dry_run(tmp_path: Path) -> None:
    write_record(tmp_path / "invalid_100", 100.0, valid=False)
    best = write_record(tmp_path / "invalid_300", 300.0, valid=False)
    assert _chosen(tmp_path, allow_test_runs=True).performance.log_dir == str(best)
    assert _chosen(tmp_path, allow_test_runs=False).performance is None
    assert _audited(tmp_path).log_dir == str(best)


def test_a_full_run_outranks_test_runs_so_dry_and_real_runs_stage_the_same(tmp_path: Path) -> None:
    full = write_record(tmp_path / "full_100", 100.0, test_run=False)
    write_record(tmp_path / "test_200", 200.0)
    write_record(tmp_path / "test_invalid_300", 300.0, valid=False)
    write_record(tmp_path / "full_invalid_400", 400.0, valid=False, test_run=False)   # never staged
    for allow in (True, False):
        assert _chosen(tmp_path, allow).performance.log_dir == str(full)
    assert _audited(tmp_path).log_dir == str(full)


def test_the_accuracy_run_is_the_same_with_and_without_allow_test_runs(tmp_path: Path) -> None:
    write_record(tmp_path / "perf", 100.0, test_run=False)
    full = write_record(tmp_path / "acc_full", 90.0, test_run=False, mode="AccuracyOnly",
                        finished="2026-01-01T00:00:01+00:00")
    write_record(tmp_path / "acc_test_newer", 90.0, mode="AccuracyOnly", finished="2026-01-01T00:00:02+00:00")
    write_record(tmp_path / "acc_full_invalid_newest", 90.0, valid=False, test_run=False, mode="AccuracyOnly",
                 finished="2026-01-01T00:00:03+00:00")
    for allow in (True, False):
        assert _chosen(tmp_path, allow).accuracy.log_dir == str(full)
    reference = find_references([tmp_path], "box", resolved_config(), lambda _: None)
    assert reference.accuracy.log_dir == str(full)


def test_rank_orders_valid_then_full_then_figure_then_newer() -> None:
    runs = [make_record(900.0, valid=False, test_run=False), make_record(800.0, valid=True, test_run=True),
            make_record(10.0, valid=True, test_run=False, finished="1"),
            make_record(10.0, valid=True, test_run=False, finished="2")]
    assert sorted(runs, key=rank, reverse=True) == runs[::-1]


def test_an_audit_of_another_computation_than_the_staged_run_is_refused(tmp_path: Path) -> None:
    staged = write_record(tmp_path / "int8", 300.0, precision="int8")
    write_record(tmp_path / "fp32", 100.0)
    write_record(tmp_path / "fp32_invalid", 900.0, valid=False)
    with pytest.raises(UserError) as error:
        _audited(tmp_path)
    message = str(error.value)
    assert error.value.exit_code == 1 and str(staged) in message and "precision=int8, not fp32" in message
    assert 'make run_audit_harness RUN_ARGS="--benchmarks=resnet50 --scenarios=Offline --precision=int8 ' \
           '--test_run"' in message
    assert _audited(tmp_path, precision="int8").log_dir == str(staged)


# -- through code.main, in a copy of the repository ---------------------------------------------------------
def _repo_copy(tmp_path: Path) -> Path:
    for name in ("code", "configs", "scripts", "requirements"):
        shutil.copytree(REPO / name, tmp_path / "repo" / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "repo"


def _toolkit(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "code.main", *args, f"--scratch_path={repo / 'scratch'}",
                           "--submitter=TestOrg", "--allow_test_runs", "--benchmarks=resnet50",
                           "--scenarios=offline"],
                          cwd=repo, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=300,
                          check=False)


def _generate_conf_files(repo: Path) -> subprocess.CompletedProcess:
    """generate_conf_files, with the system description the first call asks for filled in."""
    first = _toolkit(repo, "--action=generate_conf_files")
    if first.returncode == 0:
        return first
    assert "The system description is incomplete" in first.stderr, first.stdout + first.stderr
    overrides_path = next((repo / "systems").glob("*.overrides.json"))
    overrides = json.loads(overrides_path.read_text())
    overrides_path.write_text(json.dumps({**{k: "N/A" for k in overrides}, "status": "available",
                                          "host_network_card_count": "1", "cooling": "air"}))
    return _toolkit(repo, "--action=generate_conf_files")


def test_staged_audited_and_readme_are_the_same_run(tmp_path: Path) -> None:
    """Two VALID test runs, an INVALID one with the best figure and a run whose metadata.json is truncated:
    generate_conf_files and stage_results name the damaged record and go on; the best VALID run is staged,
    described in the README and audited."""
    repo = _repo_copy(tmp_path)
    system_id = match_system(SystemDetector().detect()).system_id
    logs = repo / "build" / "logs"
    runs = {batch: write_record(logs / f"2026.01.01-00.00.0{batch}" / system_id / "resnet50" / "Offline", value,
                                valid=valid, system_id=system_id, batch_size=batch)
            for batch, value, valid in ((2, 100.0, True), (4, 120.0, True), (8, 500.0, False))}
    damaged = write_record(logs / "2026.01.01-00.00.09" / system_id / "resnet50" / "Offline", 999.0,
                           system_id=system_id, batch_size=16)
    text = (damaged / "metadata.json").read_bytes()
    (damaged / "metadata.json").write_bytes(text[:len(text) // 3])
    skipped = f"skipped {damaged / 'metadata.json'}: not valid JSON, truncated or damaged"

    conf = _generate_conf_files(repo)
    assert conf.returncode == 0 and skipped in conf.stdout, conf.stdout + conf.stderr
    stage = _toolkit(repo, "--action=stage_results")
    assert stage.returncode == 0 and skipped in stage.stdout, stage.stdout + stage.stderr
    assert "internal error" not in conf.stderr + stage.stderr

    best = runs[4]
    staged = next((repo / "build" / "submission-staging").glob(f"open/TestOrg/results/{system_id}/*/Offline"))
    assert (staged / "performance/run_1/mlperf_log_detail.txt").read_bytes() == \
        (best / "mlperf_log_detail.txt").read_bytes()
    record = read_metadata(best / "metadata.json")
    readme = (staged / "README.md").read_text()
    assert reproduce_command(record) in readme and reproduce_command(record).endswith('--test_mode=PerformanceOnly"')
    assert "--batch_size=4" in reproduce_command(record)
    lines: list[str] = []
    audited = find_references([logs], system_id, resolved_config(system_id), lines.append)
    assert audited.performance.log_dir == str(best) and any(skipped in line for line in lines)


# -- the accuracy run that belongs to the performance run -------------------------------------------------------
ENGINE, OTHER_ENGINE, DATA = "e" * 64, "f" * 64, "d" * 64


def test_the_accuracy_run_is_one_of_the_performance_runs_engine_and_data(tmp_path: Path) -> None:
    """Newer accuracy runs of another engine file, of other preprocessed data or of another generation of the config
    are passed over, each named with how it differs; a record that names no data (an older one) still counts."""
    write_record(tmp_path / "perf", 100.0, engine_sha256=ENGINE, data_sha256=DATA)
    own = write_record(tmp_path / "acc_own", 90.0, mode="AccuracyOnly", engine_sha256=ENGINE,
                       finished="2026-01-01T00:00:01+00:00")
    write_record(tmp_path / "acc_other_engine", 95.0, mode="AccuracyOnly", engine_sha256=OTHER_ENGINE,
                 data_sha256=DATA, finished="2026-01-01T00:00:02+00:00")
    write_record(tmp_path / "acc_other_data", 95.0, mode="AccuracyOnly", engine_sha256=ENGINE,
                 data_sha256="0" * 64, finished="2026-01-01T00:00:03+00:00")
    write_record(tmp_path / "acc_capped", 95.0, mode="AccuracyOnly", engine_sha256=ENGINE, data_sha256=DATA,
                 total_sample_count=10, finished="2026-01-01T00:00:04+00:00")
    choice = _chosen(tmp_path, allow_test_runs=True)
    assert choice.accuracy.log_dir == str(own) and not choice.conflict
    others = " | ".join(choice.other_accuracy)
    assert f"{tmp_path / 'acc_other_engine'}: another engine (sha256 ffffffffffff, not eeeeeeeeeeee)" in others
    assert f"{tmp_path / 'acc_other_data'}: other preprocessed data (manifest.json of " in others
    assert "with sha256 000000000000, not dddddddddddd)" in others
    assert f"{tmp_path / 'acc_capped'}: total_sample_count=10, not None" in others
    reference = find_references([tmp_path], "box", resolved_config(), lambda _: None)
    assert reference.accuracy.log_dir == str(own)


def test_accuracy_runs_that_agree_give_the_best_as_before(tmp_path: Path) -> None:
    write_record(tmp_path / "perf", 100.0, engine_sha256=ENGINE)
    write_record(tmp_path / "acc_old", 90.0, mode="AccuracyOnly", engine_sha256=ENGINE,
                 finished="2026-01-01T00:00:01+00:00")
    newer = write_record(tmp_path / "acc_new", 90.3, mode="AccuracyOnly", engine_sha256=ENGINE,
                         finished="2026-01-01T00:00:02+00:00")
    choice = _chosen(tmp_path, allow_test_runs=True)
    assert choice.accuracy.log_dir == str(newer) and not choice.conflict


def _damaged_data_runs(logs: Path, system_id: str) -> tuple[Path, Path]:
    """A performance run and two accuracy runs of its engine and data: the good one at 90 % and a newer one at 45 %,
    made after its preprocessed images were overwritten in place (same sizes: the manifest did not change)."""
    run = logs / "2026.01.01-00.00.01" / system_id / "resnet50" / "Offline"
    same = {"system_id": system_id, "engine_sha256": ENGINE, "data_sha256": DATA}
    write_record(run / "PerformanceOnly", 100.0, **same)
    good = write_record(run / "AccuracyOnly", 90.0, mode="AccuracyOnly", finished="2026-01-01T00:00:02+00:00",
                        **same)
    damaged = write_record(logs / "2026.01.02-00.00.01" / system_id / "resnet50" / "Offline" / "AccuracyOnly", 45.0,
                           mode="AccuracyOnly", finished="2026-01-02T00:00:02+00:00", **same)
    return good, damaged


def test_a_damaged_data_accuracy_run_is_never_staged_over_the_good_one(tmp_path: Path) -> None:
    """The newer run at 45 % (damaged data) and the good one at 90 % disagree: stage_results stages nothing of that
    scenario and names both runs with their figures and what to do; the compliance references stop the same way.
    With the damaged run's folder moved away, the good run is staged."""
    repo = _repo_copy(tmp_path)
    system_id = match_system(SystemDetector().detect()).system_id
    logs = repo / "build" / "logs"
    good, damaged = _damaged_data_runs(logs, system_id)
    conf = _generate_conf_files(repo)
    assert conf.returncode == 0, conf.stdout + conf.stderr

    stage = _toolkit(repo, "--action=stage_results")
    out = stage.stdout + stage.stderr
    assert stage.returncode == 1, out
    assert "internal error" not in out and "Traceback" not in out
    for expected in (str(good), "top-1 90.000%", str(damaged), "top-1 45.000%", "disagree",
                     "delete or move the folder of the run that is wrong", "make stage_results again"):
        assert expected in out, out
    staging = repo / "build" / "submission-staging"
    assert not list(staging.glob(f"*/TestOrg/results/{system_id}/*/Offline"))   # nothing of that scenario staged

    with pytest.raises(UserError) as error:
        find_references([logs], system_id, resolved_config(system_id), lambda _: None)
    assert error.value.exit_code == 1
    assert str(good) in str(error.value) and str(damaged) in str(error.value)
    assert "make run_audit_harness again" in str(error.value)

    shutil.move(damaged.parent.parent.parent.parent, tmp_path / "set_aside")
    stage = _toolkit(repo, "--action=stage_results")
    assert stage.returncode == 0, stage.stdout + stage.stderr
    staged = next(staging.glob(f"open/TestOrg/results/{system_id}/*/Offline"))
    assert (staged / "accuracy" / "accuracy.txt").read_text() == (good / "accuracy.txt").read_text()
    assert f"staged accuracy run {good}" in stage.stdout
    reference = find_references([logs], system_id, resolved_config(system_id), lambda _: None)
    assert reference.accuracy.log_dir == str(good)               # the audit compares with the staged run
