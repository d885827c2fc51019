"""A fake OpenAI-compatible streaming server of the toolkit's own (no model behind it: its answers are made up from the
prompt), for the openai harness's fault tests and for `make bench`'s ceiling figures: it answers `/v1/completions`,
`/v1/chat/completions` (streamed, or one JSON answer when the request says `"stream": false`) and
`/v1/audio/transcriptions` (multipart) the way vLLM does (server-sent events, the generated token ids in each chunk
with `return_token_ids`), `/v1/models`, `/version` and `/metrics`, as fast as it can or with the delays and faults
it is told to play. It keeps the chat and transcription requests it answered (`received`: their JSON bodies, their
forms' fields and files), so that a test sees what reached it.

Its output is a pure function of the prompt, so that runs through one or several servers give the same accuracy
log: output token i of a prompt is `first + (key + i) % 1000`, and its text is " t<id>" per token (so a client that
tokenizes the text reads it back with `encode_test_text`). The key depends on the whole prompt (`prompt_key`: the
CRC-32 of its ids), so that prompts that share their last ids (every chat-templated prompt ends in the same ones)
get answers of their own, and a client that mixes two requests' answers up gives another accuracy log. A chat's or
an audio clip's prompt is its `content_key` (text, and the bytes of images and audio as decoded from the request),
and so is a completion's prompt sent as text (as vLLM's benchmark client sends it): all of its text. A stream that
asks for usage (`stream_options.include_usage`) ends with a chunk that counts its tokens, as vLLM's does.
With `eos_every=k`, a prompt whose key is a multiple of k ends on EOS after its first (min_tokens-respecting)
tokens, with finish reason "stop".

Faults (`fault`): `http_error` (every completion answers HTTP 500), `break` (the connection closes after
`fault_after` chunks), `malformed` (chunk `fault_after` is not JSON), `stall` (no chunk after `fault_after`),
`no_token_ids` (text only, as servers without vLLM's extension), `one_chunk` (the whole answer in one chunk),
`slow_first` (the first token after `first_delay_s`), `no_stream` (one JSON answer, as a server that does not
stream). A request's `stream_interval` (vLLM's) is honoured: the first token in a chunk of its own, then that many
per chunk. With `answer=json_choice` a chat is answered with a JSON object `{"category": <one of the candidates>,
"brand": "", "is_secondhand": false}`, the candidate (by the chat's key) from the last ```json list of its text,
streamed a few characters per token (a chat without such a list gets the usual " t<id>" text).

So that it is not what a bench measures, its chunks are rendered once (each distinct chunk's bytes are kept and
reused), and `writes` says how they go out: `chunk` (one write per chunk, awaited; a client that keeps up reads them
one per read only where they are paced, `chunk_delay_s`, as a real engine's decode steps: as fast as it can, several
arrive between two reads) or `answer` (the whole answer's chunks in one write, coalesced: many per read). With
`steps`, paced chunks go out at decode steps that every stream shares (the multiples of `chunk_delay_s` on the
machine's monotonic clock, in every process), as a real engine's do: each running sequence's token at the end of the
step that made it. Run: `python -m code.common.serving.fake_server --port 8000 --model NAME [--fault ...]
[--answer=json_choice] [--writes=answer] [--chunk_delay_s=0.02 [--steps]] [--processes=4]`; it prints "listening on <url>" once it accepts
connections. With `--processes=N`, N processes serve the one port (SO_REUSEPORT: the kernel spreads the connections
over them); the first starts the others, which end with it (a signal to its process group ends all).
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import threading
import time
import zlib
from array import array
from dataclasses import dataclass
from typing import Any

FIRST_ID = 10
FAULTS = ("", "http_error", "break", "malformed", "stall", "no_token_ids", "one_chunk", "slow_first", "no_stream")
ANSWERS = ("", "json_choice")
ANSWER_PIECE = 4                 # characters of a json_choice answer per token
WRITES = ("chunk", "answer")     # one write per chunk (one chunk per read), or per answer (coalesced)


def output_ids(prompt: list[int], count: int, eos: int | None = None, eos_every: int = 0,
               min_tokens: int = 1) -> list[int]:
    """The server's answer to `prompt`: `count` token ids, or fewer ending on `eos`."""
    key = prompt_key(prompt)
    ids = [FIRST_ID + (key + i) % 1000 for i in range(count)]
    if eos is not None and eos_every and key % eos_every == 0:
        stop = max(min_tokens, 1)
        if stop < count:
            ids = ids[:stop - 1] + [eos] if stop > 1 else [eos]
    return ids


def prompt_key(prompt: list[int]) -> int:
    """The key of a token prompt: the CRC-32 of all its ids (as 64-bit integers)."""
    return zlib.crc32(array("q", prompt).tobytes()) if prompt else 0


def content_key(parts: list[str | bytes]) -> int:
    """The key of a chat or an audio request: the CRC-32 of its parts in order (text as UTF-8, media as bytes)."""
    crc = 0
    for part in parts:
        crc = zlib.crc32(part.encode() if isinstance(part, str) else part, crc)
    return crc


def chat_parts(messages: list) -> list[str | bytes]:
    """The parts of chat `messages` as content_key reads them: text, and the bytes of data-URL images and of
    input_audio clips."""
    parts: list[str | bytes] = []
    for message in messages:
        content = message.get("content")
        for item in [{"type": "text", "text": content}] if isinstance(content, str) else content:
            if item["type"] == "text":
                parts.append(item["text"])
            elif item["type"] == "image_url":
                parts.append(base64.b64decode(item["image_url"]["url"].split(",", 1)[1], validate=True))
            elif item["type"] == "input_audio":
                parts.append(base64.b64decode(item["input_audio"]["data"], validate=True))
            else:
                raise ValueError(f"unknown content type {item['type']!r}")
    return parts


def encode_test_text(text: str) -> list[int]:
    """The ids a text of this server's stands for (its tokenizer, for clients that tokenize text)."""
    return [int(word[1:]) for word in text.split()]


@dataclass
class ServerSettings:
    model: str = "test-model"
    tokens_per_chunk: int = 1
    first_delay_s: float = 0.0
    chunk_delay_s: float = 0.0
    fault: str = ""
    fault_after: int = 1
    eos_every: int = 0
    engine: str = "toolkit-test-server"
    answer: str = ""
    writes: str = "chunk"          # WRITES
    steps: bool = False            # paced chunks at the shared decode steps (multiples of chunk_delay_s), not each alone


class StreamingServer:
    """The server on 127.0.0.1 (a free port unless given), in a thread of its own: `start()`, `.url`, `stop()`."""

    def __init__(self, settings: ServerSettings | None = None, port: int = 0, reuse_port: bool = False) -> None:
        self.settings = settings or ServerSettings()
        if self.settings.writes not in WRITES:
            raise ValueError(f"writes must be one of {', '.join(WRITES)}, not {self.settings.writes!r}")
        self.port = port
        self.reuse_port = reuse_port   # SO_REUSEPORT: other processes serve the same port
        self._rendered: dict[tuple, bytes] = {}
        self.requests = 0            # completions answered to their end
        self.tokens = 0
        self.running = 0
        self.received: list[dict[str, Any]] = []   # chat bodies; transcription forms ({field: str or bytes})
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def app(self):
        from aiohttp import web

        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/version", self._version)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_post("/v1/completions", self._completions)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/v1/audio/transcriptions", self._transcriptions)
        return app

    async def serve(self) -> None:
        from aiohttp import web

        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port, backlog=1024, reuse_port=self.reuse_port or None)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    def start(self) -> "StreamingServer":
        ready = threading.Event()
        self._loop = asyncio.new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(self._loop)
            self._loop.run_until_complete(self.serve())
            ready.set()
            self._loop.run_forever()

        self._thread = threading.Thread(target=run, daemon=True, name="test-openai-server")
        self._thread.start()
        if not ready.wait(timeout=30):
            raise RuntimeError("the test server did not start")
        return self

    def stop(self) -> None:
        if self._loop is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop = None

    async def _close(self) -> None:
        await self._runner.cleanup()
        others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in others:
            task.cancel()          # a stalled answer
        await asyncio.gather(*others, return_exceptions=True)

    def __enter__(self) -> "StreamingServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- handlers --------------------------------------------------------------------------------
    async def _models(self, request):
        from aiohttp import web

        return web.json_response({"object": "list", "data": [
            {"id": self.settings.model, "object": "model", "owned_by": self.settings.engine}]})

    async def _version(self, request):
        from aiohttp import web

        return web.json_response({"version": "1.0"})

    async def _metrics(self, request):
        from aiohttp import web

        prefix = "toolkit_test"
        text = (f"# TYPE {prefix}:request_success_total counter\n{prefix}:request_success_total {self.requests}\n"
                f"# TYPE {prefix}:generation_tokens_total counter\n{prefix}:generation_tokens_total {self.tokens}\n"
                f"# TYPE {prefix}:prefix_cache_hits_total counter\n{prefix}:prefix_cache_hits_total 0\n"
                f"# TYPE {prefix}:num_requests_running gauge\n{prefix}:num_requests_running {self.running}\n")
        return web.Response(text=text, content_type="text/plain")

    async def _completions(self, request):
        body = await request.json()
        prompt = body.get("prompt") or ()
        if isinstance(prompt, str):     # a text prompt (as vLLM's benchmark client sends): keyed on all its text
            return await self._answer(request, body, [content_key([prompt])], int(body.get("max_tokens", 16)),
                                      "text_completion")
        try:
            ids = [int(t) for t in prompt]
        except (ValueError, TypeError):
            from aiohttp import web

            return web.json_response({"error": {"message": "prompt must be text or a list of token ids"}},
                                     status=400)
        return await self._answer(request, body, ids, int(body.get("max_tokens", 16)), "text_completion")

    async def _chat(self, request):
        body = await request.json()
        self.received.append(body)
        try:
            key = content_key(chat_parts(body.get("messages") or []))
        except (ValueError, KeyError, TypeError, IndexError) as error:
            from aiohttp import web

            return web.json_response({"error": {"message": f"bad messages: {error}"}}, status=400)
        text = json_choice(body.get("messages") or [], key) if self.settings.answer == "json_choice" else None
        return await self._answer(request, body, [key], int(body.get("max_completion_tokens", 16)),
                                  "chat.completion.chunk", text)

    async def _transcriptions(self, request):
        form = await request.post()
        fields = {name: (value.file.read() if hasattr(value, "file") else str(value)) for name, value in form.items()}
        self.received.append(fields)
        body = {**fields, "stream": fields.get("stream") == "true"}
        parts = [fields["prompt"]] if fields.get("prompt") else []
        return await self._answer(request, body, [content_key([*parts, fields.get("file", b"")])],
                                  int(fields.get("max_completion_tokens", 16)), "transcription.chunk")

    async def _answer(self, request, body: dict, prompt: list[int], max_tokens: int, kind: str,
                      text: str | None = None):
        from aiohttp import web

        settings = self.settings
        if settings.fault == "http_error":
            return web.json_response({"error": {"message": "the test server fails on purpose", "code": 500}},
                                     status=500)
        if body.get("model") != settings.model:
            return web.json_response({"error": {"message": f"model {body.get('model')} does not exist"}}, status=404)
        eos = (body.get("stop_token_ids") or [None])[0]
        ids = output_ids(prompt, max_tokens, eos, settings.eos_every, int(body.get("min_tokens") or 1))
        pieces = None
        if text is not None:      # a text answer: one token per piece, cut at the output cap
            pieces = [text[i:i + ANSWER_PIECE] for i in range(0, len(text), ANSWER_PIECE)][:max_tokens]
            ids = [FIRST_ID + i for i in range(len(pieces))]
            eos = None
        with_ids = bool(body.get("return_token_ids")) and settings.fault != "no_token_ids" \
            and kind != "transcription.chunk"
        if body.get("stream") is False or settings.fault == "no_stream":
            delay = settings.first_delay_s + settings.chunk_delay_s * (len(ids) - 1)
            if delay > 0:
                await asyncio.sleep(delay)      # as long as its stream would take
            return web.json_response(self._whole(ids, eos, with_ids, kind, pieces))
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        self.running += 1
        try:
            await response.prepare(request)
            usage = (body.get("stream_options") or {}).get("include_usage") is True
            await self._stream(request, response, ids, eos, with_ids, kind, pieces,
                               int(body.get("stream_interval") or 0), usage)
        except ConnectionError:
            pass             # the client went away (or the fault closed the connection)
        finally:
            self.running -= 1
        return response

    def _whole(self, ids: list[int], eos: int | None, with_ids: bool, kind: str, pieces: list[str] | None) -> dict:
        """One JSON answer (a request with "stream": false)."""
        choice = _choice(ids, eos, with_ids, kind, True, None if pieces is None else "".join(pieces))
        if kind == "chat.completion.chunk":
            choice["message"] = {"role": "assistant", **choice.pop("delta")}
        self.requests += 1
        self.tokens += len(ids)
        return {"object": kind.removesuffix(".chunk"), "model": self.settings.model, "choices": [choice]}

    async def _stream(self, request, response, ids: list[int], eos: int | None, with_ids: bool, kind: str,
                      pieces: list[str] | None = None, interval: int = 0, usage: bool = False) -> None:
        """The answer's chunks: `tokens_per_chunk` each, or with the request's `stream_interval` (vLLM's) the first
        token alone and then that many per chunk; with `usage` (stream_options.include_usage) a last chunk without
        choices that counts the tokens, as vLLM's."""
        settings = self.settings
        step = len(ids) if settings.fault == "one_chunk" else max(1, settings.tokens_per_chunk)
        bounds = [0, *range(1, len(ids), interval)] if interval > 1 and step == 1 else list(range(0, len(ids), step))
        bounds.append(len(ids))
        first_delay = settings.first_delay_s
        coalesced = settings.writes == "answer" and not settings.fault and not settings.chunk_delay_s
        events: list[bytes] = []
        if kind != "text_completion":       # a chat stream opens with the role, as vLLM's does
            events.append(_event({"object": kind, "model": settings.model, "choices": [
                {"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}))
        for number, (start, end) in enumerate(zip(bounds, bounds[1:])):
            if settings.fault in ("break", "malformed", "stall") and number == settings.fault_after:
                if settings.fault == "break":
                    request.transport.close()
                    return
                if settings.fault == "stall":
                    await asyncio.sleep(3600)
                await response.write(b"data: {not json\n\n")
                continue
            if number == 0 and first_delay:
                await asyncio.sleep(first_delay)
            elif number and settings.chunk_delay_s:
                await asyncio.sleep(_to_next_step(settings.chunk_delay_s) if settings.steps else settings.chunk_delay_s)
            events.append(self._chunk(ids[start:end], eos, with_ids, kind, end >= len(ids),
                                      None if pieces is None else "".join(pieces[start:end])))
            if not coalesced:
                await response.write(b"".join(events))
                events.clear()
        if usage:
            events.append(_event({"object": kind, "model": settings.model, "choices": [], "usage": {
                "prompt_tokens": 0, "completion_tokens": len(ids), "total_tokens": len(ids)}}))
        events.append(b"data: [DONE]\n\n")
        await response.write(b"".join(events))
        self.requests += 1
        self.tokens += len(ids)

    def _chunk(self, part: list[int], eos: int | None, with_ids: bool, kind: str, last: bool,
               text: str | None = None) -> bytes:
        """One chunk's event, rendered once for each distinct chunk (a token's id and its place decide it, and the
        text where a json_choice answer gives it)."""
        key = (tuple(part), eos, with_ids, kind, last, text)
        event = self._rendered.get(key)
        if event is None:
            event = self._rendered[key] = _event({"object": kind, "model": self.settings.model,
                                                 "choices": [_choice(part, eos, with_ids, kind, last, text)]})
        return event


def _choice(part: list[int], eos: int | None, with_ids: bool, kind: str, last: bool, text: str | None = None) -> dict:
    """One choice of `part`'s tokens in the shape of `kind`'s answers (text for completions, a delta otherwise);
    `text`: what they say, where it is not the usual " t<id>" per token (a json_choice answer, which ends "stop")."""
    if text is not None:
        finish = "stop" if last else None
    else:
        finish = ("stop" if part[-1] == eos else "length") if last else None
        text = "".join(f" t{i}" for i in (part[:-1] if eos is not None and part[-1] == eos else part))
    choice: dict[str, Any] = {"index": 0}
    if kind == "text_completion":
        choice.update(text=text, logprobs=None, finish_reason=finish)
    else:
        choice.update(delta={"content": text}, finish_reason=finish)
    if with_ids:
        choice["token_ids"] = part
    return choice


def json_choice(messages: list, key: int) -> str | None:
    """The json_choice answer to chat `messages` of key `key`; None for a chat without a ```json list."""
    texts = [part for part in chat_parts(messages) if isinstance(part, str)]
    for text in reversed(texts):
        blocks = text.split("```json\n")
        if len(blocks) < 2:
            continue
        try:
            candidates = json.loads(blocks[-1].split("```", 1)[0])
        except ValueError:
            continue
        if isinstance(candidates, list) and candidates:
            return json.dumps({"category": str(candidates[key % len(candidates)]), "brand": "",
                               "is_secondhand": False})
    return None


def _event(data: dict) -> bytes:
    return b"data: " + json.dumps(data).encode() + b"\n\n"


def _to_next_step(step_s: float) -> float:
    """The seconds to the next decode step, steps being the multiples of `step_s` on the machine's monotonic clock
    (every stream of every process of the server shares them)."""
    return step_s - time.monotonic() % step_s


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m code.common.serving.fake_server", description=__doc__.split(
        "\n\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default="test-model")
    parser.add_argument("--tokens_per_chunk", type=int, default=1)
    parser.add_argument("--first_delay_s", type=float, default=0.0)
    parser.add_argument("--chunk_delay_s", type=float, default=0.0)
    parser.add_argument("--fault", default="", choices=FAULTS)
    parser.add_argument("--fault_after", type=int, default=1)
    parser.add_argument("--eos_every", type=int, default=0)
    parser.add_argument("--answer", default="", choices=ANSWERS)
    parser.add_argument("--writes", default="chunk", choices=WRITES)
    parser.add_argument("--steps", action="store_true", help="paced chunks at decode steps every stream shares")
    parser.add_argument("--processes", type=int, default=1, help="processes serving the port (SO_REUSEPORT)")
    parser.add_argument("--reuse_port", action="store_true", help=argparse.SUPPRESS)   # one of several processes
    ns = parser.parse_args(argv)
    settings = ServerSettings(ns.model, ns.tokens_per_chunk, ns.first_delay_s, ns.chunk_delay_s, ns.fault,
                              ns.fault_after, ns.eos_every, answer=ns.answer, writes=ns.writes,
                              steps=ns.steps)
    several = ns.processes > 1 or ns.reuse_port
    if ns.reuse_port:
        import signal

        from ..processes import die_with_parent

        die_with_parent(signal.SIGTERM)      # one of several: it ends with the first
    port = ns.port
    if several and not port:
        from ..processes import free_port

        port = free_port()
    server = StreamingServer(settings, port, reuse_port=several)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(server.serve())
    others = [_another(argv if argv is not None else sys.argv[1:], server.port) for _ in range(ns.processes - 1)]
    for other in others:
        line = other.stdout.readline()
        if not line.startswith("listening on"):
            raise SystemExit(f"a test server process did not start: {line!r}")
    print(f"listening on {server.url}", flush=True)
    try:
        loop.run_forever()
    except KeyboardInterrupt:
        pass


def _another(argv: list[str], port: int):
    """One more process serving `port`, which the kernel ends when this one ends (it stays in this process group,
    so that a signal to the group reaches it too)."""
    import subprocess

    kept = [a for a in argv if not a.startswith(("--port", "--processes"))]
    return subprocess.Popen([sys.executable, "-m", "code.common.serving.fake_server", *kept, f"--port={port}",
                             "--reuse_port"], stdout=subprocess.PIPE, text=True)


if __name__ == "__main__":
    main()
