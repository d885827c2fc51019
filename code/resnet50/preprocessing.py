"""Preprocessed ImageNet tensors: one `<image file>.npy` (CHW, the model's dtype) per image, in QSL order.

The folder also holds `val_map.txt` (`<name>.npy <label>`) and `manifest.json`; how the folder is written,
checked and repaired is `code.common.preprocessed_store`'s (see there). The manifest records, besides the
model's preprocessing and input, the sha256 of the data set's own val_map.txt: another source list means stale.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..common.benchmark_api import Log
from ..common.fileio import sha256_file
from ..common.paths import Paths
from ..common.engines.int8_input import write_int8_store
from ..common.preprocessed_store import (store_size, FILES, MANIFEST, PreprocessedSamples, SourceSample, Store, int8_store,
                                         open_store, output_name, preprocess_hint as _hint,
                                         write_store)
from .datasets import VAL_MAP, check_dataset, download_hint, parse_val_map, read_val_map
from .models import BENCHMARK, facts, preprocess_function

__all__ = ["FILES", "FORMAT_VERSION", "MANIFEST", "PreprocessedImages", "preprocess", "preprocess_hint",
           "preprocess_int8", "preprocessed", "preprocessed_int8"]

FORMAT_VERSION = 2  # bump when the file layout changes, so older folders read as stale (2: `files` digests)
INT8_HINT_ARGS = " --backend=tensorrt --precision=int8 --input_dtype=int8"   # what makes preprocess_data write it


def preprocess_hint(model: str, dataset: str) -> str:
    return _hint(BENCHMARK, model, dataset)


class PreprocessedImages(PreprocessedSamples):
    """A `PreprocessedSet` whose map holds one integer per image: its label (0..999)."""

    @property
    def labels(self) -> np.ndarray:
        return self.column("label")


def _store(model: str, dataset: str, paths: Paths) -> Store:
    """The preprocessed set of `model` on `dataset`; its sources are None when the raw data set is absent."""
    check_dataset(dataset)
    spec, source = facts(model).spec.inputs[0], paths.dataset_dir(dataset) / VAL_MAP
    sources = None
    if source.is_file():
        sources = {"count": len(parse_val_map(source)), "source_val_map_sha256": sha256_file(source)}
    return Store(benchmark=BENCHMARK, model=model, dataset=dataset,
                 directory=paths.preprocessed_dir(BENCHMARK, model, dataset), map_name=VAL_MAP, columns=("label",),
                 shape=tuple(spec.shape), dtype=spec.dtype, preprocessing=facts(model).preprocessing,
                 format=FORMAT_VERSION, sources=sources, source_dir=paths.dataset_dir(dataset))


def preprocessed(model: str, dataset: str, paths: Paths) -> PreprocessedImages:
    """Open the preprocessed folder; UserError naming `make preprocess_data` when missing or stale."""
    return open_store(_store(model, dataset, paths), PreprocessedImages)


def preprocess(model: str, dataset: str, paths: Paths, log: Log) -> PreprocessedImages:
    """Write (or reuse, when the manifest matches) the preprocessed tensors of `model` on `dataset`."""
    entries = read_val_map(dataset, paths)  # UserError naming `make download_data` when absent
    source_dir = paths.dataset_dir(dataset)
    function = preprocess_function(model)

    def convert(path: Path) -> np.ndarray:
        from PIL import Image

        with Image.open(path) as image:
            return function(image)

    samples = [SourceSample(source_dir / name, output_name(name), (label,)) for name, label in entries]
    return write_store(_store(model, dataset, paths), samples, convert, log, download_hint(dataset),
                       PreprocessedImages)


def preprocessed_int8(model: str, dataset: str, paths: Paths, scale: float) -> PreprocessedImages:
    """Open the int8 form of the preprocessed set (quantized with `scale`: engines/int8_input.py); UserError naming
    the make preprocess_data command that writes it when missing or made with another scale."""
    return open_store(int8_store(_store(model, dataset, paths), scale, INT8_HINT_ARGS), PreprocessedImages)


def preprocess_int8(model: str, dataset: str, paths: Paths, scale: float, log: Log) -> PreprocessedImages:
    """Write (or reuse) the int8 form of the preprocessed set: each float sample quantized once with `scale`
    (150 kB a 3x224x224 image instead of 602 kB)."""
    float_set = preprocessed(model, dataset, paths)
    store = int8_store(_store(model, dataset, paths), scale, INT8_HINT_ARGS)
    return write_int8_store(float_set, store, scale, log, PreprocessedImages)


def prepared_size(model: str, dataset: str, paths: Paths) -> int | None:
    """Samples of the data set as its val_map.txt lists them, else as the preprocessed set's manifest counts them
    (None: neither is there)."""
    store = _store(model, dataset, paths)
    return store.sources["count"] if store.sources is not None else store_size(store.directory)
