"""One sample of an LLM task and the readers of the files the data sets come in.

The official MLCommons files are pandas DataFrames: pickles (llama2-70b's OpenOrca, deepseek-r1's mixed set) and
Parquet files (gpt-oss-120b's), read with pandas as the reference implementations read them. The development
samples kept beside the repository are JSON Lines with the same columns.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.errors import EXIT_FAILURE, UserError


@dataclass(frozen=True)
class TaskItem:
    """One prompt of a data set, in QSL order.

    `user` (and `system`, where the task has one) is the prompt as text, which the substitute model gets inside its
    own chat template; `tok_input` is the prompt as the official file tokenized it for the closed model (None where
    the file has no token ids). `reference` is what the answer is scored against (a ROUGE target or a ground truth)
    and `subset` the sub-data set it comes from (cot, aime1983, gpqa_diamond, ...); `row` keeps the columns a scorer
    may need beyond those (e.g. a code problem's tests)."""

    user: str
    reference: str
    subset: str
    system: str = ""
    tok_input: tuple[int, ...] | None = None
    row: Mapping[str, Any] = field(default_factory=dict)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """The rows of a data file as dicts, in file order: .jsonl, .json (a list), .pkl / .pickle (a pandas DataFrame,
    read with pandas as the reference does; only open pickles you trust), .parquet."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".jsonl":
            with path.open(encoding="utf-8") as lines:
                return [json.loads(line) for line in lines if line.strip()]
        if suffix == ".json":
            rows = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(rows, list):
                raise ValueError("not a JSON list of rows")
            return rows
        if suffix in (".pkl", ".pickle", ".parquet"):
            import pandas as pd

            frame = pd.read_parquet(path) if suffix == ".parquet" else pd.read_pickle(path)
            if not isinstance(frame, pd.DataFrame):
                raise ValueError(f"holds a {type(frame).__name__}, not a pandas DataFrame")
            return [_plain_row(row) for row in frame.to_dict(orient="records")]
    except (OSError, ValueError, UnicodeDecodeError, ImportError, EOFError) as error:
        raise UserError(f"cannot read the data set file {path}: {error}", exit_code=EXIT_FAILURE) from None
    raise UserError(f"{path}: unknown data file type {suffix!r} (expected .jsonl, .json, .pkl or .parquet)",
                    exit_code=EXIT_FAILURE)


def _plain_row(row: Mapping[str, Any]) -> dict[str, Any]:
    """A DataFrame row with numpy arrays as lists and numpy scalars as Python values."""
    plain: dict[str, Any] = {}
    for key, value in row.items():
        if hasattr(value, "tolist"):
            value = value.tolist()
        plain[str(key)] = value
    return plain


def require_columns(rows: Sequence[Mapping[str, Any]], columns: Sequence[str], path: Path, what: str) -> None:
    """UserError naming the first row that lacks one of `columns`."""
    for index, row in enumerate(rows):
        missing = [c for c in columns if c not in row]
        if missing:
            raise UserError(f"{path} is not {what}: row {index} lacks the column(s) {', '.join(missing)} (it needs "
                            f"{', '.join(columns)}).", exit_code=EXIT_FAILURE)


def token_ids(value: Any) -> tuple[int, ...] | None:
    """A token-id column's value as a tuple of ints (None where absent or empty)."""
    if value is None:
        return None
    ids = tuple(int(v) for v in value)
    return ids or None
