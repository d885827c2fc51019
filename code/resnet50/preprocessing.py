"""Preprocessed tensors on disk: one `<image file>.npy` (CHW, the model's dtype) per image, in QSL order.

The folder also holds `val_map.txt` (`<name>.npy <label>`) and `manifest.json`. The manifest is written
last and removed first, so a folder whose manifest matches what we would write now is complete and
current; anything else (missing, interrupted, other preprocessing or source list) is stale.
"""
from __future__ import annotations

import json
import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..common.benchmark_api import Log
from ..common.errors import UserError
from ..common.fileio import atomic_path, sha256_file, write_atomically
from ..common.paths import Paths
from .datasets import VAL_MAP, check_dataset, download_hint, parse_val_map, read_val_map
from .models import BENCHMARK, facts, preprocess_function

MANIFEST = "manifest.json"
FORMAT_VERSION = 1  # bump when the file layout changes, so older folders read as stale


def preprocess_hint(model: str, dataset: str) -> str:
    return f'make preprocess_data RUN_ARGS="--benchmarks=resnet50 --model={model} --dataset={dataset}"'


@dataclass
class PreprocessedImages:
    """A `PreprocessedSet`: sample i is `directory / file_names[i]`, its label `labels[i]` (0..999)."""

    directory: Path
    file_names: list[str]
    labels: np.ndarray
    manifest: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.file_names)

    def load(self, index: int) -> np.ndarray:
        return np.load(self.directory / self.file_names[index])


def _output_name(image_name: str) -> str:
    return image_name.replace("/", "__") + ".npy"  # flat folder even if val_map names hold subfolders


def _expected_manifest(model: str, dataset: str, paths: Paths) -> dict[str, Any] | None:
    """The manifest preprocessing would write now; None when the raw data set is not there to compare."""
    spec, source = facts(model).spec, paths.dataset_dir(dataset) / VAL_MAP
    if not source.is_file():
        return None
    return {
        "format": FORMAT_VERSION, "model": model, "dataset": dataset,
        "count": len(parse_val_map(source)),
        "preprocessing": facts(model).preprocessing,
        "input_shape": list(spec.input_shape), "dtype": spec.input_dtype,
        "source_val_map_sha256": sha256_file(source),
    }


def _read_manifest(directory: Path) -> dict[str, Any] | None:
    try:
        return json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def preprocessed(model: str, dataset: str, paths: Paths) -> PreprocessedImages:
    """Open the preprocessed folder; UserError naming `make preprocess_data` when missing or stale."""
    check_dataset(dataset)
    directory = paths.preprocessed_dir(BENCHMARK, model, dataset)
    manifest = _read_manifest(directory)
    if manifest is None or not (directory / VAL_MAP).is_file():
        raise UserError(f"{model} on {dataset} is not preprocessed ({directory} has no complete {MANIFEST}). "
                        f"Run `{preprocess_hint(model, dataset)}` first.", exit_code=1)
    expected = _expected_manifest(model, dataset, paths)
    if expected is None:  # raw data gone (or copied elsewhere): trust the folder for what it says it is
        expected = {**manifest, "format": FORMAT_VERSION, "model": model, "dataset": dataset,
                    "preprocessing": facts(model).preprocessing}
    changed = sorted(k for k in expected.keys() | manifest.keys() if expected.get(k) != manifest.get(k))
    if changed:
        raise UserError(f"The preprocessed data in {directory} is stale ({', '.join(changed)} changed). "
                        f"Run `{preprocess_hint(model, dataset)}` again.", exit_code=1)
    entries = parse_val_map(directory / VAL_MAP)
    if len(entries) != manifest["count"]:
        raise UserError(f"{directory / VAL_MAP} lists {len(entries)} samples, the manifest {manifest['count']}. "
                        f"Run `{preprocess_hint(model, dataset)}` again.", exit_code=1)
    return PreprocessedImages(directory, [name for name, _ in entries],
                              np.array([label for _, label in entries], dtype=np.int64), manifest)


def _convert_one(source: Path, dest: Path, function: Callable, shape: tuple[int, ...], dtype: np.dtype) -> None:
    from PIL import Image

    with Image.open(source) as image:
        array = np.ascontiguousarray(function(image), dtype=dtype)
    if array.shape != shape:
        raise ValueError(f"preprocessing gave shape {array.shape}, the model takes {shape}")
    with atomic_path(dest) as tmp, open(tmp, "wb") as out:
        np.save(out, array)


def preprocess(model: str, dataset: str, paths: Paths, log: Log) -> PreprocessedImages:
    """Write (or reuse, when the manifest matches) the preprocessed tensors of `model` on `dataset`."""
    entries = read_val_map(dataset, paths)  # UserError naming `make download_data` when absent
    source_dir, directory = paths.dataset_dir(dataset), paths.preprocessed_dir(BENCHMARK, model, dataset)
    expected = _expected_manifest(model, dataset, paths)
    if _read_manifest(directory) == expected and (directory / VAL_MAP).is_file():
        log(f"{model} on {dataset}: preprocessed data in {directory} is up to date ({len(entries)} images); skipped")
        return preprocessed(model, dataset, paths)
    missing = [name for name, _ in entries if not (source_dir / name).is_file()]
    if missing:
        raise UserError(f"{dataset}: {len(missing)} images listed in {VAL_MAP} are missing from {source_dir} "
                        f"(first: {missing[0]}). Run `{download_hint(dataset)}`.", exit_code=1)

    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST).unlink(missing_ok=True)  # from here until the end the folder reads as stale
    spec = facts(model).spec
    function, dtype = preprocess_function(model), np.dtype(spec.input_dtype)
    names = [_output_name(name) for name, _ in entries]
    log(f"{model} on {dataset}: preprocessing {len(entries)} images with {facts(model).preprocessing} "
        f"into {directory}")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {pool.submit(_convert_one, source_dir / name, directory / out, function, spec.input_shape, dtype):
                   name for (name, _), out in zip(entries, names)}
        try:
            _wait_with_progress(futures, f"{model}/{dataset}", log)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    write_atomically(directory / VAL_MAP, "".join(f"{n} {label}\n" for n, (_, label) in zip(names, entries)).encode())
    write_atomically(directory / MANIFEST, (json.dumps(expected, indent=2) + "\n").encode())  # last: marks complete
    seconds = time.perf_counter() - start
    log(f"{model} on {dataset}: {len(entries)} images in {seconds:.1f} s ({len(entries) / max(seconds, 1e-9):.0f} "
        f"images/s)")
    return preprocessed(model, dataset, paths)


def _wait_with_progress(futures: dict[Future, str], label: str, log: Log) -> None:
    """Re-raise the first failure naming its image; show progress (rich on a terminal, else log lines)."""
    total = len(futures)

    def check(future: Future) -> None:
        error = future.exception()
        if error is not None:
            raise UserError(f"could not preprocess {futures[future]}: {error}", exit_code=1) from error

    if sys.stdout.isatty():
        from rich.progress import Progress

        with Progress(transient=True) as progress:
            task = progress.add_task(f"preprocessing {label}", total=total)
            for future in as_completed(futures):
                check(future)
                progress.advance(task)
        return
    every = max(500, total // 10)   # a log line per tenth of a large set; small sets just finish
    for done, future in enumerate(as_completed(futures), 1):
        check(future)
        if done % every == 0 and done < total:
            log(f"{label}: {done}/{total} images")
