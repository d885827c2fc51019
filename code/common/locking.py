"""Advisory locks: one process at a time writes a tree; a second one stops at once and says who holds it.

The lock is fcntl.flock on a lock file. The kernel releases it when its holder ends, however it ends
(SIGKILL included), so a lock is never left behind; the lock file stays (removing it would let two processes
lock two different files of the same name). While held, the file names the holder (pid and command line) for
the message a second process prints. The descriptor is not inherited by child processes (os.open's default),
so a child left running never holds a lock its parent took.

A shared lock (`shared_lock`) is held by any number of processes at once and keeps out an exclusive one: each
shared holder names itself in a file of its own in `<lock file>.holders/`, removed when it lets go; a holder
killed outright leaves its file, which is not named once its pid is gone.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import sys
from pathlib import Path
from typing import Iterator

from .errors import EXIT_FAILURE, UserError

MAX_COMMAND_CHARS = 300


def holder_description() -> str:
    """This process, as a second one will name it: `pid 1234, python3 -m code.main --action=...`."""
    command = shlex.join(sys.orig_argv)
    if len(command) > MAX_COMMAND_CHARS:
        command = command[:MAX_COMMAND_CHARS] + "..."
    return f"pid {os.getpid()}, {command}"


def _read_holder(fd: int, lock_file: Path, shared_first: bool = False) -> str:
    """Who holds the lock, as it named itself. An exclusive request is refused by shared holders or by an exclusive
    one, so it asks the shared holders first: the file may still name an exclusive holder killed outright."""
    shared = "; ".join(_shared_holders(lock_file)) if shared_first else ""
    try:
        text = os.pread(fd, 4096, 0).decode(errors="replace").strip()
    except OSError:
        text = ""
    return shared or text or "another process"


def _holders_dir(lock_file: Path) -> Path:
    return lock_file.with_name(lock_file.name + ".holders")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _shared_holders(lock_file: Path) -> list[str]:
    """The live shared holders of `lock_file`, as they named themselves."""
    found = []
    try:
        entries = sorted(_holders_dir(lock_file).iterdir())
    except OSError:
        return []
    for entry in entries:
        if entry.name.isdigit() and _alive(int(entry.name)):
            try:
                found.append(entry.read_text(errors="replace").strip())
            except OSError:
                continue
    return [text for text in found if text]


def _refusal(what: str, holder: str, lock_file: Path) -> UserError:
    return UserError(f"Another process holds the lock on {what}: {holder}; wait for it to end, then run this step "
                     f"again (the lock is {lock_file}).", exit_code=EXIT_FAILURE)


def _open(lock_file: Path) -> int:
    try:
        lock_file.parent.mkdir(parents=True, exist_ok=True)
        return os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise UserError(f"Cannot open the lock file {lock_file}: {error.strerror or error}. Make its folder "
                        f"writable.", exit_code=EXIT_FAILURE) from None


def _write_holder(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.pwrite(fd, (holder_description() + "\n").encode(), 0)


@contextlib.contextmanager
def exclusive_lock(lock_file: Path, what: str) -> Iterator[None]:
    """Hold the lock on `lock_file` while the block runs. A second process gets a UserError (exit status 1) at
    once, instead of waiting, naming `what` the lock protects and who holds it."""
    def refuse(fd: int) -> None:
        raise _refusal(what, _read_holder(fd, lock_file, shared_first=True), lock_file) from None

    lock_file = Path(lock_file)
    with _exclusive(lock_file, refuse):
        yield


@contextlib.contextmanager
def waiting_lock(lock_file: Path, what: str, log=print) -> Iterator[None]:
    """Hold the lock on `lock_file` while the block runs; a second process waits for it (saying once whom it waits
    for) rather than stopping: for work that the second one then finds done (a build)."""
    def wait(fd: int) -> None:
        log(f"waiting for {_read_holder(fd, lock_file)} to finish {what} ...")
        fcntl.flock(fd, fcntl.LOCK_EX)

    lock_file = Path(lock_file)
    with _exclusive(lock_file, wait):
        yield


@contextlib.contextmanager
def _exclusive(lock_file: Path, held_elsewhere) -> Iterator[None]:
    """The lock taken at once, or else as `held_elsewhere(fd)` takes it (or raises); the holder named in the file
    while it is held."""
    fd = _open(lock_file)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held_elsewhere(fd)
        _write_holder(fd)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)   # still held: nobody reads a stale holder
    finally:
        os.close(fd)


@contextlib.contextmanager
def shared_lock(lock_file: Path, what: str) -> Iterator[None]:
    """Hold `lock_file` shared while the block runs: other shared holders are welcome, an exclusive one is
    refused while it lasts; a UserError (exit status 1) at once, naming the exclusive holder, when one holds it."""
    lock_file = Path(lock_file)
    fd = _open(lock_file)
    own = _holders_dir(lock_file) / str(os.getpid())
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            raise _refusal(what, _read_holder(fd, lock_file), lock_file) from None
        try:
            own.parent.mkdir(exist_ok=True)
            own.write_text(holder_description() + "\n")
        except OSError:
            pass     # the lock holds all the same; a refused process then names "another process"
        try:
            yield
        finally:
            own.unlink(missing_ok=True)
    finally:
        os.close(fd)
