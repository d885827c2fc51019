"""Named inputs: a sample as {input name: array}, a set of samples stacked per input, and batches gathered from it
with varying axes padded as the model declares (benchmark_api.Padding).

Both sample libraries (harness/qsl.py and the native core's, native/src/core/sample_library.cc) keep a set the same
way: per input, one array of the samples with each varying axis at the set's longest, the rest padded with the
input's pad value, and each sample's own shape beside it. A batch then takes each varying axis at the size the
padding rule gives for the batch's longest sample, so both libraries hand a backend the same batches.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from .benchmark_api import PreprocessedSet, Sample, TensorSpec


def named_sample(sample: Sample, inputs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """`sample` as {input name: array} in the model's input order: a mapping holding exactly the declared inputs, or
    a single-input model's one array. ValueError naming what is missing, extra, or of another dtype or shape."""
    if not isinstance(sample, Mapping):
        if len(inputs) != 1:
            raise ValueError(f"a sample of a model of {len(inputs)} inputs must be a mapping of "
                             f"{', '.join(spec.name for spec in inputs)}, not one array")
        sample = {inputs[0].name: sample}
    if set(sample) != {spec.name for spec in inputs}:
        raise ValueError(f"the sample holds input(s) {', '.join(sample) or 'none'}, the model declares "
                         f"{', '.join(spec.name for spec in inputs)}")
    named = {}
    for spec in inputs:
        array = named[spec.name] = np.asarray(sample[spec.name])
        if array.dtype != np.dtype(spec.dtype) or array.ndim != len(spec.shape) or any(
                size is not None and size != found for size, found in zip(spec.shape, array.shape, strict=True)):
            raise ValueError(f"input {spec.name!r} of the sample is {array.dtype} {list(array.shape)}, the model "
                             f"declares {spec.dtype} {[size if size is not None else 'any' for size in spec.shape]}")
    return named


@dataclass(frozen=True)
class StackedInput:
    """One input of a set of samples: `data` holds them one after another, each varying axis at the set's longest
    (padded with the pad value); `extents` each sample's own shape (samples x dimensions), None where all have the
    shape of `data`'s rows."""

    data: np.ndarray
    extents: np.ndarray | None

    def __len__(self) -> int:
        return len(self.data)


def stack_samples(samples: PreprocessedSet, indices: Sequence[int],
                  inputs: Sequence[TensorSpec]) -> dict[str, StackedInput]:
    """The samples at `indices`, stacked per input. An input whose samples share one shape is filled one sample at
    a time into one array (the set is in memory once, never also as a list of samples); one whose samples vary is
    padded to the longest, as its model declares (ValueError for a model that declares no padding)."""
    indices = [int(i) for i in indices]
    if not indices:
        raise ValueError("no samples to stack")
    fixed: dict[str, np.ndarray] = {}
    varying: dict[str, list[np.ndarray]] = {}
    for slot, index in enumerate(indices):
        sample = named_sample(samples.load(index), inputs)
        for spec in inputs:
            array = sample[spec.name]
            stacked = fixed.get(spec.name)
            if slot == 0 and spec.padding is None:
                stacked = fixed[spec.name] = np.empty((len(indices), *array.shape), dtype=array.dtype)
            elif stacked is not None and array.shape != stacked.shape[1:]:
                raise ValueError(f"a batch needs samples of one shape of input {spec.name!r}, which declares no "
                                 f"padding; sample {index} is {array.shape}, sample {indices[0]} "
                                 f"{stacked.shape[1:]}")
            if stacked is not None:
                stacked[slot] = array
            else:
                varying.setdefault(spec.name, []).append(array)
    result = {name: StackedInput(data, None) for name, data in fixed.items()}
    for spec in inputs:
        if spec.name in varying:
            result[spec.name] = _padded(varying[spec.name], spec)
    return {spec.name: result[spec.name] for spec in inputs}


def _padded(arrays: list[np.ndarray], spec: TensorSpec) -> StackedInput:
    extents = np.array([array.shape for array in arrays], dtype=np.int64).reshape(len(arrays), len(spec.shape))
    longest = tuple(int(size) for size in extents.max(axis=0)) if len(arrays) else tuple(0 for _ in spec.shape)
    data = np.full((len(arrays), *longest), spec.padding.value, dtype=spec.dtype)
    for row, array in zip(data, arrays, strict=True):
        row[tuple(slice(0, size) for size in array.shape)] = array
    return StackedInput(data, extents)


def gather_input(stacked: StackedInput, slots: np.ndarray, spec: TensorSpec, out: np.ndarray | None = None
                 ) -> np.ndarray:
    """The rows `slots` of one stacked input as a batch: varying axes at the size the padding rule gives for the
    batch's longest sample. Written into `out` (e.g. a shared memory buffer) where given, for a fixed-shape input."""
    if stacked.extents is None:
        return stacked.data[slots] if out is None else np.take(stacked.data, slots, axis=0, out=out)
    longest = stacked.extents[slots].max(axis=0)
    target = [spec.padding.size(int(longest[axis])) if size is None else size for axis, size in enumerate(spec.shape)]
    batch = stacked.data[slots][(slice(None), *(slice(0, size) for size in target))]
    short = [(0, 0)] + [(0, max(0, size - have)) for size, have in zip(target, batch.shape[1:], strict=True)]
    if any(after for _, after in short):
        batch = np.pad(batch, short, constant_values=np.array(spec.padding.value, dtype=spec.dtype))
    return np.ascontiguousarray(batch)


def stack_batch(samples: Sequence[Mapping[str, np.ndarray]], inputs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """Named samples as one batch per input, padded as the model declares (what a calibrator is fed)."""
    batch = {}
    everything = np.arange(len(samples))
    for spec in inputs:
        arrays = [sample[spec.name] for sample in samples]
        if spec.padding is None:
            batch[spec.name] = np.stack(arrays)
        else:
            batch[spec.name] = gather_input(_padded(arrays, spec), everything, spec)
    return batch


def warmup_inputs(inputs: Sequence[TensorSpec], size: int) -> dict[str, np.ndarray]:
    """Zeros for a batch of `size`, each varying axis at its smallest bucket (1 without buckets): what warms a
    runtime up before a run."""
    def axis(length: int | None, spec: TensorSpec) -> int:
        if length is not None:
            return length
        return min(spec.padding.buckets) if spec.padding is not None and spec.padding.buckets else 1
    return {spec.name: np.zeros((size, *(axis(length, spec) for length in spec.shape)), dtype=spec.dtype)
            for spec in inputs}
