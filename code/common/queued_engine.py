"""The queue of a request-level engine (generation.RequestEngine) that serves its requests from one worker thread: what
a benchmark's own engines share (whisper's speech engine, wan's video pipeline). A subclass writes `_start` (load
what it runs; a failure there stops the run before it starts), `_serve_batch` (make and report the answers of the
requests taken together) and `_release` (free what `_start` loaded, once the worker has ended), and `_interrupt`
where a batch in progress must be cut short for the worker to end (a child process to stop); the queue does the
rest: submit, cancel, close, the worker, and the failure of the whole engine when one batch fails."""
from __future__ import annotations

import threading
from collections import deque
from typing import Sequence

from .generation import Request, TokenStream

JOIN_TIMEOUT_S = 60.0


class QueuedRequestEngine:
    name: str = "engine"
    max_batch: int = 1                   # requests taken together by one `_serve_batch`

    def __init__(self) -> None:
        self._waiting: deque[Request] = deque()
        self._work = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._stream: TokenStream | None = None

    def _start(self) -> None:
        raise NotImplementedError

    def _serve_batch(self, batch: list[Request], stream: TokenStream) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        raise NotImplementedError

    def _interrupt(self) -> None:
        """Cut short the batch in progress, at close (nothing by default: the worker finishes it)."""

    def open(self, stream: TokenStream) -> None:
        """Load what it runs and start the worker (an engine closed before opens again afresh)."""
        self._start()
        self._stream, self._stopping = stream, False
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
        """Drop what waits, let the worker end, free what it ran (a second close does nothing more)."""
        with self._work:
            self._stopping = True
            self._waiting.clear()
            self._work.notify_all()
        self._interrupt()
        if self._thread is not None:
            self._thread.join(JOIN_TIMEOUT_S)
            self._thread = None
        self._release()

    def _take(self) -> list[Request] | None:
        with self._work:
            while not self._waiting and not self._stopping:
                self._work.wait()
            if self._stopping:
                return None
            return [self._waiting.popleft() for _ in range(min(max(1, self.max_batch), len(self._waiting)))]

    def _serve(self) -> None:
        while (batch := self._take()) is not None:
            try:
                self._serve_batch(batch, self._stream)
            except BaseException as error:     # noqa: BLE001 - reported to the system under test, which fails the run
                with self._work:
                    if self._stopping:         # closed while it ran: nobody waits for its answers
                        return
                    self._stopping = True
                    self._waiting.clear()
                self._stream.failed(error)
                return
