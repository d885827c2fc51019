"""Fault injection, process lifecycle: signals to the toolkit, and a toolkit that vanishes, stop the harness child.

Each test starts `python -m code.main --action=run_harness` on the embedded default with a long min_duration,
waits until LoadGen is running in the child, then signals or kills the parent. The child must be gone
afterwards and its test recorded as `interrupted`, never `completed`. Processes left by a failing test are
killed by the `leftovers` fixture.
"""
from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from code.common.processes import ChildGuard
from code.common.records.metadata import RunRecord, find_metadata, read_metadata
from code.common.harness.spec import RunSpec
from code.main import StopSignal, interrupted_status, main, raise_on_stop_signals

from .conftest import EMBEDDED, REPO, default_stop_signals

LONG_RUN = ["--scenarios=offline", *EMBEDDED, "--min_duration=120000"]   # stopped long before it ends
SHORT_RUN = ["--scenarios=offline", *EMBEDDED, "--test_run", "--min_duration=1000"]
LOADGEN_LOGS = ("mlperf_log_summary.txt", "mlperf_log_detail.txt", "mlperf_log_accuracy.json")
PATIENCE_S = 120   # an upper bound for slow machines, never a timing expectation


def toolkit(scratch: Path, log_dir: Path, *args: str) -> int:
    return main([*args, f"--scratch_path={scratch}", f"--log_dir={log_dir}"], log=lambda _: None)


@pytest.fixture(scope="module")
def engine(scratch) -> Path:
    assert main(["--action=generate_engines", f"--scratch_path={scratch}", *LONG_RUN], log=lambda _: None) == 0
    return scratch


@pytest.fixture(scope="module")
def short_run(engine, tmp_path_factory) -> RunRecord:
    """The record of one short completed run (its run_spec.json is the template for the child-level tests)."""
    log_dir = tmp_path_factory.mktemp("short-run")
    assert toolkit(engine, log_dir, "--action=run_harness", *SHORT_RUN) == 0
    [record] = map(read_metadata, find_metadata(log_dir))
    return record


def harness_processes(spec_path: Path) -> list[int]:
    """Live (not zombie) processes whose command line names `spec_path`: the harness child of that run."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(spec_path).encode() in argv and state != "Z":
            found.append(int(entry.name))
    return found


@pytest.fixture
def leftovers():
    """Spec paths whose harness processes a test started; any still alive at the end are killed."""
    specs: list[Path] = []
    yield specs
    for spec_path in specs:
        for pid in harness_processes(spec_path):
            os.kill(pid, signal.SIGKILL)


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.2)


def start_long_run(scratch: Path, log_dir: Path, output: Path, leftovers: list[Path]):
    """The toolkit running a long test, once LoadGen has started in its child: (toolkit process, spec path)."""
    command = [sys.executable, "-m", "code.main", "--action=run_harness", *LONG_RUN, f"--scratch_path={scratch}",
               f"--log_dir={log_dir}"]
    with open(output, "w") as out:
        parent = subprocess.Popen(command, cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  preexec_fn=default_stop_signals)
    wait_for(lambda: list(log_dir.rglob("mlperf_log_detail.txt")) or parent.poll() is not None, "LoadGen to start")
    assert parent.poll() is None, output.read_text()
    spec_path = next(log_dir.rglob("run_spec.json"))
    leftovers.append(spec_path)
    assert harness_processes(spec_path), "the harness child is not running"
    return parent, spec_path


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_to_the_toolkit_stops_the_child_and_records_an_interrupted_run(engine, tmp_path, leftovers,
                                                                                      signum, status):
    log_dir, output = tmp_path / "logs", tmp_path / "toolkit.out"
    parent, spec_path = start_long_run(engine, log_dir, output, leftovers)
    parent.send_signal(signum)   # to the toolkit alone, not its process group: the toolkit must forward it
    assert parent.wait(timeout=PATIENCE_S) == status, output.read_text()
    assert harness_processes(spec_path) == []
    [record] = map(read_metadata, find_metadata(log_dir))
    assert record.status == "interrupted", record
    assert not record.log_sha256 and record.metric is None
    assert "internal error" not in output.read_text()


def test_a_killed_toolkit_takes_its_child_along_and_the_run_is_never_completed(engine, tmp_path, leftovers):
    log_dir = tmp_path / "logs"
    parent, spec_path = start_long_run(engine, log_dir, tmp_path / "toolkit.out", leftovers)
    parent.kill()   # SIGKILL: the toolkit forwards nothing, cleans up nothing
    parent.wait()
    wait_for(lambda: not harness_processes(spec_path), "the orphaned harness child to end")
    [record] = map(read_metadata, find_metadata(log_dir))
    assert record.status == "interrupted", record
    assert "went away" in record.error


def test_a_child_whose_parent_is_already_gone_records_an_interrupted_run(short_run, tmp_path):
    spec = RunSpec.load(Path(short_run.log_dir) / "run_spec.json")
    run_dir = tmp_path / "orphan"
    run_dir.mkdir()
    spec_path = RunSpec(**{**spec.__dict__, "log_dir": str(run_dir)}).save(run_dir / "run_spec.json")
    child_end, parent_end = os.pipe()
    os.close(parent_end)   # the parent's end of the watch pipe is closed before the child starts
    try:
        done = subprocess.run([sys.executable, "-m", "code.common.harness.child", str(spec_path), str(child_end)],
                              cwd=REPO, pass_fds=(child_end,), capture_output=True, text=True,
                              timeout=PATIENCE_S, check=False)
    finally:
        os.close(child_end)
    assert done.returncode == 128 + signal.SIGHUP, done.stderr
    record = read_metadata(run_dir / "metadata.json")
    assert record.status == "interrupted" and "went away" in record.error


def test_the_guard_sees_the_parent_go_and_lets_only_one_final_record_through():
    child_end, parent_end = os.pipe()
    stops: list[str] = []
    guard = ChildGuard(stops.append, child_end)   # not started: no threads, no signal handlers
    try:
        assert not guard.parent_gone()
        os.close(parent_end)
        assert guard.parent_gone()
        written = []
        assert guard.finish(lambda: written.append("final")) is True
        assert guard.finish(lambda: written.append("second")) is False
        assert written == ["final"] and stops == []
    finally:
        os.close(child_end)


def test_a_completed_run_records_the_sha256_of_its_loadgen_logs(short_run):
    assert short_run.status == "completed"
    run_dir = Path(short_run.log_dir)
    digests = short_run.log_sha256
    assert sorted(digests) == sorted(LOADGEN_LOGS)
    for name, digest in digests.items():
        assert digest == hashlib.sha256((run_dir / name).read_bytes()).hexdigest(), name


def test_the_toolkit_raises_on_stop_signals_only_while_it_runs_and_keeps_an_ignored_one_ignored():
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    signal.signal(signal.SIGHUP, signal.SIG_IGN)   # as under nohup
    try:
        restore = raise_on_stop_signals()
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        with pytest.raises(StopSignal) as stopped:
            signal.raise_signal(signal.SIGTERM)
        assert interrupted_status(stopped.value) == 143 and interrupted_status(KeyboardInterrupt()) == 130
        restore()
        assert signal.getsignal(signal.SIGTERM) == before[signal.SIGTERM]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)
