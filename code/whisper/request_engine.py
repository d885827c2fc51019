"""Whisper as a request-level engine (generation.RequestEngine) for the token-streaming system under test: one
worker thread per instance takes up to `max_batch` waiting clips, computes their log-mel features, runs the speech
engine on the batch and reports each clip's tokens as one final chunk. Offline hands it every sample at once, so
its batches are full."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..common.generation import Request, TokenStream
from ..common.prompts import AUDIO, Audio, Chat
from ..common.queued_engine import QueuedRequestEngine
from .audio import check_clip_length, read_clip
from .engines import SpeechEngine, features
from .models import ModelFacts


def clip_of(prompt, request_id: int) -> np.ndarray:
    """The 16 kHz samples of a prompt's audio part (checked: readable, 16 kHz mono, at most 30 s)."""
    parts = [part for part in prompt.contents() if isinstance(part, Audio)] if isinstance(prompt, Chat) else []
    if len(parts) != 1:
        raise ValueError(f"request {request_id}: a whisper prompt holds one audio clip, not {len(parts)}")
    name = f"the audio of request {request_id}"
    samples = read_clip(name, parts[0].data, what_to_do="preprocess the data set again")
    check_clip_length(name, samples, "preprocess the data set again")
    return samples


class WhisperRequestEngine(QueuedRequestEngine):
    prompt_parts = frozenset({AUDIO})

    def __init__(self, make: Callable[[], SpeechEngine], facts: ModelFacts, max_batch: int, number: int = 0) -> None:
        super().__init__()
        self.name = f"whisper engine {number}"
        self._make, self.facts, self.max_batch = make, facts, max(1, int(max_batch))
        self._engine: SpeechEngine | None = None

    def _start(self) -> None:
        self._engine = self._make()

    def _release(self) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def _serve_batch(self, batch: list[Request], stream: TokenStream) -> None:
        clips = [clip_of(request.prompt, request.id) for request in batch]
        # Requests of one test share their settings: the batch's output cap is its first request's.
        outputs = self._engine.transcribe(features(clips, self.facts.n_mels),
                                          max_new_tokens=batch[0].settings.max_new_tokens)
        for request, tokens in zip(batch, outputs):
            stream.chunk(request.id, tokens, True)
