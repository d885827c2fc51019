"""Model files on disk: their digests recorded when `make download_model` makes them, checked before an engine is
built from them or checked against them.

A model that no longer matches its record is never used: the engine builder and the harness stop, naming it and
`make download_model`; `make download_model` moves the changed file aside (`<name>.changed`, nothing is lost) and
makes the model again. A model the toolkit finds without a record (placed by hand, or made by an older version) is
recorded the first time it is used.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Iterable

from .benchmark_api import Benchmark, Log, ServingFolder
from .fileio import external_data
from .integrity import (DamagedInput, FileDigest, forget_record, read_record, record_path, record_problem,
                        record_problems, write_record)
from .paths import Paths

CHANGED_SUFFIX = ".changed"


def download_hint(benchmark: str, model: str) -> str:
    return f'make download_model RUN_ARGS="--benchmarks={benchmark} --model={model}"'


def _companions(model: Path) -> tuple[Path, ...]:
    """The files recorded with the model: its external data, and any its record already names (a benchmark whose
    model is a folder records the folder's other files with its weights)."""
    data = external_data(model)
    named = (read_record(model) or {}).keys() - {model.name, data.name}
    return tuple(p for p in (data, *(model.with_name(n) for n in sorted(named))) if p.is_file())


def _record(model: Path) -> dict[str, FileDigest]:
    return write_record(model, _companions(model))


def recorded_sha256(model: Path, digests: dict[str, FileDigest]) -> str:
    """The model's sha256 as fileio.model_sha256 computes it (over its external data too), from its record."""
    own = digests[model.name].sha256
    data = digests.get(external_data(model).name)
    return own if data is None else hashlib.sha256(f"{own} {data.sha256}".encode()).hexdigest()


def move_aside(files: Iterable[Path], log: Log) -> None:
    """Keep changed files as `<name>.changed` (nothing is lost), so that what made them makes them again."""
    for path in files:
        if path.exists():
            aside = path.with_name(path.name + CHANGED_SUFFIX)
            os.replace(path, aside)
            log(f"kept the changed file as {aside}")


def _set_aside_if_changed(model: Path, what: str, log: Log) -> bool:
    """Move the files of `model`'s record that changed since it was made aside (the model and its external data
    together); whether any had."""
    digests = read_record(model) if model.is_file() else None
    damaged = record_problems(model, digests) if digests is not None else {}
    if not damaged:
        return False
    for file, why in damaged.items():
        log(f"{file} {why}: making {what} again")
    move_aside({*damaged, *((model, external_data(model)) if model in damaged else ())}, log)
    forget_record(model)
    return True


def ensure_model(benchmark: Benchmark, model: str, paths: Paths, log: Log) -> Path:
    """`make download_model` for one model: make it (or find it as it was made), make it again when it changed
    since, and record its digest."""
    target = paths.model_file(benchmark.name, model)
    _set_aside_if_changed(target, model, log)
    path = benchmark.download_model(model, paths, log)
    if path.is_dir():
        # A served model's Hugging Face folder: ensure_serving_folder records its files and checks them at each serve.
        return path
    if path != target and _set_aside_if_changed(path, model, log):
        path = benchmark.download_model(model, paths, log)     # a model kept elsewhere (e.g. in a folder of its own)
    digests = read_record(path)
    if digests is None or record_problem(path, digests) is not None or \
            set(digests) != {p.name for p in (path, *_companions(path))}:
        _record(path)    # just made (or converted again from a new source), or found without a record
    return path


def verified_model(benchmark: str, model: str, paths: Paths, path: Path | None = None) -> tuple[Path, str]:
    """The model file (`path`, by default where ONNX models live) and its sha256, checked against the digest
    recorded when it was made (with the files recorded beside it); DamagedInput naming the file and `make
    download_model` when it is missing or changed since."""
    path = Path(path) if path is not None else paths.model_file(benchmark, model)
    hint = download_hint(benchmark, model)
    if not path.is_file():
        raise DamagedInput(f"Model file {path} is missing", f"Get it with: {hint}")
    digests = read_record(path)
    if digests is None:
        digests = _record(path)   # first use of a model placed by hand: what it is now is what later runs expect
    why = record_problem(path, digests)
    if why is not None:
        raise DamagedInput(f"{why}, so nothing is built or run from it",
                           f"Run `{hint}`: it makes the model again (the changed file is kept as "
                           f"{path.name}{CHANGED_SUFFIX}). If you replaced the model on purpose, delete "
                           f"{record_path(path)} and it is taken as it is now")
    return path, recorded_sha256(path, digests)


def serving_folder_sha256(served: ServingFolder) -> str:
    """One digest of a serving folder's files as their record keeps them (each file's name and sha256, in name
    order): two runs that served folders with equal digests served the same weights and tokenizer. "" when the
    folder's files have no record."""
    digests = read_record(served.folder / served.files[0])
    if digests is None:
        return ""
    listing = "".join(f"{name} {digests[name].sha256}\n" for name in sorted(digests))
    return hashlib.sha256(listing.encode()).hexdigest()


def ensure_serving_folder(benchmark: Benchmark, model: str, paths: Paths, log: Log) -> ServingFolder:
    """The model's Hugging Face folder for serving engines, its files' digests recorded (beside its weights) the
    first time and checked after: a folder the toolkit wrote is written again when a file changed; the user's own
    checkpoint that changed stops the run, naming the file."""
    served = benchmark.serving_folder(model, paths, log)
    anchor = served.folder / served.files[0]
    digests = read_record(anchor)
    if digests is not None:
        why = record_problem(anchor, digests)
        if why is not None and not served.made_by_toolkit:
            raise DamagedInput(f"{why} since it was first served", f"Restore the checkpoint, or delete "
                               f"{record_path(anchor)} to serve it as it is now")
        if why is not None:
            log(f"{why}: writing the {model} folder again")
            served = benchmark.serving_folder(model, paths, log, remake=True)
            digests = None
    if digests is None or set(digests) != set(served.files):
        write_record(anchor, tuple(served.folder / name for name in served.files[1:]))
    return served
