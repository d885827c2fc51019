"""The ImageNet-style data sets of benchmark resnet50: where they come from and how they are read.

Every data set is a folder of JPEGs plus `val_map.txt` (`<file> <label>` lines, labels 0..999 in the
torchvision / MLPerf order). The order of val_map.txt is the QSL index order.
"""
from __future__ import annotations

import re
import zipfile
from pathlib import Path
from typing import Sequence

from ..common import shared_samples
from ..common.benchmark_api import DatasetSpec, Log
from ..common.errors import EXIT_FAILURE, UserError, choose
from ..common.fileio import write_atomically
from ..common.paths import Paths
from ..common.preprocessed_store import parse_map

BENCHMARK = "resnet50"
VAL_MAP = "val_map.txt"                      # file name inside a data set folder (the data set's own format)
CALIBRATION_LIST = "cal_image_list_option_1.txt"
IMAGENET_VAL_COUNT = 50_000
FOOLBOX_PACKAGE, FOOLBOX_VERSION = "foolbox", "3.3.4"
_FOOLBOX_IMAGE = re.compile(r"foolbox/data/(imagenet_\d\d_(\d+)\.jpg)")

_IMAGENET_HOW_TO = (
    f"ImageNet 2012 validation is gated: register at https://image-net.org, download ILSVRC2012_img_val.tar "
    f"(50 000 JPEGs, 6.4 GB) and unpack it flat into the data set folder. Add val_map.txt "
    f"(`ILSVRC2012_val_00000001.JPEG 65` lines, labels 0..999) from the MLPerf inference repository "
    f"(vision/classification_and_detection/tools/, or as the CK/MLCommons instructions describe), and for INT8 "
    f"calibration {CALIBRATION_LIST} from its calibration/ImageNet/ folder (500 of the validation images).")

DATASETS: dict[str, DatasetSpec] = {
    "foolbox20": DatasetSpec(
        name="foolbox20",
        sample_count=20,
        description="20 labelled ImageNet JPEGs shipped in the foolbox wheel (PyPI); enough for a smoke test",
        how_to_get=f"`make download_data` fetches PyPI {FOOLBOX_PACKAGE}=={FOOLBOX_VERSION} (--no-deps) and "
                   f"extracts foolbox/data/imagenet_*.jpg; the label is in each file name.",
    ),
    "imagenet_sample": DatasetSpec(
        name="imagenet_sample",
        sample_count=1000,
        description="1000 ImageNet JPEGs, one per class, for development and CI (not a submission data set)",
        how_to_get="Kept beside the repository in ../shared/data/imagenet_sample (1000 JPEGs + val_map.txt); "
                   "`make download_data` links it into the scratch data folder.",
    ),
    "imagenet": DatasetSpec(
        name="imagenet",
        sample_count=IMAGENET_VAL_COUNT,
        description="ImageNet 2012 validation, 50 000 images: the MLPerf resnet50 data set",
        how_to_get=_IMAGENET_HOW_TO,
    ),
}


def check_dataset(dataset: str) -> DatasetSpec:
    return choose(DATASETS, dataset, "data set", BENCHMARK)


def download_hint(dataset: str) -> str:
    return f'make download_data RUN_ARGS="--benchmarks=resnet50 --dataset={dataset}"'


def parse_val_map(path: Path) -> list[tuple[str, int]]:
    """`<file> <label>` lines; blank lines ignored. Raises UserError on malformed lines."""
    return [(name, label) for name, (label,) in parse_map(path, ("label",))]


def read_val_map(dataset: str, paths: Paths) -> list[tuple[str, int]]:
    """The raw data set's entries in QSL order; UserError naming `make download_data` when absent."""
    check_dataset(dataset)
    val_map = paths.dataset_dir(dataset) / VAL_MAP
    if not val_map.is_file():
        raise UserError(f"Data set {dataset} is not at {paths.dataset_dir(dataset)} ({VAL_MAP} missing). "
                        f"Run `{download_hint(dataset)}` first.", exit_code=EXIT_FAILURE)
    return parse_val_map(val_map)


# -- download_data --------------------------------------------------------------------------------

def download_data(dataset: str, paths: Paths, log: Log) -> Path:
    check_dataset(dataset)
    if dataset == "foolbox20":
        return _download_foolbox(paths, log)
    if dataset == "imagenet_sample":
        return _link_imagenet_sample(paths, log)
    return _check_imagenet(paths, log)


def _download_foolbox(paths: Paths, log: Log) -> Path:
    from ..common.registry_fetch import extract_member, fetch_wheel

    target = paths.dataset_dir("foolbox20")
    try:
        wheel = fetch_wheel(FOOLBOX_PACKAGE, FOOLBOX_VERSION, paths.download_cache)
    except RuntimeError as error:
        raise UserError(f"foolbox20: {error}", exit_code=EXIT_FAILURE) from None
    with zipfile.ZipFile(wheel) as archive:
        members = sorted(m for m in archive.namelist() if _FOOLBOX_IMAGE.fullmatch(m))
    if len(members) != 20:
        raise UserError(f"{wheel.name} holds {len(members)} ImageNet images, expected 20", exit_code=EXIT_FAILURE)
    lines = []
    for member in members:
        name, label = _FOOLBOX_IMAGE.fullmatch(member).groups()
        extract_member(wheel, member, target / name)  # skipped when already there
        lines.append(f"{name} {label}\n")
    write_atomically(target / VAL_MAP, "".join(lines))  # last: its presence means the images are there
    log(f"foolbox20: 20 images and {VAL_MAP} in {target}")
    return target


def imagenet_sample_source(paths: Paths) -> Path:
    return paths.shared_data / "imagenet_sample"


def _link_imagenet_sample(paths: Paths, log: Log) -> Path:
    source, target = imagenet_sample_source(paths), paths.dataset_dir("imagenet_sample")
    if not (source / VAL_MAP).is_file():
        raise shared_samples.absent("imagenet_sample", f"{source} (1000 JPEGs + {VAL_MAP})",
                                    "Use --dataset=foolbox20, or put the folder there.")
    shared_samples.link_sample("imagenet_sample", target, source, log,
                               is_copy=lambda found: (found / VAL_MAP).is_file())
    return target


def _check_imagenet(paths: Paths, log: Log) -> Path:
    """Never downloads (the data is gated): checks the user's copy and says what is wrong with it."""
    target = paths.dataset_dir("imagenet")
    layout = (f"Expected layout:\n  {target}/\n    {VAL_MAP}\n    ILSVRC2012_val_00000001.JPEG ... "
              f"ILSVRC2012_val_00050000.JPEG\n    {CALIBRATION_LIST}   (for INT8 calibration)\n")
    if not (target / VAL_MAP).is_file():
        raise UserError(f"imagenet: not found ({target / VAL_MAP} is missing).\n{layout}{_IMAGENET_HOW_TO}",
                        exit_code=EXIT_FAILURE)
    entries = parse_val_map(target / VAL_MAP)
    missing = [name for name, _ in entries if not (target / name).is_file()]
    if missing or len(entries) != IMAGENET_VAL_COUNT:
        problem = (f"{len(missing)} of the {len(entries)} images {VAL_MAP} lists are missing "
                   f"(first: {missing[0]})" if missing else
                   f"{VAL_MAP} lists {len(entries)} images, the validation set has {IMAGENET_VAL_COUNT}")
        raise UserError(f"imagenet: incomplete in {target}: {problem}.\n{layout}{_IMAGENET_HOW_TO}",
                        exit_code=EXIT_FAILURE)
    cal = "present" if (target / CALIBRATION_LIST).is_file() else "absent (needed only for INT8 calibration)"
    log(f"imagenet: {len(entries)} images and {VAL_MAP} present in {target}; {CALIBRATION_LIST} {cal}")
    return target


# -- calibration ----------------------------------------------------------------------------------

def calibration_indices(dataset: str, count: int, paths: Paths) -> Sequence[int]:
    """QSL indices of at most `count` calibration images.

    foolbox20: the first `count`. imagenet_sample: `count` indices spread evenly over the 1000 classes.
    imagenet: MLPerf's calibration list option 1 (500 validation images), in its order.
    """
    if count < 1:
        raise UserError(f"calibration count must be at least 1, got {count}")
    entries = read_val_map(dataset, paths)
    total = len(entries)
    if dataset == "foolbox20":
        return list(range(min(count, total)))
    if dataset == "imagenet_sample":
        count = min(count, total)
        return [i * total // count for i in range(count)]
    cal_list = paths.dataset_dir(dataset) / CALIBRATION_LIST
    if not cal_list.is_file():
        raise UserError(f"imagenet: the MLPerf calibration list {cal_list} is missing. Get {CALIBRATION_LIST} from "
                        f"the MLPerf inference repository (calibration/ImageNet/) and place it there.",
                        exit_code=EXIT_FAILURE)
    index = {name: i for i, (name, _) in enumerate(entries)}
    names = [line.split()[0] for line in cal_list.read_text().splitlines() if line.strip()]
    unknown = [n for n in names if n not in index]
    if unknown:
        raise UserError(f"{cal_list}: {len(unknown)} images are not in {VAL_MAP} (first: {unknown[0]})",
                        exit_code=EXIT_FAILURE)
    return [index[name] for name in names[:count]]
