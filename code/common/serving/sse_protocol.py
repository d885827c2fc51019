"""The serving client's streamed requests on the wire: one endpoint's HTTP/1.1 keep-alive connections as asyncio
protocols, each answer parsed by llhttp (httptools, the C parser uvicorn serves with) in the call that reads it, and
each read's ended lines handed to the caller's function there and then (`lines`: one call for a read of one event;
by default its server-sent events split for `take`). A real engine sends one event per decode step per sequence, so
most reads carry one event: what a read costs is what a token costs. aiohttp's client reads through a stream
reader, wakes the request's task and iterates lines for every read; here a read is the event loop's callback into
the parser and the caller's function, with no task woken until the answer ends. Measured on
the toolkit's test server paced at one event per read (2 loaded cores): the harness's client 9.8 to 11.7 us of CPU
per token with this reader, 20 to 22 with aiohttp's, the bare aiohttp client 29 to 31 (the reader's own Python per
read was about 1.7 us, 1.0 since a read of one event is one call of the caller's `lines`, measured in one process
without a network; the rest is the loop's wake-up, the kernel's reads and each request's sending). A plain
protocol (the loop hands over each read's bytes) measured 6 to 10 % less per token than a buffered one that reads
into a buffer it reuses (12.3 against 13.6 us, then 12.9 against 13.8: seven pairs of runs in turns on uvloop): the
buffered one costs a Python call more per read than the bytes object it saves.

Its failures are aiohttp's, so that the client names them as it names aiohttp's own: a connection refused is
ConnectFailed (an aiohttp.ClientConnectionError with the OS error), a server that closes the connection before the
answer's end aiohttp.ServerDisconnectedError, one whose HTTP does not parse aiohttp.ClientPayloadError, and one that
sends nothing for `read_timeout_s` asyncio.TimeoutError. A connection reused from the pool that the server had
closed while it was idle (uvicorn closes idle ones after 5 s) is retried once on a new one, as HTTP clients do,
where nothing of the answer had arrived. A body with neither a length nor chunks ends with its connection.

The scheduler bounds the requests in flight per endpoint, so the pool keeps no limit of its own: a connection per
request in flight, returned to the pool when its answer has ended.
"""
from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Callable

import aiohttp
import httptools

from .chunks import data_lines

if TYPE_CHECKING:
    from .read_hold import ReadHold

# What `take` gets: the data of the events complete so far (in order); it returns None to read on, else the answer's
# result (the rest of the answer is then read to its end and dropped, so that the connection can be reused).
Take = Callable[[list], "bool | None"]
# What `lines` gets, where the caller reads lines itself: a read's lines, every one ended (the bytes end in LF, so
# that a read of one event is one call); it returns what `take` returns. By default they are split into events
# (chunks.data_lines) for `take`.
Lines = Callable[[bytes], "bool | None"]


def new_event_loop() -> asyncio.AbstractEventLoop:
    """The client's event loop: uvloop's (libuv's, in C: a read costs about a microsecond less than on asyncio's
    own loop) where it is installed, else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class ConnectFailed(aiohttp.ClientConnectionError):
    """The endpoint refused the connection, or did not accept it within the connect timeout."""

    def __init__(self, os_error: BaseException) -> None:
        super().__init__(str(os_error))
        self.os_error = os_error


class Answer:
    """One answer: its HTTP status, whether it streamed events, its body where not (an error, a whole JSON answer),
    and what `take` returned (None where the events ended without a result)."""

    __slots__ = ("status", "streamed", "body", "result")

    def __init__(self, status: int, streamed: bool, body: bytes, result: bool | None) -> None:
        self.status, self.streamed, self.body, self.result = status, streamed, body, result


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one request at a time."""

    def __init__(self, pool: "Connections") -> None:
        self.pool = pool
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.reused = False
        self.reads = 0                 # reads on this connection so far
        self.sent_at_read = 0          # ... when its request was sent
        self._reset(None, None, None)

    def _reset(self, take: Take | None, lines: Lines | None, done: asyncio.Future | None) -> None:
        self.take, self.done = take, done
        self.lines = lines if lines is not None else self._data_lines
        self.status = 0
        self.streamed = False
        self.body: list[bytes] = []
        self.rest = b""
        self.result: bool | None = None
        self.last_read = time.monotonic()

    def start(self, request: bytes, take: Take, lines: Lines | None, done: asyncio.Future) -> None:
        self._reset(take, lines, done)
        self.sent_at_read = self.reads
        self.transport.write(request)

    @property
    def received(self) -> bool:
        """Whether anything arrived since the request was sent (kept past a failure: a request that received
        something is not retried)."""
        return self.reads != self.sent_at_read

    def _data_lines(self, data: bytes) -> bool | None:
        events = data_lines(data)
        return self.take(events) if events else None

    # -- asyncio.Protocol --------------------------------------------------------------------------
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        self.reads += 1
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserCallbackError as error:   # the caller's `take` failed: the request fails with it
            self._fail(error.__context__ or error)
        except httptools.HttpParserError as error:
            self._fail(aiohttp.ClientPayloadError(f"the answer is not valid HTTP: {error}"))

    def connection_lost(self, error: Exception | None) -> None:
        self.closed = True
        self.pool.forget(self)
        if error is None and self.done is not None and self.status and not self.framed:
            self.on_message_complete()     # a body without a length or chunks ends with its connection
            return
        self._fail(aiohttp.ServerDisconnectedError(f"the connection closed ({error})" if error else None))

    # -- httptools' callbacks ------------------------------------------------------------------------
    def on_headers_complete(self) -> None:
        self.status = self.parser.get_status_code()
        self.streamed = self.status == 200 and not self.json

    json = framed = False      # the answer's body is JSON; it has a length or chunks (else it ends with the connection)

    def on_header(self, name: bytes, value: bytes) -> None:
        name = name.lower()
        if name == b"content-type":
            self.json = value.split(b";", 1)[0].strip().lower() == b"application/json"
        elif name in (b"content-length", b"transfer-encoding"):
            self.framed = True

    def on_message_begin(self) -> None:
        self.json = self.framed = False

    def on_body(self, body: bytes) -> None:
        if not self.streamed:
            self.body.append(body)
            return
        hold = self.pool.hold
        if hold is not None and not hold.pending:       # a read of events (not of the headers alone)
            hold.read()
        if self.result is not None:
            return
        if self.rest:
            body, self.rest = self.rest + body, b""
        if body[-1:] == b"\n":               # every line ended: a real engine's usual read, one event
            self.result = self.lines(body)
            return
        end = body.rfind(b"\n") + 1           # the last line is not ended yet: kept for the next read
        self.rest = body[end:]
        if end:
            self.result = self.lines(body[:end])

    def on_message_complete(self) -> None:
        if self.streamed and self.result is None and self.rest:
            line = self.rest
            self.rest = b""
            self.result = self.lines(line + b"\n")       # the answer ends its last line
        done = self.done
        answer = Answer(self.status, self.streamed, b"".join(self.body), self.result)
        keep = self.parser.should_keep_alive()
        self._reset(None, None, None)
        if keep:
            self.pool.release(self)
        else:
            self.close()
        if done is not None and not done.done():
            done.set_result(answer)

    # -- ends ------------------------------------------------------------------------------------
    def _fail(self, error: BaseException | None) -> None:
        """The request ends with `error` (None: it was cancelled); the connection closes."""
        done = self.done
        self._reset(None, None, None)
        self.close()
        if done is not None and not done.done():
            if error is None:
                done.cancel()
            else:
                done.set_exception(error)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.pool.forget(self)
            self.transport.close()


class Connections:
    """The keep-alive connections to one endpoint (`host`, `port`, TLS where `tls`)."""

    def __init__(self, host: str, port: int, tls: bool = False, connect_timeout_s: float = 10.0,
                 read_timeout_s: float = 600.0, hold: ReadHold | None = None) -> None:
        """`hold`: the loop's read hold (read_hold.py), told of every read of events; None: no hold."""
        self.host, self.port, self.tls = host, port, tls
        self.hold = hold
        self.connect_timeout_s, self.read_timeout_s = connect_timeout_s, read_timeout_s
        authority = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        self._head = f"Host: {authority}\r\nUser-Agent: mlperf-toolkit\r\n".encode()
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()
        self._closed_reads = 0       # the reads of the connections closed so far

    @property
    def reads(self) -> int:
        """Reads of answers so far (make bench's tokens per read)."""
        return self._closed_reads + sum(connection.reads for connection in self._all)

    async def post(self, path: str, body: bytes, headers: dict[str, str], take: Take,
                   lines: Lines | None = None) -> Answer:
        """POST `body` to `path` and read the answer: server-sent events go to `take` as they arrive (or each
        read's ended lines to `lines`, where given); any other body (an error, a whole JSON answer) comes back whole
        in the Answer."""
        request = b"".join((f"POST {path} HTTP/1.1\r\n".encode(), self._head,
                            "".join(f"{k}: {v}\r\n" for k, v in headers.items()).encode(),
                            b"Content-Length: %d\r\n\r\n" % len(body), body))
        connection = await self._connection()
        try:
            return await self._exchange(connection, request, take, lines)
        except aiohttp.ServerDisconnectedError:
            if not connection.reused or connection.received:
                raise
        return await self._exchange(await self._connect(), request, take, lines)   # the server had closed it idle

    async def _exchange(self, connection: _Connection, request: bytes, take: Take, lines: Lines | None) -> Answer:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        connection.start(request, take, lines, done)
        timeout = self.read_timeout_s
        while True:
            try:
                return await asyncio.wait_for(asyncio.shield(done), timeout)
            except asyncio.TimeoutError:
                silent = time.monotonic() - connection.last_read
                if silent >= self.read_timeout_s:
                    connection._fail(asyncio.TimeoutError())
                    return await done
                timeout = self.read_timeout_s - silent
            except asyncio.CancelledError:
                connection._fail(None)
                raise

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if not connection.closed and not connection.transport.is_closing():
                connection.reused = True
                return connection
        return await self._connect()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        try:
            _, connection = await asyncio.wait_for(loop.create_connection(
                lambda: _Connection(self), self.host, self.port, ssl=self.tls or None), self.connect_timeout_s)
        except (OSError, asyncio.TimeoutError) as error:
            raise ConnectFailed(error) from None
        self._all.add(connection)
        return connection

    def release(self, connection: _Connection) -> None:
        connection.reused = False
        if not connection.closed:
            self._idle.append(connection)

    def forget(self, connection: _Connection) -> None:
        if connection in self._all:
            self._all.discard(connection)
            self._closed_reads += connection.reads
        if connection in self._idle:
            self._idle.remove(connection)

    def close(self) -> None:
        for connection in list(self._all):
            connection.close()
