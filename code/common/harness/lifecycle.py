"""A harness child lives no longer than the toolkit process that started it.

The parent hands the child the read end of a pipe (the watch pipe) and keeps the write end open while it
lives: when the parent ends, however it ends (SIGKILL included), the kernel closes the write end and the
child reads end-of-file. On Linux the child also asks for a signal of its own (SIGUSR1) when its parent dies
(prctl PR_SET_PDEATHSIG), which works without the pipe too and is never mistaken for a forwarded stop. A stop
signal (SIGINT, SIGTERM, SIGHUP) or a vanished parent ends the child at once with an `interrupted` record,
whatever its main thread is doing (LoadGen's StartTest blocks it for minutes); a record already written (the test
ended first) is kept.
"""
from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import sys
import threading
from typing import Callable

from ..errors import signal_exit_status

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
PARENT_DEATH_SIGNAL = signal.SIGUSR1   # what the kernel sends the child when its parent dies
PR_SET_PDEATHSIG = 1          # <linux/prctl.h>
PARENT_GONE_STATUS = signal_exit_status(signal.SIGHUP)   # the child's exit status when its parent went away
STOP_GRACE_S = 10             # how long a stopped child may take to write its record before SIGKILL


def signal_name(signum: int) -> str:
    return signal.Signals(signum).name


# -- parent side -------------------------------------------------------------------------------------------
def watch_pipe() -> tuple[int, int]:
    """(read end for the child, write end the parent keeps open while the child runs)."""
    return os.pipe()


def stop_child(child: subprocess.Popen, signum: int) -> None:
    """Forward `signum` to the child's process group, give it time to record the stop, then SIGKILL it."""
    _signal_group(child, signum)
    try:
        child.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        _signal_group(child, signal.SIGKILL)
        child.wait()


def _signal_group(child: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(child.pid, signum)   # the child leads its own session, so its group is its pid
    except (ProcessLookupError, PermissionError):
        if child.poll() is None:
            child.send_signal(signum)


# -- child side --------------------------------------------------------------------------------------------
def die_with_parent(signum: int = PARENT_DEATH_SIGNAL) -> bool:
    """Linux: have the kernel send `signum` to this process when its parent ends. False where unsupported."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, int(signum), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


class ChildGuard:
    """Ends this process with `on_stop(reason)` on a stop signal or when the parent's watch pipe closes.

    `finish(write)` writes the final record instead, unless a stop came first; the two exclude each other,
    so a test has exactly one final record. Call `start()` from the main thread, before the test starts.
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
