"""Continuous (in-flight) batching over step-level decoders, offered as a request-level engine (generation.py).

Every submitted request goes to one shared queue. One scheduler thread per decoder instance owns a `DecodeBatch`
of at most `max_batch` rows and loops: while there is room and requests wait, it prefills up to `prefill_batch` of
them and reports their first tokens at once; then it advances every row by one decode step and reports each row's
token. Finished rows (an EOS token once `min_new_tokens` are out, or `max_new_tokens` reached) are reported final
in row order and leave the batch, so a waiting request takes their place before the next step. A thread with
nothing running and nothing waiting blocks on a condition variable.

With `prefill_chunk_tokens` > 0 (chunked prefill, for Server and Interactive) a joining prompt is prefilled that
many tokens at a time instead (`DecodeBatch.begin`), one prompt at a time: while rows are running the thread runs
at most one chunk between two decode steps, so that no running sequence waits for a whole prompt's prefill (a
sample with few output tokens would otherwise see its time per output token dominated by one); with no row
running, the chunks run back to back. The prompt's first token is reported after its last chunk, when it joins.

The same threads serve every scenario: a SingleStream sample pays one thread hand-off (tens of microseconds)
against decode steps of milliseconds, and one code path is one thing to get right. Per step, the Python work is a
few numpy calls over all rows and one report per row.

A failure in a decoder is reported (`TokenStream.failed`) and ends the engine's work: every thread drops its rows,
and whatever is queued or submitted later is dropped (the system under test completes those samples).
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..generation import DecodeBatch, Decoder, GenerationSettings, Prefill, Request, TokenStream
from ..prompts import TOKEN_IDS

JOIN_TIMEOUT_S = 30.0


def finished(tokens: np.ndarray, lengths: np.ndarray, eos: np.ndarray, settings: GenerationSettings) -> np.ndarray:
    """Which rows end with their newest token: an EOS once `min_new_tokens` are out, or `max_new_tokens` reached.

    The EOS token stays in the output as its last token (the reference's outputs keep it). An EOS before
    `min_new_tokens` does not end a sequence: the decoder returns tokens, not logits, so it cannot be suppressed
    here and stays in the output like any other token."""
    is_eos = (tokens[:, None] == eos).any(axis=1)
    return (is_eos & (lengths >= settings.min_new_tokens)) | (lengths >= settings.max_new_tokens)


@dataclass
class _Instance:
    """One decoder instance's batch and the bookkeeping of its rows, in the batch's row order."""

    batch: DecodeBatch
    lengths: np.ndarray      # tokens in each row's output
    ids: np.ndarray          # the request id of each row
    rows: int = 0            # rows running
    joining: list[Request] = field(default_factory=list)   # taken from the queue, not yet running
    prefill: Prefill | None = None    # chunked prefill: the prompt of the one joining request, part way through


class ContinuousBatchingEngine:
    """A request-level engine over `decoders` (one scheduler thread each), all generating with `settings`."""

    name = "in-process continuous batching"
    prompt_parts = frozenset({TOKEN_IDS})   # the decoder graph's input; a test of other prompts is refused at its plan

    def __init__(self, decoders: Sequence[Decoder], settings: GenerationSettings) -> None:
        if settings.max_batch < 1 or settings.prefill_batch < 1 or settings.max_new_tokens < 1:
            raise ValueError(f"max_batch, prefill_batch and max_new_tokens must be at least 1: {settings}")
        if settings.prefill_chunk_tokens < 0:
            raise ValueError(f"prefill_chunk_tokens must be 0 (whole prompts) or more: {settings}")
        if not decoders:
            raise ValueError("continuous batching needs at least one decoder instance")
        self.decoders = list(decoders)
        self.settings = settings
        self._eos = np.asarray(settings.eos_token_ids, dtype=np.int64)
        self._stream: TokenStream | None = None
        self._work = threading.Condition()            # guards _waiting, _stopping and _failed
        self._waiting: deque[Request] = deque()
        self._stopping = False
        self._failed = False
        self._threads: list[threading.Thread] = []
        self._admit = self._admit_chunks if settings.prefill_chunk_tokens > 0 else self._admit_whole

    # -- RequestEngine -----------------------------------------------------------------------------
    def open(self, stream: TokenStream) -> None:
        """One scheduler thread per decoder; batches are made here so a decoder that cannot make one fails
        before LoadGen starts."""
        self._stream = stream
        rows = self.settings.max_batch
        for number, decoder in enumerate(self.decoders):
            instance = _Instance(decoder.new_batch(), np.zeros(rows, np.int64), np.zeros(rows, np.uint64))
            thread = threading.Thread(target=self._serve, args=(instance,), daemon=True, name=f"llm-engine-{number}")
            thread.start()
            self._threads.append(thread)

    def submit(self, requests: Sequence[Request]) -> None:
        with self._work:
            if self._failed:
                return
            self._waiting.extend(requests)
            self._work.notify(len(requests))

    def cancel(self, request_ids: Sequence[int]) -> None:
        """Drop waiting requests among `request_ids` (running ones finish; their chunks are not wanted)."""
        dropped = set(request_ids)
        with self._work:
            self._waiting = deque(r for r in self._waiting if r.id not in dropped)

    def close(self) -> None:
        with self._work:
            self._stopping = True
            self._work.notify_all()
        for thread in self._threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
        self._threads.clear()

    # -- scheduler -------------------------------------------------------------------------------
    def _serve(self, instance: _Instance) -> None:
        try:
            while not self._stopping:     # read unlocked: a stop ends the loop after the current step
                if self._failed:
                    return
                try:
                    self._admit(instance)
                    if instance.rows:
                        self._step(instance)
                    elif not self._wait_for_work():
                        return
                except BaseException as error:  # noqa: BLE001  reported; the system under test records it
                    self._fail(error)
                    return
        finally:
            try:
                instance.batch.close()
            except Exception:  # noqa: BLE001  the run's outcome is already decided; closing is best effort
                pass

    def _wait_for_work(self) -> bool:
        """Block until requests wait or the engine stops or fails; False when it stops or failed."""
        with self._work:
            while not self._waiting and not self._stopping and not self._failed:
                self._work.wait()
            return not self._stopping and not self._failed

    def _take(self, count: int) -> list[Request]:
        if not self._waiting:     # unlocked peek: a request that arrives now is seen after the next step
            return []
        with self._work:
            return [self._waiting.popleft() for _ in range(min(count, len(self._waiting)))]

    def _admit_whole(self, instance: _Instance) -> None:
        """Prefill waiting requests while there is room; report their first tokens and any that are done."""
        settings = self.settings
        while instance.rows < settings.max_batch:
            instance.joining = self._take(min(settings.prefill_batch, settings.max_batch - instance.rows))
            if not instance.joining:
                return
            self._joined(instance, np.asarray(instance.batch.add([r.prompt for r in instance.joining])))

    def _admit_chunks(self, instance: _Instance) -> None:
        """Chunked prefill, one prompt at a time: run the next chunk of the joining prompt (taking the next waiting
        request when none is joining and there is room). With rows running that is one chunk per call, between two
        decode steps; with none, the chunks run back to back. A prompt whose last chunk ran joins as in
        `_admit_whole`."""
        while True:
            if instance.prefill is None:
                if instance.rows >= self.settings.max_batch:
                    return
                instance.joining = self._take(1)
                if not instance.joining:
                    return
                instance.prefill = instance.batch.begin(instance.joining[0].prompt, self.settings.prefill_chunk_tokens)
            if instance.prefill.advance():
                first = np.array([instance.prefill.first_token], dtype=np.int64)
                instance.prefill = None
                self._joined(instance, first)
            if instance.rows:
                return

    def _joined(self, instance: _Instance, first: np.ndarray) -> None:
        """The joining requests are new rows with their first tokens: report those (final where done)."""
        count, start = len(instance.joining), instance.rows
        if len(first) != count:
            raise RuntimeError(f"the decoder returned {len(first)} first tokens for {count} prompts")
        new = slice(start, start + count)
        instance.lengths[new] = 1
        instance.ids[new] = [r.id for r in instance.joining]
        instance.rows += count
        instance.joining = []
        done = finished(first, instance.lengths[new], self._eos, self.settings)
        self._report(instance.ids[new], first, done)
        if done.any():
            mask = np.zeros(instance.rows, dtype=bool)
            mask[new] = done
            self._leave(instance, mask)

    def _step(self, instance: _Instance) -> None:
        rows = instance.rows
        tokens = np.asarray(instance.batch.step())
        if len(tokens) != rows:
            raise RuntimeError(f"the decoder returned {len(tokens)} tokens for a step of {rows} rows")
        lengths = instance.lengths[:rows]
        lengths += 1
        done = finished(tokens, lengths, self._eos, self.settings)
        self._report(instance.ids[:rows], tokens, done)
        if done.any():
            self._leave(instance, done)

    def _report(self, ids: np.ndarray, tokens: np.ndarray, done: np.ndarray) -> None:
        """One chunk of one token per row, in row order."""
        chunk = self._stream.chunk
        for request_id, token, final in zip(ids.tolist(), tokens.tolist(), done.tolist(), strict=True):
            chunk(request_id, (token,), final)

    def _leave(self, instance: _Instance, done: np.ndarray) -> None:
        """The rows marked in `done` leave the bookkeeping and the batch; the others keep their order."""
        keep = ~done
        kept = instance.rows - int(done.sum())
        instance.lengths[:kept] = instance.lengths[:instance.rows][keep]
        instance.ids[:kept] = instance.ids[:instance.rows][keep]
        instance.rows = kept
        instance.batch.remove(np.flatnonzero(done).tolist())

    def _fail(self, error: BaseException) -> None:
        with self._work:
            first = not self._failed
            self._failed = True
            self._waiting.clear()
            self._work.notify_all()     # idle threads wake up and end
        if first:
            self._stream.failed(error)
