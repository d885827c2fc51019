"""Preprocessed tensors on disk: one `<image file>.npy` (CHW, the model's dtype) per image, in QSL order.

The folder also holds `val_map.txt` (`<name>.npy <label>`) and `manifest.json`: the inputs the folder was made
from, and the size and sha256 of every file written (`files`). The manifest is written last and removed first,
so a folder is current when its manifest records what we would preprocess now and every file still has its
recorded size (checked whenever the set is opened) and sha256 (checked by preprocess_data, which preprocesses
again exactly the files that differ). Anything else (missing, interrupted, other preprocessing or source list,
a truncated or replaced file) is stale, and the message names the file and `make preprocess_data`.
"""
from __future__ import annotations

import hashlib
import io
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
from ..common.fileio import sha256_file, write_atomically
from ..common.paths import Paths
from .datasets import VAL_MAP, check_dataset, download_hint, parse_val_map, read_val_map
from .models import BENCHMARK, facts, preprocess_function

MANIFEST = "manifest.json"
FORMAT_VERSION = 2  # bump when the file layout changes, so older folders read as stale (2: `files` digests)
FILES = "files"     # manifest key: {file name: {"size": bytes, "sha256": hex}} of every file written


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
        """Sample `index`; UserError naming the file and `make preprocess_data` when it is damaged."""
        path = self.directory / self.file_names[index]
        try:
            array = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError) as error:
            raise self._damaged(path, f"cannot be read as a preprocessed sample ({error})") from None
        shape, dtype = self.manifest.get("input_shape"), self.manifest.get("dtype")
        if (shape is not None and list(array.shape) != list(shape)) or (dtype is not None and array.dtype != dtype):
            raise self._damaged(path, f"holds a {array.dtype} array of shape {list(array.shape)}, not {dtype} "
                                      f"{list(shape or ())}")
        return array

    def _damaged(self, path: Path, why: str) -> UserError:
        hint = preprocess_hint(self.manifest.get("model", "?"), self.manifest.get("dataset", "?"))
        return UserError(f"{path} {why}. Run `{hint}` again: it preprocesses the damaged files again.", exit_code=1)


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
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get(FILES), dict) else None


def _inputs(manifest: dict[str, Any]) -> dict[str, Any]:
    """What the folder was made from: the manifest without the digests of what was written."""
    return {k: v for k, v in manifest.items() if k != FILES}


def _digest(data: bytes) -> dict[str, Any]:
    return {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _file_problem(path: Path, recorded: Any, check_sha256: bool) -> str | None:
    """Why `path` is not the file its manifest entry records (one clause), or None."""
    if not isinstance(recorded, dict):
        return "is not in the manifest"
    try:
        size = path.stat().st_size
    except OSError:
        return "is missing"
    if size != recorded.get("size"):
        return f"is {size} bytes, the manifest records {recorded.get('size')} (truncated or replaced)"
    if check_sha256 and sha256_file(path) != recorded.get("sha256"):
        return "does not match the sha256 the manifest records (changed since it was written)"
    return None


def _damaged_files(directory: Path, files: dict[str, Any], names: list[str],
                   check_sha256: bool) -> dict[str, str]:
    """{name: why} of the files in `names` that differ from their manifest entries; sha256 checks in parallel."""
    def check(name: str) -> str | None:
        return _file_problem(directory / name, files.get(name), check_sha256)

    if check_sha256:
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            problems = list(pool.map(check, names))
    else:
        problems = [check(name) for name in names]
    return {name: why for name, why in zip(names, problems) if why is not None}


def _require_intact(directory: Path, files: dict[str, Any], names: list[str], model: str, dataset: str,
                    check_sha256: bool) -> None:
    """UserError naming the first file of `names` that differs from the manifest, and `make preprocess_data`."""
    damaged = _damaged_files(directory, files, names, check_sha256)
    if damaged:
        name, why = next(iter(damaged.items()))
        more = f" ({len(damaged) - 1} more file(s) too)" if len(damaged) > 1 else ""
        raise UserError(f"{directory / name} {why}{more}. Run `{preprocess_hint(model, dataset)}` again: it "
                        f"preprocesses the damaged files again.", exit_code=1)


def preprocessed(model: str, dataset: str, paths: Paths) -> PreprocessedImages:
    """Open the preprocessed folder; UserError naming `make preprocess_data` when missing or stale."""
    check_dataset(dataset)
    directory = paths.preprocessed_dir(BENCHMARK, model, dataset)
    manifest = _read_manifest(directory)
    if manifest is None or not (directory / VAL_MAP).is_file():
        raise UserError(f"{model} on {dataset} is not preprocessed ({directory} has no complete {MANIFEST}). "
                        f"Run `{preprocess_hint(model, dataset)}` first.", exit_code=1)
    inputs = _inputs(manifest)
    expected = _expected_manifest(model, dataset, paths)
    if expected is None:  # raw data gone (or copied elsewhere): trust the folder for what it says it is
        expected = {**inputs, "format": FORMAT_VERSION, "model": model, "dataset": dataset,
                    "preprocessing": facts(model).preprocessing}
    changed = sorted(k for k in expected.keys() | inputs.keys() if expected.get(k) != inputs.get(k))
    if changed:
        raise UserError(f"The preprocessed data in {directory} is stale ({', '.join(changed)} changed). "
                        f"Run `{preprocess_hint(model, dataset)}` again.", exit_code=1)
    _require_intact(directory, manifest[FILES], [VAL_MAP], model, dataset, check_sha256=True)
    entries = parse_val_map(directory / VAL_MAP)
    _require_intact(directory, manifest[FILES], [name for name, _ in entries], model, dataset, check_sha256=False)
    if len(entries) != manifest.get("count"):
        raise UserError(f"{directory / VAL_MAP} lists {len(entries)} samples, the manifest {manifest.get('count')}. "
                        f"Run `{preprocess_hint(model, dataset)}` again.", exit_code=1)
    return PreprocessedImages(directory, [name for name, _ in entries],
                              np.array([label for _, label in entries], dtype=np.int64), manifest)


def _convert_one(source: Path, dest: Path, function: Callable, shape: tuple[int, ...],
                 dtype: np.dtype) -> dict[str, Any]:
    """Preprocess one image into `dest`; the size and sha256 of what was written."""
    from PIL import Image

    with Image.open(source) as image:
        array = np.ascontiguousarray(function(image), dtype=dtype)
    if array.shape != shape:
        raise ValueError(f"preprocessing gave shape {array.shape}, the model takes {shape}")
    buffer = io.BytesIO()
    np.save(buffer, array)
    data = buffer.getvalue()
    write_atomically(dest, data)
    return _digest(data)


def _reusable_files(directory: Path, expected: dict[str, Any], names: list[str],
                    log: Log) -> dict[str, Any] | None:
    """The manifest entries of the files that can stay as they are; None when the whole folder is current."""
    found = _read_manifest(directory)
    if found is None:
        if (directory / MANIFEST).exists():
            log(f"{directory / MANIFEST} is unreadable or from an older version: preprocessing everything again")
        return {}
    if _inputs(found) != expected:
        changed = sorted(k for k in expected.keys() | found.keys() - {FILES} if expected.get(k) != found.get(k))
        log(f"the preprocessed data in {directory} is stale ({', '.join(changed)} changed): preprocessing again")
        return {}
    damaged = _damaged_files(directory, found[FILES], [*names, VAL_MAP], check_sha256=True)
    if not damaged:
        return None
    name, why = next(iter(damaged.items()))
    log(f"{len(damaged)} file(s) in {directory} differ from its manifest (first: {name} {why}): "
        f"preprocessing them again")
    return {n: entry for n, entry in found[FILES].items() if n not in damaged and n != VAL_MAP}


def preprocess(model: str, dataset: str, paths: Paths, log: Log) -> PreprocessedImages:
    """Write (or reuse, when the manifest matches) the preprocessed tensors of `model` on `dataset`."""
    entries = read_val_map(dataset, paths)  # UserError naming `make download_data` when absent
    source_dir, directory = paths.dataset_dir(dataset), paths.preprocessed_dir(BENCHMARK, model, dataset)
    expected = _expected_manifest(model, dataset, paths)
    names = [_output_name(name) for name, _ in entries]
    kept = _reusable_files(directory, expected, names, log)
    if kept is None:
        log(f"{model} on {dataset}: preprocessed data in {directory} is up to date ({len(entries)} images); skipped")
        return preprocessed(model, dataset, paths)
    todo = [(entry, out) for entry, out in zip(entries, names) if out not in kept]
    missing = [name for (name, _), _ in todo if not (source_dir / name).is_file()]
    if missing:
        raise UserError(f"{dataset}: {len(missing)} images listed in {VAL_MAP} are missing from {source_dir} "
                        f"(first: {missing[0]}). Run `{download_hint(dataset)}`.", exit_code=1)

    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST).unlink(missing_ok=True)  # from here until the end the folder reads as stale
    spec = facts(model).spec
    function, dtype = preprocess_function(model), np.dtype(spec.input_dtype)
    log(f"{model} on {dataset}: preprocessing {len(todo)} images with {facts(model).preprocessing} "
        f"into {directory}")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {pool.submit(_convert_one, source_dir / name, directory / out, function, spec.input_shape, dtype):
                   (name, out) for (name, _), out in todo}
        try:
            _wait_with_progress({future: name for future, (name, _) in futures.items()}, f"{model}/{dataset}", log)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    files = {**kept, **{out: future.result() for future, (_, out) in futures.items()}}
    val_map = "".join(f"{n} {label}\n" for n, (_, label) in zip(names, entries)).encode()
    write_atomically(directory / VAL_MAP, val_map)
    files[VAL_MAP] = _digest(val_map)
    manifest = {**expected, FILES: {name: files[name] for name in [*names, VAL_MAP]}}
    write_atomically(directory / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())  # last: marks complete
    seconds = time.perf_counter() - start
    log(f"{model} on {dataset}: {len(todo)} images in {seconds:.1f} s ({len(todo) / max(seconds, 1e-9):.0f} "
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
