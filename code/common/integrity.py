"""Digests of the files a run depends on: recorded when a file is made, checked before it is used.

A record holds a file's size, modification time and sha256. The check is cheap where it can be: a file whose size
differs is damaged without reading it; a large file whose size and modification time are both as recorded is
taken as it was (anything that writes a file changes its modification time); a small file, or one whose time
changed, is hashed and judged by its sha256 (a file copied elsewhere keeps its bytes but not its time).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .errors import EXIT_FAILURE, UserError
from .fileio import sha256_file, write_atomically

# Files up to this size are always hashed: a few milliseconds, and no reliance on modification times.
ALWAYS_HASH_BYTES = 1 << 20


@dataclass(frozen=True)
class FileDigest:
    size: int
    mtime_ns: int
    sha256: str

    @classmethod
    def of(cls, path: Path) -> "FileDigest":
        """The digest of `path` as it is now (the time is read before hashing: a write during it shows later)."""
        stat = Path(path).stat()
        return cls(stat.st_size, stat.st_mtime_ns, sha256_file(path))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "FileDigest | None":
        """The digest a record holds; None for anything else (an older record without times, a damaged one)."""
        if not isinstance(data, dict):
            return None
        size, mtime, digest = data.get("size"), data.get("mtime_ns"), data.get("sha256")
        if not (isinstance(size, int) and isinstance(mtime, int) and isinstance(digest, str)):
            return None
        return cls(size, mtime, digest)


def problem(path: Path, recorded: FileDigest, always_hash: bool = False,
            hash_below: int = ALWAYS_HASH_BYTES) -> str | None:
    """Why `path` is not the file `recorded` describes (a clause to follow the file's name), or None when it is.
    Files of at most `hash_below` bytes are always hashed (0 for sets of many small files, such as preprocessed
    samples, where hashing every file on every use would cost more than the run)."""
    try:
        stat = Path(path).stat()
    except OSError:
        return "is missing"
    if stat.st_size != recorded.size:
        return f"is {stat.st_size} bytes, {recorded.size} were recorded when it was made (truncated or replaced)"
    if not always_hash and stat.st_size > hash_below and stat.st_mtime_ns == recorded.mtime_ns:
        return None
    if sha256_file(path) != recorded.sha256:
        return "does not match the sha256 recorded when it was made (changed since)"
    return None


def same_content(path: Path, recorded: FileDigest) -> bool:
    """Whether `path` has exactly the recorded bytes, however its time changed (always hashed)."""
    return problem(path, recorded, always_hash=True) is None


# -- a record beside the file it describes --------------------------------------------------------------------

def record_path(path: Path) -> Path:
    """Where the digest of a file made by the toolkit is kept when nothing else records it: beside the file."""
    path = Path(path)
    return path.with_name(f"{path.name}.sha256.json")


def read_record(path: Path) -> dict[str, FileDigest] | None:
    """The digests recorded for `path` (by file name: the file and any companion, such as its external data);
    None when there is no readable record."""
    try:
        data = json.loads(record_path(path).read_text())
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return None
    digests = {name: FileDigest.from_dict(entry) for name, entry in files.items()}
    return None if any(d is None for d in digests.values()) else digests  # type: ignore[return-value]


def write_record(path: Path, companions: tuple[Path, ...] = ()) -> dict[str, FileDigest]:
    """Record the digests of `path` and its companions (files that belong to it, such as its external data), as
    they are now: right after the toolkit made them."""
    path = Path(path)
    digests = {p.name: FileDigest.of(p) for p in (path, *companions)}
    body = {"files": {name: d.to_dict() for name, d in digests.items()}}
    write_atomically(record_path(path), json.dumps(body, indent=1) + "\n")
    return digests


def write_folder_record(folder: Path) -> dict[str, FileDigest]:
    """Record the digests of every file under `folder` as they are now, beside it (record_path), each by its path
    from the folder's parent: read_record and record_problem read it as they read a file's record."""
    folder = Path(folder)
    digests = {p.relative_to(folder.parent).as_posix(): FileDigest.of(p)
               for p in sorted(folder.rglob("*")) if p.is_file()}
    body = {"files": {name: d.to_dict() for name, d in digests.items()}}
    write_atomically(record_path(folder), json.dumps(body, indent=1) + "\n")
    return digests


def forget_record(path: Path) -> None:
    record_path(path).unlink(missing_ok=True)


def record_problems(path: Path, digests: dict[str, FileDigest], always_hash: bool = False,
                    hash_below: int = ALWAYS_HASH_BYTES) -> dict[Path, str]:
    """Every file of a record that is not as recorded, and why (a clause to follow its name)."""
    folder = Path(path).parent
    found = {}
    for name, digest in digests.items():
        why = problem(folder / name, digest, always_hash, hash_below)
        if why is not None:
            found[folder / name] = why
    return found


def record_problem(path: Path, digests: dict[str, FileDigest], always_hash: bool = False) -> str | None:
    """The first file of a record that is not as recorded, as a message fragment naming it; None when all are."""
    for file, why in record_problems(path, digests, always_hash).items():
        return f"{file} {why}"
    return None


def digests_of(files: dict[str, Path]) -> dict[str, dict[str, Any]]:
    """Digests of `files` (by the name a manifest keeps them under), as a manifest stores them."""
    return {name: FileDigest.of(file).to_dict() for name, file in files.items()}


def files_problem(files: dict[str, Path], recorded: Any, hash_below: int = ALWAYS_HASH_BYTES) -> str | None:
    """The first of `files` (by the name a manifest keeps them under) that is not as `recorded` (a manifest's
    {name: digest} entries), as a message fragment naming it; None when all are. A file without a recorded digest,
    or a record that is not one, is a problem: what was not recorded cannot be vouched for."""
    entries = recorded if isinstance(recorded, dict) else {}
    for name, file in files.items():
        digest = FileDigest.from_dict(entries.get(name))
        if digest is None:
            return f"{file} has no digest recorded"
        why = problem(file, digest, hash_below=hash_below)
        if why is not None:
            return f"{file} {why}"
    return None


class DamagedInput(UserError):
    """An input a run depends on is not the file the toolkit made: the message names it and what makes it again."""

    def __init__(self, what: str, remedy: str) -> None:
        super().__init__(f"{what}. {remedy}", exit_code=EXIT_FAILURE)


# -- the source files derived data is made from ---------------------------------------------------------------

_SOURCE_DIGESTS: dict[tuple[str, int, int], str] = {}


def source_sha256(path: Path) -> str:
    """The sha256 of a source file (a data set file that prompts or samples are made from), hashed once per command:
    remembered by the file's path, size and modification time, so a file that changes is hashed again and judged by
    its content."""
    path = Path(path).resolve()
    stat = path.stat()
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    if key not in _SOURCE_DIGESTS:
        _SOURCE_DIGESTS[key] = sha256_file(path)
    return _SOURCE_DIGESTS[key]


def changed_source(path: Path, recorded: str | None) -> str | None:
    """Why the source file `path` is not the one whose sha256 was `recorded` when something was made from it (a
    clause to follow its name), or None when it is, or when it is absent here (nothing to compare: the derived data
    is trusted for what it says it is)."""
    if not recorded or not Path(path).is_file():
        return None
    now = source_sha256(path)
    if now == recorded:
        return None
    return f"changed since it was made from it (sha256 {recorded[:12]} then, {now[:12]} now)"
