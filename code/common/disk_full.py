"""A full disk (or a used-up disk quota) is a situation for people, not a bug in the toolkit: it is told in one
sentence that names the folder whose disk is full and what to do, never as `internal error: OSError [Errno 28]`.

Python's OSError from a write on an open file carries no file name, so the folder comes from the writer where it
knows it (fileio's atomic helpers put the destination on the error) and otherwise from the folders the action
writes to, the one whose disk has (almost) no space left.
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path
from typing import Iterable

from .errors import EXIT_FAILURE, UserError

DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# Less free space than this where a write failed, or where LoadGen's logs were cut: that disk counts as full.
FULL_BELOW_BYTES = 1 << 20
FIX = "free space and run again"
_OPENING = "the disk holding "


class DiskFull(UserError):
    """A write failed because the disk holding `folder` is full: exit status 1, one sentence."""

    def __init__(self, folder: Path, why: str = "", context: str = "") -> None:
        super().__init__(f"{context}{disk_full_sentence(folder, why)}", exit_code=EXIT_FAILURE)
        self.folder = Path(folder)


def disk_full_cause(error: BaseException | None) -> OSError | None:
    """The ENOSPC or EDQUOT OSError that `error` is, or that caused it (a library may wrap it); None otherwise."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS:
            return error
        error = error.__cause__ or error.__context__
    return None


def existing_folder(path: Path) -> Path:
    """`path` when it is a folder, else the nearest parent that exists (a file still to be written, or a file)."""
    path = Path(path).absolute()
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: Path) -> int | None:
    """Free bytes, for this user, of the file system holding `path`; None where it cannot be asked."""
    try:
        return shutil.disk_usage(existing_folder(path)).free
    except OSError:
        return None


def looks_full(path: Path) -> bool:
    free = free_bytes(path)
    return free is not None and free < FULL_BELOW_BYTES


def format_bytes(count: float, byte_unit: str = "B") -> str:
    """`count` bytes for people: "512 B" (`byte_unit` names the unit below a KiB), "1.5 KiB", ... "2.0 TiB"."""
    for unit in (byte_unit, "KiB", "MiB", "GiB"):
        if count < 1024:
            return f"{count:.0f} {unit}" if unit == byte_unit else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


def disk_full_sentence(folder: Path, why: str = "") -> str:
    """`the disk holding <folder> is full (<why>; <free> free): free space and run again`."""
    free = free_bytes(folder)
    details = "; ".join(part for part in (why or os.strerror(errno.ENOSPC),
                                          f"{format_bytes(free, 'bytes')} free" if free is not None else "") if part)
    return f"{_OPENING}{folder} is full ({details}): {FIX}"


def is_disk_full_sentence(text: str | None) -> bool:
    """Whether a recorded error is disk_full_sentence's (a test's record says why it failed in words)."""
    return bool(text) and text.startswith(_OPENING) and text.endswith(FIX)


def why(error: OSError) -> str:
    """The system's words for the error, with the quota named: EDQUOT is a full quota, not a full disk."""
    words = error.strerror or os.strerror(error.errno or errno.ENOSPC)
    return f"{words}: your quota there is used up" if error.errno == errno.EDQUOT else words


def folder_of(error: OSError, candidates: Iterable[Path] = ()) -> Path | None:
    """The folder whose disk the failed write was on: the error's file name where it has one (of a copy, the
    destination: shutil puts it second), else the first of `candidates` (the folders the action writes to) whose
    disk is (almost) full."""
    for name in (error.filename2, error.filename):
        if name:
            path = Path(os.fsdecode(name)).absolute()
            return path if path.is_dir() else existing_folder(path.parent)
    return next((Path(c) for c in candidates if looks_full(c)), None)


def disk_full_message(error: BaseException, candidates: Iterable[Path] = ()) -> str | None:
    """The sentence for an error a full disk caused; None for any other error."""
    cause = disk_full_cause(error)
    if cause is None:
        return None
    folder = folder_of(cause, candidates)
    if folder is None:
        return f"a disk the toolkit writes to is full ({why(cause)}): {FIX}"
    return disk_full_sentence(folder, why(cause))
