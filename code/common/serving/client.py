"""The openai harness's engine: the dispatcher of requests to OpenAI-compatible servers (vLLM, SGLang, TensorRT-LLM's
trtllm-serve). What one request is on the wire (sessions, health, warm-up, the POST of a payload, its chunks, text to
token ids) is the transport's (transport.py), which this module and the worker processes call alike; here is what
goes where and when, and what LoadGen hears.

It is one request-level engine (code/common/generation.py) over every endpoint, on one asyncio event loop in a thread
of its own: the LLM system under test (harness/llm_sut.py) submits each issued sample as a request, and the scheduler
(scheduler.py) sends it to an endpoint with room, at most `in_flight` per endpoint; the rest wait here, in the order
they came. Offline's one query of every sample is spread that way; Server's queries go out as they come.

Before the test, `open` has the transport check every endpoint for real (the benchmark's model in `/v1/models`,
another refused; a short generation), then a few warm-up requests each. During the test each endpoint's `/metrics`
is polled (requests, queue time, prefix-cache hits, into the record); a poll that cannot reach the server fails the
run, so an endpoint that dies with nothing in flight is noticed too.

Offline may take whole answers instead of streams (`answers`: one JSON document per request, its token ids
included), since it measures no first-token time; the body then says `"stream": false` whatever the sampling. With
`workers` above one, the requests are streamed by worker processes (workers.py, worker_process.py: each its own
transport), the scheduler and LoadGen staying here.

Failure never hangs and never passes for a result: the first EndpointFailed (or a worker that ends) fails the whole
run with the endpoint named; the system under test completes what is outstanding empty and the run is recorded as
failed.
"""
from __future__ import annotations

import asyncio
import threading
from collections import deque
from typing import TYPE_CHECKING, Any, Callable, Sequence

from ..prompts import size
from ..records.computation import MODEL_FOLDER_SHA256
from .scheduler import Scheduler
from .transport import (ANSWERS, SERVER_IDS, TEXT_IDS, TOKEN_IDS_MODES, TRANSPORTS, ClientSettings, EndpointFailed,
                        EndpointState, Transport, serving)
from .workers import (CHANNEL, FAILED, READY, WorkerFailed, cancel_requests, close_channels, quit_workers, reap_workers,
                      send_requests, start_workers)

if TYPE_CHECKING:
    import numpy as np

    from ..generation import GenerationSettings, Request, TokenStream
    from ..prompts import Prompt
    from .endpoints import Endpoint
    from .payloads import Payload

__all__ = ["ClientSettings", "EndpointFailed", "EndpointState", "SERVER_IDS", "ServingClient", "TEXT_IDS", "serving",
           "travels"]


class ServingClient:
    """A request-level engine over OpenAI-compatible `endpoints` (see the module's docstring)."""

    def __init__(self, endpoints: Sequence[Endpoint], settings: ClientSettings, generation: GenerationSettings,
                 probe_prompt: Prompt | np.ndarray, *, encode: Callable[[str], list[int]] | None = None,
                 local: Sequence[Endpoint] = (), api: Payload | None = None, model_folder_sha256: str = "",
                 answer_text: bool = False) -> None:
        """The transport's arguments (transport.Transport); `model_folder_sha256`: the digest of the model folder
        the `local` servers (started by the test) serve, kept in their records."""
        if not endpoints:
            raise ValueError("the openai harness needs at least one endpoint")
        if settings.answers not in ANSWERS:
            raise ValueError(f"answers must be one of {', '.join(ANSWERS)}, not {settings.answers!r}")
        if settings.token_ids not in TOKEN_IDS_MODES:
            raise ValueError(f"token_ids must be one of {', '.join(TOKEN_IDS_MODES)}, not {settings.token_ids!r}")
        self.settings = settings
        self.transport = Transport(endpoints, settings, generation, probe_prompt, encode=encode, api=api,
                                   answer_text=answer_text, local=local)
        self.endpoints = self.transport.endpoints
        self.prompt_parts = self.transport.api.parts
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
        from .sse_protocol import new_event_loop    # uvloop's where present (the transport's reader runs on it)

        self._stream = self.transport.stream = stream
        self._loop = new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True, name="openai-client")
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._open(), self._loop).result()
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

    def reads(self) -> int:
        """The reads of streamed answers so far, this process's and its workers' (as their last frames said)."""
        return (sum(state.streams.reads for state in self.endpoints if state.streams is not None)
                + sum(worker.reads for worker in self._workers))

    def worker_pids(self) -> list[int]:
        """The process ids of the worker processes (none with one loop), for measurements of their CPU time."""
        return [worker.process.pid for worker in self._workers]

    def records(self) -> list[dict[str, Any]]:
        """Per endpoint, as the run's record keeps it (records.record.EndpointRecord): what was sent (whole answers
        or streams, the stream interval asked) and what each endpoint did."""
        api = self.transport.api
        return [{"host": e.endpoint.host, "port": e.endpoint.port, "protocol": e.endpoint.scheme,
                 "model": e.model or self.settings.model, "local": e.local, "requests": e.answered,
                 "samples": e.answered,
                 "transport": f"{TRANSPORTS[self.settings.answers]} {api.path}",
                 "extras": {"serving_engine": e.engine, "answers": self.settings.answers,
                            "stream_interval": self.settings.stream_interval, "serving_engine_version": e.version,
                            "served_models": list(e.served), "token_ids": e.token_ids, "output_tokens": e.output_tokens,
                            "workers": max(1, self._worker_count),
                            **({"worker_channel": CHANNEL, "worker_read_hold_us": self.settings.worker_read_hold_us}
                               if self._worker_count else {}),
                            "in_flight_limit": self.settings.in_flight, "most_in_flight": e.most_in_flight,
                            "scheduler": self.settings.policy, "metrics": e.metrics.summary(),
                            **({MODEL_FOLDER_SHA256: self.model_folder_sha256}
                               if e.local and self.model_folder_sha256 else {})}}
                for e in self.endpoints]

    # -- on the event loop -----------------------------------------------------------------------
    async def _open(self) -> None:
        transport = self.transport
        await transport.open_sessions()
        await asyncio.gather(*(transport.check(state) for state in self.endpoints))
        await asyncio.gather(*(transport.warm_up(state) for state in self.endpoints))
        # Worker processes (their warm-ups before the first poll, so that the metrics are the test's alone)
        encode = transport.encode if any(state.token_ids == TEXT_IDS for state in self.endpoints) else None
        if self.settings.workers > 1 and travels(encode):
            self._workers = await start_workers(
                self.settings.workers,
                {"endpoints": [state.endpoint for state in self.endpoints], "settings": self.settings,
                 "generation": transport.generation, "probe": transport.probe_prompt, "api": transport.api,
                 "encode": encode, "answer_text": transport.answer_text,
                 "states": [(state.model, state.token_ids) for state in self.endpoints]},
                self._from_worker, self._worker_gone)
            self._worker_count = len(self._workers)
        if self.settings.metrics_interval_s > 0:
            await asyncio.gather(*(transport.poll(state) for state in self.endpoints))   # before the test's requests
            self._pollers = [asyncio.ensure_future(self._watch(state)) for state in self.endpoints]

    async def _watch(self, state: EndpointState) -> None:
        """Poll the endpoint's metrics until the end; one it cannot reach fails the run."""
        while True:
            await asyncio.sleep(self.settings.metrics_interval_s)
            try:
                await self.transport.poll(state)
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
        worker.reads = message[2]
        remote, stream = self._remote, self._stream
        for item in message[1]:
            request_id, tokens, final = item[0], item[1], item[2]
            entry = remote.get(request_id)
            if entry is None:
                continue           # cancelled
            entry[3] += len(tokens)
            if len(item) > 3:      # a final chunk with the answer's text, where the stream logs texts
                stream.answer(request_id, item[3])
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
            await self.transport.generate(self.endpoints[number], request, request.settings.max_new_tokens,
                                          report=True)
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
                    await self.transport.poll(state)          # what the run added
                except EndpointFailed:
                    pass
        for task in list(self._tasks.values()):
            task.cancel()
        await asyncio.gather(*self._tasks.values(), *self._pollers, return_exceptions=True)
        await self.transport.close_sessions()


def travels(encode: Callable | None) -> bool:
    """Whether worker processes can tokenize text with `encode` (it pickles); where not, servers that stream text
    only are read on one loop here, where the tokenizer is."""
    import pickle

    try:
        pickle.dumps(encode)
    except (pickle.PicklingError, TypeError, AttributeError):
        return False
    return True
