"""Files written so that a crash or Ctrl-C never leaves a truncated one that a later run would trust."""
from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from pathlib import Path
from typing import Iterator


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
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomically(dest: Path, data: bytes | str) -> Path:
    with atomic_path(dest) as tmp:
        tmp.write_bytes(data.encode() if isinstance(data, str) else data)
    return Path(dest)


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, algorithm).hexdigest()


def sha256_file(path: Path) -> str:
    return file_digest(path, "sha256")
