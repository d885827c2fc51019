"""Fault injection, config writers: find_peak has the machine and the config files to itself, from its first run to
its last write. A second find_peak, add_custom_system or a harness run of the same checkout stops at once, naming
the find_peak that holds the lock; find_peak does not start beside a harness run. write_value holds the lock and
writes whole files, so a full disk or a failure leaves custom.py and custom_list.py as they were.

Two real processes each time, in a copy of the repository (its configs and build/ are the test's own).
"""
from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.actions.find_peak import plan_target, write_value
from code.common.arguments import parse_run_args
from code.common.constants import Scenario
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round

from .conftest import EMBEDDED, REPO
from .small_disk import fill, small_disk

PATIENCE_S = 300        # an upper bound for slow machines, never a timing expectation
OFFLINE = ["--scenarios=offline", *EMBEDDED]
HOLD_LOCK = """
import sys
from pathlib import Path
from code.common.locking import exclusive_lock
with exclusive_lock(Path(sys.argv[1]), "the config files"):
    print("held", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def repo(scratch, tmp_path) -> Path:
    """A copy of code/ and configs/ (custom_list.py as committed) with the embedded default's engine built."""
    root = tmp_path / "repo"
    for name in ("code", "configs"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__", "custom.py"))
    committed = subprocess.run(["git", "show", "HEAD:code/common/systems/custom_list.py"], cwd=REPO,
                               capture_output=True, text=True, check=True).stdout
    (root / "code/common/systems/custom_list.py").write_text(committed)
    done = toolkit(root, scratch, "--action=generate_engines", *OFFLINE)
    assert done.returncode == 0, done.stderr
    return root


def toolkit(repo: Path, scratch: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "code.main", *args, f"--scratch_path={scratch}"], cwd=repo,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=PATIENCE_S, check=False)


def start(repo: Path, scratch: Path, output: Path, *args: str) -> subprocess.Popen:
    with open(output, "w") as out:
        return subprocess.Popen([sys.executable, "-m", "code.main", *args, f"--scratch_path={scratch}"], cwd=repo,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def wait_for_loadgen(process: subprocess.Popen, log_dir: Path, output: Path) -> None:
    """Until the process's first test has LoadGen running (its detail log exists)."""
    deadline = time.monotonic() + PATIENCE_S
    while not list(log_dir.rglob("mlperf_log_detail.txt")):
        assert process.poll() is None, output.read_text()
        assert time.monotonic() < deadline, "LoadGen never started"
        time.sleep(0.1)


def stop(process: subprocess.Popen) -> int:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    return process.wait(timeout=PATIENCE_S)


def refusal(done: subprocess.CompletedProcess, holder: subprocess.Popen, holder_action: str, lock: Path) -> str:
    """The one line a refused command prints: exit status 1, the holder's pid and command, the lock file."""
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert f"pid {holder.pid}, " in line and f"--action={holder_action}" in line and str(lock) in line, line
    return line


def test_a_second_find_peak_and_any_config_writer_or_measurement_stop_at_once(repo, scratch, tmp_path):
    paths = Paths.create(repo=repo)
    custom_list = (repo / "code/common/systems/custom_list.py").read_text()
    first = start(repo, scratch, tmp_path / "first.out", "--action=find_peak", *OFFLINE,
                  f"--log_dir={tmp_path / 'first'}")
    try:
        wait_for_loadgen(first, tmp_path / "first", tmp_path / "first.out")    # measuring its first trial
        second = toolkit(repo, scratch, "--action=find_peak", *OFFLINE, f"--log_dir={tmp_path / 'second'}")
        line = refusal(second, first, "find_peak", paths.configs_lock)
        assert "the config files of this checkout" in line and "wait for it to end" in line
        register = toolkit(repo, scratch, "--action=add_custom_system", "--system_id=Other_box", "--yes")
        refusal(register, first, "find_peak", paths.configs_lock)
        measure = toolkit(repo, scratch, "--action=run_harness", *OFFLINE, "--test_run",
                          f"--log_dir={tmp_path / 'harness'}")
        assert "make find_peak measures with nothing else running" in \
            refusal(measure, first, "find_peak", paths.measure_lock)
        assert not (tmp_path / "second").exists() and not (tmp_path / "harness").exists()   # nothing ran
    finally:
        assert stop(first) == 128 + signal.SIGTERM
    assert (repo / "code/common/systems/custom_list.py").read_text() == custom_list
    assert not list((repo / "configs").rglob("custom.py"))
    # The lock went with its holder: the next writer goes ahead.
    register = toolkit(repo, scratch, "--action=add_custom_system", "--system_id=Other_box", "--yes")
    assert register.returncode == 0, register.stderr
    assert "Other_box" in (repo / "code/common/systems/custom_list.py").read_text()


def test_find_peak_does_not_start_beside_a_harness_run_and_harness_runs_share(repo, scratch, tmp_path):
    paths = Paths.create(repo=repo)
    measuring = start(repo, scratch, tmp_path / "run.out", "--action=run_harness", *OFFLINE, "--min_duration=120000",
                      f"--log_dir={tmp_path / 'run'}")
    try:
        wait_for_loadgen(measuring, tmp_path / "run", tmp_path / "run.out")
        peak = toolkit(repo, scratch, "--action=find_peak", *OFFLINE, f"--log_dir={tmp_path / 'peak'}")
        refusal(peak, measuring, "run_harness", paths.measure_lock)
        assert not (tmp_path / "peak").exists()
        beside = toolkit(repo, scratch, "--action=run_harness", *OFFLINE, "--dry_run", f"--log_dir={tmp_path / 'b'}")
        assert beside.returncode == 0, beside.stderr      # harness runs still run beside each other
    finally:
        assert stop(measuring) == 128 + signal.SIGTERM


# -- write_value itself ---------------------------------------------------------------------------------------
def _context(repo: Path, kvm_2core) -> Context:
    args = parse_run_args(["--action=find_peak", "--benchmarks=resnet50", "--scenarios=offline"], list(ACTIONS),
                          ["resnet50"])
    return Context(args=args, paths=Paths.create(scratch=repo / "scratch", log_dir=repo / "logs", repo=repo),
                   rules=get_round(), detect=lambda: kvm_2core, log=lambda _: None)


@pytest.fixture
def own_repo(tmp_path) -> Path:
    """configs/ and custom_list.py as committed, for write_value to write into."""
    copy = tmp_path / "own"
    shutil.copytree(REPO / "configs", copy / "configs", ignore=shutil.ignore_patterns("__pycache__", "custom.py"))
    (copy / "code/common/systems").mkdir(parents=True)
    (copy / "code/common/systems/custom_list.py").write_text(subprocess.run(
        ["git", "show", "HEAD:code/common/systems/custom_list.py"], cwd=REPO, capture_output=True, text=True,
        check=True).stdout)
    return copy


def test_write_value_stops_at_once_while_another_process_writes_configs(own_repo, kvm_2core):
    ctx = _context(own_repo, kvm_2core)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(ctx.paths.configs_lock)], cwd=REPO, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held"
        target = plan_target(ctx, "resnet50", Scenario.Offline)
        with pytest.raises(UserError) as refused:
            write_value(ctx, target, "resnet50", Scenario.Offline, "offline_expected_qps", 300.0, ["on a day."])
    finally:
        holder.kill()
        holder.communicate(timeout=30)
    assert refused.value.exit_code == 1 and f"pid {holder.pid}" in str(refused.value)
    assert not target.path.exists() and "AMD_EPYC_2C" not in ctx.paths.custom_systems_file.read_text()


def test_write_value_on_a_full_disk_leaves_both_files_as_they_were(own_repo, kvm_2core):
    ctx = _context(own_repo, kvm_2core)
    target = plan_target(ctx, "resnet50", Scenario.Offline)
    custom_list = ctx.paths.custom_systems_file.read_bytes()
    offline = target.path.parent
    with small_disk(offline, "64k", keep=True) as disk:
        fill(disk)
        with pytest.raises(OSError) as full:
            write_value(ctx, target, "resnet50", Scenario.Offline, "offline_expected_qps", 300.0, ["on a day."])
        assert full.value.errno == errno.ENOSPC and full.value.filename == str(target.path)
        assert not target.path.exists() and not [p for p in disk.iterdir() if p.name.startswith(".")]
    assert ctx.paths.custom_systems_file.read_bytes() == custom_list     # registered, then put back


def test_write_value_replaces_a_config_whole_or_not_at_all(own_repo, kvm_2core):
    ctx = _context(own_repo, kvm_2core)
    target = plan_target(ctx, "resnet50", Scenario.Offline)
    write_value(ctx, target, "resnet50", Scenario.Offline, "offline_expected_qps", 300.0, ["on day one."])
    written = target.path.read_bytes()
    again = plan_target(ctx, "resnet50", Scenario.Offline)
    with small_disk(target.path.parent, "64k", keep=True) as disk:
        fill(disk)
        with pytest.raises(OSError):
            write_value(ctx, again, "resnet50", Scenario.Offline, "offline_expected_qps", 420.0, ["on day two."])
        assert target.path.read_bytes() == written        # the earlier value and comment, whole
    assert os.path.getsize(ctx.paths.custom_systems_file) > 0


# -- the shared lock -------------------------------------------------------------------------------------------
HOLD_SHARED = """
import sys
from pathlib import Path
from code.common.locking import shared_lock
with shared_lock(Path(sys.argv[1]), "the measurements"):
    print("held", flush=True)
    sys.stdin.read()
"""


def _holder(script: str, lock: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", script, str(lock)], cwd=REPO, text=True, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_shared_holders_share_and_an_exclusive_one_names_them_not_a_dead_holder(tmp_path):
    from code.common.locking import exclusive_lock, shared_lock

    lock = tmp_path / "build/.measure.lock"
    dead = _holder(HOLD_LOCK, lock)            # an exclusive holder killed outright leaves its name in the file
    dead.kill()
    dead.communicate(timeout=30)
    holders = [_holder(HOLD_SHARED, lock), _holder(HOLD_SHARED, lock)]   # two at once
    try:
        with shared_lock(lock, "the measurements"):
            pass                                                          # and a third
        with pytest.raises(UserError) as refused:
            with exclusive_lock(lock, "the measurements"):
                pass
        message = str(refused.value)
        assert all(f"pid {h.pid}, " in message for h in holders) and f"pid {dead.pid}," not in message
    finally:
        for holder in holders:
            holder.kill()
            holder.communicate(timeout=30)
    with exclusive_lock(lock, "the measurements"):     # gone with their holders, files or not
        with pytest.raises(UserError, match=f"pid {os.getpid()}, "):
            with shared_lock(lock, "the measurements"):
                pass
