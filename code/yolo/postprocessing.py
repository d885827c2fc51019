"""From detector outputs to MLPerf yolo responses, in numpy.

A sample's response is float32 records of 7 values, `[qsl_idx, ymin, xmin, ymax, xmax, score, category_id]`,
box corners normalised by the original image's height and width, category_id in COCO's 91-id space (the
reference yolo_loadgen.py packs exactly this with struct "7f"); an image without detections has an empty one.

Outputs are matched by shape, never by name (converters rename them). Decoding is vectorised over boxes and
classes; non-maximum suppression is exact greedy NMS (as torchvision.ops.nms), done a block of candidates at a
time (`nms`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .image_preprocessing import NANODET_SIZE, YOLO_SIZE, letterbox_unpad

FIELDS = ("qsl_idx", "ymin", "xmin", "ymax", "xmax", "score", "category_id")
NUM_CLASSES = 80

# Index of one of the 80 detector classes -> COCO category id (1..90, with gaps), as in the reference
# yolo_loadgen.py; equal to the sorted category ids of instances_val2017.json.
COCO_80_TO_91 = np.array([
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32, 33, 34,
    35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
], dtype=np.int64)


@dataclass(frozen=True)
class Detections:
    """One image's detections: `boxes` (k x 4, xmin ymin xmax ymax, normalised to 0..1), scores, class 0..79."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def __len__(self) -> int:
        return len(self.scores)

    def records(self, qsl_index: int) -> np.ndarray:
        """The response: k x 7 float32 records (k may be 0)."""
        out = np.empty((len(self), len(FIELDS)), dtype=np.float32)
        out[:, 0] = qsl_index
        out[:, 1], out[:, 2] = self.boxes[:, 1], self.boxes[:, 0]
        out[:, 3], out[:, 4] = self.boxes[:, 3], self.boxes[:, 2]
        out[:, 5] = self.scores
        out[:, 6] = COCO_80_TO_91[self.classes]
        return out


# -- non-maximum suppression ----------------------------------------------------------------------

def _iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU of every box of `a` with every box of `b` (xyxy), as torchvision.ops.box_iou computes it."""
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    width = np.clip(np.minimum(a[:, None, 2], b[None, :, 2]) - np.maximum(a[:, None, 0], b[None, :, 0]), 0, None)
    height = np.clip(np.minimum(a[:, None, 3], b[None, :, 3]) - np.maximum(a[:, None, 1], b[None, :, 1]), 0, None)
    inter = width * height
    with np.errstate(divide="ignore", invalid="ignore"):
        return inter / (area_a[:, None] + area_b[None, :] - inter)


def nms(boxes: np.ndarray, scores: np.ndarray, iou_threshold: float, max_keep: int | None = None,
        block: int = 256) -> np.ndarray:
    """Greedy NMS: indices of the kept boxes, highest score first (torchvision.ops.nms, then `[:max_keep]`).

    A box is dropped when its IoU with a kept box of higher score exceeds `iou_threshold`. Candidates are taken
    in score order, `block` at a time: a block's boxes overlapping an already kept box go; among the rest, box
    j stays when no kept box before it in the block overlaps it, which is solved for the whole block at once by
    iterating keep = not any(kept before j and overlapping j) to its (unique) fixed point.
    """
    order = np.argsort(-scores, kind="stable")
    boxes = np.asarray(boxes)[order]
    kept: list[np.ndarray] = []
    kept_boxes = boxes[:0]
    count = 0
    for start in range(0, len(order), block):
        if max_keep is not None and count >= max_keep:
            break
        candidates = np.arange(start, min(start + block, len(order)))
        if len(kept_boxes):
            candidates = candidates[~(_iou(boxes[candidates], kept_boxes) > iou_threshold).any(axis=1)]
        if not len(candidates):
            continue
        overlaps = np.triu(_iou(boxes[candidates], boxes[candidates]) > iou_threshold, k=1)  # [i, j]: i before j
        keep = np.ones(len(candidates), dtype=bool)
        while True:
            again = ~(overlaps & keep[:, None]).any(axis=0)
            if np.array_equal(again, keep):
                break
            keep = again
        chosen = candidates[keep]
        kept.append(chosen)
        kept_boxes = np.concatenate([kept_boxes, boxes[chosen]])
        count += len(chosen)
    result = order[np.concatenate(kept)] if kept else np.zeros(0, dtype=np.int64)
    return result[:max_keep] if max_keep is not None else result


def batched_nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou_threshold: float,
                max_keep: int | None, offset: float) -> np.ndarray:
    """Per-class NMS in one call: each class's boxes are shifted by class * `offset` so classes never overlap."""
    shifted = boxes + (classes.astype(boxes.dtype) * np.asarray(offset, dtype=boxes.dtype))[:, None]
    return nms(shifted, scores, iou_threshold, max_keep)


# -- NanoDet-m ------------------------------------------------------------------------------------

NANODET_STRIDES = (8, 16, 32)
NANODET_BINS = 11           # each side's distance is a distribution over 0..10 strides (GFL)
NANODET_SCORE_THRESHOLD = 0.05
NANODET_IOU_THRESHOLD = 0.6
NANODET_MAX_DETECTIONS = 100


@dataclass(frozen=True)
class NanoDetOptions:
    """What the decoding does; the defaults are NanoDet's. The other values exist to show what goes wrong."""

    centre_offset: float = 0.5
    score_threshold: float = NANODET_SCORE_THRESHOLD
    iou_threshold: float = NANODET_IOU_THRESHOLD
    max_detections: int = NANODET_MAX_DETECTIONS


def _anchor_points(size: int, strides: Sequence[int], offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Cell centres (N x 2, x y, input pixels) and strides (N) of every level, cells row-major per level."""
    centres, level_strides = [], []
    for stride in strides:
        cells = size // stride
        y, x = np.divmod(np.arange(cells * cells), cells)
        centres.append(np.stack([(x + offset) * stride, (y + offset) * stride], axis=1))
        level_strides.append(np.full(cells * cells, stride))
    return (np.concatenate(centres).astype(np.float32), np.concatenate(level_strides).astype(np.float32))


def nanodet_levels(outputs: Sequence[np.ndarray], size: int = NANODET_SIZE) -> list[tuple[int, np.ndarray, np.ndarray]]:
    """(stride, class scores [B,N,80], box distributions [B,N,44]) per level, smallest stride first, matched by
    shape: N = (size / stride)^2 cells."""
    scores: dict[int, np.ndarray] = {}
    boxes: dict[int, np.ndarray] = {}
    for out in outputs:
        array = np.asarray(out)
        if array.ndim == 2:
            array = array[np.newaxis]
        cells = int(round(np.sqrt(array.shape[1]))) if array.ndim == 3 else 0
        if array.ndim != 3 or cells * cells != array.shape[1] or size % cells:
            continue
        stride = size // cells
        if array.shape[2] == NUM_CLASSES:
            scores[stride] = array
        elif array.shape[2] == 4 * NANODET_BINS:
            boxes[stride] = array
    strides = sorted(scores.keys() & boxes.keys())
    if strides != list(NANODET_STRIDES):
        shapes = ", ".join(str(list(np.shape(o))) for o in outputs) or "none"
        raise ValueError(f"nanodet-m: expected class scores [B,N,80] and box distributions [B,N,44] for strides "
                         f"{NANODET_STRIDES} (N = 2704, 676, 169); the outputs are {shapes}")
    return [(stride, scores[stride], boxes[stride]) for stride in strides]


def decode_nanodet(outputs: Sequence[np.ndarray], options: NanoDetOptions = NanoDetOptions(),
                   size: int = NANODET_SIZE) -> list[Detections]:
    """NanoDet-m's outputs for a batch -> each image's detections (boxes normalised by the input size, which for
    a plain resize are also the normalised boxes of the original image)."""
    levels = nanodet_levels(outputs, size)
    scores = np.concatenate([s for _, s, _ in levels], axis=1)                    # B x N x 80
    logits = np.concatenate([d for _, _, d in levels], axis=1)                    # B x N x 44
    centres, strides = _anchor_points(size, [stride for stride, _, _ in levels], options.centre_offset)
    bins = np.arange(NANODET_BINS, dtype=np.float32)
    result = []
    for image_scores, image_logits in zip(scores, logits):
        cell, label = np.nonzero(image_scores > options.score_threshold)
        cells, which = np.unique(cell, return_inverse=True)         # boxes only of the cells that score
        side = image_logits[cells].astype(np.float32).reshape(len(cells), 4, NANODET_BINS)
        weights = np.exp(side - side.max(axis=-1, keepdims=True))
        distances = (weights @ bins) / weights.sum(axis=-1) * strides[cells, None]  # left, top, right, bottom
        corners = np.concatenate([centres[cells] - distances[:, :2], centres[cells] + distances[:, 2:]], axis=1)
        boxes = np.clip(corners, 0, size)[which]
        values = image_scores[cell, label].astype(np.float32)
        offset = (float(boxes.max()) if len(boxes) else 0.0) + 1.0
        keep = batched_nms(boxes, values, label, options.iou_threshold, options.max_detections, offset)
        result.append(Detections(np.clip(boxes[keep] / np.float32(size), 0, 1), values[keep], label[keep]))
    return result


# -- YOLO11 (Ultralytics) -------------------------------------------------------------------------

YOLO_CONF_THRESHOLD = 0.001    # the reference's predict(conf=0.001)
YOLO_IOU_THRESHOLD = 0.7       # Ultralytics' predict default
YOLO_MAX_DETECTIONS = 300      # Ultralytics' predict default
YOLO_MAX_NMS = 30000           # Ultralytics: at most this many candidates (by confidence) enter NMS
YOLO_CLASS_OFFSET = 7680.0     # Ultralytics' max_wh: per-class NMS by shifting boxes


def yolo_predictions(outputs: Sequence[np.ndarray]) -> np.ndarray:
    """The [B, 84, N] prediction tensor (4 box values cx cy w h + 80 class scores), matched by shape; a
    [B, N, 84] export is transposed."""
    for out in outputs:
        array = np.asarray(out)
        if array.ndim == 2:
            array = array[np.newaxis]
        if array.ndim != 3:
            continue
        if array.shape[1] == 4 + NUM_CLASSES:
            return array
        if array.shape[2] == 4 + NUM_CLASSES:
            return array.transpose(0, 2, 1)
    shapes = ", ".join(str(list(np.shape(o))) for o in outputs) or "none"
    raise ValueError(f"yolov11l: expected a prediction output [B,84,N] (box cx cy w h + 80 class scores); the "
                     f"outputs are {shapes}")


def decode_yolo(outputs: Sequence[np.ndarray], heights: Sequence[int], widths: Sequence[int],
                size: int = YOLO_SIZE, conf_threshold: float = YOLO_CONF_THRESHOLD,
                iou_threshold: float = YOLO_IOU_THRESHOLD,
                max_detections: int = YOLO_MAX_DETECTIONS) -> list[Detections]:
    """YOLO11 outputs of a batch of letterboxed images -> each image's detections, normalised by its original
    size: Ultralytics' `non_max_suppression` (best class per box, conf > threshold, per-class NMS) and
    `scale_boxes` (subtract the padding, divide by the gain, clip to the image)."""
    predictions = yolo_predictions(outputs).astype(np.float32, copy=False)
    if len(predictions) != len(heights) or len(heights) != len(widths):
        raise ValueError(f"{len(predictions)} predictions for {len(heights)} image sizes")
    result = []
    for prediction, height, width in zip(predictions, heights, widths):
        rows = prediction.T                                          # N x 84
        classes = rows[:, 4:]
        label = classes.argmax(axis=1)
        confidence = classes[np.arange(len(rows)), label]
        chosen = np.nonzero(confidence > conf_threshold)[0]
        if len(chosen) > YOLO_MAX_NMS:
            chosen = chosen[np.argsort(-confidence[chosen], kind="stable")[:YOLO_MAX_NMS]]
        xywh = rows[chosen, :4]
        boxes = np.concatenate([xywh[:, :2] - xywh[:, 2:] / 2, xywh[:, :2] + xywh[:, 2:] / 2], axis=1)
        keep = batched_nms(boxes, confidence[chosen], label[chosen], iou_threshold, max_detections,
                           YOLO_CLASS_OFFSET)
        boxes, scores, labels = boxes[keep], confidence[chosen][keep], label[chosen][keep]
        gain, pad_x, pad_y = letterbox_unpad(int(height), int(width), size)
        boxes = (boxes - np.array([pad_x, pad_y, pad_x, pad_y], dtype=np.float32)) / np.float32(gain)
        boxes[:, [0, 2]] = np.clip(boxes[:, [0, 2]], 0, width) / np.float32(width)
        boxes[:, [1, 3]] = np.clip(boxes[:, [1, 3]], 0, height) / np.float32(height)
        result.append(Detections(boxes, scores, labels))
    return result


def responses(detections: Sequence[Detections], qsl_indices: Sequence[int]) -> list[np.ndarray]:
    """One float32 array of 7-value records per sample (empty for an image without detections)."""
    return [d.records(int(index)).reshape(-1) for d, index in zip(detections, qsl_indices)]
