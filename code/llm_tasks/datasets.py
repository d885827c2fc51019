"""The data sets of a task benchmark: which files make them, where they come from, and how they are read.

A data set is one file, or, where the round runs different prompts per kind of run (gpt-oss-120b: performance runs
read perf_eval_ref, accuracy runs acc_eval_inputs, TEST07 a GPQA file), one file per part. Development samples kept
beside the repository (../shared/data) are linked into the scratch data folder by `make download_data`; the
MLCommons files are never downloaded (MLCommons' own downloader fetches them) but checked where the user puts them.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..common import shared_samples
from ..common.benchmark_api import DatasetSpec, Log
from ..common.errors import EXIT_FAILURE, UserError
from ..common.paths import Paths
from .items import TaskItem

ALL = "all"                 # the part of a one-file data set
PERFORMANCE, ACCURACY = "performance", "accuracy"

Reader = Callable[[Path], Sequence[TaskItem]]


@dataclass(frozen=True)
class TaskDataset:
    """One data set of a task benchmark. `files` maps each part to its file name in the data set folder; `shared`
    is the file's place under ../shared/data for a development sample (linked, never copied)."""

    spec: DatasetSpec
    files: Mapping[str, str]
    read: Reader
    shared: str | None = None
    part_counts: Mapping[str, int] | None = None     # samples per part of the MLCommons files, where known
    folder: str | None = None    # another data set's folder that holds its files (one download, several sets)
    instead: str = ""            # what to do where the shared sample is absent (default: bring the MLCommons set)

    @property
    def name(self) -> str:
        return self.spec.name

    def directory(self, paths: Paths) -> Path:
        return paths.dataset_dir(self.folder or self.name)

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(self.files)


def part_for(dataset: TaskDataset, accuracy: bool, audit_test: str | None) -> str:
    """The part a run reads: the audit test's own where the data set has one, else the accuracy or performance
    part, else the one file."""
    for part in (audit_test, ACCURACY if accuracy else PERFORMANCE):
        if part and part in dataset.files:
            return part
    return dataset.parts[0]


def file_of(dataset: TaskDataset, part: str, paths: Paths) -> Path:
    return dataset.directory(paths) / dataset.files[part]


def download_hint(benchmark: str, dataset: str) -> str:
    return f'make download_data RUN_ARGS="--benchmarks={benchmark} --dataset={dataset}"'


def load_items(benchmark: str, dataset: TaskDataset, part: str, paths: Paths) -> list[TaskItem]:
    """The part's items in QSL order (cached while its file is unchanged); UserError naming `make download_data`
    when the file is absent."""
    path = file_of(dataset, part, paths)
    try:
        stat = path.stat()
    except OSError:
        raise UserError(f"Data set {dataset.name} is not at {path}. Run `{download_hint(benchmark, dataset.name)}` "
                        f"first.", exit_code=EXIT_FAILURE) from None
    return list(_read(dataset.read, str(path), stat.st_size, stat.st_mtime_ns))


@lru_cache(maxsize=8)
def _read(read: Reader, path: str, size: int, mtime_ns: int) -> tuple[TaskItem, ...]:
    items = tuple(read(Path(path)))
    if not items:
        raise UserError(f"{path} holds no samples.", exit_code=EXIT_FAILURE)
    return items


def download_data(benchmark: str, dataset: TaskDataset, paths: Paths, log: Log) -> Path:
    """Link a development sample from ../shared, or check the MLCommons files where the user put them."""
    folder = dataset.directory(paths)
    if dataset.shared is not None:
        _link_shared(benchmark, dataset, paths, log)
        return folder
    where = ", ".join(dataset.files.values())
    for part, name in dataset.files.items():
        target = folder / name
        if not target.is_file():
            raise UserError(f"{dataset.name}: not found ({target} is missing). Put {where} in {folder}.\n"
                            f"{dataset.spec.how_to_get}", exit_code=EXIT_FAILURE)
        items = load_items(benchmark, dataset, part, paths)
        expected = (dataset.part_counts or {}).get(part)
        if expected is not None and len(items) != expected:
            raise UserError(f"{dataset.name}: {target} holds {len(items)} samples, the MLCommons file has "
                            f"{expected}: it is not the official file, or a cut of it.\n{dataset.spec.how_to_get}",
                            exit_code=EXIT_FAILURE)
        log(f"{dataset.name}: {len(items)} samples present in {target}")
    return folder


def shared_source(dataset: TaskDataset, paths: Paths) -> Path:
    assert dataset.shared is not None
    return paths.shared_data / dataset.shared


def _link_shared(benchmark: str, dataset: TaskDataset, paths: Paths, log: Log) -> None:
    source = shared_source(dataset, paths)
    if not source.is_file():
        raise shared_samples.absent(dataset.name, source, dataset.instead or
                                    f"Put it there, or bring the MLCommons data set (`make download_data "
                                    f"RUN_ARGS=\"--benchmarks={benchmark} --dataset=<name>\"` says how).")
    for name in dict.fromkeys(dataset.files.values()):
        shared_samples.link_sample(dataset.name, dataset.directory(paths) / name, source, log)
