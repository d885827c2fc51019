"""The data sets of benchmark whisper: where they come from, how they are laid out, and the reference's repacking.

The round's data set is LibriSpeech dev-clean + dev-other, repacked as the reference's
speech2text/utils/repackage_librispeech.py does: the utterances of one speaker-chapter, in order, are joined with
0.5 s of silence while the clip stays within 30 s (an utterance over 30 s is dropped), their transcripts joined
by one space; each clip is a 16-bit WAV `<speaker>-<chapter>_<n>.wav` and one entry of a JSON manifest in the
reference's format. 1,633 clips. The toolkit repacks straight from the FLAC files (16-bit, 16 kHz: the samples
the reference's WAV conversion keeps), so the clips are the reference's sample for sample.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ..common import shared_samples
from ..common.benchmark_api import DatasetSpec, Log
from ..common.errors import EXIT_FAILURE, UserError, choose
from ..common.paths import Paths
from .models import CHUNK_SECONDS, SAMPLE_RATE

BENCHMARK = "whisper"
MAX_DURATION = float(CHUNK_SECONDS)     # the repackage script's MAX_DURATION
PAD_DURATION = 0.5                      # silence between two joined utterances
LIBRISPEECH_SPLITS = ("dev-clean", "dev-other")
LIBRISPEECH_ROOT = "LibriSpeech"         # what the openslr archives unpack to
LIBRISPEECH_COUNT = 1633
SHARED_SAMPLE = "librivox_sample"
SHARED_PARTS = ("librivox", "cards")     # the sample's folders, in QSL order
SHARED_COUNT = 6                         # the 5 utterances of one LibriVox chapter become one clip; 5 cards clips
ARCHIVES = (("dev-clean", "https://www.openslr.org/resources/12/dev-clean.tar.gz", "42e2234ba48799c1f50f24a7926300a1"),
            ("dev-other", "https://www.openslr.org/resources/12/dev-other.tar.gz", "c8d0bcc9cca99d4f8b62fcc847357931"))

_LIBRISPEECH_HOW_TO = (
    "LibriSpeech (CC BY 4.0, openslr.org resource 12): download "
    + " and ".join(f"{url} (md5 {md5})" for _, url, md5 in ARCHIVES)
    + ", unpack both into the data set folder so that it holds LibriSpeech/dev-clean/<speaker>/<chapter>/ and "
      "LibriSpeech/dev-other/... (FLAC files and their <speaker>-<chapter>.trans.txt), then run "
      "`make preprocess_data RUN_ARGS=\"--benchmarks=whisper --dataset=librispeech_dev\"`: the toolkit repacks "
      "them into the reference's 1,633 clips of at most 30 s (the reference's download_dataset.sh makes the same).")

DATASETS: dict[str, DatasetSpec] = {
    "librivox_sample": DatasetSpec(
        name="librivox_sample",
        sample_count=SHARED_COUNT,
        description="10 real English utterances (Debian pocketsphinx-testdata, BSD-2): 5 of one LibriVox chapter, "
                    "repacked into one clip as the reference repacks a LibriSpeech chapter, and 5 short command "
                    "utterances; for development and CI (not a submission data set)",
        how_to_get="Kept beside the repository in ../shared/data/librivox_sample; `make download_data` links it "
                   "into the data set folder, and preprocessing repacks it with the LibriSpeech code.",
    ),
    "librispeech_dev": DatasetSpec(
        name="librispeech_dev",
        sample_count=LIBRISPEECH_COUNT,
        description="LibriSpeech dev-clean + dev-other repacked to 1,633 clips of at most 30 s: the MLPerf whisper "
                    "data set",
        how_to_get=_LIBRISPEECH_HOW_TO,
    ),
}


@dataclass(frozen=True)
class Utterance:
    """One utterance of a source data set, in the order the repacking reads them."""

    source: str          # the speaker-chapter it is joined with ("1272-128104")
    path: Path           # its audio file (FLAC or WAV, 16 kHz)
    transcript: str      # lower case, stripped: as the reference's conversion writes it


def dataset_spec(dataset: str) -> DatasetSpec:
    return choose(DATASETS, dataset, "data set", BENCHMARK)


def download_data(dataset: str, paths: Paths, log: Log) -> Path:
    dataset_spec(dataset)
    folder = paths.dataset_dir(dataset)
    if dataset == SHARED_SAMPLE:
        source = paths.shared_data / SHARED_SAMPLE
        if not source.is_dir():
            raise shared_samples.absent(dataset, source, "Run the LibriSpeech data set instead: " + _LIBRISPEECH_HOW_TO)
        folder.mkdir(parents=True, exist_ok=True)
        for part in SHARED_PARTS:
            shared_samples.link_sample(dataset, folder / part, source / part, log)
        _check_readable(dataset, paths, f"restore it from {source}")
        return folder
    if not (folder / LIBRISPEECH_ROOT).is_dir():
        raise UserError(f"{dataset}: {folder / LIBRISPEECH_ROOT} is absent; the toolkit does not download it "
                        f"(openslr.org is not a package registry). {_LIBRISPEECH_HOW_TO}", exit_code=EXIT_FAILURE)
    count = _check_readable(dataset, paths, "replace it with the file of the LibriSpeech archive it came from "
                                            "(dev-clean.tar.gz or dev-other.tar.gz of openslr.org resource 12)")
    log(f"{dataset}: LibriSpeech is in {folder / LIBRISPEECH_ROOT} ({count} utterances, every file readable)")
    return folder


def _check_readable(dataset: str, paths: Paths, what_to_do: str) -> int:
    """Every transcript decodes and every audio file it names is there with a readable 16 kHz mono header (the
    samples themselves are decoded when repacked); UserError naming the first file that is not (exit status 1)."""
    from .audio import clip_frames

    items = utterances(dataset, paths)
    for item in items:
        clip_frames(item.path, what_to_do)
    return len(items)


def source_name(file_name: str) -> str:
    """The speaker-chapter of a LibriSpeech file name ("1272-128104-0000.flac" -> "1272-128104"), as the reference's
    get_source_name reads it."""
    stem, _ = os.path.splitext(file_name)
    return "-".join(stem.split("-")[:2])


def _transcript_lines(path: Path, what_to_do: str) -> list[str]:
    """The lines of a transcript file; UserError naming it (exit status 1) when it is unreadable or not UTF-8."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as error:
        raise UserError(f"{path} is not UTF-8 text (byte {error.start}): it is damaged; {what_to_do}.",
                        exit_code=EXIT_FAILURE) from None
    except OSError as error:
        raise UserError(f"{path} cannot be read ({error.strerror}); {what_to_do}.", exit_code=EXIT_FAILURE) from None


def librispeech_utterances(root: Path) -> list[Utterance]:
    """The utterances of LibriSpeech's dev-clean then dev-other under `root` (the LibriSpeech folder): each
    <speaker>-<chapter>.trans.txt in path order, its lines in order; UserError naming what is missing."""
    found: list[Utterance] = []
    for split in LIBRISPEECH_SPLITS:
        folder = root / split
        if not folder.is_dir():
            raise UserError(f"{folder} is absent; LibriSpeech's {split} must be unpacked there. {_LIBRISPEECH_HOW_TO}",
                            exit_code=EXIT_FAILURE)
        listings = sorted(folder.glob("*/*/*.trans.txt"))
        if not listings:
            raise UserError(f"{folder} holds no <speaker>/<chapter>/*.trans.txt; it is not LibriSpeech's {split}. "
                            f"{_LIBRISPEECH_HOW_TO}", exit_code=EXIT_FAILURE)
        for listing in listings:
            for number, line in enumerate(_transcript_lines(listing, "unpack LibriSpeech again"), 1):
                if not line.strip():
                    continue
                name, _, transcript = line.partition(" ")
                if not transcript.strip():
                    raise UserError(f"{listing} line {number} has no transcript after its utterance id {name!r}; "
                                    f"unpack LibriSpeech again.", exit_code=EXIT_FAILURE)
                found.append(Utterance(source_name(name), listing.parent / f"{name}.flac",
                                       transcript.lower().strip()))
    return found


def shared_utterances(folder: Path) -> list[Utterance]:
    """The shared sample's utterances: the LibriVox chapter's five (one source: they become one clip, as a
    LibriSpeech chapter's do) and the five cards clips (each its own). Transcripts are `<s> text </s> (id)` lines."""
    found: list[Utterance] = []
    for part, listing in (("librivox", "transcription"), ("cards", "cards.transcription")):
        path = folder / part / listing
        if not path.is_file():
            raise UserError(f"{path} is missing; run `make download_data RUN_ARGS=\"--benchmarks=whisper "
                            f"--dataset={SHARED_SAMPLE}\"`.", exit_code=EXIT_FAILURE)
        for line in _transcript_lines(path, f"restore it from ../shared/data/{SHARED_SAMPLE}/{part}"):
            if not line.strip():
                continue
            text, _, file_id = line.rpartition("(")
            file_id = file_id.strip().rstrip(")")
            words = [w for w in text.split() if w not in ("<s>", "</s>")]
            stem = file_id.rsplit("/", 1)[-1]
            source = stem.rsplit("-", 1)[0] if part == "librivox" else f"{part}-{stem}"
            found.append(Utterance(source, folder / part / f"{stem}.wav", " ".join(words).lower().strip()))
    return found


def utterances(dataset: str, paths: Paths) -> list[Utterance]:
    folder = paths.dataset_dir(dataset)
    if dataset == SHARED_SAMPLE:
        return shared_utterances(folder)
    return librispeech_utterances(folder / LIBRISPEECH_ROOT)


# -- the reference's repacking ------------------------------------------------------------------------------------
def clip_entry(samples: int, transcript: str, fname: str) -> dict:
    """One manifest entry, in the reference's get_sample_json format (key order included: the manifest is compared
    with the reference's byte for byte)."""
    return {
        "transcript": transcript,
        "files": [{"channels": 1, "sample_rate": float(SAMPLE_RATE), "bitdepth": 16, "bitrate": 256000.0,
                   "duration": float(samples / SAMPLE_RATE), "num_samples": int(samples),
                   "encoding": "Signed Integer PCM", "silent": False, "fname": fname, "speed": 1}],
        "original_duration": float(samples / SAMPLE_RATE),
        "original_num_samples": int(samples),
    }


@dataclass(frozen=True)
class RepackedClip:
    name: str                          # "<source>_<n>.wav"
    parts: tuple[Utterance, ...]


def repack_plan(items: Sequence[Utterance], durations: Sequence[float]) -> list[RepackedClip]:
    """Which utterances make which clip, as repackage_librispeech.py groups them: by source in the order each source
    first appears, an utterance over 30 s dropped, a clip flushed before the utterance that would take it past
    30 s (counting 0.5 s of silence before every utterance but the first)."""
    catalog: dict[str, list[tuple[Utterance, float]]] = {}
    for item, duration in zip(items, durations):
        catalog.setdefault(item.source, []).append((item, duration))
    clips: list[RepackedClip] = []
    for key, entries in catalog.items():
        index, current, current_duration = 0, [], 0.0
        for item, duration in entries:
            if duration > MAX_DURATION:
                continue
            if current and current_duration + PAD_DURATION + duration > MAX_DURATION:
                clips.append(RepackedClip(f"{key}_{index}.wav", tuple(current)))
                current, current_duration, index = [], 0.0, index + 1
            current.append(item)
            current_duration += duration
            if len(current) > 1:
                current_duration += PAD_DURATION
        if current:
            clips.append(RepackedClip(f"{key}_{index}.wav", tuple(current)))
    return clips


def joined_audio(clips: Sequence[np.ndarray]) -> np.ndarray:
    """The utterances of one clip with 0.5 s of silence between them (float64, as the reference's np.zeros pad makes
    the joined array)."""
    pad = np.zeros(int(PAD_DURATION * SAMPLE_RATE))
    pieces: list[np.ndarray] = []
    for clip in clips:
        if pieces:
            pieces.append(pad)
        pieces.append(clip)
    return np.concatenate(pieces)


def write_manifest(path: Path, entries: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        json.dump(entries, out, indent=2)
