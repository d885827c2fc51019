"""Preprocessed samples on disk, for any benchmark: one `.npy` per sample (the model's input, no batch axis).

A set lives in one folder, `paths.preprocessed_dir(benchmark, model, dataset)`, and holds:

- one `<name>.npy` per sample;
- the map file (e.g. `val_map.txt`), one line per sample in QSL order: `<name>.npy` followed by the sample's
  integers, one per column of the set (resnet50: the label; yolo: the COCO image id and the image's original
  height and width);
- `manifest.json`: the inputs the folder was made from (format, model, data set, preprocessing, input shape
  and dtype, digests of the source lists), under `files` the size, modification time and sha256 of every file
  written, and under `source_files` the path, size, modification time and sha256 of the file each sample was made
  from (an image replaced after preprocessing makes its sample stale).

The manifest is written last and removed first, so a folder is current when its manifest records what we would
preprocess now and every file is still the one written: whenever the set is opened, each sample's size and time
are compared with the record and a sample whose time changed is hashed (integrity.py), the map file is always
hashed, and each source still there is compared by size and time (hashed where its time changed);
`write_store` hashes every file and preprocesses again exactly the files that differ or whose source changed.
Anything else (missing, interrupted, other preprocessing or source list, a truncated, replaced or overwritten
file) is stale, and the message names the file and the `make preprocess_data` command that repairs it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import sys
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import numpy as np

from .benchmark_api import Log
from .disk_full import disk_full_message
from .errors import EXIT_FAILURE, UserError
from .fileio import write_atomically
from .integrity import FileDigest, problem

MANIFEST = "manifest.json"
FILES = "files"     # manifest key: {file name: {"size": bytes, "mtime_ns": int, "sha256": hex}} of every file written
# manifest key: {file name: {"path": source file, "size", "mtime_ns", "sha256"}}: what each sample was made from, as it
# was when read (a source replaced since makes its sample stale)
SOURCE_FILES = "source_files"


def preprocess_hint(benchmark: str, model: str, dataset: str, extra_args: str = "") -> str:
    return f'make preprocess_data RUN_ARGS="--benchmarks={benchmark} --model={model} --dataset={dataset}{extra_args}"'


@dataclass(frozen=True)
class Store:
    """What one preprocessed set is and where it lives."""

    benchmark: str
    model: str
    dataset: str
    directory: Path
    map_name: str                   # e.g. "val_map.txt"
    columns: tuple[str, ...]        # the integers after the file name on each map line, e.g. ("label",)
    shape: tuple[int, ...]          # one sample, no batch axis
    dtype: str                      # numpy dtype name of the samples
    preprocessing: str              # names the preprocessing function (and its version), recorded in the manifest
    format: int = 2                 # bump when the file layout changes, so older folders read as stale
    # What the samples are made from, as it is now (e.g. {"count": 20, "source_val_map_sha256": ...}); None when
    # the raw data set is not there to compare (then an existing folder is trusted for what it says it is).
    sources: dict[str, Any] | None = None
    hint_args: str = ""             # more RUN_ARGS the make preprocess_data command of this set needs
    # The raw data set's folder: sources under it are recorded by their path in it, so a scratch copied or moved
    # elsewhere checks its own sources (None: sources are recorded by their full path).
    source_dir: Path | None = None

    @property
    def hint(self) -> str:
        return preprocess_hint(self.benchmark, self.model, self.dataset, self.hint_args)

    @property
    def identity(self) -> dict[str, Any]:
        """The manifest entries that do not depend on the raw data."""
        return {"format": self.format, "model": self.model, "dataset": self.dataset,
                "preprocessing": self.preprocessing, "input_shape": list(self.shape), "dtype": self.dtype}

    @property
    def expected(self) -> dict[str, Any] | None:
        """The manifest (less `files`) that preprocessing would write now; None without the raw data."""
        return None if self.sources is None else {**self.identity, **self.sources}


@dataclass(frozen=True)
class SourceSample:
    """One sample to preprocess: read from `source`, written as `name`, with its map-line integers `values`."""

    source: Path
    name: str
    values: tuple[int, ...]


def output_name(relative: str) -> str:
    """The `.npy` name of a source file named `relative` in its data set: one flat folder even for subfolders."""
    return relative.replace("/", "__") + ".npy"


@dataclass
class PreprocessedSamples:
    """A `PreprocessedSet`: sample i is `directory / file_names[i]`; `values[i]` its map-line integers."""

    directory: Path
    file_names: list[str]
    values: np.ndarray              # int64, samples x columns
    columns: tuple[str, ...]
    manifest: dict[str, Any] = field(default_factory=dict)
    hint: str = ""                  # the make preprocess_data command that repairs the set

    def __len__(self) -> int:
        return len(self.file_names)

    def column(self, name: str) -> np.ndarray:
        """One integer per sample, e.g. column("label")."""
        try:
            return self.values[:, self.columns.index(name)]
        except ValueError:
            raise KeyError(f"{self.directory}: no column {name!r} (columns: {', '.join(self.columns)})") from None

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
        return UserError(f"{path} {why}. Run `{self.hint}` again: it preprocesses the damaged files again.",
                         exit_code=EXIT_FAILURE)


Samples = TypeVar("Samples", bound=PreprocessedSamples)


# -- map files ------------------------------------------------------------------------------------

def parse_map(path: Path, columns: Sequence[str]) -> list[tuple[str, tuple[int, ...]]]:
    """`<file> <int> ...` lines, one integer per column; blank lines ignored. UserError on malformed lines."""
    entries = []
    expected = " ".join(["<file>", *(f"<{c}>" for c in columns)])
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split()
        if len(parts) != len(columns) + 1 or not all(p.lstrip("-").isdigit() for p in parts[1:]):
            raise UserError(f"{path}:{number}: expected `{expected}`, found {line!r}", exit_code=EXIT_FAILURE)
        entries.append((parts[0], tuple(int(p) for p in parts[1:])))
    return entries


def format_map(entries: Sequence[tuple[str, Sequence[int]]]) -> str:
    return "".join(" ".join([name, *(str(int(v)) for v in values)]) + "\n" for name, values in entries)


# -- manifest and file checks ---------------------------------------------------------------------

def read_manifest(directory: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get(FILES), dict) else None


def _without_times(value: Any) -> Any:
    """A manifest without its files' modification times and its sources' places: they change when a file is
    touched, copied or moved, the data does not."""
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if k not in ("mtime_ns", "path")}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def store_size(directory: Path) -> int | None:
    """Samples of the preprocessed set in `directory` as its manifest counts them; None without a readable one."""
    manifest = read_manifest(directory)
    count = None if manifest is None else manifest.get("count")
    return count if isinstance(count, int) else None


def set_identity(directory: Path) -> dict[str, str]:
    """The folder of a preprocessed set (of any benchmark: each keeps a manifest.json) and the sha256 of what its
    manifest says the data is (the times left out), "" when it has no readable one: what a run record keeps of the
    data it read."""
    try:
        manifest = json.loads((Path(directory) / MANIFEST).read_text())
    except (OSError, ValueError):
        return {"directory": str(directory), "manifest_sha256": ""}
    content = json.dumps(_without_times(manifest), sort_keys=True).encode()
    return {"directory": str(directory), "manifest_sha256": hashlib.sha256(content).hexdigest()}


def _inputs(manifest: dict[str, Any]) -> dict[str, Any]:
    """What the folder was made from: the manifest without the digests of what was read and written."""
    return {k: v for k, v in manifest.items() if k not in (FILES, SOURCE_FILES)}


def _source_name(source: Path, source_dir: Path | None) -> str:
    """How a source is recorded: its path in the data set's folder where it lies there, else its full path."""
    if source_dir is not None and Path(source).is_relative_to(source_dir):
        return str(Path(source).relative_to(source_dir))
    return str(source)


def _source_entry(source: Path, source_dir: Path | None) -> dict[str, Any]:
    return {"path": _source_name(source, source_dir), **FileDigest.of(source).to_dict()}


def _changed_source(name: str, recorded: Any, check_present: bool, source_dir: Path | None) -> str | None:
    """Why the source of sample `name` is not the file it was made from (a sentence fragment naming it), or None.
    A source no longer there is not compared (the set is trusted for what it says it is) unless `check_present`."""
    digest = FileDigest.from_dict(recorded)
    if digest is None or not isinstance(recorded.get("path"), str):
        return f"{name} has no digest of the file it was made from (made by an older version)"
    source = Path(recorded["path"])
    if not source.is_absolute() and source_dir is not None:
        source = source_dir / source
    if not check_present and not source.exists():
        return None
    why = problem(source, digest, hash_below=0)
    return None if why is None else f"{source} {why} since {name} was preprocessed from it"


def _changed_sources(store: Store, manifest: dict[str, Any], names: list[str]) -> dict[str, str]:
    """{sample name: why} of the samples whose source changed since (by size and time, hashed where the time
    changed); none when the raw data is not there to compare."""
    if store.sources is None:
        return {}
    recorded = manifest.get(SOURCE_FILES) if isinstance(manifest.get(SOURCE_FILES), dict) else {}
    found = {name: _changed_source(name, recorded.get(name), False, store.source_dir) for name in names}
    return {name: why for name, why in found.items() if why is not None}


def _changed(expected: dict[str, Any], found: dict[str, Any]) -> list[str]:
    return sorted(k for k in expected.keys() | found.keys() if expected.get(k) != found.get(k))


def _written(path: Path, data: bytes) -> dict[str, Any]:
    """The manifest entry of `data`, just written to `path`."""
    return FileDigest(len(data), path.stat().st_mtime_ns, hashlib.sha256(data).hexdigest()).to_dict()


def _file_problem(path: Path, recorded: Any, check_sha256: bool) -> str | None:
    """Why `path` is not the file its manifest entry records (one clause), or None. Without `check_sha256` a file
    is hashed only when its modification time is not the recorded one (or none is recorded)."""
    if not isinstance(recorded, dict):
        return "is not in the manifest"
    digest = FileDigest.from_dict(recorded) or FileDigest(recorded.get("size", -1), -1, recorded.get("sha256", ""))
    return problem(path, digest, always_hash=check_sha256, hash_below=0)


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


def _require_intact(store: Store, files: dict[str, Any], names: list[str], check_sha256: bool) -> None:
    """UserError naming the first file of `names` that differs from the manifest, and `make preprocess_data`."""
    damaged = _damaged_files(store.directory, files, names, check_sha256)
    if damaged:
        name, why = next(iter(damaged.items()))
        more = f" ({len(damaged) - 1} more file(s) too)" if len(damaged) > 1 else ""
        raise UserError(f"{store.directory / name} {why}{more}. Run `{store.hint}` again: it "
                        f"preprocesses the damaged files again.", exit_code=EXIT_FAILURE)


# -- opening --------------------------------------------------------------------------------------

def open_store(store: Store, cls: type[Samples] = PreprocessedSamples) -> Samples:  # type: ignore[assignment]
    """Open the preprocessed folder; UserError naming `make preprocess_data` when missing or stale."""
    directory = store.directory
    manifest = read_manifest(directory)
    if manifest is None or not (directory / store.map_name).is_file():
        raise UserError(f"{store.model} on {store.dataset} is not preprocessed ({directory} has no complete "
                        f"{MANIFEST}). Run `{store.hint}` first.", exit_code=EXIT_FAILURE)
    inputs = _inputs(manifest)
    expected = store.expected
    if expected is None:  # raw data gone (or copied elsewhere): trust the folder for what it says it is
        expected = {**inputs, **store.identity}
    changed = _changed(expected, inputs)
    if changed:
        raise UserError(f"The preprocessed data in {directory} is stale ({', '.join(changed)} changed). "
                        f"Run `{store.hint}` again.", exit_code=EXIT_FAILURE)
    _require_intact(store, manifest[FILES], [store.map_name], check_sha256=True)
    entries = parse_map(directory / store.map_name, store.columns)
    _require_intact(store, manifest[FILES], [name for name, _ in entries], check_sha256=False)
    changed_sources = _changed_sources(store, manifest, [name for name, _ in entries])
    if changed_sources:
        more = f" ({len(changed_sources) - 1} more sample(s) too)" if len(changed_sources) > 1 else ""
        raise UserError(f"{next(iter(changed_sources.values()))}{more}. Run `{store.hint}` again: it preprocesses "
                        f"those samples again.", exit_code=EXIT_FAILURE)
    if len(entries) != manifest.get("count"):
        raise UserError(f"{directory / store.map_name} lists {len(entries)} samples, the manifest "
                        f"{manifest.get('count')}. Run `{store.hint}` again.", exit_code=EXIT_FAILURE)
    values = np.array([v for _, v in entries], dtype=np.int64).reshape(len(entries), len(store.columns))
    return cls(directory, [name for name, _ in entries], values, tuple(store.columns), manifest, store.hint)


# -- the int8 form of a set ----------------------------------------------------------------------------

INT8_SUFFIX = "-int8"    # the int8 form of a set lives beside it: <model>-int8


def int8_store(store: Store, scale: float, hint_args: str) -> Store:
    """The int8 form of the float set `store` (engines with int8 inputs, engines/int8_input.py): the same samples
    quantized with `scale`, in a folder beside it. Its manifest records the scale and the identity of the float set
    it was made from, so another calibration or another float set reads as stale (with the float set gone, the
    int8 set is trusted for what it says it is)."""
    found = read_manifest(store.directory)
    sources = None if found is None else {
        "count": found.get("count"), "float_set_manifest_sha256": set_identity(store.directory)["manifest_sha256"]}
    return dataclasses.replace(
        store, directory=store.directory.with_name(store.directory.name + INT8_SUFFIX), dtype="int8",
        preprocessing=f"{store.preprocessing}, then QuantizeLinear to int8 with scale {float(scale)!r}",
        sources=sources, hint_args=hint_args)


# -- writing --------------------------------------------------------------------------------------

def _convert_one(source: Path, dest: Path, convert: Callable[[Path], np.ndarray], shape: tuple[int, ...],
                 dtype: np.dtype, source_dir: Path | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Preprocess one sample into `dest`; the digest of its source (taken before reading it: a source written
    meanwhile shows as changed later) and the size and sha256 of what was written."""
    read = _source_entry(source, source_dir)
    array = np.ascontiguousarray(convert(source), dtype=dtype)
    if array.shape != shape:
        raise ValueError(f"preprocessing gave shape {array.shape}, the model takes {shape}")
    buffer = io.BytesIO()
    np.save(buffer, array)
    data = buffer.getvalue()
    write_atomically(dest, data)
    return read, _written(dest, data)


def _reusable_files(store: Store, expected: dict[str, Any], samples: Sequence[SourceSample],
                    log: Log) -> dict[str, Any] | None:
    """The manifest entries of the files that can stay as they are; None when the whole folder is current. A sample
    whose source changed since it was made (or whose source has no digest, from an older version, and is not
    the file `samples` names) is made again."""
    directory, names = store.directory, [s.name for s in samples]
    found = read_manifest(directory)
    if found is None:
        if (directory / MANIFEST).exists():
            log(f"{directory / MANIFEST} is unreadable or from an older version: preprocessing everything again")
        return {}
    if _inputs(found) != expected:
        log(f"the preprocessed data in {directory} is stale ({', '.join(_changed(expected, _inputs(found)))} "
            f"changed): preprocessing again")
        return {}
    damaged = _damaged_files(directory, found[FILES], [*names, store.map_name], check_sha256=True)
    recorded = found.get(SOURCE_FILES) if isinstance(found.get(SOURCE_FILES), dict) else {}
    for sample in samples:
        entry = recorded.get(sample.name)
        if isinstance(entry, dict):     # the source where it is now (a data set moved or copied keeps its bytes)
            entry = {**entry, "path": str(sample.source)}
        why = _changed_source(sample.name, entry, True, None)
        if why is not None and sample.name not in damaged:
            damaged[sample.name] = why
    if not damaged:
        return None
    name, why = next(iter(damaged.items()))
    log(f"{len(damaged)} sample(s) in {directory} differ from its manifest or their source changed (first: {name} "
        f"{why}): preprocessing them again")
    return {n: entry for n, entry in found[FILES].items() if n not in damaged and n != store.map_name}


def _record_times(directory: Path, samples: Sequence[SourceSample], source_dir: Path | None) -> None:
    """Record the modification times of files, and the places and times of sources, just found by their sha256 to
    be as written or read (copied, touched, moved, or written by a version that recorded no times), so opening the
    set does not hash them again."""
    manifest = read_manifest(directory)
    if manifest is None:
        return
    changed = False
    for name, entry in manifest[FILES].items():
        mtime = (directory / name).stat().st_mtime_ns
        if isinstance(entry, dict) and entry.get("mtime_ns") != mtime:
            entry["mtime_ns"] = mtime
            changed = True
    sources = manifest.get(SOURCE_FILES)
    for sample in samples if isinstance(sources, dict) else ():
        entry = sources.get(sample.name)
        now = {"path": _source_name(sample.source, source_dir), "mtime_ns": sample.source.stat().st_mtime_ns}
        if isinstance(entry, dict) and any(entry.get(k) != v for k, v in now.items()):
            entry.update(now)
            changed = True
    if changed:
        write_atomically(directory / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())


def write_store(store: Store, samples: Sequence[SourceSample], convert: Callable[[Path], np.ndarray], log: Log,
                download_hint: str, cls: type[Samples] = PreprocessedSamples) -> Samples:  # type: ignore[assignment]
    """Write (or reuse, when the manifest matches) the preprocessed set of `samples`, in their order.

    `convert` turns one source file into one sample (any array of `store.shape`; it is cast to `store.dtype`);
    it runs on a thread per core. `store.sources` must be set and its `count` equal to len(samples).
    `download_hint` is the command that brings back missing source files."""
    expected = store.expected
    if expected is None or expected.get("count") != len(samples):
        raise ValueError(f"{store.dataset}: the store's sources must record the count of the {len(samples)} samples")
    directory, label = store.directory, f"{store.model}/{store.dataset}"
    names = [s.name for s in samples]
    if len(set(names)) != len(names):
        raise UserError(f"{store.dataset}: two samples would be written to the same file in {directory}",
                        exit_code=EXIT_FAILURE)
    kept = _reusable_files(store, expected, samples, log)
    if kept is None:
        _record_times(directory, samples, store.source_dir)
        log(f"{store.model} on {store.dataset}: preprocessed data in {directory} is up to date "
            f"({len(samples)} samples); skipped")
        return open_store(store, cls)
    todo = [s for s in samples if s.name not in kept]
    missing = [s.source for s in todo if not s.source.is_file()]
    if missing:
        raise UserError(f"{store.dataset}: {len(missing)} of the source files to preprocess are missing "
                        f"(first: {missing[0]}). Run `{download_hint}`.", exit_code=EXIT_FAILURE)

    found = read_manifest(directory) or {}
    previous_sources = found.get(SOURCE_FILES) if isinstance(found.get(SOURCE_FILES), dict) else {}
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST).unlink(missing_ok=True)  # from here until the end the folder reads as stale
    dtype = np.dtype(store.dtype)
    log(f"{store.model} on {store.dataset}: preprocessing {len(todo)} samples with {store.preprocessing} "
        f"into {directory}")
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
        futures = {pool.submit(_convert_one, s.source, directory / s.name, convert, tuple(store.shape), dtype,
                               store.source_dir): s
                   for s in todo}
        try:
            _wait_with_progress({future: str(s.source) for future, s in futures.items()}, label, log)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise
    recorded = previous_sources
    done = {s.name: future.result() for future, s in futures.items()}
    files = {**kept, **{name: written for name, (_, written) in done.items()}}
    sources = {**{n: e for n, e in recorded.items() if n in kept}, **{name: read for name, (read, _) in done.items()}}
    map_data = format_map([(s.name, s.values) for s in samples]).encode()
    write_atomically(directory / store.map_name, map_data)
    files[store.map_name] = _written(directory / store.map_name, map_data)
    manifest = {**expected, FILES: {name: files[name] for name in [*names, store.map_name]},
                SOURCE_FILES: {name: sources[name] for name in names}}
    write_atomically(directory / MANIFEST, (json.dumps(manifest, indent=1) + "\n").encode())  # last: complete
    seconds = time.perf_counter() - start
    log(f"{store.model} on {store.dataset}: {len(todo)} samples in {seconds:.1f} s "
        f"({len(todo) / max(seconds, 1e-9):.0f} samples/s)")
    return open_store(store, cls)


def _wait_with_progress(futures: dict[Future, str], label: str, log: Log) -> None:
    """Re-raise the first failure naming its source; show progress (rich on a terminal, else log lines)."""
    total = len(futures)

    def check(future: Future) -> None:
        error = future.exception()
        if disk_full_message(error) is not None:
            raise UserError(disk_full_message(error), exit_code=EXIT_FAILURE) from error
        if error is not None:
            raise UserError(f"could not preprocess {futures[future]}: {error}", exit_code=EXIT_FAILURE) from error

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
            log(f"{label}: {done}/{total} samples")
