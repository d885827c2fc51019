"""Reading and writing the clips of benchmark whisper: 16 kHz mono audio, as the reference reads it
(librosa.load(path, sr=16000) on LibriSpeech's 16 kHz files, which resamples nothing) through libsndfile
(soundfile), FLAC and WAV alike. Every fault names the file and what to do."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError
from .models import CHUNK_SECONDS, SAMPLE_RATE

PCM_16 = "PCM_16"         # what the reference's repackage script writes (soundfile's default for WAV)


def _damaged(message: str) -> UserError:
    """An audio file that is not what the benchmark reads: a damaged or wrong file (exit status 1), not bad input."""
    return UserError(message, exit_code=EXIT_FAILURE)


def read_clip(path: Path, data: bytes | None = None, what_to_do: str = "replace it and rerun") -> np.ndarray:
    """float32 mono samples of the audio file `path` (or of its bytes `data`); UserError naming the file when it is
    missing, not a readable WAV/FLAC, not mono or not sampled at 16 kHz."""
    import soundfile

    try:
        source = io.BytesIO(data) if data is not None else str(path)
        samples, rate = soundfile.read(source, dtype="float32", always_2d=True)
    except FileNotFoundError:
        raise _damaged(f"{path} is missing; {what_to_do}.") from None
    except (soundfile.LibsndfileError, RuntimeError, ValueError, TypeError) as error:
        if data is None and not Path(path).exists():
            raise _damaged(f"{path} is missing; {what_to_do}.") from None
        raise _damaged(f"{path} is not a readable WAV or FLAC file ({error}); {what_to_do}.") from None
    if rate != SAMPLE_RATE:
        raise _damaged(f"{path} is sampled at {rate} Hz, not {SAMPLE_RATE} Hz as LibriSpeech and the benchmark's "
                        f"clips are; resample it to {SAMPLE_RATE} Hz mono (e.g. `sox in out rate {SAMPLE_RATE}`) or "
                        f"{what_to_do}.")
    if samples.shape[1] != 1:
        raise _damaged(f"{path} has {samples.shape[1]} channels, not one; make it mono or {what_to_do}.")
    return samples[:, 0]


def clip_frames(path: Path, what_to_do: str) -> int:
    """The samples in the audio file `path` (from its header, nothing decoded); the same faults as read_clip."""
    import soundfile

    try:
        info = soundfile.info(str(path))
    except (soundfile.LibsndfileError, RuntimeError, ValueError, TypeError) as error:
        if not Path(path).exists():
            raise _damaged(f"{path} is missing; {what_to_do}.") from None
        raise _damaged(f"{path} is not a readable WAV or FLAC file ({error}); {what_to_do}.") from None
    if info.samplerate != SAMPLE_RATE:
        raise _damaged(f"{path} is sampled at {info.samplerate} Hz, not {SAMPLE_RATE} Hz as LibriSpeech and the "
                        f"benchmark's clips are; resample it to {SAMPLE_RATE} Hz mono (e.g. `sox in out rate "
                        f"{SAMPLE_RATE}`) or {what_to_do}.")
    if info.channels != 1:
        raise _damaged(f"{path} has {info.channels} channels, not one; make it mono or {what_to_do}.")
    return int(info.frames)


def check_clip_length(path: Path, samples: np.ndarray, what_to_do: str) -> None:
    """UserError naming the file when a clip is longer than the 30 s the model hears."""
    seconds = len(samples) / SAMPLE_RATE
    if seconds > CHUNK_SECONDS:
        raise _damaged(f"{path} lasts {seconds:.2f} s, longer than the {CHUNK_SECONDS} s Whisper hears at once; "
                        f"{what_to_do}.")


def write_wav(path: Path, samples: np.ndarray) -> None:
    """16-bit PCM WAV at 16 kHz, as the reference's repackage script writes its clips (sf.write(name, audio, SR))."""
    import soundfile

    soundfile.write(str(path), samples, SAMPLE_RATE, subtype=PCM_16, format="WAV")
