"""The openai harness's engine: the transport of streamed requests to OpenAI-compatible servers (vLLM, SGLang,
TensorRT-LLM's trtllm-serve), one HTTP client per endpoint, all on one asyncio event loop in a thread of its own.
What a request's body is and how an answer's choices read is the payload builder's (payloads.py: `/v1/completions`
with token ids, `/v1/chat/completions` with text, images and audio, `/v1/audio/transcriptions`); sessions,
streaming, scheduling, faults, token ids and metrics are the same for every API, here.

It is one request-level engine (code/common/generation.py) over every endpoint: the LLM system under test
(harness/llm_sut.py) submits each issued sample as a request, and the scheduler (scheduler.py) sends it to an
endpoint with room, at most `in_flight` per endpoint; the rest wait here, in the order they came. Offline's one
query of every sample is spread that way; Server's queries go out as they come.

A request sends the prompt with the benchmark's generation settings (the reference's sampling: greedy, or
gpt-oss-120b's temperature 1; max and min output tokens; the model's EOS ids as stop tokens) and streams the answer
(server-sent events; a server that answers with one JSON document instead is read as one final chunk). Its first
token goes to the system under test at the first chunk that carries one, also when that chunk is the last; the rest
at the final chunk (the one with a finish reason). The output's token ids come from the server where it returns
them (vLLM's `return_token_ids`); otherwise the text is tokenized with the benchmark's tokenizer (the first token
once the text so far makes two tokens, so that it is the one the whole text starts with), and EOS appended where
the output ended on it. Which of the two each endpoint gave is in the run's record.

Before the test, `open` checks every endpoint for real: it must list the benchmark's model in `/v1/models`
(another model is refused), answer a short generation, and then a few warm-up requests, each made from the first
sample's prompt whatever its parts (prompts.probe: a token prompt's first ids, a chat whole). During the test each
endpoint's `/metrics` is polled (requests, queue time, prefix-cache hits, into the record); a poll that cannot
reach the server fails the run, so an endpoint that dies with nothing in flight is noticed too.

Offline may take whole answers instead of streams (`answers`: one JSON document per request, its token ids
included), since it measures no first-token time. Answers are read by asyncio protocols with a C HTTP parser
(sse_protocol.py), each chunk with little work (chunks.py). With `workers` above one, the requests are streamed by
worker processes (workers.py), the scheduler and LoadGen staying here.

Failure never hangs and never passes for a result: an endpoint that refuses the connection, answers with an HTTP
error, sends nothing for `request_timeout_s`, closes a stream before its end or sends a chunk that is not JSON
fails the whole run with the endpoint named (EndpointFailed); the system under test completes what is outstanding
empty and the run is recorded as failed.
"""
from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from ..generation import GenerationSettings, Request, TokenStream
from ..prompts import Prompt, checked, parts_of, probe, size
from ..records.computation import MODEL_FOLDER_SHA256
from .chunks import decode, events, take_plain
from .endpoints import Endpoint
from .metrics import MetricsWatch, parse
from .payloads import Payload, payload_for
from .scheduler import Scheduler
from .workers import (CHANNEL, FAILED, READY, WorkerFailed, cancel_requests, close_channels, quit_workers, reap_workers,
                      send_requests, start_workers)

TOKEN_IDS_MODES = ("auto", "server", "text")
SERVER_IDS = "server"          # the record's word for token ids the server returned
TEXT_IDS = "tokenized text"    # ... and for ids tokenized here from the streamed text
PROBE_TOKENS = 2               # output tokens of the health check's generation
WARMUP_TOKENS = 8              # ... and of each warm-up request
ANSWERS = ("streamed", "whole")   # a request's answer: server-sent events, or one JSON document
TRANSPORTS = {"streamed": "HTTP, streamed", "whole": "HTTP, whole answers"}   # the record's words, with the path


class EndpointFailed(RuntimeError):
    """An endpoint failed; the message names it and says what it did."""


@dataclass(frozen=True)
class ClientSettings:
    model: str                         # the model the servers must serve, as requests name it
    in_flight: int = 256               # requests in flight per endpoint at most
    policy: str = "fewest_requests"    # scheduler.POLICIES
    request_timeout_s: float = 600.0   # longest silence of a server within one request (first token included)
    connect_timeout_s: float = 10.0
    metrics_interval_s: float = 2.0    # /metrics polls (and liveness) during the run; 0: none
    warmup_requests: int = 4           # per endpoint, before the test
    token_ids: str = "auto"            # TOKEN_IDS_MODES: where output token ids come from
    answers: str = "streamed"          # ANSWERS; "whole" only where no first-token time is measured (Offline)
    stream_interval: int = 0           # tokens per streamed chunk asked of the server (vLLM's); 0: not asked
    workers: int = 1                   # processes streaming the requests (workers.py); 1: this process's loop


@dataclass
class _Endpoint:
    """One endpoint's client and what it did."""

    endpoint: Endpoint
    local: bool
    session: Any = None                # aiohttp.ClientSession (models, version, metrics)
    streams: Any = None                # sse_protocol.Connections (completion requests with a JSON body)
    engine: str = ""                   # what /v1/models says owns the model (vllm, sglang, ...)
    version: str = ""
    served: tuple[str, ...] = ()
    model: str = ""                    # the id it serves the benchmark's model under (requests name it)
    token_ids: str = ""                # SERVER_IDS or TEXT_IDS
    answered: int = 0
    output_tokens: int = 0
    most_in_flight: int = 0
    metrics: MetricsWatch = field(default_factory=MetricsWatch)

    @property
    def url(self) -> str:
        return self.endpoint.url


class _Output:
    """One streamed request's state."""

    __slots__ = ("tokens", "text", "reported", "finish")

    def __init__(self) -> None:
        self.tokens: list[int] = []     # ids not yet reported (server ids), or all so far (text mode, at the end)
        self.text: list[str] = []
        self.reported = 0               # tokens handed to the stream
        self.finish: str | None = None


class ServingClient:
    """A request-level engine over OpenAI-compatible `endpoints` (see the module's docstring)."""

    def __init__(self, endpoints: Sequence[Endpoint], settings: ClientSettings, generation: GenerationSettings,
                 probe_prompt: Prompt | np.ndarray, *, encode: Callable[[str], list[int]] | None = None,
                 local: Sequence[Endpoint] = (), api: Payload | None = None, model_folder_sha256: str = "") -> None:
        """`probe_prompt` (the first sample's) makes the health check's and the warm-up's requests; `api` writes
        the bodies (by default the builder for the probe prompt's parts); `model_folder_sha256`: the digest of the
        model folder the `local` servers (started by the test) serve, kept in their records."""
        if not endpoints:
            raise ValueError("the openai harness needs at least one endpoint")
        if settings.answers not in ANSWERS:
            raise ValueError(f"answers must be one of {', '.join(ANSWERS)}, not {settings.answers!r}")
        if settings.token_ids not in TOKEN_IDS_MODES:
            raise ValueError(f"token_ids must be one of {', '.join(TOKEN_IDS_MODES)}, not {settings.token_ids!r}")
        self.settings = settings
        self.generation = generation
        self.probe_prompt = probe(checked(probe_prompt, 0))
        self.api = api or payload_for(parts_of(self.probe_prompt))
        self.prompt_parts = self.api.parts
        self.encode = encode
        self.endpoints = [_Endpoint(e, e in set(local)) for e in endpoints]
        self.model_folder_sha256 = model_folder_sha256
        self.name = ", ".join(e.url for e in endpoints)
        self.scheduler = Scheduler(settings.policy, len(endpoints), settings.in_flight)
        self._stream: TokenStream | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._queue: deque[Request] = deque()
        self._tasks: dict[int, asyncio.Task] = {}
        self._pollers: list[asyncio.Task] = []
        self._failure: BaseException | None = None
        self._closing = False
        self._workers: list = []           # workers.Worker, where requests go to worker processes
        self._worker_count = 0
        self._remote: dict[int, list] = {}   # request id: [worker, endpoint number, prompt size, tokens reported]

    # -- RequestEngine ---------------------------------------------------------------------------
    def open(self, stream: TokenStream) -> None:
        """Start the clients; check, probe and warm up every endpoint (EndpointFailed or UserError: the test does
        not start)."""
        from .sse_protocol import new_event_loop

        self._stream = stream
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="openai-client")
        self._thread.start()
        try:
            self._call(self._open())
        except BaseException:
            self.close()
            raise

    def submit(self, requests: Sequence[Request]) -> None:
        self._loop.call_soon_threadsafe(self._enqueue, list(requests))

    def cancel(self, request_ids: Sequence[int]) -> None:
        self._loop.call_soon_threadsafe(self._cancel, set(request_ids))

    def close(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        self._loop = self._thread = None
        try:
            asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=60)
        except Exception:  # noqa: BLE001  closing is best effort once the run is decided
            pass
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=30)
        if not thread.is_alive():
            loop.close()

    def records(self) -> list[dict[str, Any]]:
        """Per endpoint, as the run's record keeps it (records.record.EndpointRecord)."""
        return [{"host": e.endpoint.host, "port": e.endpoint.port, "protocol": e.endpoint.scheme,
                 "model": e.model or self.settings.model, "local": e.local, "requests": e.answered,
                 "samples": e.answered,
                 "transport": f"{TRANSPORTS[self.settings.answers]} {self.api.path}",
                 "extras": {"serving_engine": e.engine, "answers": self.settings.answers,
                            "stream_interval": self.settings.stream_interval, "serving_engine_version": e.version,
                            "served_models": list(e.served), "token_ids": e.token_ids, "output_tokens": e.output_tokens,
                            "workers": max(1, self._worker_count),
                            **({"worker_channel": CHANNEL} if self._worker_count else {}),
                            "in_flight_limit": self.settings.in_flight, "most_in_flight": e.most_in_flight,
                            "scheduler": self.settings.policy, "metrics": e.metrics.summary(),
                            **({MODEL_FOLDER_SHA256: self.model_folder_sha256}
                               if e.local and self.model_folder_sha256 else {})}}
                for e in self.endpoints]

    # -- on the event loop -----------------------------------------------------------------------
    def _call(self, coroutine) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    async def _open_sessions(self) -> None:
        import aiohttp

        from .sse_protocol import Connections

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.settings.connect_timeout_s,
                                        sock_read=self.settings.request_timeout_s)
        for state in self.endpoints:
            connector = aiohttp.TCPConnector(limit=self.settings.in_flight + 2, enable_cleanup_closed=True)
            state.session = aiohttp.ClientSession(connector=connector, timeout=timeout, raise_for_status=False)
            state.streams = Connections(state.endpoint.host, state.endpoint.port, state.endpoint.scheme == "https",
                                        self.settings.connect_timeout_s, self.settings.request_timeout_s)

    async def _open(self) -> None:
        await self._open_sessions()
        await asyncio.gather(*(self._check(state) for state in self.endpoints))
        await asyncio.gather(*(self._warm_up(state) for state in self.endpoints))
        # Worker processes (their warm-ups before the first poll, so that the metrics are the test's alone)
        encode = self.encode if any(state.token_ids == TEXT_IDS for state in self.endpoints) else None
        if self.settings.workers > 1 and travels(encode):
            self._workers = await start_workers(
                self.settings.workers,
                {"endpoints": [state.endpoint for state in self.endpoints], "settings": self.settings,
                 "generation": self.generation, "probe": self.probe_prompt, "api": self.api, "encode": encode,
                 "answer_text": bool(getattr(self._stream, "wants_text", False)),
                 "states": [(state.model, state.token_ids) for state in self.endpoints]},
                self._from_worker, self._worker_gone)
            self._worker_count = len(self._workers)
        if self.settings.metrics_interval_s > 0:
            await asyncio.gather(*(self._poll(state) for state in self.endpoints))   # before the test's requests
            self._pollers = [asyncio.ensure_future(self._watch(state)) for state in self.endpoints]

    async def _check(self, state: _Endpoint) -> None:
        """The endpoint serves the model and generates: /v1/models, /version, and a short generation that also
        tells whether it returns token ids."""
        models = await self._get_json(state, "/v1/models")
        data = models.get("data") if isinstance(models, dict) else None
        if not isinstance(data, list):
            raise EndpointFailed(f"{state.url}/v1/models did not answer a list of models (it answered "
                                 f"{json.dumps(models)[:200]}): is this an OpenAI-compatible server?")
        state.served = tuple(str(m.get("id")) for m in data if isinstance(m, dict))
        mine = serving(data, self.settings.model)
        if mine is None:
            from ..errors import EXIT_FAILURE, UserError

            raise UserError(f"The server at {state.url} serves {', '.join(state.served) or 'no model'}, not "
                            f"{self.settings.model}, the model of this benchmark: a run never mixes models. Start it "
                            f"with the benchmark's model, served as {self.settings.model} (make serve_llm prints the "
                            f"command lines).", exit_code=EXIT_FAILURE)
        state.model = str(mine["id"])
        state.engine = str(mine.get("owned_by") or "")
        try:
            version = await self._get_json(state, "/version")
            state.version = str(version.get("version", "")) if isinstance(version, dict) else ""
        except EndpointFailed:
            state.version = ""       # not every engine has /version
        probe = Request(-1, self.probe_prompt, self.generation)
        mode = self.settings.token_ids
        state.token_ids = TEXT_IDS if mode == "text" else SERVER_IDS
        output = await self._generate(state, probe, PROBE_TOKENS, report=False)
        if state.token_ids == SERVER_IDS and output is None:
            if mode == "server" or self.encode is None:
                raise EndpointFailed(
                    f"{state.url} ({state.engine or 'unknown engine'}) does not return the generated token ids "
                    f"(vLLM's return_token_ids)" + ("; tokenizing its text needs the benchmark's tokenizer, which "
                                                    "this benchmark has not" if self.encode is None else
                                                    "; leave --openai_token_ids=server out to tokenize its text"))
            state.token_ids = TEXT_IDS

    async def _warm_up(self, state: _Endpoint) -> None:
        probe = Request(-1, self.probe_prompt, self.generation)
        await asyncio.gather(*(self._generate(state, probe, WARMUP_TOKENS, report=False)
                               for _ in range(self.settings.warmup_requests)))

    async def _get_json(self, state: _Endpoint, path: str) -> Any:
        text = await self._get(state, path)
        try:
            return json.loads(text)
        except ValueError:
            raise EndpointFailed(f"{state.url}{path} did not answer JSON: {text[:200]!r}") from None

    async def _get(self, state: _Endpoint, path: str) -> str:
        import aiohttp

        try:
            async with state.session.get(state.url + path) as response:
                text = await response.text()
                if response.status != 200:
                    raise EndpointFailed(f"{state.url}{path} answered HTTP {response.status}: {text[:200]}")
                return text
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
            raise EndpointFailed(f"{state.url}{path}: {_describe(error, self.settings)}") from None

    async def _poll(self, state: _Endpoint) -> None:
        try:
            text = await self._get(state, "/metrics")
        except EndpointFailed as error:
            if "HTTP 404" not in str(error) or state.metrics.polls:
                raise
            state.metrics.problem = "the server has no /metrics"
            await self._get(state, "/v1/models")      # still alive
            return
        try:
            state.metrics.add(parse(text))
        except ValueError as error:
            state.metrics.problem = f"/metrics is not Prometheus text: {error}"

    async def _watch(self, state: _Endpoint) -> None:
        """Poll the endpoint's metrics until the end; one it cannot reach fails the run."""
        while True:
            await asyncio.sleep(self.settings.metrics_interval_s)
            try:
                await self._poll(state)
            except EndpointFailed as error:
                if not self._closing:
                    self._fail(EndpointFailed(f"{state.url} stopped answering during the run: {error}"))
                return

    def _enqueue(self, requests: list[Request]) -> None:
        if self._failure is not None or self._closing:
            return        # the SUT completes them: the run failed
        self._queue.extend(requests)
        self._dispatch()

    def _dispatch(self) -> None:
        queue, scheduler = self._queue, self.scheduler
        batches: dict = {}
        while queue and self._failure is None:
            request = queue[0]
            number = scheduler.pick(size(request.prompt))
            if number is None:
                break
            queue.popleft()
            state = self.endpoints[number]
            state.most_in_flight = max(state.most_in_flight, scheduler.loads[number].requests)
            if self._workers:
                worker = min(self._workers, key=lambda w: w.in_flight)
                worker.in_flight += 1
                self._remote[request.id] = [worker, number, size(request.prompt), 0]
                batches.setdefault(worker, []).append((number, request))
            else:
                self._tasks[request.id] = self._loop.create_task(self._run(number, request))
        for worker, items in batches.items():
            send_requests(worker, items)

    def _from_worker(self, worker, message: list) -> None:
        """A worker's frame: the chunks it read (first chunks and final ones), or its failure."""
        if message[0] == FAILED:
            if not worker.ready.done():     # in its setup: the client's open fails with it
                worker.ready.set_exception(EndpointFailed(message[1]))
            else:
                self._fail(EndpointFailed(message[1]))
            return
        if message[0] == READY:
            worker.ready.set_result(None)
            return
        if self._failure is not None:
            return
        remote, stream = self._remote, self._stream
        for item in message[1]:
            request_id, tokens, final = item[0], item[1], item[2]
            entry = remote.get(request_id)
            if entry is None:
                continue           # cancelled
            entry[3] += len(tokens)
            if len(item) > 3:      # a final chunk with the answer's text, where the stream logs texts
                stream.answer_text(request_id, item[3])
            stream.chunk(request_id, tokens, final)
            if final:
                del remote[request_id]
                entry[0].in_flight -= 1
                state = self.endpoints[entry[1]]
                state.answered += 1
                state.output_tokens += entry[3]
                self.scheduler.done(entry[1], entry[2])
        self._dispatch()

    def _worker_gone(self, worker) -> None:
        if self._closing:
            return
        error = WorkerFailed(f"{worker.name} ended in the middle of the run ({worker.how_it_ended()}); its "
                             f"requests cannot finish")
        if not worker.ready.done():
            worker.ready.set_exception(error)
        self._fail(error)

    async def _run(self, number: int, request: Request) -> None:
        try:
            await self._generate(self.endpoints[number], request, request.settings.max_new_tokens, report=True)
        except asyncio.CancelledError:
            pass
        except BaseException as error:  # noqa: BLE001  any failure of a request fails the run
            self._fail(error)
        finally:
            self.scheduler.done(number, size(request.prompt))
            self._tasks.pop(request.id, None)
            self._dispatch()

    def _cancel(self, request_ids: set[int]) -> None:
        self._queue = deque(r for r in self._queue if r.id not in request_ids)
        for request_id in request_ids:
            task = self._tasks.get(request_id)
            if task is not None:
                task.cancel()
            entry = self._remote.pop(request_id, None)
            if entry is not None:
                entry[0].in_flight -= 1
                self.scheduler.done(entry[1], entry[2])
                cancel_requests(entry[0], [request_id])
        if self._workers:
            self._dispatch()

    def _fail(self, error: BaseException) -> None:
        if self._failure is not None or self._closing:
            return
        self._failure = error
        self._queue.clear()
        for task in list(self._tasks.values()):
            task.cancel()
        if self._stream is not None:
            self._stream.failed(error)

    async def _shutdown(self) -> None:
        self._closing = True
        for poller in self._pollers:
            poller.cancel()
        if self._failure is None and self._tasks:
            await asyncio.wait(list(self._tasks.values()), timeout=5)   # streams past their final chunk
        if self._workers:
            workers, self._workers = self._workers, []
            quit_workers(workers)
            await asyncio.get_running_loop().run_in_executor(None, reap_workers, workers)
            close_channels(workers)
        if self._failure is None and self.settings.metrics_interval_s > 0:
            for state in self.endpoints:
                try:
                    await self._poll(state)          # what the run added
                except EndpointFailed:
                    pass
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), *self._pollers, return_exceptions=True)
        for state in self.endpoints:
            await close_session(state)

    # -- one request -----------------------------------------------------------------------------
    async def _generate(self, state: _Endpoint, request: Request, max_tokens: int, report: bool) -> list[int] | None:
        """Stream one request's answer; report its chunks (report) and count it. Returns its token ids (None
        when the server sent text without ids in server mode: only the probe asks)."""
        import aiohttp

        server_ids = state.token_ids == SERVER_IDS
        output = _Output()
        data, headers = self.api.body(state.model, request.prompt, request.settings, max_tokens, server_ids,
                                      self.settings.answers == "streamed", self.settings.stream_interval)
        try:
            if isinstance(data, bytes):     # a JSON body: streamed through the protocol-level reader
                answer = await state.streams.post(self.api.path, data, headers, lambda payloads: self._take_events(
                    state, request, output, payloads, server_ids, report))
                if answer.status != 200:
                    raise EndpointFailed(f"{state.url} answered HTTP {answer.status} to a completion request: "
                                         f"{answer.body.decode(errors='replace')[:300]}")
                missing = answer.result if answer.streamed else self._take(state, request, output, answer.body,
                                                                           server_ids, report)
            else:
                missing = await self._post_form(state, request, output, data, headers, server_ids, report)
            if missing:
                return None
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
            raise EndpointFailed(f"{state.url}: {_describe(error, self.settings)}") from None
        if output.finish is None:
            raise EndpointFailed(f"{state.url} ended the stream of a completion before its end (no finish reason; "
                                 f"{output.reported + len(output.tokens)} tokens received)")
        if not server_ids:
            self._finish_text(state, request, output, report)
        state.answered += report
        return output.tokens

    async def _post_form(self, state: _Endpoint, request: Request, output: _Output, data, headers, server_ids: bool,
                         report: bool) -> bool:
        """A request whose body is a form (audio transcriptions), through aiohttp; True as _take says."""
        async with state.session.post(state.url + self.api.path, data=data, headers=headers) as response:
            if response.status != 200:
                detail = (await response.text())[:300]
                raise EndpointFailed(f"{state.url} answered HTTP {response.status} to a completion request: "
                                     f"{detail}")
            if response.content_type == "application/json":    # a whole answer, not a stream
                return self._take(state, request, output, await response.read(), server_ids, report)
            return await self._read_stream(response, state, request, output, server_ids, report)

    async def _read_stream(self, response, state: _Endpoint, request: Request, output: _Output, server_ids: bool,
                           report: bool) -> bool:
        """The server-sent events of one answer, up to [DONE]; True as _take says. Whatever arrived is split into
        events at once (chunks.events), not line by line through the stream reader."""
        rest = b""
        async for data in response.content.iter_any():
            payloads, rest = events(rest, data)
            done = self._take_events(state, request, output, payloads, server_ids, report)
            if done is not None:
                return done
        return bool(rest and self._take_events(state, request, output, events(rest, b"\n")[0], server_ids, report))

    def _take_events(self, state: _Endpoint, request: Request, output: _Output, payloads: list[bytes],
                     server_ids: bool, report: bool) -> bool | None:
        """The events' chunks in order: None to read on, else what _read_stream returns ([DONE] or _take's True)."""
        for payload in payloads:
            if payload == b"[DONE]":
                return False
            if output.finish is not None:
                continue       # e.g. a usage chunk after the final one
            if server_ids and take_plain(payload, self.api.name, output):
                self._report_ids(state, request, output, report)
            elif self._take(state, request, output, payload, server_ids, report):
                return True
        return None

    def _take(self, state: _Endpoint, request: Request, output: _Output, payload: bytes, server_ids: bool,
              report: bool) -> bool:
        """One chunk. True when the server sent a choice without token ids in server mode (the probe finds out)."""
        decoded = decode(payload, self.api.name)
        if decoded is not None:
            choices, error = decoded.choices, decoded.error
        else:
            choices, error = self._read_generally(state, payload)
        if error is not None:
            raise EndpointFailed(f"{state.url} reported an error in the middle of a completion: "
                                 f"{json.dumps(error)[:300]}")
        if not isinstance(choices, list):
            raise EndpointFailed(f"{state.url} sent a stream chunk that is not a completion chunk: {payload[:200]!r}")
        for read in choices:
            if read is None:
                continue
            ids, text, finish = read
            if server_ids:
                if ids is None:
                    if not report:
                        return True
                    raise EndpointFailed(f"{state.url} stopped returning token ids in the middle of the run: "
                                         f"{payload[:200]!r}")
                if not isinstance(ids, list):
                    raise EndpointFailed(f"{state.url} sent token_ids that are not a list: {payload[:200]!r}")
                output.tokens.extend(ids)
            output.text.append(text)
            if finish is not None:
                output.finish = str(finish)
        if server_ids:
            self._report_ids(state, request, output, report)
        elif report and not output.reported and output.finish is None and self.encode is not None:
            # (a final chunk goes out whole at the end: _finish_text)
            first = self.encode("".join(output.text))
            if len(first) >= 2:                  # stable: the whole text starts with it
                output.reported = 1
                self._stream.chunk(request.id, first[:1], False)
        return False

    def _read_generally(self, state: _Endpoint, payload: bytes) -> tuple[list | None, Any]:
        """(the choices of a chunk that chunks.decode does not read, as the API reads them, or None where it is not
        a completion chunk; the error it reports)."""
        try:
            chunk = json.loads(payload)
            choices = self.api.choices(chunk)
            error = chunk.get("error") if isinstance(chunk, dict) else None
        except ValueError:
            return None, None
        if error is not None or not isinstance(choices, list):
            return choices, error
        for choice in choices:
            if not isinstance(choice, dict):
                raise EndpointFailed(f"{state.url} sent a malformed choice in a stream chunk: "
                                     f"{payload[:200]!r}")
        return [self.api.read(choice) for choice in choices], None

    def _report_ids(self, state: _Endpoint, request: Request, output: _Output, report: bool) -> None:
        """The first chunk that carries ids goes out at once; later ones gather until the final one."""
        final = output.finish is not None
        if not report or not (final or (output.tokens and not output.reported)):
            return
        tokens, output.tokens = output.tokens, []
        output.reported += len(tokens)
        if final:
            state.output_tokens += output.reported
            self._answer_text(request.id, output)
        self._stream.chunk(request.id, tokens, final)

    def _finish_text(self, state: _Endpoint, request: Request, output: _Output, report: bool) -> None:
        ids = list(self.encode("".join(output.text))) if self.encode is not None else []
        if output.finish == "stop" and request.settings.eos_token_ids:
            ids.append(int(request.settings.eos_token_ids[0]))     # it ended on EOS, which the text leaves out
        output.tokens = ids
        if not report:
            return
        state.output_tokens += len(ids)
        self._answer_text(request.id, output)
        if output.reported:
            self._stream.chunk(request.id, ids[1:], True)
        else:
            self._stream.chunk(request.id, ids, True)

    def _answer_text(self, request_id: int, output: _Output) -> None:
        """The whole answer's text to a stream that takes it (TokenStream.answer_text), before the final chunk."""
        report = getattr(self._stream, "answer_text", None)
        if report is not None:
            report(request_id, "".join(output.text))


async def close_session(state: _Endpoint) -> None:
    """An endpoint's clients closed (its aiohttp session and its streaming connections)."""
    if state.streams is not None:
        state.streams.close()
    if state.session is not None:
        await state.session.close()


def travels(encode: Callable | None) -> bool:
    """Whether worker processes can tokenize text with `encode` (it pickles); where not, servers that stream text
    only are read on one loop here, where the tokenizer is."""
    import pickle

    try:
        pickle.dumps(encode)
    except (pickle.PicklingError, TypeError, AttributeError):
        return False
    return True


def serving(models: list, name: str) -> dict | None:
    """The entry of /v1/models that is the model `name` (a Hugging Face id): the same id, or an id whose last part
    is the same (a server started with the model's folder, e.g. /models/Llama-3.1-8B-Instruct, serves it under
    that path unless told a name); None when it serves another model."""
    entries = [m for m in models if isinstance(m, dict) and isinstance(m.get("id"), str)]
    exact = next((m for m in entries if m["id"] == name), None)
    if exact is not None:
        return exact
    base = name.rstrip("/").rsplit("/", 1)[-1].lower()
    return next((m for m in entries if m["id"].rstrip("/").rsplit("/", 1)[-1].lower() == base), None)


def _describe(error: BaseException, settings: ClientSettings) -> str:
    import aiohttp

    from .sse_protocol import ConnectFailed

    if isinstance(error, asyncio.TimeoutError):
        return (f"sent nothing for {settings.request_timeout_s:g} s (openai_request_timeout_s); the server is stuck "
                f"or far slower than the load it was given")
    if isinstance(error, (aiohttp.ClientConnectorError, ConnectFailed)):
        return f"cannot connect ({error.os_error or error}); is the server running and listening there?"
    if isinstance(error, (aiohttp.ServerDisconnectedError, aiohttp.ClientPayloadError)):
        return f"closed the connection in the middle of an answer ({type(error).__name__}: {error}); did it die?"
    return f"{type(error).__name__}: {error}"
