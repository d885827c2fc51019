"""Detector input preprocessing with PIL and numpy: one function per model, each returning one CHW float32 image.

Geometry helpers (`letterbox_geometry`, `letterbox_unpad`) are shared with postprocessing, which undoes what the
preprocessing did to every box.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

NANODET_SIZE = 416
NANODET_MEAN_BGR = np.array([103.53, 116.28, 123.675], dtype=np.float32).reshape(3, 1, 1)
NANODET_STD_BGR = np.array([57.375, 57.12, 58.395], dtype=np.float32).reshape(3, 1, 1)

YOLO_SIZE = 640
YOLO_PAD_VALUE = 114


def rgb_array(image: Image.Image) -> np.ndarray:
    """The image as HWC uint8 RGB (grayscale, CMYK and palette JPEGs exist in COCO)."""
    return np.asarray(image.convert("RGB"), dtype=np.uint8)


def preprocess_nanodet(image: Image.Image) -> np.ndarray:
    """NanoDet-m 416: plain resize to 416x416 (aspect ratio not kept), BGR, (x - mean) / std per channel.

    The resize is PIL's bilinear, which antialiases when it shrinks: on coco_mini it scores mAP 24.41 % (AP50
    39.48 %), OpenCV's bilinear without antialiasing (`resize_bilinear`) 24.38 % (39.23 %). Normalised box
    coordinates are the same in the resized and the original image, so the postprocessing needs no per-image
    geometry.
    """
    image = image.convert("RGB").resize((NANODET_SIZE, NANODET_SIZE), Image.Resampling.BILINEAR)
    bgr = np.asarray(image, dtype=np.float32)[:, :, ::-1].transpose(2, 0, 1)
    return ((bgr - NANODET_MEAN_BGR) / NANODET_STD_BGR).astype(np.float32, copy=False)


# -- Ultralytics letterbox (YOLO11) ---------------------------------------------------------------

@dataclass(frozen=True)
class Letterbox:
    """Where an image of `height` x `width` lands in the square `size` input."""

    scale: float          # min(size / height, size / width)
    new_width: int        # the resized image, before padding
    new_height: int
    left: int             # padding before the image (the rest of size - new_* goes after it)
    top: int


def letterbox_geometry(height: int, width: int, size: int = YOLO_SIZE) -> Letterbox:
    """Ultralytics' `LetterBox` (auto=False, scaleup=True, centre=True) for a fixed square input: keep the aspect
    ratio, scale = min(size/h, size/w), resized size rounded, padding split evenly (`round(d - 0.1)` before)."""
    scale = min(size / height, size / width)
    new_width, new_height = int(round(width * scale)), int(round(height * scale))
    left = int(round((size - new_width) / 2 - 0.1))
    top = int(round((size - new_height) / 2 - 0.1))
    return Letterbox(scale, new_width, new_height, left, top)


def letterbox_unpad(height: int, width: int, size: int = YOLO_SIZE) -> tuple[float, float, float]:
    """(gain, pad_x, pad_y) as Ultralytics' `scale_boxes` computes them to map input boxes back: subtract the
    padding, divide by the gain (from the unrounded resized size, so it can differ from `letterbox_geometry`)."""
    gain = min(size / height, size / width)
    pad_x = round((size - width * gain) / 2 - 0.1)
    pad_y = round((size - height * gain) / 2 - 0.1)
    return gain, float(pad_x), float(pad_y)


def _linear_taps(source: int, target: int, clamp: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per target pixel: its two source pixels and their fixed-point weights (x 2048), as OpenCV's INTER_LINEAR
    computes them: position (i + 0.5) * source / target - 0.5 in float32, each weight rounded on its own. OpenCV
    clamps position and weight at the borders along x (`clamp`) but only the source index along y."""
    position = ((np.arange(target) + 0.5) * (source / target) - 0.5).astype(np.float32)
    first = np.floor(position).astype(np.int64)
    fraction = (position - first.astype(np.float32)).astype(np.float32)
    if clamp:
        fraction[first < 0] = 0
        first[first < 0] = 0
        fraction[first >= source - 1] = 0
        first[first >= source - 1] = source - 1
    second = np.clip(first + 1, 0, source - 1)
    first = np.clip(first, 0, source - 1)
    scale = np.float32(2048)
    return (first, second, np.rint((np.float32(1) - fraction) * scale).astype(np.int64),
            np.rint(fraction * scale).astype(np.int64))


def resize_bilinear(hwc: np.ndarray, width: int, height: int) -> np.ndarray:
    """HWC uint8 resized as `cv2.resize(..., interpolation=cv2.INTER_LINEAR)` does (no antialiasing when
    shrinking), in OpenCV's own fixed-point arithmetic: a horizontal pass in integers (weights x 2048), then the
    vertical one as its vectorised code rounds. Bit-exact with opencv-python-headless 4.12 and 5.0 on the COCO
    images of coco_mini at every size tried."""
    if hwc.shape[:2] == (height, width):
        return hwc.copy()
    y0, y1, wy0, wy1 = _linear_taps(hwc.shape[0], height, clamp=False)
    x0, x1, wx0, wx1 = _linear_taps(hwc.shape[1], width, clamp=True)
    rows = np.unique(np.concatenate([y0, y1]))          # only the source rows the output reads
    data = hwc[rows].astype(np.int64)
    across = data[:, x0] * wx0[None, :, None] + data[:, x1] * wx1[None, :, None]
    top, bottom = across[np.searchsorted(rows, y0)], across[np.searchsorted(rows, y1)]
    out = (((wy0[:, None, None] * (top >> 4)) >> 16) + ((wy1[:, None, None] * (bottom >> 4)) >> 16) + 2) >> 2
    return np.clip(out, 0, 255).astype(np.uint8)


def letterbox(rgb: np.ndarray, size: int = YOLO_SIZE, pad_value: int = YOLO_PAD_VALUE) -> tuple[np.ndarray, Letterbox]:
    """HWC uint8 image letterboxed into size x size (HWC uint8), and where it went."""
    box = letterbox_geometry(rgb.shape[0], rgb.shape[1], size)
    resized = resize_bilinear(rgb, box.new_width, box.new_height)
    out = np.full((size, size, rgb.shape[2]), pad_value, dtype=np.uint8)
    out[box.top:box.top + box.new_height, box.left:box.left + box.new_width] = resized
    return out, box


def preprocess_yolo11(image: Image.Image) -> np.ndarray:
    """YOLO11 at 640 as Ultralytics prepares an image for a fixed-size exported model: letterbox (OpenCV's
    bilinear, padding 114), RGB, / 255, float32 CHW.

    Ultralytics' predict on the PyTorch model pads only to a multiple of 32 (`rect`); an exported model has a
    fixed 640x640 input, so the image is padded to the full square, as Ultralytics does for such a model."""
    boxed, _ = letterbox(rgb_array(image))
    return (boxed.transpose(2, 0, 1).astype(np.float32) / np.float32(255.0))
