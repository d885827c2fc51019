"""INT8 on real data: torchvision MobileNetV2 (the open-division substitute for ResNet-50, whose weights are not
here) on ../shared/data/imagenet_sample (1000 images), the TensorRT INT8 model (Q/DQ) scored on the CPU with ONNX
Runtime running each Q/DQ pair as written. Top-1 of each calibration method; the figures are printed."""
from __future__ import annotations

import time
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from code.common.engines.tensorrt_onnx import cpu_reference_session, prepare
from tests.test_tensorrt_onnx import imagenet_mobilenet  # noqa: F401  (the fixture: model and preprocessed set)


def _config(**values):
    from code.common.config_registry import ConfigKey, ResolvedConfig
    from code.common.constants import Scenario, WorkloadSetting
    from configs.resnet50 import ResNet50Base

    values = {"model": "mobilenet_v2", "dataset": "imagenet_sample", "backend": "tensorrt", "precision": "int8",
              "batch_size": 32, "calibration_images": ResNet50Base.calibration_images, **values}
    return ResolvedConfig(ConfigKey("resnet50", Scenario.Offline, "Test_CPUx2", WorkloadSetting()), "test", "exact",
                          MappingProxyType(values), MappingProxyType({k: "config class" for k in values}))


def _top1(model: Path, images, labels: np.ndarray, convert=lambda batch: batch) -> tuple[int, np.ndarray]:
    """(correct, predictions) of `model` over the preprocessed set; `convert` turns a float batch into the model's
    input."""
    session = cpu_reference_session(model)
    name = session.get_inputs()[0].name
    predictions = []
    for first in range(0, len(images), 100):
        batch = np.stack([images.load(i) for i in range(first, min(first + 100, len(images)))])
        predictions.append(session.run(None, {name: convert(batch)})[0].argmax(axis=1))
    found = np.concatenate(predictions)
    return int((found == labels).sum()), found


@pytest.fixture(scope="module")
def scored(imagenet_mobilenet, tmp_path_factory):  # noqa: F811
    from code.resnet50 import models, preprocessing

    paths = imagenet_mobilenet
    images = preprocessing.preprocessed("mobilenet_v2", "imagenet_sample", paths)
    labels = np.asarray(images.labels) + models.facts("mobilenet_v2").label_offset
    fp32 = tmp_path_factory.mktemp("fp32") / "fp32.onnx"
    prepare(paths.model_file("resnet50", "mobilenet_v2"), fp32, "fp32")
    return paths, images, labels, _top1(fp32, images, labels)


@pytest.mark.parametrize("method", ["minmax", "entropy", "percentile"])
def test_calibration_methods_top1_on_imagenet_sample(scored, method: str, tmp_path: Path) -> None:
    from code.common.engines.builder import calibrate
    from code.resnet50.benchmark import BENCHMARK

    paths, images, labels, (fp32_correct, fp32_found) = scored
    start = time.perf_counter()
    cache = calibrate(_config(calibration_method=method), paths, BENCHMARK, lambda _: None)
    calibrated = time.perf_counter() - start
    int8 = tmp_path / "int8.onnx"
    prepare(paths.model_file("resnet50", "mobilenet_v2"), int8, "int8", cache)
    correct, found = _top1(int8, images, labels)
    print(f"\nMobileNetV2 imagenet_sample top-1, TensorRT INT8 Q/DQ, {method} calibration (500 images, "
          f"{calibrated:.0f} s): {correct / 10:.1f} % (fp32 {fp32_correct / 10:.1f} %; "
          f"{int((found == fp32_found).sum()) / 10:.1f} % same class as fp32)")
    assert len(labels) == 1000
    assert fp32_correct - correct <= 15, (method, correct, fp32_correct)   # within 1.5 points of fp32
