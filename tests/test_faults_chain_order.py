"""Fault injection, chain order: pack_submission packs only the tree whose last check passed on exactly its current
content, and only as the submitter it belongs to; a dry-run pass packs only as a dry run."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.actions.base import Context
from code.actions.submission import CheckSubmission, PackSubmission
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.submission.check_record import read_record, tree_digest

from .conftest import REPO
from .test_checker import ORG, RULES, make_tree

SHORT_RUN = {"effective_min_duration_ms": 10000}   # an error in a check, a warning in a dry-run check


@pytest.fixture
def paths(tmp_path, monkeypatch) -> Paths:
    monkeypatch.delenv("MLPERF_INFERENCE_DIR", raising=False)   # the official checkers only where a test says
    return Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path / "repo")


def _export(paths: Paths, tmp_path: Path, **tweaks) -> Path:
    """A hand-made exported tree of ORG in build/submission (what export_submission writes), in the open division:
    its compliance folders would be refused, as no stage_compliance staged them (test_checker tests that)."""
    shutil.rmtree(paths.submission, ignore_errors=True)
    made = make_tree(tmp_path / "made", division="open", **tweaks)
    paths.submission.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(made, paths.submission)
    shutil.rmtree(tmp_path / "made")
    return paths.submission


def _context(paths: Paths, action: str, submitter: str = ORG, allow_test_runs: bool = False) -> Context:
    args = SimpleNamespace(action=action, submitter=submitter, allow_test_runs=allow_test_runs, passphrase_file=None)
    return Context(args=args, paths=paths, rules=RULES, detect=lambda: None, log=lambda _: None)


def check(paths: Paths, allow_test_runs: bool = False) -> int:
    return CheckSubmission(_context(paths, "check_submission", allow_test_runs=allow_test_runs)).run()


def pack(paths: Paths, submitter: str = ORG, allow_test_runs: bool = False) -> int:
    return PackSubmission(_context(paths, "pack_submission", submitter, allow_test_runs)).run()


def refused_pack(paths: Paths, **kwargs) -> str:
    with pytest.raises(UserError) as refused:
        pack(paths, **kwargs)
    assert refused.value.exit_code == 1
    assert not paths.tarball(kwargs.get("submitter", ORG)).exists()
    return str(refused.value)


def _fake_official_checker(tmp_path: Path, monkeypatch, status: int) -> None:
    checkout = tmp_path / "inference"
    script = checkout / "tools/submission/submission_checker.py"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f"import sys\nprint('verdict {status}')\nsys.exit({status})\n")
    monkeypatch.setenv("MLPERF_INFERENCE_DIR", str(checkout))


# -- the record --------------------------------------------------------------------------------------------
def test_a_passing_check_records_the_tree_and_pack_packs_exactly_it(paths, tmp_path):
    root = _export(paths, tmp_path)
    assert check(paths) == 0
    record = read_record(paths.submission_check_record)
    assert record.digest == tree_digest(root) and record.submitters == [f"open/{ORG}"]
    assert record.dry_run is False and record.relaxed is False and record.checked_at
    assert pack(paths) == 0
    with tarfile.open(paths.tarball(ORG)) as archive:
        assert f"open/{ORG}/results/submission_checker_log.txt" in archive.getnames()   # as checked


def test_the_digest_covers_paths_and_content(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        (root / "closed/ORG/results").mkdir(parents=True)
        (root / "closed/ORG/results/a.txt").write_text("a")
    assert tree_digest(one) == tree_digest(two)              # where the tree lies does not matter
    (two / "closed/ORG/results/a.txt").write_text("b")
    assert tree_digest(one) != tree_digest(two)
    (two / "closed/ORG/results/a.txt").write_text("a")
    (two / "closed/ORG/results/a.txt").rename(two / "closed/ORG/results/b.txt")
    assert tree_digest(one) != tree_digest(two)              # same content, another name
    (two / "closed/ORG/results/b.txt").rename(two / "closed/ORG/results/a.txt")
    (two / "closed/ORG/empty").mkdir()
    assert tree_digest(one) != tree_digest(two)              # an empty folder goes into the archive too


# -- pack after a failed check ----------------------------------------------------------------------------------
def test_pack_after_a_failed_check_is_refused(paths, tmp_path):
    _export(paths, tmp_path, perf=SHORT_RUN)
    assert check(paths) == 1
    message = refused_pack(paths)
    assert "no passing check on record" in message and "make check_submission" in message


def test_a_failed_check_withdraws_an_earlier_pass_of_the_same_tree(paths, tmp_path, monkeypatch):
    _export(paths, tmp_path)
    assert check(paths) == 0 and paths.submission_check_record.exists()
    _fake_official_checker(tmp_path, monkeypatch, status=1)     # the referee rejects the very same tree
    assert check(paths) == 1
    assert not paths.submission_check_record.exists()
    assert "no passing check on record" in refused_pack(paths)


def test_a_check_that_stops_early_withdraws_the_pass_too(paths, tmp_path):
    _export(paths, tmp_path)
    assert check(paths) == 0
    shutil.rmtree(paths.submission)
    with pytest.raises(UserError, match="run make export_submission"):
        check(paths)
    assert not paths.submission_check_record.exists()


def test_official_checkers_that_pass_keep_the_record(paths, tmp_path, monkeypatch):
    _export(paths, tmp_path)
    _fake_official_checker(tmp_path, monkeypatch, status=0)
    assert check(paths) == 0
    assert read_record(paths.submission_check_record).relaxed is False
    assert pack(paths) == 0


# -- pack after the tree changed -------------------------------------------------------------------------------
def _edit(root: Path) -> None:
    """A change of content no checker reads: only the digest sees it."""
    readme = root / f"open/{ORG}/src/README.md"
    readme.write_text(readme.read_text() + "Edited after the check.\n")


def _add(root: Path) -> None:
    (root / f"open/{ORG}/results/notes.txt").write_text("added after the check\n")


def _remove(root: Path) -> None:
    next(root.rglob("SingleStream/accuracy/accuracy.txt")).unlink()


def _reexport(root: Path) -> None:
    for log in root.rglob("submission_checker_log.txt"):   # what a new export_submission leaves out
        log.unlink()


@pytest.mark.parametrize("change", (_edit, _add, _remove, _reexport), ids=lambda f: f.__name__.strip("_"))
def test_pack_after_the_tree_changed_since_its_check_is_refused(paths, tmp_path, change):
    root = _export(paths, tmp_path)
    assert check(paths) == 0
    change(root)
    message = refused_pack(paths)
    assert "changed since it passed make check_submission" in message and "check_submission" in message
    assert check(paths) == (1 if change is _remove else 0)     # checking it again decides
    if change is not _remove:
        assert pack(paths) == 0


# -- pack as another submitter ----------------------------------------------------------------------------------
def test_pack_with_another_submitter_is_refused(paths, tmp_path):
    _export(paths, tmp_path)
    assert check(paths) == 0
    message = refused_pack(paths, submitter="OtherOrg")
    assert f"open/{ORG}" in message and "SUBMITTER=OtherOrg" in message
    assert pack(paths) == 0


def test_a_tree_of_two_submitters_is_never_checked_or_packed(paths, tmp_path):
    root = _export(paths, tmp_path)
    assert check(paths) == 0
    shutil.copytree(root / f"open/{ORG}", root / "closed/OtherOrg")
    message = refused_check(paths)
    assert "closed/OtherOrg" in message and f"open/{ORG}" in message
    assert f"remove {paths.staging}/*/OtherOrg" in message
    message = refused_pack(paths)
    assert "closed/OtherOrg" in message and f"open/{ORG}" in message


# -- check as another submitter ---------------------------------------------------------------------------------
def refused_check(paths: Paths, submitter: str = ORG) -> str:
    before = tree_digest(paths.submission)
    with pytest.raises(UserError) as refused:
        CheckSubmission(_context(paths, "check_submission", submitter)).run()
    assert refused.value.exit_code == 1
    assert tree_digest(paths.submission) == before   # nothing checked, no checker log written
    return str(refused.value)


def test_checking_a_tree_exported_for_another_submitter_fails(paths, tmp_path):
    """make check_submission SUBMITTER=OtherOrg on the tree exported for ORG: refused, naming both and the commands
    that check it as either; ORG's own check of the same tree still passes and packs."""
    _export(paths, tmp_path)
    message = refused_check(paths, submitter="OtherOrg")
    assert f"holds open/{ORG} (exported for {ORG}), but SUBMITTER=OtherOrg" in message
    assert f"make check_submission SUBMITTER={ORG}" in message
    assert "make stage_results export_submission check_submission SUBMITTER=OtherOrg" in message
    assert not paths.submission_check_record.exists()
    assert check(paths) == 0
    refused_check(paths, submitter="OtherOrg")
    assert read_record(paths.submission_check_record).submitters == [f"open/{ORG}"]   # ORG's pass stays
    assert "SUBMITTER=OtherOrg" in refused_pack(paths, submitter="OtherOrg")
    assert pack(paths) == 0


# -- dry runs ---------------------------------------------------------------------------------------------------
def test_a_dry_run_pass_packs_only_as_a_dry_run(paths, tmp_path):
    _export(paths, tmp_path, perf=SHORT_RUN)
    assert check(paths, allow_test_runs=True) == 0
    record = read_record(paths.submission_check_record)
    assert record.dry_run is True and record.relaxed is True
    message = refused_pack(paths)
    assert "only as a dry run" in message and 'make pack_submission RUN_ARGS="--allow_test_runs"' in message
    assert pack(paths, allow_test_runs=True) == 0


def test_a_dry_run_waiving_the_official_verdict_packs_only_as_a_dry_run(paths, tmp_path, monkeypatch):
    _export(paths, tmp_path)
    _fake_official_checker(tmp_path, monkeypatch, status=1)
    assert check(paths, allow_test_runs=True) == 0
    assert read_record(paths.submission_check_record).relaxed is True
    assert "only as a dry run" in refused_pack(paths)


def test_a_clean_tree_checked_with_allow_test_runs_packs_normally(paths, tmp_path):
    _export(paths, tmp_path)
    assert check(paths, allow_test_runs=True) == 0           # nothing relaxed: the verdict of a full check
    assert read_record(paths.submission_check_record).relaxed is False
    assert pack(paths) == 0


# -- a damaged record ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("content", ("{", "[]", '{"digest": 1}', "\udcff"), ids=("truncated", "list", "fields",
                                                                                  "bytes"))
def test_a_damaged_record_is_named_never_an_internal_error(paths, tmp_path, content):
    _export(paths, tmp_path)
    assert check(paths) == 0
    paths.submission_check_record.write_bytes(content.encode(errors="surrogateescape"))
    message = refused_pack(paths)
    assert str(paths.submission_check_record) in message and "make check_submission" in message


def test_through_the_command_line_pack_without_a_check_exits_1(tmp_path):
    repo = tmp_path / "repo"
    for name in ("code", "configs", "scripts", "requirements"):
        shutil.copytree(REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    made = make_tree(tmp_path / "made")
    (repo / "build").mkdir()
    shutil.move(made, repo / "build/submission")
    done = subprocess.run([sys.executable, "-m", "code.main", "--action=pack_submission", f"--submitter={ORG}",
                           f"--scratch_path={tmp_path / 'scratch'}"], cwd=repo, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)
    assert done.returncode == 1, done.stderr
    assert "no passing check on record" in done.stderr and "internal error" not in done.stderr
    assert not list((repo / "build").glob("*.tar.gz"))
