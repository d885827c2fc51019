"""Token generation: what the LLM system under test drives, whatever runs the model.

A backend that runs a decoder (ONNX Runtime here, TensorRT on NVIDIA GPUs) gives a `Decoder`; the harness asks it
for a `DecodeBatch` per instance and runs continuous (in-flight) batching on it: new sequences are prefilled and
join between decode steps, each step advances every running sequence by one token, finished sequences leave at
once. Decoding is greedy (the reference runs temperature 0). Tokens are int64 numpy arrays throughout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np


@dataclass(frozen=True)
class GenerationSettings:
    """How the harness generates for one benchmark and model."""

    max_new_tokens: int                  # output tokens per sample at most (the reference: 128)
    eos_token_ids: tuple[int, ...]       # a sequence ends with the first of these (kept as its last output token)
    max_batch: int = 8                   # sequences decoded together per instance
    min_new_tokens: int = 1              # the reference's min_tokens
    # New sequences prefilled together when several wait: a larger value raises throughput, a smaller one keeps
    # the running sequences' time per output token low (their step waits for the prefill).
    prefill_batch: int = 1


class DecodeBatch(Protocol):
    """The sequences one instance generates together. Rows keep their order; new rows are appended at the end."""

    def __len__(self) -> int: ...

    def add(self, prompts: Sequence[np.ndarray]) -> np.ndarray:
        """Prefill `prompts` (1-D integer token arrays) and append them as new rows; return each one's first
        generated token (int64, one per prompt)."""

    def step(self) -> np.ndarray:
        """One decode step of every row, fed with the row's last generated token; return each row's next token
        (int64, one per row, in row order)."""

    def remove(self, rows: Sequence[int]) -> None:
        """Rows that finished leave and free their cache; the others keep their relative order."""

    def close(self) -> None: ...


class Decoder(Protocol):
    """A loaded decoder model (one per instance)."""

    vocab_size: int

    def new_batch(self) -> DecodeBatch: ...

    def close(self) -> None: ...
