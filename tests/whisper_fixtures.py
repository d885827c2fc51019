"""What the whisper tests share: LibriSpeech-shaped trees of generated speech-like audio, the registry packages the
benchmark fetches (fetched once per machine), and the official speech2text folder."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from code.common.paths import Paths
from code.common.registry_fetch import fetch_sdist
from tests.conftest import WHEEL_CACHE, seed_downloads
from tests.official_tools import NOT_AT_HAND, inference_dir

NORMALIZER = ("openai-whisper", "20250625")
RATE = 16000


def speech_like(seconds: float, seed: int) -> np.ndarray:
    """Noise shaped like speech's loudness (syllable-rate bursts), within 16-bit range: real samples to write and
    compare, nothing a model is meant to recognize."""
    rng = np.random.default_rng(seed)
    count = int(round(seconds * RATE))
    envelope = 0.5 + 0.5 * np.sin(np.arange(count) * 2 * np.pi * 4.0 / RATE + seed)
    return (0.2 * envelope * rng.standard_normal(count)).clip(-0.99, 0.99).astype(np.float32)


def librispeech_tree(root: Path, chapters: dict[str, dict[str, list[tuple[float, str]]]]) -> Path:
    """root/LibriSpeech/<split>/<speaker>/<chapter>/ with FLACs and <speaker>-<chapter>.trans.txt (upper case, as
    LibriSpeech's); `chapters`: split -> "speaker-chapter" -> [(seconds, transcript)]."""
    import soundfile

    base = root / "LibriSpeech"
    seed = 0
    for split, by_chapter in chapters.items():
        for key, utterances in by_chapter.items():
            speaker, chapter = key.split("-")
            folder = base / split / speaker / chapter
            folder.mkdir(parents=True, exist_ok=True)
            lines = []
            for number, (seconds, text) in enumerate(utterances):
                name = f"{speaker}-{chapter}-{number:04d}"
                seed += 1
                soundfile.write(str(folder / f"{name}.flac"), speech_like(seconds, seed), RATE, subtype="PCM_16")
                lines.append(f"{name} {text.upper()}")
            (folder / f"{speaker}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")
    return base


def seeded_paths(root: Path, *packages: tuple[str, str]) -> Paths:
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    seed_downloads(paths, *packages)
    return paths


def seed_normalizer(paths: Paths) -> None:
    """openai-whisper's source archive, fetched once per machine, linked into `paths`' download cache."""
    try:
        archive = fetch_sdist(*NORMALIZER, WHEEL_CACHE)
    except RuntimeError as error:
        pytest.skip(f"PyPI package {NORMALIZER[0]}=={NORMALIZER[1]} unavailable: {error}")
    paths.download_cache.mkdir(parents=True, exist_ok=True)
    dest = paths.download_cache / archive.name
    if not dest.exists():
        try:
            os.link(archive, dest)
        except OSError:
            shutil.copy2(archive, dest)


def speech2text() -> Path:
    checkout = inference_dir()
    if checkout is None or not (checkout / "speech2text" / "accuracy_eval.py").is_file():
        pytest.skip(NOT_AT_HAND)
    return checkout / "speech2text"


def shared_sample(paths: Paths) -> Path:
    source = paths.shared_data / "librivox_sample"
    if not source.is_dir():
        pytest.skip(f"{source} is absent (development data kept beside the repository)")
    return source
