"""metadata.json: the record of one LoadGen test, the only thing staging reads.

Written atomically, once, when the test has ended. `status` is `completed` only for a test that ran to its
end; `failed` and `interrupted` records exist so that nobody mistakes the logs beside them for a result.
See documentation/metadata.md for the fields.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from ..constants import Scenario, TestMode
from ..errors import UserError
from ..fileio import sha256_file, write_atomically
from .loadgen_log import ACCURACY, DETAIL, SUMMARY

SCHEMA_VERSION = 1
FILE_NAME = "metadata.json"
COMPLETED, FAILED, INTERRUPTED = "completed", "failed", "interrupted"
LOG_DIGESTS = "log_sha256"            # {LoadGen log name: sha256} of a completed test, as LoadGen wrote them
LOADGEN_LOGS = (SUMMARY, DETAIL, ACCURACY)


def log_digests(log_dir: Path) -> dict[str, str]:
    """The sha256 of each LoadGen log in `log_dir`, to recognise a log edited after the test."""
    return {name: sha256_file(log_dir / name) for name in LOADGEN_LOGS if (log_dir / name).is_file()}


def write_metadata(log_dir: Path, record: dict[str, Any]) -> Path:
    record = {"schema_version": SCHEMA_VERSION, **record}
    return write_atomically(log_dir / FILE_NAME, json.dumps(record, indent=2, default=str) + "\n")


class UnreadableRecord(UserError):
    """A metadata.json that cannot be used (unreadable, truncated, another schema, a field missing or of the
    wrong type): a UserError naming the file and why, so a caller that does not skip it still stops cleanly."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} is not a usable run record: {reason}", exit_code=1)
        self.path, self.reason = Path(path), reason


def read_metadata(path: Path) -> dict[str, Any]:
    """The record at `path`; UnreadableRecord when it cannot be trusted as one."""
    try:
        record = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise UnreadableRecord(path, f"cannot be read ({error.strerror or error})") from None
    except UnicodeDecodeError:
        raise UnreadableRecord(path, "not UTF-8 text (damaged?)") from None
    except json.JSONDecodeError as error:
        raise UnreadableRecord(path, f"not valid JSON, truncated or damaged ({error.msg} at line {error.lineno} "
                                     f"column {error.colno})") from None
    problem = record_problem(record)
    if problem is not None:
        raise UnreadableRecord(path, problem)
    return record


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What every reader of records relies on: (field, test, what it must be).
_REQUIRED: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("status", lambda v: isinstance(v, str), "a string"),
    ("benchmark", lambda v: isinstance(v, str), "a string"),
    ("scenario", lambda v: v in {s.value for s in Scenario}, f"one of {Scenario.choices_text()}"),
    ("test_mode", lambda v: v in {m.value for m in TestMode}, f"one of {TestMode.choices_text()}"),
    ("system", lambda v: isinstance(v, dict) and isinstance(v.get("id"), str), "an object with an \"id\" string"),
    ("config", lambda v: isinstance(v, dict) and isinstance(v.get("fields"), dict)
     and isinstance(v.get("sources"), dict) and isinstance(v.get("workload_setting"), str),
     "an object with \"fields\", \"sources\" and \"workload_setting\""),
    ("log_dir", lambda v: isinstance(v, str), "a string"),
)
_OPTIONAL: tuple[tuple[str, Callable[[Any], bool], str], ...] = (
    ("finished", lambda v: isinstance(v, str), "a string"),
    ("valid", lambda v: isinstance(v, bool), "true or false"),
    ("test_run", lambda v: isinstance(v, bool), "true or false"),
    ("metric", lambda v: isinstance(v, dict) and (v.get("value") is None or _is_number(v["value"])),
     "an object whose \"value\" is a number"),
)


def record_problem(record: Any) -> str | None:
    """Why `record` cannot be used as a run record, or None."""
    if not isinstance(record, dict):
        return "it holds no JSON object"
    if record.get("schema_version") != SCHEMA_VERSION:
        return f"metadata schema {record.get('schema_version')!r}, this toolkit reads schema {SCHEMA_VERSION}"
    for name, test, what in _REQUIRED:
        if name not in record:
            return f"\"{name}\" is missing"
        if not test(record[name]):
            return f"\"{name}\" is not {what}"
    for name, test, what in _OPTIONAL:
        if record.get(name) is not None and not test(record[name]):
            return f"\"{name}\" is not {what}"
    return None


def find_metadata(root: Path) -> list[Path]:
    return sorted(root.rglob(FILE_NAME)) if root.exists() else []


def read_records(roots: Iterable[Path], skipped: Callable[[Path, str], None]) -> Iterator[dict[str, Any]]:
    """Every usable record under `roots` (each root once), with its path in `_path`; each unusable one is
    left out and handed to `skipped(path, reason)`, so one damaged file never stops a step."""
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
            record["_path"] = str(path)
            yield record


def skipped_line(path: Path, reason: str) -> str:
    """The console line for a record left out."""
    return f"skipped {path}: {reason}; that run is left out (remove or repair the file to silence this)"
