"""What every whisper engine shares: the log-mel features of a clip and the engine protocol.

An engine takes a batch of 30 s log-mel spectrograms and returns, per clip, the token ids it generated after the
prompt, as vLLM's `token_ids` hold them for the reference: greedy; Whisper's suppression rules (the model config's
suppress_tokens at every step, " " and <|endoftext|> at the first; no timestamps); at most MAX_NEW_TOKENS (200),
the closing <|endoftext|> included when the clip ended before the cap. Their count is the sample's n_tokens.
The CTranslate2 engine (ctranslate2_engine.py) is the embedded default; the ONNX Runtime encoder and
decoder-with-cache pair plugs in under the name `onnxruntime`.
"""
from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol

import numpy as np

from ..common.errors import UserError
from .models import CHUNK_SECONDS, FRAMES, SAMPLE_RATE, ModelFacts

if TYPE_CHECKING:
    from ..common.paths import Paths

N_FFT = 400                 # 25 ms windows
HOP_LENGTH = 160            # 10 ms hops
N_SAMPLES = CHUNK_SECONDS * SAMPLE_RATE


class SpeechEngine(Protocol):
    name: str

    def transcribe(self, features: np.ndarray, max_new_tokens: int = ...) -> list[list[int]]:
        """`features`: float32 [batch, n_mels, 3000]; one list of generated token ids per clip: without the prompt,
        ending with <|endoftext|> unless the clip reached `max_new_tokens` (the requests' output cap,
        MAX_NEW_TOKENS by default) first (see the module's docstring)."""

    def close(self) -> None: ...


# name -> "module:class": each class is made as cls(folder, facts, threads=..., paths=..., log=...) (folder: the
# model's CTranslate2 folder, models.model_folder; paths: where it may write what it builds, e.g. graphs).
ENGINES = {
    "ctranslate2": "code.whisper.ctranslate2_engine:CTranslate2Whisper",
    "onnxruntime": "code.whisper.onnx_engine:OnnxWhisper",
}
DEFAULT_ENGINE = "ctranslate2"


def make_engine(name: str, folder: Path, facts: ModelFacts, *, threads: int, paths: "Paths",
                log: Callable[[str], None]) -> SpeechEngine:
    """The engine `name` ("" for the default) over the model in `folder`; UserError naming the choices."""
    name = name or DEFAULT_ENGINE
    if name not in ENGINES:
        raise UserError(f"--inprocess_engine={name}: whisper's engines are {', '.join(ENGINES)}.")
    module_name, _, class_name = ENGINES[name].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        raise UserError(f"--inprocess_engine={name}: that engine is not built into this toolkit yet; leave "
                        f"--inprocess_engine out to run {DEFAULT_ENGINE}.") from None
    return getattr(module, class_name)(folder, facts, threads=threads, paths=paths, log=log)


def _hz_to_mel(freq: np.ndarray) -> np.ndarray:
    # Slaney's auditory toolbox scale (librosa's default, which Whisper's filters were made with): linear below
    # 1 kHz, logarithmic above.
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    freq = np.asarray(freq, dtype=np.float64)
    mels = freq / f_sp
    above = freq >= min_log_hz
    mels[above] = min_log_mel + np.log(freq[above] / min_log_hz) / logstep
    return mels


def _mel_to_hz(mels: np.ndarray) -> np.ndarray:
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    mels = np.asarray(mels, dtype=np.float64)
    freqs = f_sp * mels
    above = mels >= min_log_mel
    freqs[above] = min_log_hz * np.exp(logstep * (mels[above] - min_log_mel))
    return freqs


@lru_cache(maxsize=4)
def mel_filters(n_mels: int) -> np.ndarray:
    """[n_mels, 201] triangular filters, Slaney-normalized, 0..8 kHz: librosa.filters.mel(sr=16000, n_fft=400,
    n_mels=n_mels), which Whisper's mel_filters.npz holds and faster-whisper computes the same way."""
    fft_freqs = np.linspace(0, SAMPLE_RATE / 2, 1 + N_FFT // 2)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(np.array([0.0]))[0], _hz_to_mel(np.array([SAMPLE_RATE / 2]))[0],
                                   n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    weights *= (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]
    return weights.astype(np.float32)


@lru_cache(maxsize=1)
def _window() -> np.ndarray:
    return np.hanning(N_FFT + 1)[:-1].astype(np.float32)        # periodic Hann, as torch.hann_window


def log_mel(audio: np.ndarray, n_mels: int) -> np.ndarray:
    """float32 [n_mels, 3000]: the log-mel spectrogram of `audio` (16 kHz mono float) zero-padded to 30 s, as
    Whisper's log_mel_spectrogram(pad_or_trim(audio)) computes it (centered STFT with reflection, power spectrum,
    log10 clamped 8 below the clip's maximum, scaled to about [-1, 1])."""
    audio = np.asarray(audio, dtype=np.float32).reshape(-1)
    if len(audio) > N_SAMPLES:
        raise ValueError(f"a clip of {len(audio) / SAMPLE_RATE:.2f} s is longer than {CHUNK_SECONDS} s")
    padded = np.zeros(N_SAMPLES, dtype=np.float32)
    padded[:len(audio)] = audio
    half = N_FFT // 2
    signal = np.pad(padded, half, mode="reflect")
    frames = np.lib.stride_tricks.sliding_window_view(signal, N_FFT)[::HOP_LENGTH]   # 3001 frames
    spectrum = np.fft.rfft(frames * _window(), axis=-1)
    power = (spectrum.real ** 2 + spectrum.imag ** 2)[:-1].T.astype(np.float32)   # [201, 3000]: the last frame goes
    mel = mel_filters(n_mels) @ power
    logs = np.log10(np.maximum(mel, 1e-10))
    logs = np.maximum(logs, logs.max() - 8.0)
    out = ((logs + 4.0) / 4.0).astype(np.float32)
    assert out.shape == (n_mels, FRAMES)
    return out


def features(clips: list[np.ndarray], n_mels: int) -> np.ndarray:
    """float32 [batch, n_mels, 3000] of several clips."""
    return np.stack([log_mel(clip, n_mels) for clip in clips]) if clips else np.zeros((0, n_mels, FRAMES), np.float32)
