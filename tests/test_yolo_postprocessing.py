"""Benchmark yolo, on synthetic data: NMS, NanoDet and YOLO11 decoding, letterbox, OpenCV-style resize, responses.

No model and no data set needed (the 80 -> 91 map is also checked against coco_mini's annotations when
../shared is there).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from code.common.benchmark_api import Responses
from code.yolo.benchmark import BENCHMARK
from code.yolo.image_preprocessing import (
    NANODET_MEAN_BGR, NANODET_STD_BGR, letterbox, letterbox_geometry, letterbox_unpad, preprocess_nanodet,
    preprocess_yolo11, resize_bilinear,
)
from code.yolo.postprocessing import (
    COCO_80_TO_91, FIELDS, Detections, NanoDetOptions, batched_nms, decode_nanodet, decode_yolo, nms, responses,
)

# The list of the reference's yolo_loadgen.py (vision/classification_and_detection/yolo/), copied by hand.
REFERENCE_COCO_80_TO_91 = [
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 27, 28, 31, 32, 33, 34,
    35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    64, 65, 67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
]


# -- 80 -> 91 -------------------------------------------------------------------------------------

def test_coco_80_to_91_is_the_reference_list() -> None:
    assert COCO_80_TO_91.tolist() == REFERENCE_COCO_80_TO_91
    assert len(COCO_80_TO_91) == 80 and np.all(np.diff(COCO_80_TO_91) > 0)


def test_coco_80_to_91_equals_the_annotation_categories(shared_dir: Path) -> None:
    annotations = shared_dir / "data" / "coco_mini" / "instances_val2017_subset.json"
    if not annotations.is_file():
        pytest.skip(f"{annotations} is absent: the shared evaluation data lives beside the repository")
    categories = json.loads(annotations.read_text())["categories"]
    assert COCO_80_TO_91.tolist() == sorted(c["id"] for c in categories)


# -- NMS ------------------------------------------------------------------------------------------

def _greedy_nms(boxes: np.ndarray, scores: np.ndarray, threshold: float) -> list[int]:
    """The textbook loop, one box at a time (torchvision.ops.nms semantics): the reference for `nms`."""
    order = list(np.argsort(-scores, kind="stable"))
    keep: list[int] = []
    while order:
        i = order.pop(0)
        keep.append(int(i))
        rest = []
        for j in order:
            w = max(0.0, min(boxes[i, 2], boxes[j, 2]) - max(boxes[i, 0], boxes[j, 0]))
            h = max(0.0, min(boxes[i, 3], boxes[j, 3]) - max(boxes[i, 1], boxes[j, 1]))
            inter = w * h
            union = (boxes[i, 2] - boxes[i, 0]) * (boxes[i, 3] - boxes[i, 1]) + \
                (boxes[j, 2] - boxes[j, 0]) * (boxes[j, 3] - boxes[j, 1]) - inter
            if not inter / union > threshold:
                rest.append(j)
        order = rest
    return keep


def _random_boxes(rng: np.random.Generator, count: int, extent: float = 100.0) -> np.ndarray:
    xy = rng.uniform(0, extent, (count, 2))
    wh = rng.uniform(5, 40, (count, 2))
    return np.concatenate([xy, xy + wh], axis=1).astype(np.float32)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("threshold", [0.3, 0.6])
def test_nms_equals_the_greedy_loop(seed: int, threshold: float) -> None:
    rng = np.random.default_rng(seed)
    boxes = _random_boxes(rng, 300)
    scores = rng.uniform(0, 1, 300).astype(np.float32)
    expected = _greedy_nms(boxes, scores, threshold)
    for block in (1, 7, 64, 1000):   # across block boundaries and within one block
        assert nms(boxes, scores, threshold, block=block).tolist() == expected
    assert nms(boxes, scores, threshold, max_keep=10).tolist() == expected[:10]
    assert nms(boxes[:0], scores[:0], threshold).tolist() == []


def test_nms_chain_and_exact_threshold() -> None:
    # A chain: 0 suppresses 1, so 2 (overlapping only 1) survives; greedy, not "suppressed by anyone".
    boxes = np.array([[0, 0, 10, 10], [3, 0, 13, 10], [6, 0, 16, 10]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    assert nms(boxes, scores, 0.5).tolist() == [0, 2]
    # IoU exactly at the threshold is kept (suppression needs IoU > threshold).
    half = np.array([[0, 0, 10, 10], [0, 0, 10, 5]], np.float32)
    assert nms(half, np.array([0.9, 0.8], np.float32), 0.5).tolist() == [0, 1]
    assert nms(half, np.array([0.9, 0.8], np.float32), 0.49).tolist() == [0]


def test_batched_nms_keeps_classes_apart() -> None:
    boxes = np.array([[0, 0, 10, 10], [0, 0, 10, 10], [0, 0, 10, 10]], np.float32)
    scores = np.array([0.9, 0.8, 0.7], np.float32)
    classes = np.array([3, 5, 3])
    assert batched_nms(boxes, scores, classes, 0.5, None, offset=11.0).tolist() == [0, 1]
    assert batched_nms(boxes, scores, classes, 0.5, 1, offset=11.0).tolist() == [0]


# -- NanoDet-m ------------------------------------------------------------------------------------

NANODET_LEVELS = {8: 52, 16: 26, 32: 13}   # stride: cells per side at 416


def _nanodet_outputs(objects: list[tuple[int, int, int, int, float, tuple[int, int, int, int]]]) -> list[np.ndarray]:
    """The six NanoDet outputs (batch 1, the model's order) holding `objects`: (stride, cell x, cell y, class,
    score, bins of left, top, right, bottom). Each side's distribution is sharply peaked at its bin."""
    scores = {s: np.zeros((1, n * n, 80), np.float32) for s, n in NANODET_LEVELS.items()}
    boxes = {s: np.full((1, n * n, 44), -30.0, np.float32) for s, n in NANODET_LEVELS.items()}
    for stride, x, y, label, score, bins in objects:
        cell = y * NANODET_LEVELS[stride] + x
        scores[stride][0, cell, label] = score
        boxes[stride][0, cell] = -30.0
        for side, b in enumerate(bins):
            boxes[stride][0, cell, side * 11 + b] = 30.0
    return [scores[32], boxes[32], scores[16], scores[8], boxes[16], boxes[8]]


def test_decode_nanodet_box_from_cell_and_bins() -> None:
    outputs = _nanodet_outputs([(16, 5, 3, 17, 0.9, (2, 1, 3, 4))])
    [found] = decode_nanodet(outputs)
    centre = np.array([5.5 * 16, 3.5 * 16])
    expected = np.array([centre[0] - 32, centre[1] - 16, centre[0] + 48, centre[1] + 64]) / 416
    assert len(found) == 1 and found.classes.tolist() == [17]
    np.testing.assert_allclose(found.boxes[0], expected, atol=1e-5)
    np.testing.assert_allclose(found.scores, [0.9])
    # Without the half-cell offset the box moves by half a stride: the option shows what goes wrong.
    [shifted] = decode_nanodet(outputs, NanoDetOptions(centre_offset=0.0))
    np.testing.assert_allclose(shifted.boxes[0], expected - 8 / 416, atol=1e-5)
    # Matched by shape: any order of the outputs decodes the same.
    [again] = decode_nanodet(outputs[::-1])
    np.testing.assert_allclose(again.boxes, found.boxes)


def test_decode_nanodet_threshold_nms_clip_and_cap() -> None:
    outputs = _nanodet_outputs([
        (8, 10, 10, 0, 0.8, (3, 3, 3, 3)),     # (60, 60)-(108, 108)
        (8, 11, 10, 0, 0.7, (4, 3, 2, 3)),     # the same box from the next cell, same class: suppressed
        (32, 0, 0, 4, 0.6, (10, 10, 2, 2)),    # reaches past the image's top-left corner: clipped to 0
        (16, 20, 20, 9, 0.04, (1, 1, 1, 1)),   # below the 0.05 score threshold
    ])
    outputs[3][0, 10 * 52 + 11, 1] = 0.5       # the suppressed box's cell also says class 1: kept (per-class NMS)
    [found] = decode_nanodet(outputs)
    assert found.classes.tolist() == [0, 4, 1]                     # best score first
    np.testing.assert_allclose(found.scores, [0.8, 0.6, 0.5])
    np.testing.assert_allclose(found.boxes[0], np.array([60, 60, 108, 108]) / 416, atol=1e-5)
    np.testing.assert_allclose(found.boxes[2], found.boxes[0], atol=1e-5)
    np.testing.assert_allclose(found.boxes[1], np.array([0, 0, 80, 80]) / 416, atol=1e-5)
    # At most 100 per image: the best 100 of 150 boxes that do not overlap.
    objects = [(8, x % 52, x // 52 * 3, 0, 0.06 + x / 1000, (1, 1, 1, 1)) for x in range(0, 600, 4)]
    [capped] = decode_nanodet(_nanodet_outputs(objects))
    best = np.sort([score for *_, score, _ in objects])[-100:]
    np.testing.assert_allclose(np.sort(capped.scores), best, rtol=1e-6)


def test_decode_nanodet_rejects_other_outputs_and_finds_nothing_in_zeros() -> None:
    [nothing] = decode_nanodet(_nanodet_outputs([]))
    assert len(nothing) == 0 and nothing.records(5).shape == (0, 7)
    with pytest.raises(ValueError, match="strides"):
        decode_nanodet([np.zeros((1, 169, 80), np.float32)])


# -- YOLO11 ---------------------------------------------------------------------------------------

def _yolo_output(rows: list[tuple[float, float, float, float, int, float]], n: int = 8400) -> np.ndarray:
    """[1, 84, n]: (cx, cy, w, h, class, score) in the 640 input; every other class score 0."""
    out = np.zeros((1, 84, n), np.float32)
    for i, (cx, cy, w, h, label, score) in enumerate(rows):
        out[0, :4, i] = cx, cy, w, h
        out[0, 4 + label, i] = score
    return out


def test_decode_yolo_undoes_the_letterbox() -> None:
    height, width = 480, 640                 # scale 1, 80 rows of padding above and below
    rows = [
        (200, 230, 200, 200, 2, 0.8),        # (100, 50)-(300, 250) in the image
        (202, 231, 200, 200, 2, 0.6),        # the same object again: suppressed (IoU > 0.7)
        (202, 231, 200, 200, 7, 0.5),        # the same box, another class: kept
        (620, 100, 80, 80, 0, 0.3),          # runs past the right edge and into the padding: clipped
        (300, 300, 10, 10, 5, 0.0009),       # below conf 0.001
    ]
    [found] = decode_yolo([_yolo_output(rows)], [height], [width])
    assert found.classes.tolist() == [2, 7, 0]
    np.testing.assert_allclose(found.scores, [0.8, 0.5, 0.3])
    np.testing.assert_allclose(found.boxes[0], [100 / 640, 50 / 480, 300 / 640, 250 / 480], atol=1e-6)
    np.testing.assert_allclose(found.boxes[2], [580 / 640, 0.0, 1.0, 60 / 480], atol=1e-6)
    # A [1, N, 84] export decodes the same.
    [transposed] = decode_yolo([_yolo_output(rows).transpose(0, 2, 1)], [height], [width])
    np.testing.assert_array_equal(transposed.boxes, found.boxes)


def test_decode_yolo_scales_and_pads_like_ultralytics() -> None:
    # 200 x 100 (h x w): scale 3.2, resized to 320 wide and 640 high, 160 columns of padding on each side.
    height, width = 200, 100
    box = letterbox_geometry(height, width)
    assert (box.scale, box.new_width, box.new_height, box.left, box.top) == (3.2, 320, 640, 160, 0)
    gain, pad_x, pad_y = letterbox_unpad(height, width)
    assert (gain, pad_x, pad_y) == (3.2, 160.0, 0.0)
    x0, y0, x1, y1 = 10, 20, 60, 120         # in the original image
    cx, cy = 160 + (x0 + x1) / 2 * 3.2, (y0 + y1) / 2 * 3.2
    [found] = decode_yolo([_yolo_output([(cx, cy, 50 * 3.2, 100 * 3.2, 11, 0.9)])], [height], [width])
    np.testing.assert_allclose(found.boxes[0], [x0 / width, y0 / height, x1 / width, y1 / height], atol=1e-6)
    # Two images of one batch, each mapped with its own size.
    batch = np.concatenate([_yolo_output([(320, 320, 64, 64, 1, 0.9)])] * 2)
    small, wide = decode_yolo([batch], [320, 480], [320, 640])
    np.testing.assert_allclose(small.boxes[0], [0.45, 0.45, 0.55, 0.55], atol=1e-6)        # scale 2, no pad
    np.testing.assert_allclose(wide.boxes[0], [288 / 640, 208 / 480, 352 / 640, 272 / 480], atol=1e-6)


def test_decode_yolo_caps_at_300_and_rejects_other_outputs() -> None:
    rng = np.random.default_rng(0)
    rows = [(float(x), float(y), 4.0, 4.0, int(c), float(s)) for x, y, c, s in
            zip(rng.uniform(10, 630, 500), rng.uniform(10, 630, 500), rng.integers(0, 80, 500),
                rng.uniform(0.01, 1, 500))]
    [found] = decode_yolo([_yolo_output(rows)], [640], [640])
    assert len(found) == 300 and found.scores.tolist() == sorted(found.scores.tolist(), reverse=True)
    with pytest.raises(ValueError, match="84"):
        decode_yolo([np.zeros((1, 85, 10), np.float32)], [640], [640])


# -- preprocessing --------------------------------------------------------------------------------

def test_resize_bilinear_matches_opencv_arithmetic() -> None:
    # OpenCV INTER_LINEAR on [0, 100] -> 4 wide: positions -0.25, 0.25, 0.75, 1.25, borders clamped.
    row = np.array([[[0], [100]]], np.uint8)
    assert resize_bilinear(row, 4, 1)[0, :, 0].tolist() == [0, 25, 75, 100]
    flat = np.full((37, 53, 3), 77, np.uint8)
    for width, height in ((20, 11), (100, 80), (53, 37)):
        assert (resize_bilinear(flat, width, height) == 77).all()
    ramp = np.tile(np.arange(0, 256, 5, dtype=np.uint8)[None, :, None], (4, 1, 3))
    half = resize_bilinear(ramp, 26, 4)
    assert np.all(np.diff(half[0, :, 0].astype(int)) >= 0)   # monotone stays monotone
    # Rows at the top and bottom borders use the first/last source row twice (OpenCV clamps the index only).
    column = np.array([[[0]], [[200]]], np.uint8)
    assert resize_bilinear(column, 1, 4)[:, 0, 0].tolist() == [0, 50, 150, 200]


def test_letterbox_synthetic_image() -> None:
    image = np.zeros((100, 200, 3), np.uint8)
    image[:, :, 0], image[:, :, 1], image[:, :, 2] = 10, 20, 30
    boxed, box = letterbox(image)
    assert boxed.shape == (640, 640, 3)
    assert (box.new_width, box.new_height, box.left, box.top) == (640, 320, 0, 160)
    assert (boxed[:160] == 114).all() and (boxed[480:] == 114).all()
    assert (boxed[160:480] == [10, 20, 30]).all()
    # Odd padding: one row more after the image than before it, as Ultralytics' round(d -/+ 0.1).
    odd, box = letterbox(np.zeros((201, 640, 3), np.uint8))
    assert (box.new_height, box.top) == (201, 219) and (odd[:219] == 114).all() and (odd[219:420] == 0).all()
    assert (odd[420:] == 114).all() and 640 - 201 - 219 == 220
    tensor = preprocess_yolo11(Image.fromarray(image))
    assert tensor.shape == (3, 640, 640) and tensor.dtype == np.float32
    np.testing.assert_allclose(tensor[:, 320, 320], np.array([10, 20, 30]) / 255, rtol=1e-6)   # RGB order
    np.testing.assert_allclose(tensor[:, 0, 0], [114 / 255] * 3, rtol=1e-6)


def test_nanodet_preprocessing_is_bgr_normalised() -> None:
    image = Image.new("RGB", (300, 200), (200, 100, 50))
    tensor = preprocess_nanodet(image)
    assert tensor.shape == (3, 416, 416) and tensor.dtype == np.float32
    expected = (np.array([50, 100, 200], np.float32).reshape(3, 1) - NANODET_MEAN_BGR[:, :, 0]) / \
        NANODET_STD_BGR[:, :, 0]
    np.testing.assert_allclose(tensor[:, 100, 100], expected[:, 0], rtol=1e-6)
    assert preprocess_nanodet(image.convert("L")).shape == (3, 416, 416)   # grayscale JPEGs exist in COCO


# -- responses ------------------------------------------------------------------------------------

def test_records_layout_and_empty_responses() -> None:
    found = Detections(np.array([[0.1, 0.2, 0.3, 0.4]], np.float32), np.array([0.75], np.float32), np.array([79]))
    none = Detections(np.zeros((0, 4), np.float32), np.zeros(0, np.float32), np.zeros(0, np.int64))
    packed = Responses.pieces(responses([found, none, found], [7, 8, 9]))
    assert len(packed) == 3 and packed.sample(1) == b""
    record = np.frombuffer(packed.sample(2), np.float32)
    assert len(FIELDS) == 7
    np.testing.assert_allclose(record, [9, 0.2, 0.1, 0.4, 0.3, 0.75, 90])   # qsl, ymin, xmin, ymax, xmax, score, id


@dataclass
class _Sizes:
    """What the postprocessor reads of a preprocessed set: each image's original size."""

    heights: np.ndarray
    widths: np.ndarray


def test_benchmark_postprocessors() -> None:
    samples = _Sizes(np.array([480, 200]), np.array([640, 100]))
    yolo = BENCHMARK.postprocessor("yolov11l", samples)
    out = yolo([_yolo_output([(200, 230, 200, 200, 2, 0.8)])], np.array([0]))
    record = np.frombuffer(out.sample(0), np.float32)
    np.testing.assert_allclose(record, [0, 50 / 480, 100 / 640, 250 / 480, 300 / 640, 0.8, 3], atol=1e-6)
    out = yolo([np.zeros((1, 84, 8400), np.float32)], np.array([1]))
    assert out.sample(0) == b""
    nanodet = BENCHMARK.postprocessor("nanodet-m", samples)
    out = nanodet(_nanodet_outputs([(16, 5, 3, 17, 0.9, (2, 1, 3, 4))]), np.array([1]))
    assert np.frombuffer(out.sample(0), np.float32)[[0, 6]].tolist() == [1.0, 19.0]   # class 17: COCO id 19
    assert BENCHMARK.response.record_bytes == 28 and BENCHMARK.response.variable
