"""The reasoning scorers (scoring.py) on a task benchmark's items and decoded accuracy log.

LiveCodeBench answers are run against the problem's tests: those of the LiveCodeBench `code_generation_lite` rows
the user puts beside the data set as `livecodebench_problems.jsonl` (or .parquet), keyed by `question_id`, as the
official scorer loads them; without that file, against the examples of the problem statement (the result says so).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.benchmark_api import AccuracyResult
from ..llm_tasks.items import TaskItem, read_rows
from ..llm_tasks.responses import Outputs

LCB_FILES = ("livecodebench_problems.jsonl", "livecodebench_problems.parquet")


def lcb_problems(folder: Path | None) -> Mapping[str, Mapping[str, Any]] | None:
    """The user's LiveCodeBench problems by question_id, where the data set's folder has them."""
    for name in LCB_FILES:
        path = folder / name if folder is not None else None
        if path is not None and path.is_file():
            return {str(row["question_id"]): row for row in read_rows(path) if "question_id" in row}
    return None


def _row(item: TaskItem) -> dict[str, Any]:
    row = dict(item.row)
    row.setdefault("dataset", item.subset)
    row.setdefault("ground_truth", item.reference)
    return row


def score_task(benchmark: str, items: Sequence[TaskItem], outputs: Outputs, folder: Path | None) -> AccuracyResult:
    from .scoring import score_deepseek, score_gpt_oss

    score = score_gpt_oss if benchmark == "gpt-oss-120b" else score_deepseek
    return score([_row(item) for item in items], list(outputs.texts), list(outputs.token_counts),
                 lcb_problems=lcb_problems(folder)).accuracy_result()
