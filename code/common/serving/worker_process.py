"""A worker process of the serving client (workers.py says what they are for and how they end): the transport that
the one-loop client calls too (transport.Transport) on this process's event loop, its reports sent over its channel.
`python -m code.common.serving.worker_process <fd>`, started by workers.start_workers with the socket `fd`."""
from __future__ import annotations

import asyncio
import pickle
import signal
import socket
import sys
from typing import Any

import msgspec

from .channel import Channel
from .sse_protocol import new_event_loop
from .transport import Transport
from .workers import CANCEL, CHUNKS, FAILED, QUIT, READY, REQUESTS, SETUP, unpack_requests


class _WorkerLoop:
    """A worker: the transport (transport.py) on this process's event loop, its reports over its channel."""

    def __init__(self, sock: socket.socket) -> None:
        self.loop = new_event_loop()
        self.encoder = msgspec.msgpack.Encoder()
        self.channel = Channel(sock, self.loop, self._frame, self._parent_gone)
        self.transport: Transport | None = None
        self.tasks: dict[int, asyncio.Task] = {}   # request id: its task, until it ends
        self.pending: list[list] = []
        self.settings: list = []                 # the requests' settings, by number (workers.pack_requests)
        self.texts: dict[int, str] = {}          # answers' texts, sent with their final chunks (setup's answer_text)
        self.quit = self.loop.create_future()

    def run(self) -> None:
        self.loop.run_until_complete(self.quit)
        self.loop.run_until_complete(self._close())

    # TokenStream, called by the transport on this loop
    def chunk(self, request_id: int, tokens, final: bool) -> None:
        if not self.pending:
            self.loop.call_soon(self._flush)      # one frame for whatever this turn of the loop reports
        item = [request_id, tokens if isinstance(tokens, list) else [int(t) for t in tokens], final]
        if final and self.texts:
            text = self.texts.pop(request_id, None)
            if text is not None:
                item.append(text)
        self.pending.append(item)

    def answer(self, request_id: int, text: object) -> None:
        """Where the LoadGen process's stream logs answers' texts: kept for the request's final chunk."""
        self.texts[request_id] = text

    def failed(self, error: BaseException) -> None:
        self._flush()
        self.channel.send(self.encoder.encode([FAILED, str(error)]))

    def _flush(self) -> None:
        if self.pending:
            pending, self.pending = self.pending, []
            self.channel.send(self.encoder.encode([CHUNKS, pending, self._reads()]))

    def _reads(self) -> int:
        """The reads of answers so far, over every endpoint (make bench's tokens per read)."""
        transport = self.transport
        return sum(state.streams.reads for state in transport.endpoints if state.streams is not None) if transport \
            else 0

    def _frame(self, data: bytes) -> None:
        message = pickle.loads(data)
        kind = message[0]
        if kind == SETUP:
            self.loop.create_task(self._setup(message[1]))
        elif kind == REQUESTS:
            for number, request in unpack_requests(self.settings, message[1], message[2]):
                self.tasks[request.id] = self.loop.create_task(self._run(number, request))
        elif kind == CANCEL:
            for request_id in message[1]:
                task = self.tasks.get(request_id)
                if task is not None:
                    task.cancel()
        elif kind == QUIT and not self.quit.done():
            self.quit.set_result(None)

    async def _setup(self, setup: dict[str, Any]) -> None:
        transport = Transport(setup["endpoints"], setup["settings"], setup["generation"], setup["probe"],
                              api=setup["api"], encode=setup["encode"], answer_text=setup["answer_text"],
                              read_hold_us=setup["settings"].worker_read_hold_us)
        transport.stream = self
        self.transport = transport
        try:
            await transport.open_sessions()
        except BaseException as error:  # noqa: BLE001  reported, then the LoadGen process stops this worker
            self.failed(error)
            return
        for state, (model, token_ids) in zip(transport.endpoints, setup["states"]):
            state.model, state.token_ids = model, token_ids
        try:      # with warm-ups: a connection of its own to every endpoint, warm before the test's first request
            if transport.settings.warmup_requests > 0:
                await asyncio.gather(*(transport.warm_up(state, 1) for state in transport.endpoints))
        except BaseException as error:  # noqa: BLE001
            self.failed(error)
            return
        self.channel.send(self.encoder.encode([READY]))

    async def _run(self, number: int, request) -> None:
        transport = self.transport
        try:
            await transport.generate(transport.endpoints[number], request, request.settings.max_new_tokens,
                                     report=True)
        except asyncio.CancelledError:
            pass
        except BaseException as error:  # noqa: BLE001  any failure of a request fails the run
            self.failed(error)
        finally:
            self.tasks.pop(request.id, None)

    def _parent_gone(self) -> None:
        if not self.quit.done():
            self.quit.set_result(None)

    async def _close(self) -> None:
        self._flush()
        tasks = list(self.tasks.values())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        if self.transport is not None:
            await self.transport.close_sessions()
        self.channel.close()


def main(argv: list[str]) -> None:
    """`python -m code.common.serving.workers <fd>`: a worker on the socket `fd` its parent passed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)      # a Ctrl-C at the terminal is the toolkit's to handle
    _WorkerLoop(socket.socket(fileno=int(argv[0]))).run()


if __name__ == "__main__":
    main(sys.argv[1:])
