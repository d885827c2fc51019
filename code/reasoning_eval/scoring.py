"""The accuracy figures of gpt-oss-120b and deepseek-r1, computed as the round's evaluation scripts compute them,
and the accuracy.txt text whose lines the submission checker reads.

Both take the data set rows of the samples scored (mappings with `dataset` and `ground_truth`; for LiveCodeBench
the ground truth is the `question_id`, and the row or `lcb_problems[question_id]` may carry the problem's
code_generation_lite columns, see lcb_tests.py), the model's texts in the same order, and their output token
counts.

- gpt-oss-120b (language/gpt-oss-120b/eval_mlperf_accuracy.py): texts decoded WITH the special tokens (the
  Harmony channel markers are what its extractors look for); every log entry counts (no de-duplication).
  Per data set (lower-cased name) correct/total; `final = sum(correct_d / repeats_d) / sum(total_d / repeats_d)
  x 100` with DATASET_REPEATS (aime25 8, gpqa_diamond 5, livecodebench_v6 3, others 1), printed for the checker
  as `'exact_match': <final, 3 decimals>`. The script prints no token count; the round's checker also bounds
  gpt-oss-120b's `tokens_per_sample` (at most 1.1 x 9999) where accuracy.txt has one, so it is printed too:
  the mean output token count, in deepseek-r1's form.
- deepseek-r1 (language/deepseek-r1/eval_accuracy.py): texts decoded WITHOUT special tokens; a log's repeated
  qsl_idx counts once (the first), which the caller does. `exact_match` = the mean of each row's 0 or 100,
  `tokens_per_sample` = the mean output token count, printed as the dict
  `{'exact_match': ..., 'tokens_per_sample': ..., 'num-samples': ...}`; `gt_output`, where a row has it, is
  the ground truth (as the script prefers that column).

The checker reads `.*'exact_match':\\s([\\d.]+).*` and `.*'tokens_per_sample':\\s([\\d.]+).*`
(submission_checker/constants.py, ACC_PATTERN); no other line of the text matches them.
"""
from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..common.benchmark_api import AccuracyResult, Metric
from ..common.errors import EXIT_FAILURE, UserError
from . import evaluators as ev
from .code_runner import Limits, run_solution
from .lcb_tests import problem_tests

GPT_OSS, DEEPSEEK = "gpt-oss-120b", "deepseek-r1"
# eval_mlperf_accuracy.py: how many times each item appears in the accuracy set.
DATASET_REPEATS = {"aime25": 8, "gpqa_diamond": 5, "livecodebench_v6": 3}


@dataclass(frozen=True)
class SampleVerdict:
    index: int                   # position in the rows given
    dataset: str
    extracted: Any               # the extractor's answer (None: nothing found)
    correct: bool
    detail: str = ""
    evaluated: bool = True       # an answer was extracted and there is a ground truth


@dataclass(frozen=True)
class DatasetScore:
    name: str                    # lower-cased, as the scripts group them
    correct: int
    total: int                   # rows of this data set
    evaluated: int               # rows with an extracted answer and a ground truth
    repeats: int = 1

    @property
    def accuracy(self) -> float:
        return self.correct / self.total * 100 if self.total else 0.0


@dataclass(frozen=True)
class ReasoningScore:
    benchmark: str
    exact_match: float           # the figure the checker holds to the target, in %
    tokens_per_sample: float
    samples: int
    datasets: tuple[DatasetScore, ...]
    verdicts: tuple[SampleVerdict, ...]
    notes: tuple[str, ...]       # what makes the figure differ from an official one (e.g. LCB tests used)
    text: str                    # accuracy.txt

    def accuracy_result(self) -> AccuracyResult:
        metrics = (Metric("exact_match", self.exact_match), Metric("TOKENS_PER_SAMPLE", self.tokens_per_sample, ""))
        return AccuracyResult(metrics=metrics, text=self.text, samples=self.samples)


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _check_inputs(benchmark: str, rows: Sequence[Mapping[str, Any]], texts: Sequence[Any],
                  counts: Sequence[int]) -> None:
    if not rows:
        raise UserError(f"{benchmark}: there is nothing to score: no samples.", exit_code=EXIT_FAILURE)
    if not len(rows) == len(texts) == len(counts):
        raise ValueError(f"{len(rows)} rows, {len(texts)} texts and {len(counts)} token counts: one each per sample")


def _grade(benchmark: str, table: tuple[ev.Evaluator, ...], rows: Sequence[Mapping[str, Any]],
           texts: Sequence[Any], truth_column: str, lcb_problems: Mapping[str, Mapping[str, Any]] | None,
           limits: Limits, workers: int) -> tuple[list[SampleVerdict], list[str]]:
    """Each row's verdict; the code rows run in the sandbox, `workers` at a time."""
    verdicts: list[SampleVerdict | None] = [None] * len(rows)
    code_jobs: list[tuple[int, str, str, Any]] = []
    notes: dict[str, str] = {}
    for index, (row, text) in enumerate(zip(rows, texts)):
        evaluator = ev.evaluator_for(row.get("dataset"), table, benchmark)
        dataset = str(row["dataset"]).lower()
        truth = row.get(truth_column, row.get("ground_truth"))
        extracted = evaluator.extract(text)
        if extracted is None or _missing(truth):
            why = "no answer extracted" if extracted is None else "no ground truth"
            verdicts[index] = SampleVerdict(index, dataset, extracted, False, why, evaluated=False)
        elif evaluator.check == ev.CODE:
            code_jobs.append((index, dataset, extracted, truth))
        else:
            if evaluator.check == ev.CHOICE:
                correct = ev.check_choice(extracted, truth, evaluator.options)
            elif evaluator.check == ev.AIME:
                correct = ev.check_aime(extracted, truth)
            else:
                correct = ev.check_math(extracted, truth)
            verdicts[index] = SampleVerdict(index, dataset, extracted, correct)

    def run(job: tuple[int, str, str, Any]) -> SampleVerdict:
        index, dataset, code, question_id = job
        if not code or not question_id:
            return SampleVerdict(index, dataset, code, False, "no code or no question_id")
        lcb_problem = (lcb_problems or {}).get(str(question_id))
        try:
            tests = problem_tests({**rows[index], "question_id": str(question_id)}, lcb_problem)
        except UserError as error:
            notes[f"none:{question_id}"] = f"LiveCodeBench {question_id}: no tests, counted as failed ({error})"
            return SampleVerdict(index, dataset, code, False, "no tests")
        if not tests.official:
            notes[f"src:{question_id}"] = f"LiveCodeBench {question_id}: graded on {tests.source}"
        outcome = run_solution(code, tests, limits)
        return SampleVerdict(index, dataset, code, outcome.passed, outcome.summary)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for verdict in pool.map(run, code_jobs):
            verdicts[verdict.index] = verdict
    return [v for v in verdicts if v is not None], [notes[k] for k in sorted(notes)]


def _dataset_scores(verdicts: Sequence[SampleVerdict], repeats: Mapping[str, int]) -> tuple[DatasetScore, ...]:
    names = sorted({v.dataset for v in verdicts})
    return tuple(DatasetScore(name, sum(v.correct for v in verdicts if v.dataset == name),
                              sum(1 for v in verdicts if v.dataset == name),
                              sum(1 for v in verdicts if v.dataset == name and v.evaluated),
                              repeats.get(name, 1)) for name in names)


def _default_workers() -> int:
    return max(1, min(8, os.cpu_count() or 1))


def gpt_oss_final_score(datasets: Sequence[DatasetScore]) -> tuple[float, float, float]:
    """(final score, max score, final %) as eval_mlperf_accuracy.py sums them, data sets in name order."""
    final = maximum = 0.0
    for dataset in sorted(datasets, key=lambda d: d.name):
        final += dataset.correct / dataset.repeats
        maximum += dataset.total / dataset.repeats
    return final, maximum, (final / maximum * 100 if maximum > 0 else 0.0)


def _notes_lines(notes: Sequence[str]) -> list[str]:
    return ["", "Notes:"] + [f"  {note}" for note in notes] if notes else []


def score_gpt_oss(rows: Sequence[Mapping[str, Any]], texts: Sequence[Any], output_token_counts: Sequence[int],
                  *, lcb_problems: Mapping[str, Mapping[str, Any]] | None = None, limits: Limits = Limits(),
                  workers: int | None = None) -> ReasoningScore:
    """gpt-oss-120b's accuracy as eval_mlperf_accuracy.py computes it (see the module's text)."""
    _check_inputs(GPT_OSS, rows, texts, output_token_counts)
    verdicts, notes = _grade(GPT_OSS, ev.gpt_oss_evaluators(), rows, texts, "ground_truth", lcb_problems, limits,
                             workers or _default_workers())
    datasets = _dataset_scores(verdicts, DATASET_REPEATS)
    final, maximum, percent = gpt_oss_final_score(datasets)
    correct = sum(d.correct for d in datasets)
    tokens = sum(int(c) for c in output_token_counts) / len(output_token_counts)
    raw = correct / len(rows) * 100
    lines = [f"gpt-oss-120b accuracy: {len(rows)} samples, raw {raw:.2f}% ({correct}/{len(rows)})",
             f"{'data set':25s} {'correct':>8s} {'total':>8s} {'repeats':>8s} {'score':>10s} {'accuracy':>10s}"]
    lines += [f"{d.name:25s} {d.correct:8d} {d.total:8d} {d.repeats:8d} {d.correct / d.repeats:10.2f} "
              f"{d.accuracy:9.2f}%" for d in datasets]
    lines += [f"final score = {' + '.join(f'{d.name}/{d.repeats}' for d in datasets)} = {final:.2f} of "
              f"{maximum:.2f} = {percent:.2f}%"]
    lines += _notes_lines(notes)
    lines += ["", f"'exact_match': {percent:.3f}", str({"tokens_per_sample": tokens, "num-samples": len(rows)})]
    return ReasoningScore(GPT_OSS, float(f"{percent:.3f}"), tokens, len(rows), datasets, tuple(verdicts),
                          tuple(notes), "\n".join(lines) + "\n")


def score_deepseek(rows: Sequence[Mapping[str, Any]], texts: Sequence[Any], output_token_counts: Sequence[int],
                   *, lcb_problems: Mapping[str, Mapping[str, Any]] | None = None, limits: Limits = Limits(),
                   workers: int | None = None) -> ReasoningScore:
    """deepseek-r1's accuracy as eval_accuracy.py computes it (see the module's text)."""
    _check_inputs(DEEPSEEK, rows, texts, output_token_counts)
    verdicts, notes = _grade(DEEPSEEK, ev.deepseek_evaluators(), rows, texts, "gt_output", lcb_problems, limits,
                             workers or _default_workers())
    exact_match = sum(100.0 if v.correct else 0.0 for v in verdicts) / len(verdicts)
    tokens = sum(int(c) for c in output_token_counts) / len(output_token_counts)
    datasets = _dataset_scores(verdicts, {})
    result = {"exact_match": float(exact_match), "tokens_per_sample": float(tokens), "num-samples": len(rows)}
    lines = ["Results", "", str(result), ""]
    lines += [f"{d.name} results: {d.correct}/{d.evaluated} correct of {d.total} samples "
              f"({d.correct / d.evaluated * 100 if d.evaluated else 0.0:.1f}% of those with an answer)"
              for d in datasets]
    lines += _notes_lines(notes)
    return ReasoningScore(DEEPSEEK, exact_match, tokens, len(rows), datasets, tuple(verdicts), tuple(notes),
                          "\n".join(lines) + "\n")

