"""Fault injection, stray audit.config: only the compliance action ever hands LoadGen an audit.config.

A file left in a reused LOG_DIR stops a normal run before anything starts; a normal test never reads one even
when it is put beside it behind the toolkit's back; a compliance test reads its own and removes it afterwards.
The stray file's setting, an accuracy-log seed, shows in LoadGen's effective settings when it is read.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.constants import Scenario, TestMode
from code.common.records.metadata import RunRecord, find_metadata, read_metadata
from code.common.harness.runner import run_test
from code.common.harness.spec import RunSpec
from code.common.paths import Paths
from code.main import main

from .conftest import EMBEDDED, REPO

SHORT_RUN = ["--scenarios=offline", *EMBEDDED, "--test_run", "--min_duration=1000"]
SEED = 4242   # no config of the toolkit uses it: seen in the effective settings only when an audit.config is read
STRAY = f"*.*.accuracy_log_rng_seed = {SEED}\n"
FOUND_AUDIT_CONFIG = "Found Audit Config file"   # what LoadGen logs when it reads one


def toolkit(scratch: Path, log_dir: Path, *args: str) -> int:
    return main([*args, f"--scratch_path={scratch}", f"--log_dir={log_dir}"], log=lambda _: None)


@pytest.fixture(scope="module")
def short_run(scratch, tmp_path_factory) -> RunRecord:
    """The record of one short completed run: its run_spec.json is the template of the child-level tests."""
    log_dir = tmp_path_factory.mktemp("short-run")
    assert toolkit(scratch, log_dir, "--action=generate_engines", *SHORT_RUN) == 0
    assert toolkit(scratch, log_dir, "--action=run_harness", *SHORT_RUN) == 0
    [record] = map(read_metadata, find_metadata(log_dir))
    return record


def spec_in(short_run: RunRecord, run_dir: Path, **changes) -> RunSpec:
    spec = RunSpec.load(Path(short_run.log_dir) / "run_spec.json")
    return RunSpec(**{**spec.__dict__, "log_dir": str(run_dir), **changes})


def effective_seed(record: RunRecord) -> int:
    return int(record.loadgen.effective["accuracy_log_rng_seed"])


@pytest.mark.parametrize("where", ["run folder", "LOG_DIR"])
def test_a_stray_audit_config_in_a_reused_log_dir_stops_the_run_before_anything_starts(scratch, short_run,
                                                                                        tmp_path, capsys, where):
    system_id = short_run.system.id
    run_dir = Paths.create(log_dir=tmp_path).run_log_dir(system_id, "resnet50", Scenario.Offline,
                                                         TestMode.PerformanceOnly)
    folder = run_dir if where == "run folder" else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "audit.config").write_text(STRAY)
    capsys.readouterr()
    assert toolkit(scratch, tmp_path, "--action=run_harness", *SHORT_RUN) == 1
    err = capsys.readouterr().err
    assert str(folder / "audit.config") in err and "Remove the file or use another LOG_DIR" in err
    assert "internal error" not in err
    assert (folder / "audit.config").read_text() == STRAY   # the user's file is left as it was
    assert not list(tmp_path.rglob("run_spec.json")) and not list(tmp_path.rglob("mlperf_log_*"))


def test_a_normal_test_never_reads_an_audit_config_put_beside_it(short_run, tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "audit.config").write_text(STRAY)   # behind the toolkit's back, after planning
    spec_path = spec_in(short_run, run_dir).save(run_dir / "run_spec.json")
    # Run from the run folder: the file is in LoadGen's working directory too, where it looks by default.
    done = subprocess.run([sys.executable, "-m", "code.common.harness.child", str(spec_path)], cwd=run_dir,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr
    record = read_metadata(run_dir / "metadata.json")
    assert record.status == "completed" and record.purpose == "submission"
    assert effective_seed(record) != SEED
    assert FOUND_AUDIT_CONFIG not in (run_dir / "mlperf_log_detail.txt").read_text()
    assert (run_dir / "audit.config").read_text() == STRAY   # not the harness's to remove


def test_a_compliance_test_reads_its_own_audit_config_and_removes_it(short_run, tmp_path):
    run_dir = tmp_path / "compliance"
    record = run_test(spec_in(short_run, run_dir, audit_test="TEST01", purpose="audit",
                              audit_config=[STRAY.strip()]), REPO, log=lambda _: None)
    assert record.status == "completed" and record.audit_test == "TEST01"
    assert effective_seed(record) == SEED
    assert FOUND_AUDIT_CONFIG in (run_dir / "mlperf_log_detail.txt").read_text()
    assert not (run_dir / "audit.config").exists()
