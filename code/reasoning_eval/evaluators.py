"""Which extractor and which check each sub-data set gets, per benchmark, as the scripts' DATASET_EVALUATORS
tables say: the first key (in table order) contained in the lower-cased `dataset` name wins, e.g. `aime1983` and
`aime25` -> aime, `gpqa_diamond` -> gpqa, `livecodebench_v6` -> livecodebench. A name that contains no key has no
evaluator (the scripts stop with an error)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, Callable

from ..common.errors import EXIT_FAILURE, UserError
from . import extract

CHOICE, AIME, MATH, CODE = "multiple choice", "aime", "math", "code"
GPQA_OPTIONS, MMLU_OPTIONS = "ABCD", "ABCDEFGHIJ"


@dataclass(frozen=True)
class Evaluator:
    key: str                                 # matched as a substring of the lower-cased data set name
    extract: Callable[[Any], Any]            # model text -> extracted answer or None
    check: str                               # CHOICE, AIME, MATH or CODE
    options: str = ""                        # CHOICE: the valid letters


def _choices(parser: Callable[..., str | None], last: str) -> Callable[[Any], str | None]:
    return partial(parser, last_option=last)


def deepseek_evaluators() -> tuple[Evaluator, ...]:
    """language/deepseek-r1/eval_accuracy.py's table."""
    return (
        Evaluator("gpqa", _choices(extract.deepseek_multiple_choice, "D"), CHOICE, GPQA_OPTIONS),
        Evaluator("mmlu_pro", _choices(extract.deepseek_multiple_choice, "J"), CHOICE, MMLU_OPTIONS),
        Evaluator("math500", extract.boxed_answer, MATH),
        Evaluator("aime", extract.aime_answer, AIME),
        Evaluator("livecodebench", extract.deepseek_code, CODE),
    )


def gpt_oss_evaluators() -> tuple[Evaluator, ...]:
    """language/gpt-oss-120b/eval_accuracy.py's table (its last entry, plain `mmlu`, after livecodebench)."""
    return (
        Evaluator("gpqa", _choices(extract.gpt_oss_multiple_choice, "D"), CHOICE, GPQA_OPTIONS),
        Evaluator("mmlu_pro", _choices(extract.gpt_oss_multiple_choice, "J"), CHOICE, MMLU_OPTIONS),
        Evaluator("math500", extract.boxed_answer, MATH),
        Evaluator("aime", extract.aime_answer, AIME),
        Evaluator("livecodebench", extract.gpt_oss_code, CODE),
        Evaluator("mmlu", _choices(extract.gpt_oss_multiple_choice, "J"), CHOICE, MMLU_OPTIONS),
    )


def evaluator_for(dataset: Any, table: tuple[Evaluator, ...], benchmark: str) -> Evaluator:
    name = str(dataset).lower() if dataset is not None else ""
    if not name:
        raise UserError(f"{benchmark}: a row has no `dataset` name", exit_code=EXIT_FAILURE)
    for evaluator in table:
        if evaluator.key in name:
            return evaluator
    raise UserError(f"{benchmark}: no evaluator for data set {dataset!r}; the official script knows names "
                    f"containing {', '.join(e.key for e in table)}", exit_code=EXIT_FAILURE)


def check_choice(extracted: Any, ground_truth: Any, options: str) -> bool:
    """evaluate_multiple_choice: both present, the letter one of `options` and equal, upper-cased."""
    if not extracted or not ground_truth:
        return False
    letter = str(extracted).upper()
    return letter in options and letter == str(ground_truth).upper()


def check_aime(extracted: Any, ground_truth: Any) -> bool:
    """evaluate_aime: int(extracted) == int(ground_truth); False where the ground truth is no integer."""
    if extracted is None:
        return False
    try:
        return int(extracted) == int(ground_truth)
    except (ValueError, TypeError):
        return False


def check_math(extracted: Any, ground_truth: Any) -> bool:
    """evaluate_math500: PRM800K's grade_answer on the stripped answer and the ground truth as text."""
    from .math_grader import grade_answer

    if not extracted or not ground_truth:
        return False
    answer = str(extracted).strip()
    return bool(answer) and grade_answer(answer, str(ground_truth))
