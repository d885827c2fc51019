"""ImageNet preprocessing with PIL and numpy: one function per model family's convention.

Both return one CHW float32 image (3x224x224, RGB); stack them for an NCHW batch.
"""
from __future__ import annotations

import numpy as np
from PIL import Image

CROP = 224
RESIZE = 256  # short side before the centre crop: 224 / 0.875

_TORCHVISION_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1)
_TORCHVISION_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1)
_MLPERF_MEAN = np.array([123.68, 116.78, 103.94], dtype=np.float32).reshape(3, 1, 1)


def _short_side_size(width: int, height: int, short: int) -> tuple[int, int]:
    """(width, height) with the short side `short`, the long side scaled and truncated.

    Truncation (not rounding) is what both torchvision's `resize` and MLPerf's
    `resize_with_aspectratio` do; a square stays square.
    """
    if width <= height:
        return short, int(short * height / width)
    return int(short * width / height), short


def _to_chw_float32(image: Image.Image) -> np.ndarray:
    return np.asarray(image, dtype=np.float32).transpose(2, 0, 1)


def preprocess_torchvision(image: Image.Image) -> np.ndarray:
    """torchvision's ImageNet eval transform: Resize(256), CenterCrop(224), ToTensor, Normalize.

    The model zoo's accuracies (MobileNetV2 included) are measured with exactly this.
    PIL's bilinear resize antialiases when downscaling, as torchvision's PIL path does.
    """
    image = image.convert("RGB")  # grayscale, CMYK and palette JPEGs exist in ImageNet
    image = image.resize(_short_side_size(*image.size, RESIZE), Image.Resampling.BILINEAR)
    width, height = image.size
    # torchvision's center_crop rounds the offsets (MLPerf's truncates).
    left, top = int(round((width - CROP) / 2.0)), int(round((height - CROP) / 2.0))
    image = image.crop((left, top, left + CROP, top + CROP))
    chw = _to_chw_float32(image) / np.float32(255.0)
    return ((chw - _TORCHVISION_MEAN) / _TORCHVISION_STD).astype(np.float32, copy=False)


def preprocess_mlperf_resnet50(image: Image.Image) -> np.ndarray:
    """MLPerf reference preprocessing for ResNet50-v1.5 (`pre_process_vgg` in mlcommons/inference
    vision/classification_and_detection/python/dataset.py).

    RGB; resize so the short side is int(100 * 224 / 87.5) = 256 (long side truncated);
    centre crop 224 with truncated offsets; float32 on the 0..255 scale minus the per-channel
    mean [123.68, 116.78, 103.94], no division by a std. The reference returns HWC and
    transposes when asked; this returns CHW.
    """
    image = image.convert("RGB")
    # The reference resizes with OpenCV's INTER_AREA. PIL has no exact equivalent; BOX is the
    # closest for downscaling (it averages the source pixels each output pixel covers, but
    # with whole-pixel rather than fractional-area weights; when upscaling both behave
    # roughly like nearest neighbour). Results can differ by a grey level on some pixels.
    new_size = _short_side_size(*image.size, int(100.0 * CROP / 87.5))
    image = image.resize(new_size, Image.Resampling.BOX)
    width, height = image.size
    left, top = int((width - CROP) / 2), int((height - CROP) / 2)
    image = image.crop((left, top, left + CROP, top + CROP))
    return _to_chw_float32(image) - _MLPERF_MEAN
