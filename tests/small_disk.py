"""A real full disk for the fault-injection tests: a small tmpfs mounted on a folder, filled up to a chosen number of
free bytes. Mounting needs root (or CAP_SYS_ADMIN); where it is not allowed, the tests that need one skip, saying
so, and tests/disk_full_child.py injects the same errno without a mount."""
from __future__ import annotations

import contextlib
import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

PAGE = 4096          # tmpfs counts its size in pages
FILLER = "filler"


@contextlib.contextmanager
def small_disk(folder: Path, size: str = "4m", keep: bool = False) -> Iterator[Path]:
    """`folder` (created) as a tmpfs of `size` while the block runs; with `keep`, holding the files it held (the
    mount hides them: they are copied in). Unmounted after, even when the block fails."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="small_disk.") as aside:
        if keep:
            shutil.copytree(folder, Path(aside) / "kept", symlinks=True)
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(folder)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"a small file system cannot be mounted here ({done.stderr.strip() or done.returncode}); "
                        f"the injected-errno tests cover this path without one")
        try:
            if keep:
                shutil.copytree(Path(aside) / "kept", folder, symlinks=True, dirs_exist_ok=True)
            yield folder
        finally:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the file system of `folder` until a write fails with ENOSPC, then give back `leave` bytes (whole
    pages). The filler file is returned; removing it frees the disk again."""
    filler = Path(folder) / FILLER
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for size in (64 * 1024, PAGE, 1):    # big writes, then what is left of the last pages
            while True:
                try:
                    os.write(fd, bytes(size))
                except OSError as error:
                    assert error.errno == errno.ENOSPC, error
                    break
    finally:
        os.close(fd)
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - -(-leave // PAGE) * PAGE))
    return filler


def free(folder: Path) -> int:
    return shutil.disk_usage(folder).free
