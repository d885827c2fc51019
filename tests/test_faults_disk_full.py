"""Fault injection, a full disk: a run whose disk fills ends `failed`, with its record and one sentence naming the
folder (exit status 1, no traceback), and is never staged; the other actions that write say the same sentence
instead of `internal error`, and leave no half-written file that a later step would trust.

The disk is a real one where possible: a small tmpfs mounted on the folder and filled (tests/small_disk.py, needs
root). Where no file system can be mounted, those tests skip and the injected-errno test still runs.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from code.common.disk_full import is_disk_full_sentence
from code.common.errors import UserError
from code.common.paths import RUN_RECORD
from code.common.records.metadata import RESERVE, find_metadata, read_metadata
from code.common.harness.runner import run_test
from code.common.harness.spec import RunSpec
from code.common.records.runs import choose_runs, load_records
from code.common.submission.staging import ACCURACY_FILES
from code.main import main

from .conftest import EMBEDDED, REPO
from .small_disk import fill, small_disk

# SingleStream lasts at least min_duration, however fast the machine: the disk fills while LoadGen runs.
MID_RUN = ["--scenarios=singlestream", *EMBEDDED, "--min_duration=8000", "--min_query_count=50"]
SHORT_RUN = ["--scenarios=offline", *EMBEDDED, "--test_run", "--min_duration=1000"]
PATIENCE_S = 300     # an upper bound for slow machines, never a timing expectation
FIX = "free space and run again"


def toolkit(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "code.main", *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=PATIENCE_S, check=False)


def one_sentence(stderr: str) -> str:
    """The one error line of a command; no traceback, no `internal error`."""
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


@pytest.fixture(scope="module")
def engines(scratch) -> Path:
    for scenarios in ("--scenarios=offline", "--scenarios=singlestream"):
        assert main(["--action=generate_engines", f"--scratch_path={scratch}", scenarios, *EMBEDDED],
                    log=lambda _: None) == 0
    return scratch


@pytest.fixture(scope="module")
def template(engines, tmp_path_factory) -> RunSpec:
    """The run spec of one short completed test: the template of the tests that run a child directly."""
    log_dir = tmp_path_factory.mktemp("template")
    assert main(["--action=run_harness", *SHORT_RUN, f"--scratch_path={engines}", f"--log_dir={log_dir}"],
                log=lambda _: None) == 0
    [spec_path] = log_dir.rglob("run_spec.json")
    return RunSpec.load(spec_path)


# -- the harness --------------------------------------------------------------------------------------------
def test_a_disk_that_fills_mid_run_ends_the_run_failed_with_its_record(engines, tmp_path):
    with small_disk(tmp_path / "disk", "4m") as disk:
        log_dir, out, err = disk / "logs", tmp_path / "out.txt", tmp_path / "err.txt"
        with open(out, "w") as stdout, open(err, "w") as stderr:
            run = subprocess.Popen([sys.executable, "-m", "code.main", "--action=run_harness", *MID_RUN,
                                    f"--scratch_path={engines}", f"--log_dir={log_dir}"], cwd=REPO, stdout=stdout,
                                   stderr=stderr, stdin=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + PATIENCE_S
            while not list(log_dir.rglob("mlperf_log_detail.txt")) and run.poll() is None:
                assert time.monotonic() < deadline, "LoadGen never started"
                time.sleep(0.05)
            assert run.poll() is None, err.read_text()
            fill(disk)                                   # another process takes the rest of the disk
            status = run.wait(timeout=PATIENCE_S)
        finally:
            if run.poll() is None:
                run.kill()
                run.wait()
        [metadata] = find_metadata(log_dir)
        run_dir = metadata.parent
        line = one_sentence(err.read_text())
        assert status == 1, line
        assert line.startswith(f"error: resnet50 SingleStream PerformanceOnly failed, as its record {metadata} says: "
                               f"the disk holding {run_dir} is full (") and line.endswith(FIX)
        record = read_metadata(metadata)
        assert record.status == "failed" and is_disk_full_sentence(record.error) and "LoadGen's logs were cut" in \
            record.error
        assert record.valid is None and record.metric is None and not record.log_sha256
        assert not (run_dir / RESERVE).exists() and not (run_dir / "harness_error.txt").exists()
        chosen = choose_runs(load_records([log_dir], log=lambda _: None), allow_test_runs=True)
        assert all(c.performance is None and c.accuracy is None for c in chosen.values())    # never staged


def test_a_disk_with_no_room_for_the_record_is_said_by_the_toolkit(template, tmp_path):
    """The child cannot set space aside nor write its record: the parent says so, and that nothing counts."""
    with small_disk(tmp_path / "disk", "1m") as disk:
        run_dir = disk / "run"
        spec = dataclasses.replace(template, log_dir=str(run_dir))
        fill(disk, leave=len(json.dumps(dataclasses.asdict(spec), indent=2, default=str)) + 1)   # run_spec.json fits
        with pytest.raises(UserError) as refused:
            run_test(spec, REPO, log=lambda _: None)
        message = str(refused.value)
        assert refused.value.exit_code == 1
        assert message.startswith(f"{spec.label} has no record ({RUN_RECORD} could not be written), so the run counts "
                                  f"for nothing and is never staged: the disk holding {run_dir} is full (")
        assert message.endswith(FIX)
        assert not (run_dir / RUN_RECORD).exists() and (run_dir / "run_spec.json").is_file()


def test_a_disk_full_before_the_test_starts_starts_nothing(template, tmp_path):
    with small_disk(tmp_path / "disk", "1m") as disk:
        fill(disk)
        spec = dataclasses.replace(template, log_dir=str(disk / "run"))
        with pytest.raises(UserError, match=f"{spec.label} did not start: the disk holding {disk / 'run'} is full"):
            run_test(spec, REPO, log=lambda _: None)
        assert not list((disk / "run").iterdir())


def test_a_full_disk_injected_into_the_child_is_recorded_as_failed(template, tmp_path):
    """Without a file system to fill: the child's first write after setting space aside fails with ENOSPC."""
    run_dir = tmp_path / "run"
    spec = dataclasses.replace(template, log_dir=str(run_dir))
    with pytest.raises(UserError) as refused:
        run_test(spec, REPO, log=lambda _: None, child_module="tests.disk_full_child")
    assert refused.value.exit_code == 1
    assert str(refused.value).startswith(f"{spec.label} failed, as its record {run_dir / RUN_RECORD} says: the disk "
                                         f"holding {run_dir} is full (No space left on device; ")
    record = read_metadata(run_dir / RUN_RECORD)
    assert record.status == "failed" and is_disk_full_sentence(record.error)
    assert not (run_dir / RESERVE).exists() and not (run_dir / "harness_error.txt").exists()


# -- other actions that write --------------------------------------------------------------------------------
def test_preprocessing_onto_a_full_disk_names_the_folder_and_records_nothing(scratch, tmp_path):
    own = tmp_path / "scratch"
    for name in ("downloads", "data", "models"):
        shutil.copytree(scratch / name, own / name, symlinks=True, copy_function=_link)
    with small_disk(own / "preprocessed_data", "1m") as disk:     # 20 images of 600 KB: it fills at the second
        done = toolkit("--action=preprocess_data", "--scenarios=offline", *EMBEDDED, f"--scratch_path={own}")
        folder = disk / "resnet50" / "foolbox20" / "mobilenet_v2"
        assert done.returncode == 1, done.stdout + done.stderr
        assert one_sentence(done.stderr).startswith(f"error: the disk holding {folder} is full (")
        assert done.stderr.rstrip().endswith(FIX)
        assert not list(folder.glob("*manifest*"))             # never recorded as complete
        assert not list(folder.glob(".*.tmp"))                 # no half-written file left


def _link(source: str, dest: str) -> None:
    Path(dest).symlink_to(Path(source).resolve())


def test_an_engine_build_onto_a_full_disk_names_the_folder(engines, tmp_path):
    repo = tmp_path / "repo"
    for name in ("code", "configs"):
        shutil.copytree(REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    with small_disk(repo / "build" / "engines", "1m") as disk:   # MobileNetV2 is 14 MB
        done = toolkit("--action=generate_engines", "--scenarios=offline", *EMBEDDED, f"--scratch_path={engines}",
                       cwd=repo)
        assert done.returncode == 1, done.stdout + done.stderr
        line = one_sentence(done.stderr)
        assert line.startswith(f"error: the disk holding {disk}/") and "/resnet50/Offline is full (" in line
        assert line.endswith(FIX)
        assert not [p for p in disk.rglob("*") if p.is_file()]    # no engine, no manifest, no half file


def test_staging_onto_a_full_disk_names_the_folder_and_stages_no_half_folder(engines, tmp_path):
    repo = tmp_path / "repo"
    for name in ("code", "configs", "scripts", "requirements", "pyproject.toml"):
        copy = shutil.copytree if (REPO / name).is_dir() else shutil.copy2
        copy(REPO / name, repo / name, **({"ignore": shutil.ignore_patterns("__pycache__")} if copy is
                                          shutil.copytree else {}))
    common = [*SHORT_RUN, f"--scratch_path={engines}", "--submitter=TestOrg", "--allow_test_runs"]
    assert toolkit("--action=generate_engines", *common, cwd=repo).returncode == 0
    for mode in ("PerformanceOnly", "AccuracyOnly"):
        done = toolkit("--action=run_harness", f"--test_mode={mode}", *common, cwd=repo)
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr
    first = toolkit("--action=generate_conf_files", *common, cwd=repo)
    overrides = next((repo / "systems").glob("*.overrides.json"))
    (overrides).write_text(json.dumps({**{k: "N/A" for k in json.loads(overrides.read_text())},
                                       "status": "available", "host_network_card_count": "1", "cooling": "air"}))
    assert first.returncode == 1 and toolkit("--action=generate_conf_files", *common, cwd=repo).returncode == 0
    staging = repo / "build" / "submission-staging"
    with small_disk(staging, "1m") as disk:
        filler = fill(disk, leave=64 * 1024)      # the system description fits, the detail logs do not
        done = toolkit("--action=stage_results", *common, cwd=repo)
        assert done.returncode == 1, done.stdout + done.stderr
        line = one_sentence(done.stderr)
        assert line.startswith(f"error: the disk holding {disk}/") and line.endswith(FIX)
        for run_1 in disk.rglob("run_1"):       # a scenario's logs are staged whole or not at all
            assert sorted(p.name for p in run_1.iterdir()) == ["mlperf_log_detail.txt", "mlperf_log_summary.txt"]
        for accuracy in disk.rglob("accuracy"):
            assert sorted(p.name for p in accuracy.iterdir()) == sorted(ACCURACY_FILES)
        assert not [p for p in disk.rglob(".*") if p.name != filler.name]     # no half-copied folder left
        filler.unlink()
        again = toolkit("--action=stage_results", *common, cwd=repo)
        assert again.returncode == 0, again.stdout + again.stderr
