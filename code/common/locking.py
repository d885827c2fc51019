"""Advisory locks: one process at a time writes a tree; a second one stops at once and says who holds it.

The lock is fcntl.flock on a lock file. The kernel releases it when its holder ends, however it ends
(SIGKILL included), so a lock is never left behind; the lock file stays (removing it would let two processes
lock two different files of the same name). While held, the file names the holder (pid and command line) for
the message a second process prints. The descriptor is not inherited by child processes (os.open's default),
so a child left running never holds a lock its parent took.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
from pathlib import Path
from typing import Iterator

from .errors import UserError

EXIT_LOCKED = 1
MAX_COMMAND_CHARS = 300


def holder_description() -> str:
    """This process, as a second one will name it: `pid 1234, python3 -m code.main --action=...`."""
    command = shlex.join(sys.orig_argv)
    if len(command) > MAX_COMMAND_CHARS:
        command = command[:MAX_COMMAND_CHARS] + "..."
    return f"pid {os.getpid()}, {command}"


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return text or "another process"


def _write_holder(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, (holder_description() + "\n").encode(), 0)


@contextlib.contextmanager
def exclusive_lock(lock_file: Path, what: str) -> Iterator[None]:
    """Hold the lock on `lock_file` while the block runs. A second process gets a UserError (exit status 1) at
    once, instead of waiting, naming `what` the lock protects and who holds it."""
    lock_file = Path(lock_file)
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise UserError(f"Cannot open the lock file {lock_file}: {error.strerror or error}. Make its folder "
                        f"writable.", exit_code=EXIT_LOCKED) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UserError(f"Another process holds the lock on {what}: {_read_holder(fd)}; wait for it to end, "
                            f"then run this step again (the lock is {lock_file}).", exit_code=EXIT_LOCKED) from None
        _write_holder(fd)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)   # still held: nobody reads a stale holder
    finally:
        os.close(fd)
