"""Files written so that a crash, Ctrl-C or a full disk never leaves a truncated one that a later run would trust.

A write that fails on a full disk raises an OSError (ENOSPC or EDQUOT) that names the file it was for, so that
code.main can say which folder's disk is full (disk_full.py)."""
from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import threading
from pathlib import Path
from typing import Iterator, Mapping

from .disk_full import DISK_FULL_ERRNOS, disk_full_cause, looks_full
from .errors import UserError


@contextlib.contextmanager
def atomic_path(dest: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """Yield a temporary path beside `dest`; on success it replaces `dest` in one rename, on failure it goes.

    Same folder, so the rename is atomic; named per process and thread, so concurrent writers do not
    collide. `suffix` matters to writers that pick a format from the extension (e.g. ".tmp.onnx").
    """
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}{suffix}")
    try:
        yield tmp
        os.replace(tmp, dest)
    except BaseException as error:
        full = isinstance(error, Exception) and not isinstance(error, UserError) and disk_full_cause(error) is None \
            and looks_full(dest.parent)
        tmp.unlink(missing_ok=True)
        _name_the_destination(error, dest)
        if full:   # a library that writes for itself fails in its own words (ONNX: "serialization failed")
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(dest)) from error
        raise


def _name_the_destination(error: BaseException, dest: Path) -> None:
    """A write to an open file that fills the disk raises an OSError without a file name: give it `dest`, so the
    message can name the folder whose disk is full."""
    if isinstance(error, OSError) and error.errno in DISK_FULL_ERRNOS and not error.filename:
        error.filename = str(dest)


def write_atomically(dest: Path, data: bytes | str) -> Path:
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(dest)


def copy_atomically(source: Path, dest: Path) -> Path:
    """Copy `source` (contents, mode and times, as shutil.copy2) to `dest`: whole or not at all."""
    with atomic_path(dest) as tmp:
        shutil.copy2(source, tmp)
    return Path(dest)


@contextlib.contextmanager
def atomic_dir(dest: Path) -> Iterator[Path]:
    """Yield an empty folder beside `dest`; on success it takes the place of `dest` (whose old content goes), on
    failure it goes. `dest` is at every moment the old folder or the new one, whole: a full disk or Ctrl-C midway
    leaves the old one."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    old = dest.with_name(f".{dest.name}.{os.getpid()}.{threading.get_ident()}.old")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir()
        yield tmp
        if dest.exists():
            os.replace(dest, old)
        os.replace(tmp, dest)
    except BaseException as error:
        shutil.rmtree(tmp, ignore_errors=True)
        if old.exists() and not dest.exists():
            os.replace(old, dest)
        _name_the_destination(error, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)


def replace_dir(dest: Path, files: Mapping[str, Path]) -> Path:
    """Make `dest` a folder holding exactly `files` (name -> source file or folder), copied, whole or not at all
    (atomic_dir)."""
    with atomic_dir(dest) as tmp:
        for name, source in files.items():
            if Path(source).is_dir():
                shutil.copytree(source, tmp / name)
            else:
                shutil.copy2(source, tmp / name)
    return Path(dest)


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algorithm).hexdigest()


def sha256_file(path: Path) -> str:
    return file_digest(path, "sha256")


def external_data(path: Path) -> Path:
    """`<model>.data`: where a model too big for one protobuf (an LLM decoder) keeps its weights, beside it."""
    return Path(path).with_name(Path(path).name + ".data")


def model_sha256(path: Path) -> str:
    """sha256 of a model or engine file; with an external-data file beside it, a sha256 over both files' digests
    (for a file without one, exactly its sha256)."""
    digest = sha256_file(path)
    data = external_data(path)
    if not data.is_file():
        return digest
    return hashlib.sha256(f"{digest} {sha256_file(data)}".encode()).hexdigest()


def model_size(path: Path) -> int:
    """Bytes of a model or engine file, its external-data file included."""
    data = external_data(path)
    return Path(path).stat().st_size + (data.stat().st_size if data.is_file() else 0)
