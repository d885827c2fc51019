"""Preprocessing of benchmark whisper: the reference's repacking, once per data set (every model hears the same
clips). The folder holds the clips (`dev-all-repack/<source>_<n>.wav`), the reference's JSON manifest of them
(`dev-all-repack.json`, whose `fname`s are relative to the folder: the official accuracy_eval.py reads it with
`--dataset_dir` the folder) and the toolkit's manifest.json. It is written beside its place and renamed into it:
a failure leaves the previous folder, or none, never half of one.

A sample is what the reference's QSL hands its engine: the clip's audio (here its WAV bytes, as a chat's audio part,
which serving engines take as they are); engines compute the 30 s log-mel features from it.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from ..common.benchmark_api import Log
from ..common.errors import EXIT_FAILURE, UserError
from ..common.integrity import FileDigest, digests_of, files_problem
from ..common.paths import Paths
from ..common.preprocessed_store import MANIFEST, preprocess_hint
from ..common.prompts import Audio, Chat
from .audio import check_clip_length, clip_frames, read_clip, write_wav
from .datasets import (BENCHMARK, DATASETS, SHARED_SAMPLE, RepackedClip, clip_entry, dataset_spec, joined_audio,
                       repack_plan, utterances, write_manifest)
from .models import SAMPLE_RATE

REPACKED = "dev-all-repack"              # the reference's folder and manifest names (download_dataset.sh)
REPACKED_MANIFEST = f"{REPACKED}.json"
ALL_MODELS = "repacked"                  # the preprocessed folder's model slot: the clips are the same for every model
FORMAT = 2                               # of this folder's layout; a folder of another is made again
WAV = "audio/wav"


def preprocessed_folder(dataset: str, paths: Paths) -> Path:
    return paths.preprocessed_dir(BENCHMARK, ALL_MODELS, dataset)


def _hint(model: str, dataset: str) -> str:
    return preprocess_hint(BENCHMARK, model, dataset)


def _source_identity(dataset: str, items) -> dict:
    """What the clips are made from: the utterances (names and transcripts); a change makes the folder again. The
    source files' own digests are kept under `sources` (compared by size and time, hashed where the time changed)."""
    listing = "\n".join(f"{item.source} {item.path.name} {item.transcript}" for item in items)
    return {"benchmark": BENCHMARK, "dataset": dataset, "format": FORMAT, "utterances": len(items),
            "listing_sha256": hashlib.sha256(listing.encode()).hexdigest()}


def _source_files(items, dataset: str, paths: Paths) -> dict[str, Path]:
    """The source audio files by their path in the data set folder (the name the manifest keeps them under)."""
    root = paths.dataset_dir(dataset)
    return {os.path.relpath(item.path, root): item.path for item in items}


def _clip_files(folder: Path, names) -> dict[str, Path]:
    return {name: folder / REPACKED / name for name in names}


def _stale_because(folder: Path, manifest: dict | None, identity: dict, sources: dict[str, Path]) -> str | None:
    """Why the repacked folder is not what repacking would write now; None when it is."""
    if manifest is None:
        return "it is not there yet"
    if {k: v for k, v in manifest.items() if k not in ("files", "sources", "reference_manifest")} != identity:
        return "it was made from other utterances or by another version"
    return files_problem(sources, manifest.get("sources"), hash_below=0) or _damaged(folder, manifest)


def _damaged(folder: Path, manifest: dict) -> str | None:
    """The first of the folder's files (the reference's manifest, always hashed; each clip by size and time, hashed
    where its time changed) that is not as written."""
    clips = manifest.get("files") if isinstance(manifest.get("files"), dict) else {}
    return (files_problem({REPACKED_MANIFEST: folder / REPACKED_MANIFEST},
                          {REPACKED_MANIFEST: manifest.get("reference_manifest")}, hash_below=1 << 62)
            or files_problem(_clip_files(folder, clips), clips, hash_below=0))


def preprocess(model: str, dataset: str, paths: Paths, log: Log) -> "RepackedSet":
    dataset_spec(dataset)
    folder = preprocessed_folder(dataset, paths)
    redo = _redo(dataset)
    items = utterances(dataset, paths)
    for item in items:
        if not item.path.is_file():
            raise UserError(f"{item.path} is missing (named by the data set's transcripts); {redo}.",
                            exit_code=EXIT_FAILURE)
    identity, sources = _source_identity(dataset, items), _source_files(items, dataset, paths)
    why = _stale_because(folder, _read_manifest(folder), identity, sources)
    if why is None:
        found = open_set(folder, model, dataset, paths)
        log(f"whisper: {len(found)} repacked clips of {dataset} are up to date in {folder}")
        return found
    log(f"whisper: repacking {dataset} ({why})")
    plan = repack(items, folder, identity, redo, expected=DATASETS[dataset].sample_count
                  if dataset == "librispeech_dev" else None, sources=sources)
    log(f"whisper: {len(items)} utterances of {dataset} repacked into {len(plan)} clips in {folder}")
    return open_set(folder, model, dataset, paths)


def _redo(dataset: str) -> str:
    if dataset == SHARED_SAMPLE:
        return (f"restore it from ../shared/data/{SHARED_SAMPLE} (`make download_data RUN_ARGS=\"--benchmarks=whisper "
                f"--dataset={dataset}\"` links it again)")
    return "replace it with the file of the LibriSpeech archive it came from (`make download_data RUN_ARGS=" \
           f"\"--benchmarks=whisper --dataset={dataset}\"` says which archives)"


def repack(items, folder: Path, identity: dict, redo: str, expected: int | None = None,
           sources: dict[str, Path] | None = None) -> list[RepackedClip]:
    """Repack `items` into `folder` (the clips, the reference's manifest, manifest.json holding `identity` and the
    digests of the sources read and the files written), as repackage_librispeech.py does; written beside `folder`
    and renamed into place. UserError (naming the file and `redo`) for an utterance that cannot be read, or
    (`expected`) a clip count other than the reference's."""
    source_digests = digests_of(sources or {})   # before reading: a source written meanwhile shows as changed later
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
        entries = [_write_clip(work, clip, redo) for clip in plan]
        write_manifest(work / REPACKED_MANIFEST, entries)
        record = {**identity, "sources": source_digests,
                  "reference_manifest": FileDigest.of(work / REPACKED_MANIFEST).to_dict(),
                  "files": digests_of(_clip_files(work, [clip.name for clip in plan]))}
        (work / MANIFEST).write_text(json.dumps(record, indent=1))
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
            raise UserError(f"{path} is missing (named by {self.directory / REPACKED_MANIFEST}); {self.hint}.",
                            exit_code=EXIT_FAILURE) from None

    def load(self, index: int) -> Chat:
        return Chat.user(Audio(self.audio_bytes(index), WAV))

    def samples(self, index: int):
        """float32 16 kHz samples of clip `index` (checked: readable, 16 kHz mono, at most 30 s)."""
        path = self.path(index)
        samples = read_clip(path, self.audio_bytes(index), what_to_do=self.hint)
        check_clip_length(path, samples, self.hint)
        return samples


def open_set(folder: Path, model: str, dataset: str, paths: Paths | None = None) -> RepackedSet:
    """The repacked set in `folder`, checked: its files as written (the reference's manifest hashed, each clip by
    size and time) and, with `paths`, its sources as they were when it was made; UserError naming the file and
    `make preprocess_data` otherwise."""
    hint = f"run {_hint(model, dataset)}"
    manifest = folder / REPACKED_MANIFEST
    record = _read_manifest(folder)
    if record is None:
        raise UserError(f"{folder / MANIFEST} is missing or unreadable: the clips of {dataset} are not repacked; "
                        f"{hint}.", exit_code=EXIT_FAILURE)
    why = _damaged(folder, record)
    if why is None and paths is not None:
        items = utterances(dataset, paths)
        changed = files_problem(_source_files(items, dataset, paths), record.get("sources"), hash_below=0)
        why = None if changed is None else f"{changed}: the clips were repacked from it as it was before"
    if why is not None:
        raise UserError(f"{why}; {hint}: it repacks the clips again.", exit_code=EXIT_FAILURE)
    try:
        entries = json.loads(manifest.read_text(encoding="utf-8"))
    except OSError:
        raise UserError(f"{manifest} is missing; {hint}.", exit_code=EXIT_FAILURE) from None
    except ValueError as error:
        raise UserError(f"{manifest} is not JSON ({error}); {hint}.", exit_code=EXIT_FAILURE) from None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and e.get("files") for e in entries):
        raise UserError(f"{manifest} is not a list of clips in the reference's manifest format; {hint}.",
                        exit_code=EXIT_FAILURE)
    return RepackedSet(folder, entries, hint)


def preprocessed(model: str, dataset: str, paths: Paths) -> RepackedSet:
    dataset_spec(dataset)
    return open_set(preprocessed_folder(dataset, paths), model, dataset, paths)
