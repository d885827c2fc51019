"""The system under test for LLMs: LoadGen queries -> continuous (in-flight) batching on decoder instances.

Every issued sample goes to one shared queue, whatever the scenario (Server/Interactive: as it arrives; Offline:
the whole query; SingleStream: one at a time). One scheduler thread per decoder instance owns a `DecodeBatch` of
at most `max_batch` rows and loops: while there is room and samples wait, it prefills up to `prefill_batch` of
them and reports their first tokens to LoadGen at once (FirstTokenComplete); then it advances every row by one
decode step. Finished rows (an EOS token once `min_new_tokens` are out, or `max_new_tokens` reached) are completed
with one QuerySamplesComplete call per step and leave the batch, so a waiting sample takes their place before the
next step. A thread with nothing running and nothing waiting blocks on a condition variable.

With `prefill_chunk_tokens` > 0 (chunked prefill, for Server and Interactive) a joining prompt is prefilled that
many tokens at a time instead (`DecodeBatch.begin`), one prompt at a time: while rows are running the thread runs
at most one chunk between two decode steps, so that no running sequence waits for a whole prompt's prefill (a
sample with few output tokens would otherwise see its time per output token dominated by one); with no row
running, the chunks run back to back. The prompt's first token is reported after its last chunk, when it joins.

The same threads serve every scenario: a SingleStream sample pays one thread hand-off (tens of microseconds)
against decode steps of milliseconds, and one code path is one thing to get right.

Per step, the Python work is a few numpy calls over all rows; Python loops run only over the samples that join
or finish. Output tokens are written into one preallocated int32 array per instance (rows x max_new_tokens, at
least 2), and LoadGen reads each response straight from its row (it copies the data inside the call, before the
row is reused).
Responses are int32 token ids, as the reference writes them, with the token count as `n_tokens`. Every sample's
first token is reported (FirstTokenComplete) before its completion, in Offline too, where LoadGen does not need it
for its results: it computes every sample's time per output token from its first-token time, and reads that entry
whether or not the SUT reported one. An output of one token (EOS right after the prompt) is completed with the
model's EOS token appended, as NVIDIA's harness does: LoadGen 6.0.17 logs an error for a completion of fewer
than two tokens whenever it measures token latencies (time per output token divides by n_tokens - 1), and the
submission checker rejects an accuracy run whose log has errors. Decoding skips the EOS, so the text and its
ROUGE and GEN_LEN are the same, and TEST06, which never counts the first token as a trailing EOS, passes.

A failure in a decoder marks the run failed: the first exception is kept in `error`, every outstanding sample
(queued, joining, a prompt part way through its chunks included, or running, in every instance) is completed with
an empty response so that LoadGen ends, and samples issued later are completed empty at once.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from ..benchmark_api import PreprocessedSet
from ..constants import Scenario
from ..generation import DecodeBatch, Decoder, GenerationSettings, Prefill

TOKEN = np.dtype(np.int32)     # what LoadGen gets: the reference SUT writes int32 token ids
MIN_REPORTED_TOKENS = 2        # LoadGen's least n_tokens of a completion under use_token_latencies
JOIN_TIMEOUT_S = 30.0


class PromptLibrary:
    """The QSL of an LLM: keeps the performance set's prompts (1-D integer token arrays) in memory."""

    def __init__(self, samples: PreprocessedSet, performance_count: int) -> None:
        self.samples = samples
        self.total = len(samples)
        self.performance_count = min(performance_count, self.total)
        self._prompts: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()

    def load(self, indices: Sequence[int]) -> None:
        loaded = {int(index): self._checked(int(index)) for index in indices}
        with self._lock:
            self._prompts = {**self._prompts, **loaded}   # a new dict: readers never see one being changed

    def unload(self, indices: Sequence[int]) -> None:
        with self._lock:
            kept = dict(self._prompts)
            for index in indices:
                kept.pop(int(index), None)
            self._prompts = kept

    def prompt(self, index: int) -> np.ndarray:
        prompt = self._prompts.get(index)
        if prompt is None:
            raise RuntimeError(f"sample {index} was issued but not loaded by LoadGen")
        return prompt

    def _checked(self, index: int) -> np.ndarray:
        prompt = np.ascontiguousarray(self.samples.load(index))
        if prompt.ndim != 1 or prompt.dtype.kind not in "iu" or len(prompt) == 0:
            raise ValueError(f"prompt {index} must be a non-empty 1-D array of integer token ids; "
                             f"it has shape {prompt.shape} and dtype {prompt.dtype}")
        return prompt

    def construct(self):
        import mlperf_loadgen as lg

        return lg.ConstructQSL(self.total, self.performance_count, self.load, self.unload)


@dataclass
class Counters:
    """Progress of a run; each field is updated under the SUT's lock and can be read from any thread."""

    issued: int = 0        # samples LoadGen issued
    completed: int = 0     # samples completed to LoadGen (empty ones included)
    tokens: int = 0        # output tokens generated, first tokens included

    @property
    def progress(self) -> int:
        """Samples done, for the progress display (as HarnessSUT's counters): a sample is done when completed."""
        return self.completed


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
    out: np.ndarray          # rows x max_new_tokens, int32: each row's output so far
    lengths: np.ndarray      # tokens in each row's output
    ids: np.ndarray          # LoadGen's sample id of each row
    rows: int = 0            # rows running
    # Samples taken from the queue but not yet running: failed with the rest if their prefill fails.
    joining: list[tuple[int, int]] = field(default_factory=list)
    prefill: Prefill | None = None    # chunked prefill: the prompt of the one joining sample, part way through


class LLMSut:
    def __init__(self, scenario: Scenario, prompts: PromptLibrary, decoders: Sequence[Decoder],
                 settings: GenerationSettings) -> None:
        import mlperf_loadgen as lg

        if settings.max_batch < 1 or settings.prefill_batch < 1 or settings.max_new_tokens < 1:
            raise ValueError(f"max_batch, prefill_batch and max_new_tokens must be at least 1: {settings}")
        if settings.prefill_chunk_tokens < 0:
            raise ValueError(f"prefill_chunk_tokens must be 0 (whole prompts) or more: {settings}")
        if not decoders:
            raise ValueError("the LLM system under test needs at least one decoder instance")
        self._lg = lg
        self.scenario = scenario
        self.prompts = prompts
        self.decoders = list(decoders)
        self.settings = settings
        self.counters = Counters()
        self.error: BaseException | None = None
        self._eos = np.asarray(settings.eos_token_ids, dtype=np.int64)
        self._lock = threading.Lock()                 # counters and error
        self._work = threading.Condition()            # guards _waiting and _stopping
        self._waiting: deque[tuple[int, int]] = deque()
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._admit = self._admit_chunks if settings.prefill_chunk_tokens > 0 else self._admit_whole

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "LLMSut":
        """One scheduler thread per decoder; batches are made here so a decoder that cannot make one fails
        before LoadGen starts."""
        rows, width = self.settings.max_batch, max(self.settings.max_new_tokens, MIN_REPORTED_TOKENS)
        for number, decoder in enumerate(self.decoders):
            instance = _Instance(decoder.new_batch(), np.zeros((rows, width), TOKEN), np.zeros(rows, np.int64),
                                 np.zeros(rows, np.uint64))
            thread = threading.Thread(target=self._serve, args=(instance,), daemon=True, name=f"llm-sut-{number}")
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        with self._work:
            self._stopping = True
            self._work.notify_all()
        for thread in self._threads:
            thread.join(timeout=JOIN_TIMEOUT_S)
        self._threads.clear()

    def construct(self):
        return self._lg.ConstructFastSUT(self.issue, self.flush)

    # -- LoadGen callbacks -----------------------------------------------------------------------
    def issue(self, ids: list[int], indices: list[int]) -> None:
        with self._lock:
            self.counters.issued += len(ids)
            failed = self.error is not None
        if failed:
            self._complete_empty(list(ids), first_token_sent=False)
            return
        with self._work:
            self._waiting.extend(zip(ids, indices))
            self._work.notify(len(ids))

    def flush(self) -> None:
        pass

    # -- scheduler -------------------------------------------------------------------------------
    def _serve(self, instance: _Instance) -> None:
        try:
            while not self._stopping:     # read unlocked: a stop ends the loop after the current step
                if self.error is not None:
                    self._abandon(instance)
                    if not self._drain_failed():
                        return
                    continue
                try:
                    self._admit(instance)
                    if instance.rows:
                        self._step(instance)
                    elif not self._wait_for_work():
                        return
                except BaseException as error:  # noqa: BLE001  kept in self.error, reported by the run
                    self._fail(error)
        finally:
            try:
                instance.batch.close()
            except Exception:  # noqa: BLE001  the run's outcome is already decided; closing is best effort
                pass

    def _wait_for_work(self) -> bool:
        """Block until samples wait or the SUT stops; False when it stops."""
        with self._work:
            while not self._waiting and not self._stopping and self.error is None:
                self._work.wait()
            return not self._stopping

    def _take(self, count: int) -> list[tuple[int, int]]:
        if not self._waiting:     # unlocked peek: a sample that arrives now is seen after the next step
            return []
        with self._work:
            return [self._waiting.popleft() for _ in range(min(count, len(self._waiting)))]

    def _admit_whole(self, instance: _Instance) -> None:
        """Prefill waiting samples while there is room; report their first tokens; complete any that are done."""
        settings = self.settings
        while instance.rows < settings.max_batch:
            instance.joining = self._take(min(settings.prefill_batch, settings.max_batch - instance.rows))
            if not instance.joining:
                return
            self._joined(instance, np.asarray(instance.batch.add([self.prompts.prompt(int(index))
                                                                   for _, index in instance.joining])))

    def _admit_chunks(self, instance: _Instance) -> None:
        """Chunked prefill, one prompt at a time: run the next chunk of the joining prompt (taking the next waiting
        sample when none is joining and there is room). With rows running that is one chunk per call, between two
        decode steps; with none, the chunks run back to back. A prompt whose last chunk ran joins as in
        `_admit_whole`."""
        while True:
            if instance.prefill is None:
                if instance.rows >= self.settings.max_batch:
                    return
                instance.joining = self._take(1)
                if not instance.joining:
                    return
                prompt = self.prompts.prompt(int(instance.joining[0][1]))
                instance.prefill = instance.batch.begin(prompt, self.settings.prefill_chunk_tokens)
            if instance.prefill.advance():
                first = np.array([instance.prefill.first_token], dtype=np.int64)
                instance.prefill = None
                self._joined(instance, first)
            if instance.rows:
                return

    def _joined(self, instance: _Instance, first: np.ndarray) -> None:
        """The joining samples are new rows with their first tokens: report those; complete any that are done."""
        count, start = len(instance.joining), instance.rows
        if len(first) != count:
            raise RuntimeError(f"the decoder returned {len(first)} first tokens for {count} prompts")
        new = slice(start, start + count)
        instance.out[new, 0] = first
        instance.lengths[new] = 1
        instance.ids[new] = [sample_id for sample_id, _ in instance.joining]
        base, stride = instance.out.ctypes.data, instance.out.strides[0]
        response = self._lg.QuerySampleResponse
        self._lg.FirstTokenComplete([response(sample_id, base + row * stride, TOKEN.itemsize, 1)
                                     for row, (sample_id, _) in enumerate(instance.joining, start)])
        instance.rows += count
        instance.joining = []
        with self._lock:
            self.counters.tokens += count
        done = finished(first, instance.lengths[new], self._eos, self.settings)
        if done.any():
            mask = np.zeros(instance.rows, dtype=bool)
            mask[new] = done
            self._finish(instance, mask)

    def _step(self, instance: _Instance) -> None:
        rows = instance.rows
        tokens = np.asarray(instance.batch.step())
        if len(tokens) != rows:
            raise RuntimeError(f"the decoder returned {len(tokens)} tokens for a step of {rows} rows")
        lengths = instance.lengths[:rows]
        instance.out[np.arange(rows), lengths] = tokens
        lengths += 1
        with self._lock:
            self.counters.tokens += rows
        done = finished(tokens, lengths, self._eos, self.settings)
        if done.any():
            self._finish(instance, done)

    def _finish(self, instance: _Instance, done: np.ndarray) -> None:
        """Complete the rows marked in `done` (one LoadGen call), then drop them from the bookkeeping and the batch.
        A one-token output goes to LoadGen with EOS appended (see the module's docstring)."""
        rows = np.flatnonzero(done)
        lengths = instance.lengths[rows]
        short = rows[lengths < MIN_REPORTED_TOKENS]
        if len(short):
            instance.out[short, 1] = self.settings.eos_token_ids[0]
            lengths = np.maximum(lengths, MIN_REPORTED_TOKENS)
        addresses = (instance.out.ctypes.data + rows * instance.out.strides[0]).tolist()
        response = self._lg.QuerySampleResponse
        self._lg.QuerySamplesComplete([
            response(sample_id, address, size, count) for sample_id, address, size, count in
            zip(instance.ids[rows].tolist(), addresses, (lengths * TOKEN.itemsize).tolist(), lengths.tolist())])
        with self._lock:
            self.counters.completed += len(rows)
        # LoadGen has copied the data: rows can move now. Keep the batch's order (survivors shift up).
        keep = ~done
        kept, width = instance.rows - len(rows), int(instance.lengths[:instance.rows].max())
        instance.out[:kept, :width] = instance.out[:instance.rows, :width][keep]
        instance.lengths[:kept] = instance.lengths[:instance.rows][keep]
        instance.ids[:kept] = instance.ids[:instance.rows][keep]
        instance.rows = kept
        instance.batch.remove(rows.tolist())

    # -- failure ---------------------------------------------------------------------------------
    def _fail(self, error: BaseException) -> None:
        with self._lock:
            if self.error is None:
                self.error = error
        with self._work:
            self._work.notify_all()     # idle threads wake up to drain the queue

    def _abandon(self, instance: _Instance) -> None:
        """Complete this instance's running and joining samples empty."""
        running = instance.ids[:instance.rows].tolist()
        joining = [sample_id for sample_id, _ in instance.joining]
        instance.rows, instance.joining, instance.prefill = 0, [], None
        self._complete_empty(running, first_token_sent=True)
        self._complete_empty(joining, first_token_sent=False)

    def _drain_failed(self) -> bool:
        """Complete every waiting sample empty, then wait for more; False when the SUT stops."""
        with self._work:
            while not self._waiting and not self._stopping:
                self._work.wait()
            if self._stopping:
                return False
            pending = [sample_id for sample_id, _ in self._waiting]
            self._waiting.clear()
        self._complete_empty(pending, first_token_sent=False)
        return True

    def _complete_empty(self, ids: list[int], first_token_sent: bool) -> None:
        """Empty responses. A sample whose first token was never reported gets an empty one first, so that
        LoadGen's per-token bookkeeping has an entry for every completed sample."""
        if not ids:
            return
        lg = self._lg
        if not first_token_sent:
            lg.FirstTokenComplete([lg.QuerySampleResponse(sample_id, 0, 0) for sample_id in ids])
        lg.QuerySamplesComplete([lg.QuerySampleResponse(sample_id, 0, 0) for sample_id in ids])
        with self._lock:
            self.counters.completed += len(ids)
