"""The serving client's transport: one process's HTTP side of the openai harness, which the one-loop client
(client.py, in the LoadGen process) and every worker process (worker_process.py) call alike.

It holds per endpoint an aiohttp session (models, version, metrics, audio forms) and the keep-alive connections of
the per-chunk reader (sse_protocol.py: asyncio protocols parsed by llhttp, on uvloop's loop where present), and, for
one request, writes its body with the API's payload builder (payloads.py), POSTs it (a JSON body through the reader,
each read's events taken in the loop's callback; a form through aiohttp), reads the answer (server-sent events, or
one JSON document where the request asked for a whole answer or the server does not stream: chunks.py reads each
chunk with little work; where the server returns token ids and no text is kept, a read of one plain chunk is taken in
one call, `_Output.lines`, its JSON decoded into its ids and finish reason alone) and reports it to its token stream (generation.TokenStream): the
first token at the first chunk that carries one, the rest at the final chunk (the one with a finish reason), the
answer's whole text before it where the benchmark's answer kind takes text. The output's token ids come from the
server where it returns them (vLLM's `return_token_ids`); otherwise the text is tokenized with the benchmark's
tokenizer (`encode`: the first token once the text so far makes two tokens, so that it is the one the whole text
starts with), and EOS appended where the output ended on it.

Before a test it checks an endpoint for real (`check`: the model in `/v1/models`, `/version`, a short generation
that also tells whether the server returns token ids), warms it up (`warm_up`, from the first sample's prompt) and
reads its `/metrics` (`poll`). What to send where and when, and what LoadGen hears, is the dispatcher's (client.py).

Failure never hangs and never passes for a result: an endpoint that refuses the connection, answers with an HTTP
error, sends nothing for `request_timeout_s`, closes a stream before its end or sends a chunk that is not JSON
raises EndpointFailed with the endpoint named.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

import msgspec

from ..generation import Request
from ..prompts import checked, parts_of, probe
from .chunks import PLAIN_APIS, data_lines, decode, events, plain_ids, take_plain
from .metrics import MetricsWatch, parse
from .payloads import payload_for
from .read_hold import DEFAULT_WINDOW_US, ReadHold

if TYPE_CHECKING:
    import numpy as np

    from ..generation import GenerationSettings, TokenStream
    from ..prompts import Prompt
    from .endpoints import Endpoint
    from .payloads import Payload

TOKEN_IDS_MODES = ("auto", "server", "text")
SERVER_IDS = "server"          # the record's word for token ids the server returned
TEXT_IDS = "tokenized text"    # ... and for ids tokenized here from the streamed text
PROBE_TOKENS = 2               # output tokens of the health check's generation
MEDIA_TOKEN = 0                # the one "token" a media answer (a video) is counted as
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
    worker_read_hold_us: int = DEFAULT_WINDOW_US   # each worker process's read hold (read_hold.py); 0: none


@dataclass
class EndpointState:
    """One endpoint's client and what it did."""

    endpoint: Endpoint
    local: bool
    session: Any = None                # aiohttp.ClientSession (models, version, metrics, forms)
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
    """One streamed request's state; with `fast` (sse_protocol.Lines), the reader of its reads' lines."""

    __slots__ = ("tokens", "text", "reported", "finish", "decode", "take", "stream", "request_id", "state")

    def __init__(self) -> None:
        self.tokens: list[int] = []     # ids not yet reported (server ids), or all so far (text mode, at the end)
        self.text: list[str] = []
        self.reported = 0               # tokens handed to the stream
        self.finish: str | None = None

    def fast(self, take: Callable[[list], bool | None], stream: TokenStream, request_id: int,
             state: EndpointState) -> Callable[[bytes], bool | None]:
        """The reader of the reads' lines of a request whose token ids the server returns, reported to `stream`,
        the text unused: a plain chunk (chunks.plain_ids) is taken in this one call; any other chunk goes to `take`
        (the events of the read, read the general way)."""
        self.decode, self.take, self.stream, self.request_id, self.state = plain_ids, take, stream, request_id, state
        return self.lines

    def lines(self, data: bytes) -> bool | None:
        if self.finish is None and data[:5] == b"data:":
            try:
                choice = self.decode(data[5:]).choices[0]
            except msgspec.DecodeError:      # several events, [DONE], an error, another shape: the general way
                pass
            else:
                self.tokens += choice.token_ids
                if choice.finish_reason is not None:
                    self.finish = choice.finish_reason
                elif self.reported or not self.tokens:
                    return None              # (gathered until the final chunk)
                tokens, self.tokens = self.tokens, []       # the first chunk or the final one goes out
                self.reported += len(tokens)
                if self.finish is not None:
                    self.state.output_tokens += self.reported
                self.stream.chunk(self.request_id, tokens, self.finish is not None)
                return None
        events = data_lines(data)
        return self.take(events) if events else None


class Transport:
    """The HTTP side of the serving client over `endpoints` in one process (see the module's docstring); its
    methods run on that process's event loop. `stream` (set before the first request) hears the answers."""

    def __init__(self, endpoints: Sequence[Endpoint], settings: ClientSettings, generation: GenerationSettings,
                 probe_prompt: Prompt | np.ndarray, *, encode: Callable[[str], list[int]] | None = None,
                 api: Payload | None = None, answer_text: bool = False, local: Sequence[Endpoint] = (),
                 read_hold_us: int = 0) -> None:
        """`probe_prompt` (the first sample's) makes the health check's and the warm-up's requests; `api` writes
        the bodies (by default the builder for the probe prompt's parts); `answer_text`: each answer's whole text
        goes to the stream (TokenStream.answer) before its final chunk (the benchmark's answer kind takes text);
        `read_hold_us`: this process's loop holds after a turn that read answers (read_hold.py; a worker's)."""
        self.settings = settings
        self.generation = generation
        self.probe_prompt = probe(checked(probe_prompt, 0))
        self.api = api or payload_for(parts_of(self.probe_prompt))
        self.encode = encode
        self.answer_text = answer_text
        self.endpoints = [EndpointState(e, e in set(local)) for e in endpoints]
        self.stream: TokenStream | None = None
        self.read_hold_us = read_hold_us

    def probe_request(self) -> Request:
        """The request the health check and the warm-ups send (its output cap is theirs)."""
        return Request(-1, self.probe_prompt, self.generation)

    async def close_sessions(self) -> None:
        """Every endpoint's clients closed (its aiohttp session and its streaming connections)."""
        for state in self.endpoints:
            if state.streams is not None:
                state.streams.close()
            if state.session is not None:
                await state.session.close()

    async def open_sessions(self) -> None:
        import aiohttp

        from .sse_protocol import Connections

        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.settings.connect_timeout_s,
                                        sock_read=self.settings.request_timeout_s)
        hold = ReadHold(asyncio.get_running_loop(), self.read_hold_us / 1e6) if self.read_hold_us > 0 else None
        for state in self.endpoints:
            connector = aiohttp.TCPConnector(limit=self.settings.in_flight + 2, enable_cleanup_closed=True)
            state.session = aiohttp.ClientSession(connector=connector, timeout=timeout, raise_for_status=False)
            state.streams = Connections(state.endpoint.host, state.endpoint.port, state.endpoint.scheme == "https",
                                        self.settings.connect_timeout_s, self.settings.request_timeout_s, hold)

    async def check(self, state: EndpointState) -> None:
        """The endpoint serves the model and generates: /v1/models, /version, and a short generation that also
        tells whether it returns token ids."""
        models = await self.get_json(state, "/v1/models")
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
            version = await self.get_json(state, "/version")
            state.version = str(version.get("version", "")) if isinstance(version, dict) else ""
        except EndpointFailed:
            state.version = ""       # not every engine has /version
        probe = self.probe_request()
        mode = self.settings.token_ids
        state.token_ids = TEXT_IDS if mode == "text" else SERVER_IDS
        output = await self.generate(state, probe, PROBE_TOKENS, report=False)
        if state.token_ids == SERVER_IDS and output is None:
            if mode == "server" or self.encode is None:
                raise EndpointFailed(
                    f"{state.url} ({state.engine or 'unknown engine'}) does not return the generated token ids "
                    f"(vLLM's return_token_ids)" + ("; tokenizing its text needs the benchmark's tokenizer, which "
                                                    "this benchmark has not" if self.encode is None else
                                                    "; leave --openai_token_ids=server out to tokenize its text"))
            state.token_ids = TEXT_IDS

    async def warm_up(self, state: EndpointState, requests: int | None = None) -> None:
        """`requests` warm-up requests at once (the settings' warmup_requests by default)."""
        count = self.settings.warmup_requests if requests is None else requests
        probe = self.probe_request()
        await asyncio.gather(*(self.generate(state, probe, WARMUP_TOKENS, report=False) for _ in range(count)))

    async def get_json(self, state: EndpointState, path: str) -> Any:
        text = await self.get(state, path)
        try:
            return json.loads(text)
        except ValueError:
            raise EndpointFailed(f"{state.url}{path} did not answer JSON: {text[:200]!r}") from None

    async def get(self, state: EndpointState, path: str) -> str:
        import aiohttp

        try:
            async with state.session.get(state.url + path) as response:
                text = await response.text()
                if response.status != 200:
                    raise EndpointFailed(f"{state.url}{path} answered HTTP {response.status}: {text[:200]}")
                return text
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
            raise EndpointFailed(f"{state.url}{path}: {_describe(error, self.settings)}") from None

    async def poll(self, state: EndpointState) -> None:
        try:
            text = await self.get(state, "/metrics")
        except EndpointFailed as error:
            if "HTTP 404" not in str(error) or state.metrics.polls:
                raise
            state.metrics.problem = "the server has no /metrics"
            await self.get(state, "/v1/models")      # still alive
            return
        try:
            state.metrics.add(parse(text))
        except ValueError as error:
            state.metrics.problem = f"/metrics is not Prometheus text: {error}"

    # -- one request ---------------------------------------------------------------------------------------
    async def generate(self, state: EndpointState, request: Request, max_tokens: int, report: bool) -> list[int] | None:
        """Stream one request's answer; report its chunks (report) and count it. Returns its token ids (None
        when the server sent text without ids in server mode: only the probe asks)."""
        import aiohttp

        if self.api.media:
            return await self._generate_media(state, request, report)
        server_ids = state.token_ids == SERVER_IDS
        output = _Output()
        data, headers = self.api.body(state.model, request.prompt, request.settings, max_tokens, server_ids,
                                      self.settings.answers == "streamed", self.settings.stream_interval)
        try:
            if isinstance(data, bytes):     # a JSON body: streamed through the protocol-level reader
                take = lambda payloads: self._take_events(  # noqa: E731
                    state, request, output, payloads, server_ids, report)
                lines = (output.fast(take, self.stream, request.id, state) if report and server_ids and
                         not self.answer_text and self.api.name in PLAIN_APIS else None)
                answer = await state.streams.post(self.api.path, data, headers, take, lines)
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

    async def _generate_media(self, state: EndpointState, request: Request, report: bool) -> list[int]:
        """One request of a media API (payloads.VideoGenerations): one whole answer, the media file, reported as the
        answer's content followed by one final chunk of one token (MEDIA_TOKEN): LoadGen counts a file as one
        sample."""
        import aiohttp

        data, headers = self.api.body(state.model, request.prompt, request.settings, 1, False, False)
        try:
            async with state.session.post(state.url + self.api.path, data=data,
                                          headers={**headers, "Accept": "*/*"}) as response:
                body = await response.read()
                if response.status != 200:
                    hint = (f"; it does not serve {self.api.path}: is it a video generation server (trtllm-serve "
                            f"VisualGen, make serve_llm for this benchmark)?" if response.status in (404, 405)
                            else "")
                    raise EndpointFailed(f"{state.url}{self.api.path} answered HTTP {response.status}: "
                                         f"{body.decode(errors='replace')[:300]}{hint}")
                content_type = response.content_type
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as error:
            raise EndpointFailed(f"{state.url}: {_describe(error, self.settings)}") from None
        try:
            media = self.api.media_file(body, content_type)
        except ValueError as error:
            raise EndpointFailed(f"{state.url}{self.api.path}: {error}") from None
        if report:
            state.answered += 1
            state.output_tokens += 1
            if self.answer_text:
                self.stream.answer(request.id, media)
            self.stream.chunk(request.id, [MEDIA_TOKEN], True)
        return [MEDIA_TOKEN]

    async def _post_form(self, state: EndpointState, request: Request, output: _Output, data, headers,
                         server_ids: bool, report: bool) -> bool:
        """A request whose body is a form (audio transcriptions), through aiohttp; True as _take says."""
        async with state.session.post(state.url + self.api.path, data=data, headers=headers) as response:
            if response.status != 200:
                detail = (await response.text())[:300]
                raise EndpointFailed(f"{state.url} answered HTTP {response.status} to a completion request: "
                                     f"{detail}")
            if response.content_type == "application/json":    # a whole answer, not a stream
                return self._take(state, request, output, await response.read(), server_ids, report)
            return await self._read_stream(response, state, request, output, server_ids, report)

    async def _read_stream(self, response, state: EndpointState, request: Request, output: _Output, server_ids: bool,
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

    def _take_events(self, state: EndpointState, request: Request, output: _Output, payloads: list[bytes],
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

    def _take(self, state: EndpointState, request: Request, output: _Output, payload: bytes, server_ids: bool,
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
                self.stream.chunk(request.id, first[:1], False)
        return False

    def _read_generally(self, state: EndpointState, payload: bytes) -> tuple[list | None, Any]:
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

    def _report_ids(self, state: EndpointState, request: Request, output: _Output, report: bool) -> None:
        """The first chunk that carries ids goes out at once; later ones gather until the final one."""
        final = output.finish is not None
        if not report or not (final or (output.tokens and not output.reported)):
            return
        tokens, output.tokens = output.tokens, []
        output.reported += len(tokens)
        if final:
            state.output_tokens += output.reported
            self._answer_text(request.id, output)
        self.stream.chunk(request.id, tokens, final)

    def _finish_text(self, state: EndpointState, request: Request, output: _Output, report: bool) -> None:
        ids = list(self.encode("".join(output.text))) if self.encode is not None else []
        if output.finish == "stop" and request.settings.eos_token_ids:
            ids.append(int(request.settings.eos_token_ids[0]))     # it ended on EOS, which the text leaves out
        output.tokens = ids
        if not report:
            return
        state.output_tokens += len(ids)
        self._answer_text(request.id, output)
        if output.reported:
            self.stream.chunk(request.id, ids[1:], True)
        else:
            self.stream.chunk(request.id, ids, True)

    def _answer_text(self, request_id: int, output: _Output) -> None:
        """The whole answer's text to the stream where it takes it (TokenStream.answer), before the final chunk."""
        if self.answer_text:
            self.stream.answer(request_id, "".join(output.text))


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
