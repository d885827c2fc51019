"""The processes the toolkit starts (the harness child of each test, a local vLLM or Triton server) and how each
lives and ends: one lifecycle for all of them.

- A group of its own: every such process leads a new session, hence a process group whose id is its pid, so one
  signal reaches the helpers it starts (vLLM's engine core and worker, Triton's python-backend stubs), and a Ctrl-C
  at the terminal reaches the toolkit alone, which then stops its children in order.
- Death with the parent: a server asks the kernel for SIGTERM when the thread that started it ends
  (PR_SET_PDEATHSIG, Linux). The harness child gets the read end of a pipe whose write end the parent holds
  (`watch_pipe`): when the parent ends, however it ends (SIGKILL included), the child reads end-of-file; it also
  asks for a signal of its own (SIGUSR1) when its parent dies, which works without the pipe and is never taken for
  a forwarded stop (`ChildGuard`).
- Stop: the stop signal (SIGTERM, or the SIGINT/SIGTERM/SIGHUP the toolkit got, forwarded) to the group, a grace
  period for the leader, then SIGKILL to the group, and to whatever of the group is still there after `linger_s`.
- A server listens on a free port and writes its output to a log file, whose last lines go into the message when
  it fails.
"""
from __future__ import annotations

import ctypes
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, ClassVar, Iterator, Mapping, Protocol, Sequence

from .errors import signal_exit_status

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PARENT_DEATH_SIGNAL = signal.SIGUSR1   # what the kernel sends the harness child when its parent dies
PR_SET_PDEATHSIG = 1                   # <linux/prctl.h>
PARENT_GONE_STATUS = signal_exit_status(signal.SIGHUP)   # a child's exit status when its parent went away
LOCALHOST = "127.0.0.1"
NO_LOG = "(no log)"


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


def free_port(host: str = LOCALHOST) -> int:
    """A TCP port nobody listens on now (for a local server)."""
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def log_tail(path: Path, lines: int) -> str:
    """The last `lines` lines of the log at `path` ("(no log)" when it cannot be read)."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return NO_LOG


# -- the process group -------------------------------------------------------------------------------------
def group_members(pgid: int) -> list[int]:
    """The processes of process group `pgid` still there (zombies included), from /proc."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid:    # after the name: state, ppid, pgrp
            members.append(int(entry.name))
    return members


def die_with_parent(signum: int) -> bool:
    """Linux: have the kernel send `signum` to this process when its parent ends. False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _death_signal_hook(signum: int | None) -> Callable[[], object] | None:
    """A preexec_fn asking for `signum` when the thread that starts the process ends (Linux; None elsewhere). libc
    is loaded here, before the fork: the forked child only makes the one system call."""
    if signum is None or not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0)


def start_in_group(command: Sequence[str], *, log_path: Path | None = None, header: str | None = None,
                   env: Mapping[str, str] | None = None, cwd: Path | str | None = None, pass_fds: Sequence[int] = (),
                   death_signal: int | None = signal.SIGTERM) -> subprocess.Popen:
    """`command` leading a process group of its own, sent `death_signal` when the calling thread ends (None: the
    process looks after that itself). With `log_path`, its output is appended there (after `header`) and its
    stdin is empty; without, it shares this process's terminal."""
    options = dict(env=None if env is None else dict(env), cwd=None if cwd is None else str(cwd),
                   pass_fds=tuple(pass_fds), start_new_session=True, preexec_fn=_death_signal_hook(death_signal))
    if log_path is None:
        return subprocess.Popen(list(command), **options)
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        if header is not None:
            log.write(header.encode())
            log.flush()
        return subprocess.Popen(list(command), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                **options)


def signal_group(process: subprocess.Popen, signum: int) -> None:
    """`signum` to the group `process` leads (its pid); to the process alone where the group cannot be signalled
    and it still runs."""
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        if process.poll() is None:
            process.send_signal(signum)


def stop_group(process: subprocess.Popen, signum: int = signal.SIGTERM, grace_s: float = 10.0,
               linger_s: float = 0.0) -> None:
    """`signum` to the group, SIGKILL when its leader has not ended after `grace_s`; then the rest of the group
    gets `linger_s` to end on its own before SIGKILL. Returns with the leader reaped (idempotent)."""
    if process.poll() is None or group_members(process.pid):
        signal_group(process, signum)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        signal_group(process, signal.SIGKILL)
        process.wait()
    deadline = time.monotonic() + linger_s
    while group_members(process.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if group_members(process.pid):
        signal_group(process, signal.SIGKILL)


class Stoppable(Protocol):
    def stop(self, timeout_s: float | None = None) -> None: ...


class ProcessSet:
    """The servers of one kind this process started and has not stopped yet (thread-safe), for `stop_all`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._members: set[Stoppable] = set()

    def add(self, member: Stoppable) -> None:
        with self._lock:
            self._members.add(member)

    def discard(self, member: Stoppable) -> None:
        with self._lock:
            self._members.discard(member)

    def __contains__(self, member: object) -> bool:
        with self._lock:
            return member in self._members

    def __iter__(self) -> Iterator[Stoppable]:
        with self._lock:
            return iter(list(self._members))

    def __len__(self) -> int:
        with self._lock:
            return len(self._members)

    def stop_all(self, timeout_s: float) -> None:
        for member in self:
            member.stop(timeout_s)


class ServerProcess:
    """A server the toolkit starts: a group of its own, SIGTERM when the thread that started it ends, its output
    in `log_path`. A subclass says how it is started and when it is ready, and holds the `started` set of its kind."""

    started: ClassVar[ProcessSet]
    log_lines: ClassVar[int] = 30            # how much of the log a failure message shows
    stop_timeout_s: ClassVar[float] = 20.0
    group_ends_alone: ClassVar[bool] = False  # True: the rest of the group gets the stop's timeout to end after
                                              # its leader before SIGKILL; False: what is left is killed at once

    def __init__(self, log_path: Path) -> None:
        self.log_path = Path(log_path)
        self.process: subprocess.Popen | None = None

    def launch(self, command: Sequence[str], *, env: Mapping[str, str], cwd: Path | str | None = None,
               header: str | None = None) -> None:
        self.process = start_in_group(command, log_path=self.log_path, header=header, env=env, cwd=cwd)
        self.started.add(self)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM to the group, SIGKILL to what is left after `timeout_s`; returns when no process of the group is
        left (idempotent)."""
        timeout_s = self.stop_timeout_s if timeout_s is None else timeout_s
        if self.process is not None:
            stop_group(self.process, signal.SIGTERM, timeout_s, linger_s=timeout_s if self.group_ends_alone else 0.0)
        self.started.discard(self)

    def kill(self) -> None:
        """SIGKILL to the group, no grace: what a crashed node looks like to the clients."""
        if self.process is not None and self.process.poll() is None:
            signal_group(self.process, signal.SIGKILL)
            self.process.wait()

    def log_tail(self, lines: int | None = None) -> str:
        return log_tail(self.log_path, lines or self.log_lines)

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


# -- the harness child's side --------------------------------------------------------------------------------
def watch_pipe() -> tuple[int, int]:
    """(read end for the child, write end the parent keeps open while the child runs)."""
    return os.pipe()


class ChildGuard:
    """Ends this process with `on_stop(reason)` on a stop signal or when the parent's watch pipe closes.

    A stop signal (SIGINT, SIGTERM, SIGHUP) or a vanished parent ends the child at once, whatever its main thread
    is doing (LoadGen's StartTest blocks it for minutes). `finish(write)` writes the final record instead, unless a
    stop came first; the two exclude each other, so a test has exactly one final record. Call `start()` from the
    main thread, before the test starts.
    """

    def __init__(self, on_stop: Callable[[str], None], parent_fd: int | None = None) -> None:
        self._on_stop = on_stop
        self._parent_fd = parent_fd
        self._lock = threading.Lock()
        self._done = False
        self._wake_fd: int | None = None

    def start(self) -> "ChildGuard":
        wake_read, wake_write = os.pipe()
        os.set_blocking(wake_write, False)
        self._wake_fd = wake_read
        # Python's C-level handler writes the signal number to the wakeup fd from whichever thread the
        # signal lands on; the watcher thread acts on it even while the main thread is inside LoadGen.
        signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        for signum in (*STOP_SIGNALS, PARENT_DEATH_SIGNAL):
            signal.signal(signum, _left_to_the_watcher)
        die_with_parent(PARENT_DEATH_SIGNAL)
        threading.Thread(target=self._watch, name="parent-watch", daemon=True).start()
        return self

    def parent_gone(self) -> bool:
        """True once the parent's end of the watch pipe is closed (always False without a watch pipe)."""
        if self._parent_fd is None:
            return False
        readable, _, _ = select.select([self._parent_fd], [], [], 0)
        return bool(readable) and os.read(self._parent_fd, 1) == b""

    def finish(self, write: Callable[[], None]) -> bool:
        """Run `write` unless the test was stopped first; False when it was (the stop record stands)."""
        with self._lock:
            if self._done:
                return False
            self._done = True
            write()
            return True

    def _watch(self) -> None:
        fds = [self._wake_fd] + ([self._parent_fd] if self._parent_fd is not None else [])
        while True:
            readable, _, _ = select.select(fds, [], [])
            signals = os.read(self._wake_fd, 64) if self._wake_fd in readable else b""
            pipe_closed = self._parent_fd in readable and os.read(self._parent_fd, 64) == b""
            if pipe_closed or PARENT_DEATH_SIGNAL in signals:
                self._stop("the toolkit process that started the test went away before the test ended",
                           PARENT_GONE_STATUS)
            stops = [n for n in signals if n in STOP_SIGNALS]
            if stops:
                self._stop(f"the test was stopped by {signal_name(stops[0])}", signal_exit_status(stops[0]))

    def _stop(self, reason: str, status: int) -> None:
        with self._lock:
            if not self._done:
                self._done = True
                try:
                    self._on_stop(reason)
                finally:
                    _flush_quietly()
                    os._exit(status)
        _flush_quietly()
        os._exit(status)


def _left_to_the_watcher(signum, frame) -> None:  # noqa: ARG001  the watcher thread has the signal already
    return None


def _flush_quietly() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
