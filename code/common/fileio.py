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
