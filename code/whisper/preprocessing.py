"""Preprocessing of benchmark whisper: the reference's repacking, once per data set (every model hears the same
clips). The folder holds the clips (`dev-all-repack/<source>_<n>.wav`), the reference's JSON manifest of them
(`dev-all-repack.json`, whose `fname`s are relative to the folder: the official accuracy_eval.py reads it with
`--dataset_dir` the folder) and the toolkit's manifest.json. It is written beside its place and renamed into it:
a failure leaves the previous folder, or none, never half of one.

A sample is what the reference's QSL hands its engine: the clip's audio (here its WAV bytes, as a chat's audio part,
which serving engines take as they are); engines compute the 30 s log-mel features from it.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from ..common.benchmark_api import Log
from ..common.errors import EXIT_FAILURE, UserError
from ..common.paths import Paths
from ..common.preprocessed_store import MANIFEST, preprocess_hint
from ..common.prompts import Audio, Chat
from .audio import check_clip_length, clip_frames, read_clip, write_wav
from .datasets import (BENCHMARK, DATASETS, RepackedClip, clip_entry, dataset_spec, joined_audio, repack_plan,
                       utterances, write_manifest)
from .models import SAMPLE_RATE

REPACKED = "dev-all-repack"              # the reference's folder and manifest names (download_dataset.sh)
REPACKED_MANIFEST = f"{REPACKED}.json"
ALL_MODELS = "repacked"                  # the preprocessed folder's model slot: the clips are the same for every model
FORMAT = 1                               # of this folder's layout; a folder of another is made again
WAV = "audio/wav"


def preprocessed_folder(dataset: str, paths: Paths) -> Path:
    return paths.preprocessed_dir(BENCHMARK, ALL_MODELS, dataset)


def _hint(model: str, dataset: str) -> str:
    return preprocess_hint(BENCHMARK, model, dataset)


def _source_identity(dataset: str, items) -> dict:
    return {"benchmark": BENCHMARK, "dataset": dataset, "format": FORMAT, "utterances": len(items),
            "source_bytes": sum(item.path.stat().st_size for item in items)}


def preprocess(model: str, dataset: str, paths: Paths, log: Log) -> "RepackedSet":
    dataset_spec(dataset)
    folder = preprocessed_folder(dataset, paths)
    redo = f"download the data set again (`make download_data RUN_ARGS=\"--benchmarks=whisper --dataset={dataset}\"`)"
    items = utterances(dataset, paths)
    for item in items:
        if not item.path.is_file():
            raise UserError(f"{item.path} is missing (named by the data set's transcripts); {redo}.")
    identity = _source_identity(dataset, items)
    current = _read_manifest(folder)
    if current is not None and {k: v for k, v in current.items() if k != "files"} == identity:
        try:
            found = open_set(folder, model, dataset)
            log(f"whisper: {len(found)} repacked clips of {dataset} are up to date in {folder}")
            return found
        except UserError:
            pass                                  # damaged: made again below
    plan = repack(items, folder, identity, redo, expected=DATASETS[dataset].sample_count
                  if dataset == "librispeech_dev" else None)
    log(f"whisper: {len(items)} utterances of {dataset} repacked into {len(plan)} clips in {folder}")
    return open_set(folder, model, dataset)


def repack(items, folder: Path, identity: dict, redo: str, expected: int | None = None) -> list[RepackedClip]:
    """Repack `items` into `folder` (the clips, the reference's manifest, manifest.json holding `identity`), as
    repackage_librispeech.py does; written beside `folder` and renamed into place. UserError (naming the file and
    `redo`) for an utterance that cannot be read, or (`expected`) a clip count other than the reference's."""
    durations = [clip_frames(item.path, redo) / SAMPLE_RATE for item in items]
    plan = repack_plan(items, durations)
    if expected is not None and len(plan) != expected:
        raise UserError(f"LibriSpeech's dev-clean and dev-other repack into {len(plan)} clips here, not the "
                        f"reference's {expected}: the data set folder holds other or fewer files; {redo}.",
                        exit_code=EXIT_FAILURE)
    work = folder.with_name(f".{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(work, ignore_errors=True)
    (work / REPACKED).mkdir(parents=True)
    try:
        entries, files = [], {}
        for clip in plan:
            entries.append(_write_clip(work, clip, redo))
            files[clip.name] = {"bytes": (work / REPACKED / clip.name).stat().st_size}
        write_manifest(work / REPACKED_MANIFEST, entries)
        (work / MANIFEST).write_text(json.dumps({**identity, "files": files}, indent=1))
        if folder.exists():
            shutil.rmtree(folder)
        work.rename(folder)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return plan


def _write_clip(work: Path, clip: RepackedClip, redo: str) -> dict:
    audio = joined_audio([read_clip(part.path, what_to_do=redo) for part in clip.parts])
    fname = f"{REPACKED}/{clip.name}"
    write_wav(work / fname, audio)
    return clip_entry(len(audio), " ".join(part.transcript for part in clip.parts), fname)


def _read_manifest(folder: Path) -> dict | None:
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


class RepackedSet:
    """The repacked clips of a data set, in the order of the reference's manifest (the QSL order)."""

    def __init__(self, directory: Path, entries: list[dict], hint: str) -> None:
        self.directory = directory
        self.entries = entries
        self.hint = hint

    def __len__(self) -> int:
        return len(self.entries)

    def path(self, index: int) -> Path:
        return self.directory / self.entries[index]["files"][0]["fname"]

    def transcript(self, index: int) -> str:
        return self.entries[index]["transcript"]

    def audio_bytes(self, index: int) -> bytes:
        path = self.path(index)
        try:
            return path.read_bytes()
        except OSError:
            raise UserError(f"{path} is missing (named by {self.directory / REPACKED_MANIFEST}); {self.hint}.") \
                from None

    def load(self, index: int) -> Chat:
        return Chat.user(Audio(self.audio_bytes(index), WAV))

    def samples(self, index: int):
        """float32 16 kHz samples of clip `index` (checked: readable, 16 kHz mono, at most 30 s)."""
        path = self.path(index)
        samples = read_clip(path, self.audio_bytes(index), what_to_do=self.hint)
        check_clip_length(path, samples, self.hint)
        return samples


def open_set(folder: Path, model: str, dataset: str) -> RepackedSet:
    hint = f"run {_hint(model, dataset)}"
    manifest = folder / REPACKED_MANIFEST
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))
    except OSError:
        raise UserError(f"{manifest} is missing; {hint}.") from None
    except ValueError as error:
        raise UserError(f"{manifest} is not JSON ({error}); {hint}.") from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and e.get("files") for e in entries):
        raise UserError(f"{manifest} is not a list of clips in the reference's manifest format; {hint}.")
    recorded = (_read_manifest(folder) or {}).get("files", {})
    for entry in entries:
        path = folder / entry["files"][0]["fname"]
        if not path.is_file():
            raise UserError(f"{path} is missing (named by {manifest}); {hint}.")
        size = recorded.get(path.name, {}).get("bytes")
        if size is not None and size != path.stat().st_size:
            raise UserError(f"{path} has changed since it was written ({path.stat().st_size} bytes, not {size}); "
                            f"{hint}.")
    return RepackedSet(folder, entries, hint)


def preprocessed(model: str, dataset: str, paths: Paths) -> RepackedSet:
    dataset_spec(dataset)
    return open_set(preprocessed_folder(dataset, paths), model, dataset)
