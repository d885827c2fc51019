"""From LoadGen's mlperf_log_accuracy.json to the figures: the responses as the two scripts read them.

Each entry's `data` is the hex of the generated token ids, int32 little-endian (both reference SUTs write that).
deepseek-r1's eval_accuracy.py counts a qsl_idx once (its first entry); gpt-oss-120b's eval_mlperf_accuracy.py
counts every entry. The caller's `decode` turns token ids into text: deepseek-r1's tokenizer WITHOUT special
tokens, gpt-oss-120b's WITH them (its extractors read the Harmony channel markers).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..common.errors import UserError
from ..llm.token_log import read_token_log
from .code_runner import Limits
from .scoring import DEEPSEEK, GPT_OSS, ReasoningScore, score_deepseek, score_gpt_oss

TOKEN_DTYPE = np.dtype("<i4")
FIRST_ENTRY_ONLY = {DEEPSEEK: True, GPT_OSS: False}


@dataclass(frozen=True)
class Response:
    qsl_idx: int
    token_ids: tuple[int, ...]


def read_responses(accuracy_log: Path, sample_count: int, *, first_entry_only: bool) -> list[Response]:
    """The log's responses in log order; UserError for an entry that is not LoadGen's, or names a sample
    outside the data set's `sample_count`."""
    log = read_token_log(accuracy_log, sample_count, "int32", first_entry_only)
    return [Response(index, tuple(int(t) for t in ids)) for index, ids in zip(log.qsl_indices, log.token_ids)]


def score_accuracy_log(benchmark: str, accuracy_log: Path, rows: Sequence[Mapping[str, Any]],
                       decode: Callable[[Sequence[int]], str], *,
                       lcb_problems: Mapping[str, Mapping[str, Any]] | None = None, limits: Limits = Limits(),
                       workers: int | None = None) -> ReasoningScore:
    """`benchmark`'s (gpt-oss-120b or deepseek-r1) figures for an accuracy log; `rows` is the whole data set in
    QSL order."""
    if benchmark not in FIRST_ENTRY_ONLY:
        raise UserError(f"No reasoning scorer for {benchmark!r}; known: {', '.join(FIRST_ENTRY_ONLY)}.")
    responses = read_responses(accuracy_log, len(rows), first_entry_only=FIRST_ENTRY_ONLY[benchmark])
    scorer = score_deepseek if benchmark == DEEPSEEK else score_gpt_oss
    return scorer([rows[r.qsl_idx] for r in responses], [decode(r.token_ids) for r in responses],
                  [len(r.token_ids) for r in responses], lcb_problems=lcb_problems, limits=limits, workers=workers)
