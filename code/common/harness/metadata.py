"""metadata.json: the record of one LoadGen test, the only thing staging reads.

Written atomically, once, when the test has ended. `status` is `completed` only for a test that ran to its
end; `failed` and `interrupted` records exist so that nobody mistakes the logs beside them for a result.
See documentation/metadata.md for the fields.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..fileio import write_atomically

SCHEMA_VERSION = 1
FILE_NAME = "metadata.json"
COMPLETED, FAILED, INTERRUPTED = "completed", "failed", "interrupted"


def write_metadata(log_dir: Path, record: dict[str, Any]) -> Path:
    record = {"schema_version": SCHEMA_VERSION, **record}
    return write_atomically(log_dir / FILE_NAME, json.dumps(record, indent=2, default=str) + "\n")


def read_metadata(path: Path) -> dict[str, Any]:
    record = json.loads(path.read_text())
    if record.get("schema_version") != SCHEMA_VERSION:
        raise ValueError(f"{path}: metadata schema {record.get('schema_version')} is not {SCHEMA_VERSION}")
    return record


def find_metadata(root: Path) -> list[Path]:
    return sorted(root.rglob(FILE_NAME)) if root.exists() else []
