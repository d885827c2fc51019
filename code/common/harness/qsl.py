"""The query sample library: the performance sample set held in memory, gathered into batches."""
from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from ..benchmark_api import PreprocessedSet


class SampleLibrary:
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
        first = self.samples.load(indices[0]) if indices else None
        with self._lock:
            self._slot[:] = -1
            if first is None:
                self._data = None
                return
            data = np.empty((len(indices), *first.shape), dtype=first.dtype)
            data[0] = first
            for slot, index in enumerate(indices[1:], start=1):
                data[slot] = self.samples.load(index)
            self._slot[indices] = np.arange(len(indices))
            self._data = data

    def unload(self, indices: Sequence[int]) -> None:
        with self._lock:
            self._slot[list(indices)] = -1
            if not (self._slot >= 0).any():
                self._data = None

    def gather(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        slots = self._slot[indices]
        if slots.min() < 0:
            missing = np.asarray(indices)[slots < 0][:5].tolist()
            raise RuntimeError(f"samples {missing} were issued but not loaded by LoadGen")
        return self._data[slots]

    def construct(self):
        import mlperf_loadgen as lg

        return lg.ConstructQSL(self.total, self.performance_count, self.load, self.unload)
