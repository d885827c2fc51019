"""Preprocessed detector inputs: one `<image file>.npy` (CHW float32) per image, in QSL order.

The folder also holds `samples.txt` (`<name>.npy <coco image id> <height> <width>`: each image's id in the
annotation file and its original size, which postprocessing needs to map boxes back) and `manifest.json`; how the
folder is written, checked and repaired is `code.common.preprocessed_store`'s (see there). The manifest records,
besides the model's preprocessing and input, the sha256 of the data set's annotation file.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..common.benchmark_api import Log
from ..common.errors import EXIT_FAILURE, UserError
from ..common.fileio import sha256_file
from ..common.paths import Paths
from ..common.preprocessed_store import (store_size, PreprocessedSamples, SourceSample, Store, open_store, output_name,
                                         write_store)
from .datasets import BENCHMARK, annotation_file, check_dataset, download_hint, image_dir, qsl_images
from .models import facts, preprocess_function

SAMPLE_MAP = "samples.txt"
COLUMNS = ("image_id", "height", "width")
FORMAT_VERSION = 1


class PreprocessedImages(PreprocessedSamples):
    """A `PreprocessedSet` that knows each image's COCO id and original height and width."""

    @property
    def image_ids(self) -> np.ndarray:
        return self.column("image_id")

    @property
    def heights(self) -> np.ndarray:
        return self.column("height")

    @property
    def widths(self) -> np.ndarray:
        return self.column("width")


def _store(model: str, dataset: str, paths: Paths, count: int | None = None) -> Store:
    """The preprocessed set of `model` on `dataset`; its sources are None when the raw data set is absent."""
    check_dataset(dataset)
    spec, annotations = facts(model).spec.inputs[0], annotation_file(dataset, paths)
    sources = None
    if annotations.is_file():
        count = len(qsl_images(dataset, paths)) if count is None else count
        sources = {"count": count, "source_annotations_sha256": sha256_file(annotations)}
    return Store(benchmark=BENCHMARK, model=model, dataset=dataset,
                 directory=paths.preprocessed_dir(BENCHMARK, model, dataset), map_name=SAMPLE_MAP, columns=COLUMNS,
                 shape=tuple(spec.shape), dtype=spec.dtype, preprocessing=facts(model).preprocessing,
                 format=FORMAT_VERSION, sources=sources, source_dir=paths.dataset_dir(dataset))


def preprocessed(model: str, dataset: str, paths: Paths) -> PreprocessedImages:
    """Open the preprocessed folder; UserError naming `make preprocess_data` when missing or stale."""
    return open_store(_store(model, dataset, paths), PreprocessedImages)


def preprocess(model: str, dataset: str, paths: Paths, log: Log) -> PreprocessedImages:
    """Write (or reuse, when the manifest matches) the preprocessed tensors of `model` on `dataset`."""
    images = qsl_images(dataset, paths)  # UserError naming `make download_data` when absent
    if not images:
        raise UserError(f"{dataset}: none of the images {annotation_file(dataset, paths)} lists is in "
                        f"{image_dir(dataset, paths)}. Run `{download_hint(dataset)}`.", exit_code=EXIT_FAILURE)
    function, folder = preprocess_function(model), image_dir(dataset, paths)
    sizes = {folder / image.file_name: (image.width, image.height) for image in images}

    def convert(path: Path) -> np.ndarray:
        from PIL import Image

        with Image.open(path) as image:
            if image.size != sizes[path]:
                raise ValueError(f"the image is {image.size[0]}x{image.size[1]}, the annotations say "
                                 f"{sizes[path][0]}x{sizes[path][1]} (width x height)")
            return function(image)

    samples = [SourceSample(folder / image.file_name, output_name(image.file_name),
                            (image.id, image.height, image.width)) for image in images]
    return write_store(_store(model, dataset, paths, len(images)), samples, convert, log, download_hint(dataset),
                       PreprocessedImages)


def prepared_size(model: str, dataset: str, paths: Paths) -> int | None:
    """Samples of the preprocessed set as its manifest counts them (None: not preprocessed yet)."""
    check_dataset(dataset)
    return store_size(paths.preprocessed_dir(BENCHMARK, model, dataset))
