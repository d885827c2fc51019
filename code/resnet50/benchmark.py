"""Benchmark resnet50 behind `code.common.benchmark_api.Benchmark`: ImageNet top-1 classification.

Models: `resnet50_v1.5` (closed division, the MLPerf reference ONNX the user brings) and `mobilenet_v2`
(open division, from PyPI). Data sets: `imagenet` (the user's), `imagenet_sample`, `foolbox20`.
Responses in the accuracy log are one int32 per sample: the model's raw class id; the scorer subtracts
the model's label offset (1 for the reference model, whose class 0 is "background").
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Mapping, Sequence

import numpy as np

from ..common.benchmark_api import AccuracyResult, DatasetSpec, Log, ModelSpec, Postprocess, ResponseFormat, Responses
from ..common.paths import Paths
from . import datasets as _datasets
from . import models as _models


class ResNet50Benchmark:
    name = "resnet50"
    models: Mapping[str, ModelSpec] = _models.MODELS
    datasets: Mapping[str, DatasetSpec] = _datasets.DATASETS
    response = ResponseFormat(dtype="int32", fields=("class_id",), records_per_sample=1)
    embedded_default: Mapping[str, str] = {"model": "mobilenet_v2", "dataset": "foolbox20"}

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        return _models.download_model(model, paths, log)

    def download_data(self, dataset: str, paths: Paths, log: Log) -> Path:
        return _datasets.download_data(dataset, paths, log)

    def preprocess(self, model: str, dataset: str, paths: Paths, log: Log):
        from .preprocessing import preprocess

        return preprocess(model, dataset, paths, log)

    def preprocessed(self, model: str, dataset: str, paths: Paths):
        from .preprocessing import preprocessed

        return preprocessed(model, dataset, paths)

    def calibration_indices(self, dataset: str, count: int, paths: Paths) -> Sequence[int]:
        return _datasets.calibration_indices(dataset, count, paths)

    def calibration_samples(self, model: str, dataset: str, count: int, paths: Paths) -> Iterator[np.ndarray]:
        """Preprocessed calibration tensors (one CHW sample each), in calibration-list order.

        MLPerf's ImageNet calibration list (cal_image_list_option_1.txt) names 500 *validation* images,
        so every calibration sample is also a sample of the preprocessed set, and this is simply
        `calibration_indices` loaded from `preprocessed(model, dataset)`. Engine builders call this so a
        benchmark whose calibration data lies outside its evaluation set can supply it another way.
        """
        images = self.preprocessed(model, dataset, paths)
        for index in self.calibration_indices(dataset, count, paths):
            yield images.load(index)

    def postprocessor(self, model: str, samples) -> Postprocess:
        _models.facts(model)   # unknown model -> UserError before the run starts
        return lambda outputs, indices: Responses.rows(_models.postprocess(model, outputs))

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        from .accuracy import score_accuracy_log

        labels = self.preprocessed(model, dataset, paths).labels
        return score_accuracy_log(accuracy_log, labels, _models.facts(model).label_offset, self.response.np_dtype)


BENCHMARK = ResNet50Benchmark()
