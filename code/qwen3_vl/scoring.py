"""The accuracy of qwen3-vl-235b-a22b, computed as the round's evaluation (multimodal/qwen3-vl evaluation.py, and
the endpoints client's ShopifyCategoryF1Scorer, which follows it) computes it.

Each logged response is the answer's UTF-8 text (the hex of its bytes in mlperf_log_accuracy.json). It is read as a
JSON object of the answer schema with pydantic's JSON validation (model_validate_json: no repair, no code fence
stripped, extra fields refused, pydantic's own type rules). An answer that does not validate counts as wrong at every
level: its category becomes as many levels as the true path has, none of them matching. Every entry of the log counts
(the evaluation reads them all, repeats included).

Category F1 is hierarchical and micro-averaged: per answer, the levels of the predicted and the true path (split at
" > ", each level stripped) match from the root up to the first difference; precision is the matched levels over
all predicted levels, recall over all true levels, both summed over the answers first; F1 = 2PR / (P + R).
accuracy.txt holds the line `{"f1": <F1>}` that the checker's F1_HIERARCHICAL pattern reads.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from ..common.benchmark_api import AccuracyResult, Metric
from ..common.errors import EXIT_FAILURE, UserError
from ..common.records.loadgen_log import read_accuracy_entries

SEPARATOR = " > "
METRIC = "F1_HIERARCHICAL"       # the checker's name for it (ACC_PATTERN, accuracy-target)
# The level an invalid answer's category is made of (the reference's padding: it matches no true level).
PAD = "<|__PRED_CATEGORY_PAD__|>"


@lru_cache(maxsize=1)
def _answer_model():
    from pydantic import BaseModel, ConfigDict

    class Answer(BaseModel):
        """The answer schema: category path, brand, second hand or not; nothing else."""

        model_config = ConfigDict(extra="forbid")
        category: str
        brand: str
        is_secondhand: bool

    return Answer


def predicted_category(answer: str) -> str | None:
    """The category of a valid answer, or None (an answer the schema does not validate)."""
    from pydantic import ValidationError

    try:
        return _answer_model().model_validate_json(answer).category
    except ValidationError:
        return None


def levels(path: str) -> list[str]:
    return [level.strip() for level in path.split(SEPARATOR)]


@dataclass(frozen=True)
class CategoryScore:
    matched: int          # levels matched from the root, summed
    predicted: int        # levels predicted, summed
    true: int             # true levels, summed
    answers: int
    invalid: int          # answers the schema does not validate

    @property
    def precision(self) -> float:
        return self.matched / self.predicted if self.predicted else 0.0

    @property
    def recall(self) -> float:
        return self.matched / self.true if self.true else 0.0

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def score_answers(answers: Sequence[str], truths: Sequence[str]) -> CategoryScore:
    """The category figures of `answers` against their true paths (pairwise)."""
    matched = predicted = true = invalid = 0
    for answer, truth in zip(answers, truths, strict=True):
        category = predicted_category(answer)
        truth_levels = levels(truth)
        if category is None:
            invalid += 1
            category = SEPARATOR.join([PAD] * len(truth_levels))
        guess = levels(category)
        for mine, theirs in zip(guess, truth_levels):
            if mine != theirs:
                break
            matched += 1
        predicted += len(guess)
        true += len(truth_levels)
    return CategoryScore(matched, predicted, true, len(answers), invalid)


def read_answers(accuracy_log: Path, samples: int) -> tuple[list[int], list[str]]:
    """(qsl_idx, answer text) of every entry of the log; UserError for a log that is missing or damaged, a sample
    outside the data set or a response that is not UTF-8 text."""
    if not Path(accuracy_log).is_file():
        raise UserError(f"Cannot score: {accuracy_log} is missing.", exit_code=EXIT_FAILURE)
    indices, answers = [], []
    for entry in read_accuracy_entries(accuracy_log):
        try:
            index, data = int(entry["qsl_idx"]), bytes.fromhex(entry["data"])
        except (KeyError, TypeError, ValueError) as error:
            raise UserError(f"{accuracy_log}: an entry is not LoadGen's {{qsl_idx, data}} ({error!r})",
                            exit_code=EXIT_FAILURE) from None
        if not 0 <= index < samples:
            raise UserError(f"{accuracy_log}: qsl_idx {index} is outside the data set's {samples} samples",
                            exit_code=EXIT_FAILURE)
        try:
            answers.append(data.decode("utf-8"))
        except UnicodeDecodeError as error:
            raise UserError(f"{accuracy_log}: the response of qsl_idx {index} is not UTF-8 text ({error}); this "
                            f"benchmark logs each answer's text.", exit_code=EXIT_FAILURE) from None
        indices.append(index)
    if not indices:
        raise UserError(f"{accuracy_log} holds no responses to score.", exit_code=EXIT_FAILURE)
    return indices, answers


def result_line(f1: float) -> str:
    """The line the evaluation writes into accuracy.txt and the checker's F1_HIERARCHICAL pattern reads."""
    return json.dumps({"f1": f1}, sort_keys=True)


def accuracy_result(score: CategoryScore, samples: int, note: str = "") -> AccuracyResult:
    lines = ["Results", "", result_line(score.f1), "",
             f"hierarchical precision {score.precision:.6f}, recall {score.recall:.6f}; {score.answers} answers, "
             f"{score.invalid} not valid JSON of the answer schema (scored wrong at every level)"]
    if note:
        lines.append(note)
    return AccuracyResult(metrics=(Metric(METRIC, score.f1, unit=""),), text="\n".join(lines), samples=samples)
