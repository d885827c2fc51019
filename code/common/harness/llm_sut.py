"""The system under test for LLMs: LoadGen queries -> request-level engines (generation.py) -> token streams.

Every issued sample becomes one request, sent to the engine with the fewest requests outstanding (round robin among
equals): an in-process continuous-batching engine over step-level decoders (batching_engine.py), or any other
request-level engine, e.g. a client of serving engines on other nodes. The SUT keeps each request's tokens as its
chunks arrive and reports to LoadGen:
- the first token at the first chunk (FirstTokenComplete), always before the completion, also when the first chunk
  is the final one, and in Offline too, where LoadGen does not need it for its results: it computes every sample's
  time per output token from its first-token time, and reads that entry whether or not the SUT reported one;
- the completion at the final chunk (QuerySamplesComplete), with the response the benchmark's answer kind makes
  (answers.py: the output's token ids as int32, as the reference writes them, by default; its text, labels made
  from the text, or what the engine made, from the content an engine reports just before the final chunk), and the
  token count as `n_tokens`.
An output of one token (EOS right after the prompt) is completed with the model's EOS token appended, as NVIDIA's
harness does: LoadGen 6.0.17 logs an error for a completion of fewer than two tokens whenever it measures token
latencies (time per output token divides by n_tokens - 1), and the submission checker rejects an accuracy run
whose log has errors. Decoding skips the EOS, so the text and its ROUGE and GEN_LEN are the same, and TEST06,
which never counts the first token as a trailing EOS, passes.

An engine that fails fails the run, never a partial VALID: the first error is kept, the other engines are told to
drop what they hold, every outstanding sample (in every engine) is completed with an empty response so that LoadGen
ends, and samples issued later are completed empty at once.

Every LoadGen call of this SUT is made by one reporter thread, in the order the chunks came: LoadGen logs from
each calling thread into a buffer of its own and reads the buffers in no set order, so a sample's first token and
its completion reported from two threads (one engine's scheduler, and another's failure) could be logged the wrong
way round. The hand-off costs a sample tens of microseconds against decode steps of milliseconds, but under load
the reporter waits for the interpreter lock (up to its switch interval, 5 ms) while the engine's thread runs on.
A SUT whose engines report every chunk and failure from one thread (`inline_reports`: the serving client's event
loop) makes the LoadGen calls in that thread instead, right after each chunk, in the same order.
"""
from __future__ import annotations

import queue
import threading
from typing import Callable, Sequence

import numpy as np

from ..answers import TOKEN, TOKEN_IDS, AnswerKind
from ..benchmark_api import PreprocessedSet
from ..constants import Scenario
from ..generation import Decoder, GenerationSettings, Request, RequestEngine
from ..prompts import Prompt, checked
from .batching_engine import ContinuousBatchingEngine
from .base import QSLBase, SUTBase

MIN_REPORTED_TOKENS = 2        # LoadGen's least n_tokens of a completion under use_token_latencies


class PromptLibrary(QSLBase):
    """The QSL of an LLM: keeps the performance set's prompts (prompts.py: token ids or chats) in memory."""

    def __init__(self, samples: PreprocessedSet, performance_count: int) -> None:
        self.samples = samples
        self.total = len(samples)
        self.performance_count = min(performance_count, self.total)
        self._prompts: dict[int, Prompt] = {}
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

    def prompt(self, index: int) -> Prompt:
        prompt = self._prompts.get(index)
        if prompt is None:
            raise RuntimeError(f"sample {index} was issued but not loaded by LoadGen")
        return prompt

    def _checked(self, index: int) -> Prompt:
        return checked(self.samples.load(index), index)


class _Output:
    """One outstanding request's tokens so far."""

    __slots__ = ("tokens", "engine", "content")

    def __init__(self, engine: int) -> None:
        self.tokens: list[int] = []
        self.engine = engine
        self.content = None     # the answer beyond its ids, where the engine reports it (TokenStream.answer)


class StreamingSUT(SUTBase):
    """The LLM system under test over request-level `engines`, each generating with `settings`, its responses the
    benchmark's kind of `answer`."""

    def __init__(self, scenario: Scenario, prompts: PromptLibrary, engines: Sequence[RequestEngine],
                 settings: GenerationSettings, *, inline_reports: bool = False,
                 answer: AnswerKind = TOKEN_IDS) -> None:
        if not engines:
            raise ValueError("the LLM system under test needs at least one engine")
        super().__init__(scenario)
        self.prompts = prompts
        self.engines = list(engines)
        self.settings = settings
        # Outstanding requests, the engines' loads and each request's reports to LoadGen, under one lock: a failure
        # completes what is outstanding at once, so no first token may reach LoadGen after its sample's completion.
        self._report = threading.Lock()
        self._outputs: dict[int, _Output] = {}
        self._load = [0] * len(self.engines)       # outstanding requests per engine
        self._next = 0                             # round-robin start among equally loaded engines
        self._opened = 0
        self._calls: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()   # to the reporter
        self._reporter: threading.Thread | None = None
        self._inline = inline_reports
        self._draining = threading.RLock()         # inline: one thread at a time makes the calls, in order
        self.answer_kind = answer

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "StreamingSUT":
        """Open every engine (a failure here stops the test before LoadGen starts)."""
        if not self._inline:
            self._reporter = threading.Thread(target=self._report_calls, daemon=True, name="llm-sut-reporter")
            self._reporter.start()
        for number, engine in enumerate(self.engines):
            engine.open(_EngineStream(self, number))
            self._opened += 1
        return self

    def stop(self) -> None:
        engines, self._opened = self.engines[:self._opened], 0
        for engine in engines:
            engine.close()
        if self._reporter is not None:
            self._calls.put(None)
            self._reporter.join()
            self._reporter = None
        self._flush()

    def _report_calls(self) -> None:
        while (call := self._calls.get()) is not None:
            call()

    def _flush(self) -> None:
        """Inline reports: make the queued LoadGen calls now, in this thread (outside the report lock)."""
        if not self._inline:
            return
        with self._draining:
            while True:
                try:
                    call = self._calls.get_nowait()
                except queue.Empty:
                    return
                if call is not None:
                    call()

    # -- LoadGen callbacks -----------------------------------------------------------------------
    def issue(self, ids: list[int], indices: list[int]) -> None:
        try:
            requests = [Request(int(sample_id), self.prompts.prompt(int(index)), self.settings)
                        for sample_id, index in zip(ids, indices, strict=True)]
        except BaseException as error:  # noqa: BLE001  kept as the run's failure; LoadGen must still end
            self.count_issued(len(ids))
            self.fail(error)
            self._calls.put(lambda: self.complete_empty(ids, first_token_missing=True))
            self._flush()
            return
        self.count_issued(len(ids))
        with self._report:
            failed = self.error is not None
            if failed:
                self._calls.put(lambda: self.complete_empty(ids, first_token_missing=True))
            else:
                shares = self._share(requests)
        if failed:
            self._flush()
            return
        for engine, share in zip(self.engines, shares, strict=True):
            if share:
                engine.submit(share)

    def _share(self, requests: list[Request]) -> list[list[Request]]:
        """Each request to the engine with the fewest outstanding (round robin among equals); under _report."""
        shares: list[list[Request]] = [[] for _ in self.engines]
        count = len(self.engines)
        for request in requests:
            engine = min(((self._next + k) % count for k in range(count)), key=self._load.__getitem__)
            self._next = (engine + 1) % count
            self._load[engine] += 1
            self._outputs[request.id] = _Output(engine)
            shares[engine].append(request)
        return shares

    # -- token streams ---------------------------------------------------------------------------
    def chunk(self, request_id: int, tokens: Sequence[int] | np.ndarray, final: bool) -> None:
        """Report a request's first token at its first chunk, complete it at its final one."""
        with self._report:
            output = self._outputs.get(request_id)
            if output is None:
                return        # completed empty already: the run failed
            first = not output.tokens
            if first and not len(tokens):
                problem = RuntimeError(f"{self.engines[output.engine].name} sent a first chunk of no tokens "
                                       f"(request {request_id})")
            else:
                problem = None
                self._report_tokens(request_id, output, tokens, first, final)
        if problem is not None:
            self.engine_failed(output.engine, problem)
        else:
            self._flush()

    def answer(self, request_id: int, content: object) -> None:
        """A request's answer beyond its ids (TokenStream.answer), reported just before its final chunk."""
        with self._report:
            output = self._outputs.get(request_id)
            if output is not None:
                output.content = content

    def _report_tokens(self, request_id: int, output: _Output, tokens: Sequence[int] | np.ndarray, first: bool,
                       final: bool) -> None:
        """Under _report: hand the reporter the first token and the completion. A one-token output goes to LoadGen
        with EOS appended (see the module's docstring)."""
        output.tokens.extend(int(t) for t in tokens)
        with self._lock:
            self.counters.tokens += len(tokens)
        if first:
            self._calls.put(lambda: self._first_token(request_id, output.tokens[0]))
        if final:
            del self._outputs[request_id]
            self._load[output.engine] -= 1
            out = output.tokens
            if len(out) < MIN_REPORTED_TOKENS:
                out = out + [self.settings.eos_token_ids[0]]
            data = self.answer_kind.response(out, output.content)
            self._calls.put(lambda: self._complete_tokens(request_id, data, len(out)))

    def _first_token(self, request_id: int, token: int) -> None:
        head = np.asarray([token], dtype=TOKEN)
        lg = self._lg
        lg.FirstTokenComplete([lg.QuerySampleResponse(request_id, head.ctypes.data, TOKEN.itemsize, 1)])

    def _complete_tokens(self, request_id: int, data: np.ndarray, n_tokens: int | None = None) -> None:
        lg = self._lg
        lg.QuerySamplesComplete([lg.QuerySampleResponse(request_id, data.ctypes.data, data.nbytes,
                                                        len(data) if n_tokens is None else n_tokens)])
        with self._lock:
            self.counters.completed += 1

    def engine_failed(self, engine: int, error: BaseException) -> None:
        """Fail the run: the other engines drop what they hold; every outstanding sample is completed empty."""
        self.fail(error)
        with self._report:
            outstanding, self._outputs = self._outputs, {}
            self._load = [0] * len(self.engines)
            started = [i for i, output in outstanding.items() if output.tokens]
            waiting = [i for i, output in outstanding.items() if not output.tokens]
            self._calls.put(lambda: self.complete_empty(started))
            self._calls.put(lambda: self.complete_empty(waiting, first_token_missing=True))
        self._flush()
        for number, other in enumerate(self.engines[:self._opened]):
            mine = [request_id for request_id, output in outstanding.items() if output.engine == number]
            if number != engine and mine:
                other.cancel(mine)


class _EngineStream:
    """What one engine reports into: its chunks and its failure, to the SUT."""

    __slots__ = ("sut", "number", "chunk", "answer")

    def __init__(self, sut: StreamingSUT, number: int) -> None:
        self.sut, self.number = sut, number
        self.chunk = sut.chunk
        self.answer = sut.answer

    def failed(self, error: BaseException) -> None:
        self.sut.engine_failed(self.number, error)


class LLMSut(StreamingSUT):
    """The in-process LLM harness: the streaming SUT over one continuous-batching engine of `decoders`."""

    def __init__(self, scenario: Scenario, prompts: PromptLibrary, decoders: Sequence[Decoder],
                 settings: GenerationSettings, answer: AnswerKind = TOKEN_IDS) -> None:
        super().__init__(scenario, prompts, [ContinuousBatchingEngine(decoders, settings)], settings, answer=answer)
