"""LiveCodeBench grading: a model's solution run against its problem's tests in a sandboxed interpreter.

Each solution runs in its own process (sandbox_child.py): a separate Python interpreter in isolated mode (`-I`),
its own session (so its whole process group is killed at the end, whatever it started), an empty temporary
working folder, a minimal environment, and resource limits: CPU seconds, address space, file size, no core
files; LiveCodeBench's guard disables fork, spawn, kill and file deletion inside it. Each test has its own time
limit (SIGALRM in the child, LiveCodeBench's "Time Limit Exceeded"), and the whole run a wall clock of
(per-test limit + 1) x tests + 5 seconds, as LiveCodeBench's check_correctness allows; past it the process
group is killed and every test counts as failed (-1), as there.

The official scripts run lcb_runner with a 60-second limit per test (`timeout=60`); Limits() keeps that.
A solution passes when every test passes (lcb_runner's extract_instance_results).
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from .lcb_tests import ProblemTests

CHILD = Path(__file__).with_name("sandbox_child.py")
OFFICIAL_SECONDS_PER_TEST = 60.0
GLOBAL_MARGIN_PER_TEST_S, GLOBAL_MARGIN_S = 1.0, 5.0      # LiveCodeBench's (timeout + 1) * tests + 5
NOT_RUN = -1              # LiveCodeBench's verdict for every test of a run killed or crashed
VERDICT_NAMES = {True: "passed", False: "wrong answer", -1: "killed or crashed", -2: "wrong answer",
                 -3: "time limit exceeded", -4: "runtime or compile error"}
CHILD_ENVIRONMENT = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1"}


@dataclass(frozen=True)
class Limits:
    """What one solution may use. seconds_per_test: LiveCodeBench's per-test time limit (the official scripts:
    60). memory_bytes: address space (LiveCodeBench itself sets none; 4 GiB here). processes: RLIMIT_NPROC, off
    by default (it counts all of the user's processes and threads, so a low value also fails solutions that
    start a thread, which LiveCodeBench allows; fork and spawn are disabled in the child either way)."""

    seconds_per_test: float = OFFICIAL_SECONDS_PER_TEST
    memory_bytes: int | None = 4 << 30
    file_bytes: int = 64 << 20
    processes: int | None = None

    def wall_seconds(self, tests: int) -> float:
        return (self.seconds_per_test + GLOBAL_MARGIN_PER_TEST_S) * tests + GLOBAL_MARGIN_S

    def child_limits(self, tests: int) -> dict[str, int | None]:
        return {"cpu_seconds": math.ceil(self.wall_seconds(tests)) + 1, "memory_bytes": self.memory_bytes,
                "file_bytes": self.file_bytes, "processes": self.processes}


@dataclass(frozen=True)
class RunOutcome:
    """One solution's run: `verdicts` as lcb_runner reports them (True, or -1..-4 for the test that ended the
    run), `passed` when every test passed."""

    verdicts: tuple[bool | int, ...]
    tests: int
    source: str                    # ProblemTests.source: which tests these were
    detail: str = ""
    stderr_tail: str = field(default="", repr=False)

    @property
    def passed(self) -> bool:
        return bool(self.verdicts) and all(v is True for v in self.verdicts) and len(self.verdicts) == self.tests

    @property
    def summary(self) -> str:
        if self.passed:
            return f"passed all {self.tests} tests ({self.source})"
        last = self.verdicts[-1] if self.verdicts else NOT_RUN
        done = sum(1 for v in self.verdicts if v is True)
        why = VERDICT_NAMES.get(last, str(last))
        extra = f": {self.detail}" if self.detail else ""
        return f"{why} after {done} of {self.tests} tests passed ({self.source}){extra}"


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_available(fd: int) -> bytes:
    """What the child wrote on its result pipe; never waits (a straggler holding the pipe open cannot block)."""
    os.set_blocking(fd, False)
    chunks = []
    try:
        while chunk := os.read(fd, 1 << 16):
            chunks.append(chunk)
    except BlockingIOError:
        pass
    finally:
        os.close(fd)
    return b"".join(chunks)


def run_solution(code: str, problem: ProblemTests, limits: Limits = Limits()) -> RunOutcome:
    """Run `code` against `problem`'s tests in the sandbox; never raises for what the code does."""
    tests = len(problem.tests)
    job = {"code": code, "method": problem.method, "seconds_per_test": limits.seconds_per_test,
           "tests": [{"input": t.input, "output": t.output} for t in problem.tests],
           "limits": limits.child_limits(tests)}
    read_end, write_end = os.pipe()
    with tempfile.TemporaryDirectory(prefix="lcb_run_") as workdir:
        try:
            process = subprocess.Popen(
                [sys.executable, "-I", str(CHILD), str(write_end)], cwd=workdir, stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=(write_end,),
                env={**CHILD_ENVIRONMENT, "HOME": workdir, "TMPDIR": workdir}, start_new_session=True)
        finally:
            os.close(write_end)
        detail = ""
        try:
            _, stderr = process.communicate(json.dumps(job).encode(), timeout=limits.wall_seconds(tests))
        except subprocess.TimeoutExpired:
            _kill_group(process)
            _, stderr = process.communicate()
            detail = f"killed after the wall-clock limit of {limits.wall_seconds(tests):.0f} s"
        finally:
            _kill_group(process)           # whatever the solution left running in its group
        raw = _read_available(read_end)
    tail = stderr.decode("utf-8", "replace")[-2000:] if stderr else ""
    try:
        verdicts = tuple(json.loads(raw)["verdicts"])
    except (ValueError, KeyError, TypeError):
        if not detail:
            detail = f"the sandbox ended without a result (exit status {process.returncode})"
        verdicts = (NOT_RUN,) * tests
    return RunOutcome(verdicts, tests, problem.source, detail, tail)
