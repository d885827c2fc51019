"""Benchmark resnet50 behind `code.common.benchmark_api.Benchmark`: ImageNet top-1 classification.

Models: `resnet50_v1.5` (closed division, the MLPerf reference ONNX the user brings) and `mobilenet_v2`
(open division, from PyPI). Data sets: `imagenet` (the user's), `imagenet_sample`, `foolbox20`.
Responses in the accuracy log are one int32 per sample: the model's raw class id; the scorer subtracts
the model's label offset (1 for the reference model, whose class 0 is "background").
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from ..common.benchmark_api import (AccuracyResult, DatasetSpec, ModelSpec, PackagedBenchmark, Postprocess,
                                    ResponseFormat, Responses)
from ..common.paths import Paths
from . import datasets as _datasets
from . import models as _models


class ResNet50Benchmark(PackagedBenchmark):
    """MLPerf's ImageNet calibration list (cal_image_list_option_1.txt) names 500 *validation* images, so every
    calibration sample is also a sample of the preprocessed set (PackagedBenchmark.calibration_samples)."""

    package = "code.resnet50"
    int8_inputs = True                   # preprocessing.preprocess_int8 / preprocessed_int8
    name = "resnet50"
    models: Mapping[str, ModelSpec] = _models.MODELS
    datasets: Mapping[str, DatasetSpec] = _datasets.DATASETS
    response = ResponseFormat(dtype="int32", fields=("class_id",), records_per_sample=1)
    embedded_default: Mapping[str, str] = {"model": "mobilenet_v2", "dataset": "foolbox20"}

    def prepared_size(self, model: str, dataset: str, paths: Paths) -> int | None:
        """Samples of the preprocessed set as its manifest counts them (a partial set is labelled a subset)."""
        return self._module("preprocessing").prepared_size(model, dataset, paths)

    def postprocessor(self, model: str, samples) -> Postprocess:
        _models.facts(model)   # unknown model -> UserError before the run starts
        return lambda outputs, indices: Responses.rows(_models.postprocess(model, outputs))

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        from .accuracy import score_accuracy_log

        labels = self.preprocessed(model, dataset, paths).labels
        return score_accuracy_log(accuracy_log, labels, _models.facts(model).label_offset, self.response.np_dtype)


BENCHMARK = ResNet50Benchmark()
