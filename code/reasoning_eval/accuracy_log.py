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

from ..common.errors import EXIT_FAILURE, UserError
from ..common.records.loadgen_log import read_accuracy_entries
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
    responses: list[Response] = []
    seen: set[int] = set()
    for entry in read_accuracy_entries(accuracy_log):
        try:
            index, data = int(entry["qsl_idx"]), bytes.fromhex(entry["data"])
        except (KeyError, TypeError, ValueError) as error:
            raise UserError(f"{accuracy_log}: an entry is not LoadGen's {{qsl_idx, data}} ({error!r})",
                            exit_code=EXIT_FAILURE) from None
        if first_entry_only and index in seen:
            continue
        if not 0 <= index < sample_count:
            raise UserError(f"{accuracy_log}: qsl_idx {index} is outside the data set's {sample_count} samples",
                            exit_code=EXIT_FAILURE)
        if len(data) % TOKEN_DTYPE.itemsize:
            raise UserError(f"{accuracy_log}: the response of qsl_idx {index} is {len(data)} bytes, not a whole "
                            f"number of int32 token ids", exit_code=EXIT_FAILURE)
        seen.add(index)
        responses.append(Response(index, tuple(int(t) for t in np.frombuffer(data, TOKEN_DTYPE))))
    if not responses:
        raise UserError(f"{accuracy_log} holds no responses to score.", exit_code=EXIT_FAILURE)
    return responses


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
