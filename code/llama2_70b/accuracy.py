"""ROUGE and tokens per sample of llama2-70b-99.9, as the reference's evaluate-accuracy.py computes them.

As llama3.1-8b's evaluation.py (ROUGE of code/llm/rouge.py): the first response of each
qsl_idx, decoded with special tokens skipped, stripped and put one sentence a line, against the row's `output`;
rouge1, rouge2, rougeL, rougeLsum as the mean F-measure x 100 rounded to 4 places; gen_len the characters of the
postprocessed predictions and gen_num their count. evaluate-accuracy.py adds gen_tok_len, the generated tokens of
all scored responses, and tokens_per_sample = round(gen_tok_len / gen_num, 1), which the checkers hold within 10 %
of the reference's 294.45. It prints the figures as one dict: the checkers read `'rouge1': 44.43` and
`'tokens_per_sample': 294.4` from it.
"""
from __future__ import annotations

from typing import Any, Sequence

from ..common.benchmark_api import AccuracyResult, Metric
from ..llm.rouge import ROUGE_TYPES, score_outputs
from ..llm_tasks.items import TaskItem
from ..llm_tasks.responses import Outputs

METRIC_NAMES = {"rouge1": "ROUGE1", "rouge2": "ROUGE2", "rougeL": "ROUGEL", "rougeLsum": "ROUGELSUM"}


def scores(items: Sequence[TaskItem], outputs: Outputs) -> dict[str, Any]:
    figures = score_outputs(list(outputs.texts), [item.reference for item in items])
    gen_tok_len = int(sum(outputs.token_counts))
    figures.update(gen_tok_len=gen_tok_len, tokens_per_sample=round(gen_tok_len / figures["gen_num"], 1))
    return figures


def result(items: Sequence[TaskItem], outputs: Outputs) -> AccuracyResult:
    figures = scores(items, outputs)
    metrics = tuple(Metric(METRIC_NAMES[r], float(figures[r])) for r in ROUGE_TYPES) + (
        Metric("TOKENS_PER_SAMPLE", float(figures["tokens_per_sample"]), unit=""),
        Metric("GEN_LEN", float(figures["gen_len"]), unit=""), Metric("GEN_NUM", float(figures["gen_num"]), unit=""))
    printed = {r: float(figures[r]) for r in ROUGE_TYPES}
    printed.update(gen_len=int(figures["gen_len"]), gen_num=int(figures["gen_num"]),
                   gen_tok_len=int(figures["gen_tok_len"]), tokens_per_sample=float(figures["tokens_per_sample"]))
    lines = ["Results", "", str(printed),
             f"found {outputs.entries} results, {figures['gen_num']} samples, ignored {outputs.duplicates} dupes"]
    return AccuracyResult(metrics=metrics, text="\n".join(lines), samples=int(figures["gen_num"]))
