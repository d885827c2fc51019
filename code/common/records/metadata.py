"""metadata.json: the record of one LoadGen test, the only thing staging reads.

Written atomically, once, when the test has ended. `status` is `completed` only for a test that ran to its
end; `failed` and `interrupted` records exist so that nobody mistakes the logs beside them for a result.
While a test runs, its folder holds a file of RESERVE_BYTES that writing the record frees first, so a disk that
fills during the test still takes the record that says so.
The record is a typed RunRecord (record.py); see documentation/metadata.md for the fields and schemas.
"""
from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..errors import EXIT_FAILURE, UserError
from ..fileio import sha256_file, write_atomically
from ..paths import ACCURACY_TXT, LOADGEN_LOGS, RUN_RECORD
from .record import (COMPLETED, FAILED, INTERRUPTED, SCHEMA_VERSION, STATUSES, AccuracyRecord,  # noqa: F401
                     ConfigRecord, DataRecord, Durations, EngineRecord, Filled, Invocation, LoadGenRecord,
                     RecordProblem, RunRecord, SystemRecord)

LOG_DIGESTS = "log_sha256"            # {LoadGen log name: sha256} of a completed test, as LoadGen wrote them
RESERVE = ".metadata.reserve"
RESERVE_BYTES = 256 * 1024            # a record is a few KiB; a Triton or LLM one some more


def log_digests(log_dir: Path) -> dict[str, str]:
    """The sha256 of each LoadGen log in `log_dir`, to recognise a log edited after the test."""
    return {name: sha256_file(log_dir / name) for name in LOADGEN_LOGS if (log_dir / name).is_file()}


def changed_logs(record: RunRecord, run_dir: Path) -> tuple[str, ...]:
    """The files in `run_dir` that no longer are what the test left there: each LoadGen log whose sha256 is not the
    one `record` holds, and accuracy.txt when it no longer says the recorded accuracy ("<name> (missing)" for one
    that is gone). Empty for a record kept without digests: nothing to compare with."""
    changed = []
    for name, digest in record.log_sha256.items():
        try:
            if sha256_file(run_dir / name) != digest:
                changed.append(name)
        except OSError:
            changed.append(f"{name} (missing)")
    if record.log_sha256 and record.accuracy is not None:
        try:
            if (run_dir / ACCURACY_TXT).read_text(errors="replace").strip() != record.accuracy.text.strip():
                changed.append(ACCURACY_TXT)
        except OSError:
            changed.append(f"{ACCURACY_TXT} (missing)")
    return tuple(changed)


def write_metadata(log_dir: Path, record: RunRecord) -> Path:
    (Path(log_dir) / RESERVE).unlink(missing_ok=True)     # its space is the record's
    return write_atomically(log_dir / RUN_RECORD, json.dumps(record.as_dict(), indent=2, default=str) + "\n")


def reserve_record_space(log_dir: Path) -> None:
    """Set RESERVE_BYTES aside in `log_dir` for the record (write_metadata frees them); OSError when the disk has
    not even that much left."""
    path = Path(log_dir) / RESERVE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError as error:
            if error.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                raise
            zeros = memoryview(bytes(RESERVE_BYTES))   # no fallocate here: blocks written are blocks held
            while zeros:
                zeros = zeros[os.write(fd, zeros):]
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)


class UnreadableRecord(UserError):
    """A metadata.json that cannot be used (unreadable, truncated, another schema, a field missing or of the
    wrong type): a UserError naming the file and why, so a caller that does not skip it still stops cleanly."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} is not a usable run record: {reason}", exit_code=EXIT_FAILURE)
        self.path, self.reason = Path(path), reason


def read_metadata(path: Path) -> RunRecord:
    """The record at `path` (of this schema or schema 1); UnreadableRecord when it cannot be trusted as one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise UnreadableRecord(path, f"cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise UnreadableRecord(path, "not UTF-8 text (damaged?)") from None
    except json.JSONDecodeError as error:
        raise UnreadableRecord(path, f"not valid JSON, truncated or damaged ({error.msg} at line {error.lineno} "
                                     f"column {error.colno})") from None
    except RecursionError:
        raise UnreadableRecord(path, "it nests too deeply") from None
    try:
        return RunRecord.from_dict(data, path=Path(path))
    except RecordProblem as problem:
        raise UnreadableRecord(path, str(problem)) from None


def find_metadata(root: Path) -> list[Path]:
    return sorted(root.rglob(RUN_RECORD)) if root.exists() else []


def read_records(roots: Iterable[Path], skipped: Callable[[Path, str], None]) -> Iterator[RunRecord]:
    """Every usable record under `roots` (each root once), with its `path`; each unusable one is left out and
    handed to `skipped(path, reason)`, so one damaged file never stops a step."""
    seen: set[Path] = set()
    for root in dict.fromkeys(Path(r) for r in roots):
        for path in find_metadata(root):
            if path.resolve() in seen:
                continue
            seen.add(path.resolve())
            try:
                record = read_metadata(path)
            except UnreadableRecord as error:
                skipped(error.path, error.reason)
                continue
            yield record


def skipped_line(path: Path, reason: str) -> str:
    """The console line for a record left out."""
    return f"skipped {path}: {reason}; that run is left out (remove or repair the file to silence this)"
