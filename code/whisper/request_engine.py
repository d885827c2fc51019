"""Whisper as a request-level engine (generation.RequestEngine) for the token-streaming system under test: one
worker thread per instance takes up to `max_batch` waiting clips, computes their log-mel features, runs the speech
engine on the batch and reports each clip's tokens as one final chunk. Offline hands it every sample at once, so
its batches are full."""
from __future__ import annotations

import threading
from collections import deque
from typing import Callable, Sequence

import numpy as np

from ..common.generation import Request, TokenStream
from ..common.prompts import AUDIO, Audio, Chat
from .audio import check_clip_length, read_clip
from .engines import SpeechEngine, features
from .models import ModelFacts

JOIN_TIMEOUT_S = 60.0


def clip_of(prompt, request_id: int) -> np.ndarray:
    """The 16 kHz samples of a prompt's audio part (checked: readable, 16 kHz mono, at most 30 s)."""
    parts = [part for part in prompt.contents() if isinstance(part, Audio)] if isinstance(prompt, Chat) else []
    if len(parts) != 1:
        raise ValueError(f"request {request_id}: a whisper prompt holds one audio clip, not {len(parts)}")
    name = f"the audio of request {request_id}"
    samples = read_clip(name, parts[0].data, what_to_do="preprocess the data set again")
    check_clip_length(name, samples, "preprocess the data set again")
    return samples


class WhisperRequestEngine:
    prompt_parts = frozenset({AUDIO})

    def __init__(self, make: Callable[[], SpeechEngine], facts: ModelFacts, max_batch: int, number: int = 0) -> None:
        self.name = f"whisper engine {number}"
        self._make, self.facts, self.max_batch = make, facts, max(1, int(max_batch))
        self._engine: SpeechEngine | None = None
        self._waiting: deque[Request] = deque()
        self._work = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._stream: TokenStream | None = None

    def open(self, stream: TokenStream) -> None:
        """Load the model and start the worker (an engine closed before opens again afresh)."""
        self._engine = self._make()
        self._stream = stream
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, daemon=True, name=self.name)
        self._thread.start()

    def submit(self, requests: Sequence[Request]) -> None:
        with self._work:
            self._waiting.extend(requests)
            self._work.notify()

    def cancel(self, request_ids: Sequence[int]) -> None:
        drop = set(request_ids)
        with self._work:
            self._waiting = deque(r for r in self._waiting if r.id not in drop)

    def close(self) -> None:
        with self._work:
            self._stopping = True
            self._waiting.clear()
            self._work.notify_all()
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT_S)
            self._thread = None
        if self._engine is not None:
            self._engine.close()
            self._engine = None

    def _take(self) -> list[Request] | None:
        with self._work:
            while not self._waiting and not self._stopping:
                self._work.wait()
            if self._stopping:
                return None
            return [self._waiting.popleft() for _ in range(min(self.max_batch, len(self._waiting)))]

    def _serve(self) -> None:
        while (batch := self._take()) is not None:
            try:
                clips = [clip_of(request.prompt, request.id) for request in batch]
                # Requests of one test share their settings: the batch's output cap is its first request's.
                outputs = self._engine.transcribe(features(clips, self.facts.n_mels),
                                                  max_new_tokens=batch[0].settings.max_new_tokens)
            except BaseException as error:     # noqa: BLE001 - reported to the system under test, which fails the run
                with self._work:
                    self._stopping = True
                    self._waiting.clear()
                self._stream.failed(error)
                return
            for request, tokens in zip(batch, outputs):
                self._stream.chunk(request.id, tokens, True)
