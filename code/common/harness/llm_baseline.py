"""The bare greedy loop the LLM harness is measured against: same decoder, same batch size, no LoadGen.

Prompts go in fixed batches of `max_batch`: each batch is prefilled with one `add()`, then stepped until every
row is done. Finished rows are removed as they finish (the protocol makes that free), but no new prompt joins
until the whole batch is done. Removing them keeps the loop honest: a loop that kept stepping finished rows
would pay for tokens nobody reads, and the harness would look better than it is. The difference between this
loop and the harness is then what the harness adds: joining (continuous batching) and its per-step overhead.

The stopping rule is the harness's own (`llm_sut.finished`), so the outputs are token for token the harness's.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..generation import Decoder, GenerationSettings
from .batching_engine import finished


@dataclass(frozen=True)
class StaticResult:
    outputs: list[np.ndarray]   # each prompt's output tokens (int64, EOS kept as the last one), in prompt order
    tokens: int                 # output tokens in all
    seconds: float              # wall time of prefills and steps (making and closing the batch excluded)


def greedy_static(decoder: Decoder, prompts: Sequence[np.ndarray], settings: GenerationSettings) -> StaticResult:
    eos = np.asarray(settings.eos_token_ids, dtype=np.int64)
    outputs: list[np.ndarray] = [np.zeros(0, np.int64)] * len(prompts)
    batch = decoder.new_batch()
    seconds = 0.0
    try:
        for start in range(0, len(prompts), settings.max_batch):
            chunk = list(prompts[start:start + settings.max_batch])
            out = np.zeros((len(chunk), settings.max_new_tokens), np.int64)
            lengths = np.ones(len(chunk), np.int64)
            owner = np.arange(len(chunk))            # the chunk position of each running row
            t0 = time.perf_counter()
            tokens = np.asarray(batch.add(chunk), dtype=np.int64)
            out[:, 0] = tokens
            done = finished(tokens, lengths, eos, settings)
            while True:
                if done.any():
                    rows = np.flatnonzero(done)
                    for row in rows.tolist():
                        outputs[start + int(owner[row])] = out[owner[row], :lengths[owner[row]]].copy()
                    batch.remove(rows.tolist())
                    owner = owner[~done]
                if not len(owner):
                    break
                tokens = np.asarray(batch.step(), dtype=np.int64)
                out[owner, lengths[owner]] = tokens
                lengths[owner] += 1
                done = finished(tokens, lengths[owner], eos, settings)
            seconds += time.perf_counter() - t0
    finally:
        batch.close()
    return StaticResult(outputs, int(sum(len(o) for o in outputs)), seconds)
