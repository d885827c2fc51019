"""What the generic harness needs from a benchmark: models, data sets, preprocessing, scoring.

Each benchmark package (code/resnet50/, ...) provides one `Benchmark` object. The harness, engine
builders and audit code talk to benchmarks only through this interface.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Mapping, Protocol, Sequence

import numpy as np

from .errors import UserError
from .paths import Paths

Log = Callable[[str], None]


@dataclass(frozen=True)
class ModelSpec:
    name: str                      # e.g. "mobilenet_v2", "resnet50_v1.5"
    description: str
    division: str                  # "closed" (the round's reference model) or "open"
    input_name: str
    input_shape: tuple[int, ...]   # one sample, e.g. (3, 224, 224)
    input_dtype: str               # numpy dtype name of the preprocessed tensors, e.g. "float32"
    # Facts for measurements.json of a submission.
    starting_weights_filename: str
    weight_transformations: str
    retraining: str = "No"
    # Values of the benchmark's response_dtype in one sample's response (typical, for variable-length ones):
    # what LoadGen writes per sample into the accuracy log, as hex. The run plan sizes that log from it.
    response_size: int = 1


@dataclass(frozen=True)
class DatasetSpec:
    name: str                      # e.g. "foolbox20", "imagenet_sample", "imagenet"
    description: str
    how_to_get: str                # one paragraph a person can follow
    sample_count: int | None = None   # samples of the whole set, known before it is downloaded (None: unknown)


@dataclass(frozen=True)
class AccuracyResult:
    metric: str                    # e.g. "top-1 accuracy (%)"
    value: float                   # in the metric's unit (e.g. percent)
    good: int
    total: int
    text: str                      # the exact accuracy.txt line, e.g. "accuracy=90.000%, good=18, total=20"


class PreprocessedSet(Protocol):
    """Preprocessed samples on disk, one file per sample, in QSL index order."""

    directory: Path

    def __len__(self) -> int: ...

    def load(self, index: int) -> np.ndarray: ...


class Benchmark(Protocol):
    name: str                                  # toolkit benchmark name, e.g. "resnet50"
    models: Mapping[str, ModelSpec]
    datasets: Mapping[str, DatasetSpec]
    response_dtype: np.dtype                   # dtype of each sample's response bytes in the accuracy log

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        """Make the model's ONNX file exist at paths.model_file(...) and return it."""

    def download_data(self, dataset: str, paths: Paths, log: Log) -> Path:
        """Make the raw data set available under paths.dataset_dir(dataset), or raise UserError saying how."""

    def preprocess(self, model: str, dataset: str, paths: Paths, log: Log) -> PreprocessedSet:
        """Write (or reuse, when up to date) the preprocessed tensors and map file."""

    def preprocessed(self, model: str, dataset: str, paths: Paths) -> PreprocessedSet:
        """Open preprocessed data; UserError naming `make preprocess_data` when it is missing or stale."""

    def calibration_indices(self, dataset: str, count: int, paths: Paths) -> Sequence[int]:
        """Indices (into the preprocessed set) of the calibration list for INT8 engines."""

    def calibration_samples(self, model: str, dataset: str, count: int, paths: Paths) -> Iterator[np.ndarray]:
        """Preprocessed calibration tensors (one sample each, no batch axis), in calibration-list order.

        What engine builders call: it also covers calibration data outside the evaluation set."""

    def postprocess(self, model: str, outputs: Sequence[np.ndarray]) -> np.ndarray:
        """Backend outputs of one batch -> one response row per sample, of `response_dtype`."""

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        """Score an mlperf_log_accuracy.json against the data set's labels."""


_IMPLEMENTATIONS = {"resnet50": "code.resnet50.benchmark:BENCHMARK"}


def get_benchmark(name: str) -> Benchmark:
    """The implementation of a benchmark, imported on first use."""
    try:
        module, _, attribute = _IMPLEMENTATIONS[name].partition(":")
    except KeyError:
        raise UserError(f"Benchmark '{name}' has no implementation in this toolkit yet; "
                        f"implemented: {', '.join(_IMPLEMENTATIONS)}.") from None
    return getattr(importlib.import_module(module), attribute)


def iter_batches(indices: Sequence[int], batch_size: int) -> Iterator[Sequence[int]]:
    for start in range(0, len(indices), batch_size):
        yield indices[start:start + batch_size]
