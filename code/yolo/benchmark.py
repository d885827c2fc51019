"""Benchmark yolo behind `code.common.benchmark_api.Benchmark`: COCO object detection, scored by mAP.

Models: `yolov11l` (closed division, the MLPerf reference the user brings) and `nanodet-m` (open division, kept
beside the repository). Data sets: `coco_safe` (MLPerf's 1525 license-filtered COCO 2017 validation images, the
user's) and `coco_mini` (158 COCO 2017 validation images, for development and CI).
Each sample's response in the accuracy log is float32 records `[qsl_idx, ymin, xmin, ymax, xmax, score,
category_id]`, one per detected object (none for an image without any), as the reference yolo_loadgen.py writes
them and accuracy-coco.py reads them.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..common.benchmark_api import (AccuracyResult, DatasetSpec, ModelSpec, PackagedBenchmark, Postprocess,
                                    ResponseFormat, Responses)
from ..common.config_registry import PerCore
from ..common.errors import EXIT_FAILURE, UserError
from ..common.paths import Paths
from ..common.preprocessed_store import preprocess_hint
from . import datasets as _datasets
from . import models as _models
from .postprocessing import FIELDS

# Mean detections per image of nanodet-m on coco_mini (score > 0.05 per class, at most 100 per image): 97.7.
TYPICAL_DETECTIONS = 98


class YoloBenchmark(PackagedBenchmark):
    """Calibration samples are images of the evaluation set (datasets.calibration_indices names the lists)."""

    package = "code.yolo"
    name = "yolo"
    models: Mapping[str, ModelSpec] = _models.MODELS
    datasets: Mapping[str, DatasetSpec] = _datasets.DATASETS
    response = ResponseFormat(dtype="float32", fields=FIELDS, records_per_sample=None,
                              typical_records=TYPICAL_DETECTIONS)
    # NanoDet-m is ~120 times lighter than the configs' YOLOv11l: its own Offline rate (measured: 29 to 31
    # samples/s per single-threaded instance on a Xeon core), so that a short run lasts as long as planned.
    embedded_default: Mapping[str, Any] = {"model": "nanodet-m", "dataset": "coco_mini",
                                           "offline_expected_qps": PerCore(30.0)}

    def prepared_size(self, model: str, dataset: str, paths: Paths) -> int | None:
        """Samples of the preprocessed set as its manifest counts them (a partial set is labelled a subset)."""
        return self._module("preprocessing").prepared_size(model, dataset, paths)

    def postprocessor(self, model: str, samples) -> Postprocess:
        """Decode a batch's outputs and pack each image's detections. The letterboxed model needs each image's
        original size, read once from the preprocessed set's map."""
        from .postprocessing import responses

        needs_size = _models.facts(model).needs_image_size   # unknown model -> UserError before the run starts
        decode = _models.decoder(model)
        heights = np.asarray(samples.heights) if needs_size else None
        widths = np.asarray(samples.widths) if needs_size else None

        def postprocess(outputs: Sequence[np.ndarray], indices: np.ndarray) -> Responses:
            indices = np.asarray(indices, dtype=np.int64).reshape(-1)
            sizes = (heights[indices], widths[indices]) if needs_size else ((), ())
            detections = decode(outputs, *sizes)
            if len(detections) != len(indices):
                raise ValueError(f"{model}: the outputs hold {len(detections)} images, the batch {len(indices)}")
            return Responses.pieces(responses(detections, indices))

        return postprocess

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        """mAP as accuracy-coco.py computes it, with the QSL order of the preprocessed set."""
        from .accuracy import score_accuracy_log

        annotations = _datasets.annotation_file(dataset, paths)
        if not annotations.is_file():
            raise UserError(f"Cannot score {accuracy_log}: the annotations of {dataset} ({annotations}) are missing. "
                            f"Run `{_datasets.download_hint(dataset)}`.", exit_code=EXIT_FAILURE)
        by_id = {image.id: image for image in _datasets.annotation_images(annotations)}
        ids = self.preprocessed(model, dataset, paths).image_ids
        unknown = [int(i) for i in ids if int(i) not in by_id]
        if unknown:
            raise UserError(f"The preprocessed {dataset} holds images that {annotations} does not list (first id: "
                            f"{unknown[0]}). Run `{preprocess_hint(self.name, model, dataset)}` again.",
                            exit_code=EXIT_FAILURE)
        return score_accuracy_log(accuracy_log, [by_id[int(i)] for i in ids], annotations).result


BENCHMARK = YoloBenchmark()
