"""The COCO data sets of benchmark yolo: where they come from, how they are laid out and read.

Every data set folder is laid out as MLPerf's official COCO tools expect (`--coco-dir`):
`annotations/instances_val2017.json` (standard COCO instances format) and a folder of JPEGs. The QSL order is the
order of `images` in the annotation file, keeping only the images whose file exists, as the reference
(vision/classification_and_detection/yolo/yolo_loadgen.py, class `Coco`) builds it.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from ..common import shared_samples
from ..common.benchmark_api import DatasetSpec, Log
from ..common.errors import EXIT_FAILURE, UserError, choose
from ..common.paths import Paths

BENCHMARK = "yolo"
ANNOTATIONS = Path("annotations") / "instances_val2017.json"   # inside a data set folder, as accuracy-coco.py reads
IMAGE_DIRS = {"coco_mini": "val2017", "coco_safe": "val2017_safe"}
COCO_SAFE_COUNT = 1525
COCO_MINI_COUNT = 158
SHARED_ANNOTATIONS = "instances_val2017_subset.json"            # coco_mini's file in ../shared/data/coco_mini

_COCO_SAFE_HOW_TO = (
    "The closed-division data set is the license-filtered ('safe') COCO 2017 validation subset of MLPerf's yolo "
    "reference (vision/classification_and_detection/yolo/README.md): 1525 images in val2017_safe/ and their "
    "annotations/instances_val2017.json. It is hosted on MLCommons' R2 bucket: get it with MLCFlow "
    "(`pip install mlc-scripts`, then `mlcr get,dataset,mlperf-inference,yolo-coco2017-filtered,_mlc,"
    "_r2-downloader --outdirname=<folder> -j`) or as https://inference.mlcommons-storage.org describes, then "
    "move or link the downloaded coco_safe folder to the data set folder. The reference README's "
    "filter_coco_safe_images.py and create_safe_annotations.py derive the same set from a full COCO 2017 "
    "download (rename instances_val2017_safe.json to annotations/instances_val2017.json).")

DATASETS: dict[str, DatasetSpec] = {
    "coco_mini": DatasetSpec(
        name="coco_mini",
        sample_count=COCO_MINI_COUNT,
        description="158 COCO 2017 validation images with their instances annotations (1424 boxes, 80 "
                    "categories), for development and CI (not a submission data set)",
        how_to_get=f"Kept beside the repository in ../shared/data/coco_mini (val2017/ and {SHARED_ANNOTATIONS}); "
                   f"`make download_data` makes the scratch data folder lay it out as MLPerf's COCO tools expect "
                   f"(val2017/ and {ANNOTATIONS.as_posix()}, both links).",
    ),
    "coco_safe": DatasetSpec(
        name="coco_safe",
        sample_count=COCO_SAFE_COUNT,
        description="COCO 2017 validation, license-filtered 'safe' subset of 1525 images: the MLPerf yolo data set",
        how_to_get=_COCO_SAFE_HOW_TO,
    ),
}


@dataclass(frozen=True)
class CocoImage:
    """One image of the annotation file: what the QSL, the preprocessed map and the scorer need."""

    file_name: str
    id: int
    height: int
    width: int


def check_dataset(dataset: str) -> DatasetSpec:
    return choose(DATASETS, dataset, "data set", BENCHMARK)


def download_hint(dataset: str) -> str:
    return f'make download_data RUN_ARGS="--benchmarks=yolo --dataset={dataset}"'


def annotation_file(dataset: str, paths: Paths) -> Path:
    return paths.dataset_dir(dataset) / ANNOTATIONS


def image_dir(dataset: str, paths: Paths) -> Path:
    return paths.dataset_dir(dataset) / IMAGE_DIRS[dataset]


@lru_cache(maxsize=4)
def _load_json(path: str, size: int, mtime_ns: int) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def load_annotations(path: Path) -> dict[str, Any]:
    """The parsed annotation file (cached while the file is unchanged); UserError when it is not COCO JSON."""
    try:
        stat = Path(path).stat()
        data = _load_json(str(path), stat.st_size, stat.st_mtime_ns)
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read the COCO annotation file {path}: {error}", exit_code=EXIT_FAILURE) from None
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise UserError(f"{path} is not a COCO annotation file (no `images` list)", exit_code=EXIT_FAILURE)
    return data


def annotation_images(path: Path) -> list[CocoImage]:
    """Every image of the annotation file, in its order."""
    try:
        return [CocoImage(str(i["file_name"]), int(i["id"]), int(i["height"]), int(i["width"]))
                for i in load_annotations(path)["images"]]
    except (KeyError, TypeError, ValueError) as error:
        raise UserError(f"{path}: an image entry lacks file_name, id, height or width ({error})",
                        exit_code=EXIT_FAILURE) \
            from None


def qsl_images(dataset: str, paths: Paths) -> list[CocoImage]:
    """The data set's images in QSL order (annotation order, present files only); UserError naming
    `make download_data` when the annotation file is absent."""
    check_dataset(dataset)
    annotations, images = annotation_file(dataset, paths), image_dir(dataset, paths)
    if not annotations.is_file():
        raise UserError(f"Data set {dataset} is not at {paths.dataset_dir(dataset)} ({ANNOTATIONS.as_posix()} "
                        f"missing). Run `{download_hint(dataset)}` first.", exit_code=EXIT_FAILURE)
    return [image for image in annotation_images(annotations) if (images / image.file_name).is_file()]


# -- download_data --------------------------------------------------------------------------------

def download_data(dataset: str, paths: Paths, log: Log) -> Path:
    check_dataset(dataset)
    if dataset == "coco_mini":
        return _link_coco_mini(paths, log)
    return _check_coco_safe(paths, log)


def coco_mini_source(paths: Paths) -> Path:
    return paths.shared_data / "coco_mini"


def _link_coco_mini(paths: Paths, log: Log) -> Path:
    source, target = coco_mini_source(paths), paths.dataset_dir("coco_mini")
    images, annotations = source / IMAGE_DIRS["coco_mini"], source / SHARED_ANNOTATIONS
    if not (images.is_dir() and annotations.is_file()):
        raise shared_samples.absent("coco_mini", f"{source} (val2017/ with 158 JPEGs and {SHARED_ANNOTATIONS})",
                                    f"Put the folder there, or bring the closed-division data set: "
                                    f"`{download_hint('coco_safe')}` says how.")
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise UserError(f"coco_mini: {target} is not a folder; remove it and rerun.", exit_code=EXIT_FAILURE)
    made = [shared_samples.link_sample("coco_mini", target / IMAGE_DIRS["coco_mini"], images),
            shared_samples.link_sample("coco_mini", target / ANNOTATIONS, annotations)]
    if not any(made):
        log(f"coco_mini: {target} already holds {IMAGE_DIRS['coco_mini']}/ and {ANNOTATIONS.as_posix()}")
    else:
        log(f"coco_mini: {target}/{IMAGE_DIRS['coco_mini']} -> {images}, {target / ANNOTATIONS} -> {annotations}")
    return target


def _check_coco_safe(paths: Paths, log: Log) -> Path:
    """Never downloads (the data is on MLCommons' bucket, behind its own tool): checks the user's copy."""
    target = paths.dataset_dir("coco_safe")
    layout = (f"Expected layout:\n  {target}/\n    {IMAGE_DIRS['coco_safe']}/   ({COCO_SAFE_COUNT} JPEGs, "
              f"000000000139.jpg ...)\n    {ANNOTATIONS.as_posix()}\n")
    annotations = target / ANNOTATIONS
    if not annotations.is_file():
        raise UserError(f"coco_safe: not found ({annotations} is missing).\n{layout}{_COCO_SAFE_HOW_TO}",
                        exit_code=EXIT_FAILURE)
    listed = annotation_images(annotations)
    present = qsl_images("coco_safe", paths)
    if len(listed) != COCO_SAFE_COUNT or len(present) != len(listed):
        have = {image.file_name for image in present}
        missing = [image.file_name for image in listed if image.file_name not in have]
        problem = (f"{len(missing)} of the {len(listed)} images the annotations list are missing from "
                   f"{image_dir('coco_safe', paths)} (first: {missing[0]})" if missing else
                   f"the annotations list {len(listed)} images, the data set has {COCO_SAFE_COUNT}")
        raise UserError(f"coco_safe: incomplete in {target}: {problem}.\n{layout}{_COCO_SAFE_HOW_TO}",
                        exit_code=EXIT_FAILURE)
    log(f"coco_safe: {len(present)} images and {ANNOTATIONS.as_posix()} present in {target}")
    return target


# -- calibration ----------------------------------------------------------------------------------

def calibration_indices(dataset: str, count: int, paths: Paths) -> Sequence[int]:
    """QSL indices of at most `count` calibration images, in calibration order.

    coco_mini: every other image, 0, 2, 4, ... (79 of the 158), the first `count` of them.

    coco_safe: MLPerf publishes no calibration list for yolo. The inference repository's
    calibration/COCO/coco_cal_images_list.txt (500 COCO 2017 *train* images, made for SSD) names images that are
    not part of the coco_safe download, so it is not used. The list is `count` images spread evenly over the
    1525: index i * 1525 // count for i = 0 .. count-1 (for 64: 0, 23, 47, 71, ...), a fixed, documented choice
    that depends on nothing but the QSL order.
    """
    if count < 1:
        raise UserError(f"calibration count must be at least 1, got {count}")
    total = len(qsl_images(dataset, paths))
    if dataset == "coco_mini":
        return list(range(0, total, 2))[:count]
    count = min(count, total)
    return [i * total // count for i in range(count)]
