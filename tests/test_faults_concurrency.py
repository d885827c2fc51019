"""Fault injection, concurrency: two runs never share a run folder, default log folders are unique even within one
second, and a submission step stops at once, naming the holder, while another one holds the submission lock."""
from __future__ import annotations

import datetime as dt
import os
import shutil
import signal
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.actions.base import Context
from code.actions.submission import (CheckSubmission, ExportSubmission, GenerateConfFiles, PackSubmission,
                                     StageCompliance, StageResults, TruncateResults)
from code.common.constants import Scenario, TestMode
from code.common.errors import UserError
from code.common.harness.claim import claim_run_dir, refuse_used_run_dir
from code.common.harness.runner import run_test
from code.common.harness.spec import RunSpec
from code.common.locking import exclusive_lock
from code.common.paths import Paths
from code.common.rules import get_round

from .conftest import REPO

SAME_SECOND = dt.datetime(2026, 3, 4, 5, 6, 7)
CLAIMANTS = 4
SUBMISSION_STEPS = (GenerateConfFiles, StageResults, StageCompliance, TruncateResults, ExportSubmission,
                    CheckSubmission, PackSubmission)

# Each claimant waits for the start file, so that all of them claim at (nearly) the same moment.
CLAIM_SCRIPT = """
import os, sys, time
from pathlib import Path
from code.common.errors import UserError
from code.common.harness.claim import claim_run_dir
start = Path(sys.argv[2])
print("ready", flush=True)
while not start.exists():
    time.sleep(0.001)
try:
    claim_run_dir(Path(sys.argv[1]))
except UserError as error:
    print(error, file=sys.stderr)
    sys.exit(error.exit_code)
"""
DEFAULT_LOG_DIR_SCRIPT = """
import datetime as dt, sys, time
from pathlib import Path
from code.common.paths import Paths
start = Path(sys.argv[2])
print("ready", flush=True)
while not start.exists():
    time.sleep(0.001)
print(Paths.create(repo=Path(sys.argv[1]), now=dt.datetime(2026, 3, 4, 5, 6, 7)).claimed_log_dir)
"""
HOLD_LOCK_SCRIPT = """
import sys
from pathlib import Path
from code.common.locking import exclusive_lock
with exclusive_lock(Path(sys.argv[1]), "the test tree"):
    print("held", flush=True)
    sys.stdin.read()
"""


def _python(script: str, *args: object, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", script, *map(str, args)], cwd=REPO, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def _race(script: str, first_arg: Path, start: Path, count: int) -> list[tuple[int, str, str]]:
    """Start `count` processes, and once all are ready (imports done) release them together through the file
    `start`; (status, stdout after "ready", stderr) of each."""
    processes = [_python(script, first_arg, start) for _ in range(count)]
    try:
        for p in processes:
            assert p.stdout.readline().strip() == "ready", p.stderr.read()
        start.touch()
        outputs = [p.communicate(timeout=60) for p in processes]
        return [(p.returncode, out, err) for p, (out, err) in zip(processes, outputs)]
    finally:
        for p in processes:
            if p.poll() is None:
                p.kill()
                p.wait()


# -- a run folder is claimed by one run ------------------------------------------------------------------
def test_two_processes_claiming_one_run_folder_one_wins_the_other_stops(tmp_path):
    run_dir = tmp_path / "logs/sys/resnet50/Offline/PerformanceOnly"
    results = _race(CLAIM_SCRIPT, run_dir, tmp_path / "start", CLAIMANTS)
    winners = [r for r in results if r[0] == 0]
    losers = [r for r in results if r[0] != 0]
    assert len(winners) == 1 and run_dir.is_dir()
    for status, _, err in losers:
        assert status == 1, err
        assert str(run_dir) in err and "Use another LOG_DIR" in err and "never overwritten" in err


def test_two_threads_claiming_one_run_folder_one_wins(tmp_path):
    run_dir = tmp_path / "logs/run"
    barrier = threading.Barrier(CLAIMANTS)
    outcomes: list[object] = []

    def claim() -> None:
        barrier.wait()
        try:
            outcomes.append(claim_run_dir(run_dir))
        except UserError as error:
            outcomes.append(error)

    threads = [threading.Thread(target=claim) for _ in range(CLAIMANTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert outcomes.count(run_dir) == 1
    errors = [o for o in outcomes if isinstance(o, UserError)]
    assert len(errors) == CLAIMANTS - 1 and all(e.exit_code == 1 for e in errors)


def test_planning_refuses_a_run_folder_another_run_holds(tmp_path):
    run_dir = tmp_path / "run"
    refuse_used_run_dir(run_dir)             # free: nothing said
    claim_run_dir(run_dir)
    with pytest.raises(UserError, match="already in use by another run") as refused:
        refuse_used_run_dir(run_dir)
    assert refused.value.exit_code == 1 and str(run_dir) in str(refused.value)


def _spec(log_dir: Path) -> RunSpec:
    return RunSpec(benchmark="resnet50", model="mobilenet_v2", dataset="foolbox20", division="open",
                   scenario="Offline", test_mode="PerformanceOnly", loadgen_model="resnet50", log_dir=str(log_dir),
                   scratch="unused", engine="unused", engine_manifest={}, config={"fields": {}}, system={},
                   user_conf=[], performance_sample_count=1, cpu_cores=1, test_run=True, rules_version="v6.1",
                   accuracy_threshold=None, invocation={})


def test_a_run_planned_before_another_claimed_its_folder_writes_nothing_there(tmp_path):
    """The race between two invocations that both planned one folder: the later one stops before it writes."""
    run_dir = claim_run_dir(tmp_path / "logs/sys/resnet50/Offline/PerformanceOnly")
    (run_dir / "mlperf_log_detail.txt").write_text("the other run's log\n")
    with pytest.raises(UserError, match="already in use by another run") as refused:
        run_test(_spec(run_dir), REPO, log=lambda _: None, child_module="tests.no_such_child")
    assert refused.value.exit_code == 1
    assert sorted(p.name for p in run_dir.iterdir()) == ["mlperf_log_detail.txt"]
    assert (run_dir / "mlperf_log_detail.txt").read_text() == "the other run's log\n"


def test_a_run_folder_that_cannot_be_created_is_bad_input(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    with pytest.raises(UserError, match="Cannot create the run folder") as refused:
        claim_run_dir(blocker / "run")
    assert refused.value.exit_code == 2


# -- default log folders are unique ---------------------------------------------------------------------------
def test_default_log_folders_of_the_same_second_differ(tmp_path):
    first = Paths.create(repo=tmp_path, now=SAME_SECOND)
    second = Paths.create(repo=tmp_path, now=SAME_SECOND)
    assert first.log_dir == second.log_dir               # the same second, the same name to start from
    assert not (tmp_path / "build").exists()             # nothing is created until a run needs it
    assert first.claimed_log_dir == tmp_path / "build/logs/2026.03.04-05.06.07"
    assert second.claimed_log_dir == tmp_path / "build/logs/2026.03.04-05.06.07-2"
    assert first.claimed_log_dir == first.claimed_log_dir   # one folder per invocation
    assert first.run_log_dir("sys", "resnet50", Scenario.Offline, TestMode.PerformanceOnly) == \
        first.claimed_log_dir / "sys/resnet50/Offline/PerformanceOnly"


def test_default_log_folders_of_processes_started_in_the_same_second_differ(tmp_path):
    results = _race(DEFAULT_LOG_DIR_SCRIPT, tmp_path, tmp_path / "start", CLAIMANTS)
    assert all(status == 0 for status, _, _ in results), [err for _, _, err in results]
    folders = {out.strip() for _, out, _ in results}
    assert len(folders) == CLAIMANTS and all(Path(f).is_dir() for f in folders)
    assert {Path(f).name for f in folders} == {"2026.03.04-05.06.07"} | \
        {f"2026.03.04-05.06.07-{n}" for n in range(2, CLAIMANTS + 1)}


def test_an_explicit_log_dir_is_shared_and_never_renamed(tmp_path):
    paths = Paths.create(repo=tmp_path, log_dir=tmp_path / "mine", now=SAME_SECOND)
    assert paths.claimed_log_dir == tmp_path / "mine"
    assert Paths.create(repo=tmp_path, log_dir=tmp_path / "mine").claimed_log_dir == tmp_path / "mine"


# -- the submission lock --------------------------------------------------------------------------------------
@pytest.fixture
def lock_holder(tmp_path):
    """A process that holds the submission lock of a repo under tmp_path until the test lets it go."""
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path / "repo")
    holder = _python(HOLD_LOCK_SCRIPT, paths.submission_lock, stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held", holder.stderr.read()
        yield paths, holder
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.communicate(timeout=30)


def _context(paths: Paths) -> Context:
    args = SimpleNamespace(action="stage_results", submitter="ACME", allow_test_runs=False, passphrase_file=None,
                           benchmarks=("resnet50",), scenarios=(), infer_scenarios=False, system_name=None)
    return Context(args=args, paths=paths, rules=get_round(), detect=lambda: None, log=lambda _: None)


@pytest.mark.parametrize("step", SUBMISSION_STEPS, ids=lambda s: s.__name__)
def test_a_submission_step_stops_at_once_while_another_holds_the_lock(lock_holder, step):
    paths, holder = lock_holder
    with pytest.raises(UserError) as refused:
        step(_context(paths)).run()
    message = str(refused.value)
    assert refused.value.exit_code == 1
    assert f"pid {holder.pid}" in message and "exclusive_lock" in message   # the holder's command line
    assert str(paths.build) in message and str(paths.submission_lock) in message
    assert not paths.staging.exists() and not paths.submission.exists()


def test_the_lock_goes_with_its_holder_however_it_ends(lock_holder):
    paths, holder = lock_holder
    holder.send_signal(signal.SIGKILL)
    holder.wait(timeout=30)
    with pytest.raises(UserError, match="Nothing staged yet") as after:   # past the lock, to the step's own check
        ExportSubmission(_context(paths)).run()
    assert after.value.exit_code == 1


def test_a_second_descriptor_in_the_same_process_is_refused_too(tmp_path):
    lock = tmp_path / "build/.submission.lock"
    with exclusive_lock(lock, "the trees"):
        assert f"pid {os.getpid()}" in lock.read_text()
        with pytest.raises(UserError, match=f"Another process holds the lock on the trees: pid {os.getpid()}"):
            with exclusive_lock(lock, "the trees"):
                pass
    assert lock.read_text() == ""                        # released: no holder named
    with exclusive_lock(lock, "the trees"):
        pass


def test_a_step_through_the_command_line_names_the_holder(tmp_path):
    repo = tmp_path / "repo"
    for name in ("code", "configs", "scripts", "requirements"):
        shutil.copytree(REPO / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    lock = Paths.create(repo=repo).submission_lock
    holder = _python(HOLD_LOCK_SCRIPT, lock, stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held"
        done = subprocess.run([sys.executable, "-m", "code.main", "--action=stage_results", "--submitter=ACME",
                               f"--scratch_path={tmp_path / 'scratch'}"], cwd=repo, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=120, check=False)
    finally:
        holder.kill()
        holder.communicate(timeout=30)
    assert done.returncode == 1, done.stderr
    assert f"pid {holder.pid}" in done.stderr and str(lock) in done.stderr
    assert "internal error" not in done.stderr and not (repo / "build/submission-staging").exists()


def test_an_unwritable_default_log_folder_is_bad_input(tmp_path):
    (tmp_path / "build").mkdir()
    (tmp_path / "build/logs").write_text("a file where the log folders go")
    with pytest.raises(UserError, match="Cannot create a log folder") as refused:
        Paths.create(repo=tmp_path, now=SAME_SECOND).claimed_log_dir
    assert refused.value.exit_code == 2


WAIT_LOCK_SCRIPT = """
import sys
from pathlib import Path
from code.common.locking import waiting_lock
with waiting_lock(Path(sys.argv[1]), "the test build"):
    print("held", flush=True)
    sys.stdin.read()
"""


def test_a_waiting_lock_waits_for_its_holder_saying_whom_then_holds_it(tmp_path):
    """The native core's build lock: a second builder waits for the first (then finds the core built), never
    stopping as the tree locks do."""
    from code.common.locking import waiting_lock

    lock = tmp_path / ".build.lock"
    holder = _python(WAIT_LOCK_SCRIPT, lock, stdin=subprocess.PIPE)
    try:
        assert holder.stdout.readline().strip() == "held", holder.stderr.read()
        said, held = [], threading.Event()

        def second():
            with waiting_lock(lock, "the test build", said.append):
                held.set()

        thread = threading.Thread(target=second)
        thread.start()
        while not said and thread.is_alive():
            thread.join(0.05)
        assert not held.is_set()
        assert said == [said[0]] and f"waiting for pid {holder.pid}" in said[0] and "the test build" in said[0]
        holder.stdin.close()                       # the first one ends: the second holds the lock
        thread.join(60)
        assert held.is_set() and not thread.is_alive()
    finally:
        if holder.poll() is None:
            holder.kill()
        holder.wait()
