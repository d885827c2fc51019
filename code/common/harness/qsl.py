"""The query sample library: the performance sample set held in memory, gathered into batches."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..benchmark_api import PreprocessedSet
from .base import QSLBase


@dataclass(frozen=True)
class FirstSamples:
    """The first `count` samples of a preprocessed set (a development cap: total_sample_count)."""

    samples: PreprocessedSet
    count: int

    @property
    def directory(self):
        return self.samples.directory

    def __len__(self) -> int:
        return self.count

    def load(self, index: int) -> np.ndarray:
        if not 0 <= index < self.count:
            raise IndexError(f"sample {index} is outside the first {self.count} samples")
        return self.samples.load(index)

    def capped(self, max_input_tokens: int) -> "FirstSamples":
        """The same cut of a prompt set whose prompts are capped (see the LLM benchmarks' PromptSet.capped)."""
        return FirstSamples(self.samples.capped(max_input_tokens), self.count)   # type: ignore[attr-defined]


def first_samples(samples: PreprocessedSet, count: int) -> PreprocessedSet:
    """`samples` itself when it has at most `count` samples, else a view of its first `count`."""
    return samples if len(samples) <= count else FirstSamples(samples, count)


def stack_samples(samples: PreprocessedSet, indices: Sequence[int]) -> np.ndarray:
    """The samples at `indices` in one new contiguous array, filled one sample at a time (the set is in memory once,
    never also as a list of samples). All samples must have one shape."""
    indices = [int(i) for i in indices]
    first = samples.load(indices[0])
    data = np.empty((len(indices), *first.shape), dtype=first.dtype)
    data[0] = first
    for slot, index in enumerate(indices[1:], start=1):
        sample = samples.load(index)
        if sample.shape != first.shape:
            raise RuntimeError(f"a batch needs samples of one shape; sample {index} is {sample.shape}, sample "
                               f"{indices[0]} {first.shape}")
        data[slot] = sample
    return data


class SampleLibrary(QSLBase):
    """Loads the samples LoadGen asks for into one contiguous array; `gather` builds a batch by index."""

    def __init__(self, samples: PreprocessedSet, performance_count: int) -> None:
        self.samples = samples
        self.total = len(samples)
        self.performance_count = min(performance_count, self.total)
        self._slot = np.full(self.total, -1, dtype=np.int64)
        self._data: np.ndarray | None = None
        self._lock = threading.Lock()

    def load(self, indices: Sequence[int]) -> None:
        indices = list(indices)
        data = stack_samples(self.samples, indices) if indices else None
        with self._lock:
            self._slot[:] = -1
            if data is None:
                self._data = None
                return
            self._slot[indices] = np.arange(len(indices))
            self._data = data

    def unload(self, indices: Sequence[int]) -> None:
        with self._lock:
            self._slot[list(indices)] = -1
            if not (self._slot >= 0).any():
                self._data = None

    def gather(self, indices: Sequence[int] | np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """The samples at `indices` as one batch: a new array, or written into `out` (e.g. a shared memory
        buffer the batch goes to) and returned."""
        slots = self._slot[indices]
        if slots.min() < 0:
            missing = np.asarray(indices)[slots < 0][:5].tolist()
            raise RuntimeError(f"samples {missing} were issued but not loaded by LoadGen")
        return self._data[slots] if out is None else np.take(self._data, slots, axis=0, out=out)
