"""The query sample library: the performance sample set held in memory, per named input, gathered into batches."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

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
        self.load_token = 0     # counts LoadGen's loads: which copy of the performance set a batch is from
        # Called after every load with the whole loaded set as one PendingBatch (e.g. to upload it to the GPUs).
        self.after_load: list[Callable[["PendingBatch"], None]] = []

    def load(self, indices: Sequence[int]) -> None:
        indices = list(indices)
        data = stack_samples(self.samples, indices, self.inputs) if indices else None
        with self._lock:
            self._slot[:] = -1
            self._set(data)
            self.load_token += 1
            token = self.load_token
            if data is not None:
                self._slot[indices] = np.arange(len(indices))
        if data is not None:
            loaded = PendingBatch(self, np.asarray(indices), np.arange(len(indices)), token)
            for listener in self.after_load:
                listener(loaded)

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
        memory buffers the batch goes to) for the inputs it holds, which must be of fixed shape. Samples of fixed
        shape that lie one after another in the loaded set (a batch of one; an Offline batch, LoadGen issuing the
        set in its order) are read-only views of it, not copies, as the native core hands them over."""
        slots = self._slot[indices]
        if slots.min() < 0:
            missing = np.asarray(indices)[slots < 0][:5].tolist()
            raise RuntimeError(f"samples {missing} were issued but not loaded by LoadGen")
        if out is None and self._rows:           # the common case, inline: it runs once per batch
            first, count = int(slots[0]), len(slots)
            adjacent = int(slots[-1]) - first == count - 1 and (count == 1 or bool((np.diff(slots) == 1).all()))
            batch = {}
            for name, rows in self._rows:
                if adjacent:
                    batch[name] = rows[first:first + count]
                    batch[name].flags.writeable = False      # the loaded set itself: a backend only reads it
                else:
                    batch[name] = rows[slots]
            return batch
        return {spec.name: gather_input(self._data[spec.name], slots, spec, (out or {}).get(spec.name))
                for spec in self.inputs}

    def pending(self, indices: np.ndarray) -> "PendingBatch":
        """The samples at `indices` as a batch not gathered yet (see PendingBatch)."""
        slots = self._slot[indices]
        if slots.min() < 0:
            missing = np.asarray(indices)[slots < 0][:5].tolist()
            raise RuntimeError(f"samples {missing} were issued but not loaded by LoadGen")
        return PendingBatch(self, np.asarray(indices), slots, self.load_token)


class PendingBatch(Mapping[str, np.ndarray]):
    """A batch by sample, for a backend with buffers of its own (TensorRT's pinned memory): `gather_into` writes
    the samples straight into them, so that a sample is copied once on the host; `slots` and `stacked` say where
    they are in the loaded performance set, for a backend that keeps that set on the GPU. Read by name
    (`batch[name]`), it is gathered as `SampleLibrary.gather` would."""

    def __init__(self, library: SampleLibrary, indices: np.ndarray, slots: np.ndarray, load_token: int) -> None:
        self._library, self._indices, self.slots, self.load_token = library, indices, slots, load_token
        self.count = len(indices)
        self._gathered: dict[str, np.ndarray] | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        if self._gathered is None:
            self._gathered = self._library.gather(self._indices)
        return self._gathered[name]

    def __iter__(self) -> Iterator[str]:
        return iter(spec.name for spec in self._library.inputs)

    def __len__(self) -> int:
        return len(self._library.inputs)

    def gather_into(self, out: Mapping[str, np.ndarray]) -> set[str]:
        """Write the inputs of fixed shape whose stored type is `out`'s into `out[name][:count]`; the names written
        (the others are read by name and converted by the caller)."""
        data, written = self._library._data or {}, set()
        for spec in self._library.inputs:
            stacked, target = data.get(spec.name), out.get(spec.name)
            if stacked is None or target is None or stacked.extents is not None:
                continue
            if stacked.data.dtype == target.dtype and stacked.data.shape[1:] == target.shape[1:]:
                np.take(stacked.data, self.slots, axis=0, out=target[:self.count])
                written.add(spec.name)
        return written

    def stacked(self, name: str) -> np.ndarray:
        """Every loaded sample of input `name`, in slot order (fixed-shape inputs only)."""
        stacked = (self._library._data or {}).get(name)
        if stacked is None or stacked.extents is not None:
            raise RuntimeError(f"input {name} has samples of varying shape: start_from_device keeps only inputs of "
                               "one shape on the GPU")
        return stacked.data
