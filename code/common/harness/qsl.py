"""The query sample library: the performance sample set held in memory, per named input, gathered into batches."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from ..benchmark_api import PreprocessedSet, Sample, TensorSpec
from ..named_inputs import StackedInput, gather_input, stack_samples
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

    def load(self, index: int) -> Sample:
        if not 0 <= index < self.count:
            raise IndexError(f"sample {index} is outside the first {self.count} samples")
        return self.samples.load(index)

    def capped(self, max_input_tokens: int) -> "FirstSamples":
        """The same cut of a prompt set whose prompts are capped (see the LLM benchmarks' PromptSet.capped)."""
        return FirstSamples(self.samples.capped(max_input_tokens), self.count)   # type: ignore[attr-defined]


def first_samples(samples: PreprocessedSet, count: int) -> PreprocessedSet:
    """`samples` itself when it has at most `count` samples, else a view of its first `count`."""
    return samples if len(samples) <= count else FirstSamples(samples, count)


class SampleLibrary(QSLBase):
    """Loads the samples LoadGen asks for, stacked per named input (named_inputs.stack_samples); `gather` builds a
    batch by index, {input name: array}, varying axes padded as the model declares."""

    def __init__(self, samples: PreprocessedSet, performance_count: int, inputs: Sequence[TensorSpec]) -> None:
        self.samples = samples
        self.inputs = tuple(inputs)
        self.total = len(samples)
        self.performance_count = min(performance_count, self.total)
        self._slot = np.full(self.total, -1, dtype=np.int64)
        self._data: dict[str, StackedInput] | None = None
        self._rows: list[tuple[str, np.ndarray]] = []
        self._lock = threading.Lock()

    def load(self, indices: Sequence[int]) -> None:
        indices = list(indices)
        data = stack_samples(self.samples, indices, self.inputs) if indices else None
        with self._lock:
            self._slot[:] = -1
            self._set(data)
            if data is not None:
                self._slot[indices] = np.arange(len(indices))

    def unload(self, indices: Sequence[int]) -> None:
        with self._lock:
            self._slot[list(indices)] = -1
            if not (self._slot >= 0).any():
                self._set(None)

    def _set(self, data: dict[str, StackedInput] | None) -> None:
        """Keep `data` (None: free the set); `_rows` holds (name, stacked samples) of every input when none has
        anything to pad, so that a batch is a plain pick of rows."""
        self._data = data
        self._rows = [] if data is None or any(s.extents is not None for s in data.values()) else \
            [(name, stacked.data) for name, stacked in data.items()]

    def gather(self, indices: Sequence[int] | np.ndarray, out: Mapping[str, np.ndarray] | None = None
               ) -> dict[str, np.ndarray]:
        """The samples at `indices` as one batch per input: new arrays, or written into `out`'s arrays (e.g. shared
        memory buffers the batch goes to) for the inputs it holds, which must be of fixed shape."""
        slots = self._slot[indices]
        if slots.min() < 0:
            missing = np.asarray(indices)[slots < 0][:5].tolist()
            raise RuntimeError(f"samples {missing} were issued but not loaded by LoadGen")
        if out is None and self._rows:           # the common case, inline: it runs once per batch
            batch = {}
            for name, rows in self._rows:
                batch[name] = rows[slots]
            return batch
        return {spec.name: gather_input(self._data[spec.name], slots, spec, (out or {}).get(spec.name))
                for spec in self.inputs}
