"""The system under test of the Triton harness: LoadGen queries -> asynchronous gRPC requests to Triton servers.

LoadGen runs here; inference runs in one or more Triton Inference Servers (local, or one per node with
`--endpoints`). Issued samples are cut into requests (Server: each query as it comes, and Triton's dynamic
batcher forms the batches; Offline and the stream scenarios: up to `batch_size` samples per request) and queued.
One dispatcher thread sends each request with `async_infer` to the endpoint with the fewest requests in flight,
never more than `in_flight` per endpoint: the limit keeps a slow node from collecting the whole Offline query.
The client's callback (on gRPC's threads) turns the outputs into responses with the benchmark's postprocessor and
completes them to LoadGen. A server on this machine gets the batch through system shared memory, gathered straight
into a region it reads (triton/inputs.py); one on another host, in the gRPC message.

Failure never hangs and never passes for a result: a request that fails (the server died, refused, or took longer
than `request_timeout_s`) or an endpoint that stops answering its health check fails the run with the endpoint
named; every outstanding sample is then completed empty, so LoadGen ends, and the run is recorded as failed.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from functools import partial
from typing import Callable, Sequence

import numpy as np

from ..benchmark_api import Responses
from ..constants import Scenario
from ..records.record import split_address
from ..triton.inputs import RequestLayout, endpoint_inputs
from .qsl import SampleLibrary
from .base import SUTBase

Postprocess = Callable[[list[np.ndarray], np.ndarray], Responses]
HEALTH_INTERVAL_S = 1.0


class EndpointFailed(RuntimeError):
    """A Triton endpoint failed during the run; the message names it."""


@dataclass
class Endpoint:
    url: str
    client: object
    inputs: object = None       # how requests carry their batch (triton/inputs.py)
    in_flight: int = 0          # requests sent and not answered
    requests: int = 0           # requests answered
    samples: int = 0            # samples answered

    def record(self) -> dict[str, object]:
        return {"url": self.url, "requests": self.requests, "samples": self.samples,
                "transport": self.inputs.transport}


@dataclass(frozen=True)
class RemoteModel:
    """The model every endpoint serves, as requests name it."""

    name: str
    inputs: RequestLayout
    output_names: tuple[str, ...]


class TritonSUT(SUTBase):
    def __init__(self, scenario: Scenario, qsl: SampleLibrary, urls: Sequence[str], model: RemoteModel,
                 postprocess: Postprocess, batch_size: int, in_flight: int, request_timeout_s: float, *,
                 servers: Sequence = (), infos: Sequence = (),
                 connect: Callable[[str], object] | None = None) -> None:
        from ..triton.client import connect as grpc_connect

        if not urls:
            raise ValueError("the Triton harness needs at least one endpoint")
        if batch_size < 1 or in_flight < 1:
            raise ValueError(f"batch_size and in_flight must be at least 1 (got {batch_size}, {in_flight})")
        super().__init__(scenario)
        self.qsl = qsl
        self.model = model
        self.postprocess = postprocess
        self.batch_size = batch_size
        self.in_flight = in_flight
        self.request_timeout_s = request_timeout_s
        self.endpoints = [Endpoint(url, (connect or grpc_connect)(url)) for url in urls]
        try:
            for number, endpoint in enumerate(self.endpoints):
                endpoint.inputs = endpoint_inputs(endpoint.url, endpoint.client, model.inputs, in_flight, str(number))
        except BaseException:
            self._close_endpoints()
            raise
        self.servers = list(servers)          # local servers this SUT stops when it stops
        self.infos = {info.url: info for info in infos}
        self._ready = threading.Condition(self._lock)    # a request queued, a slot freed, a stop or a failure
        self._queue: deque[tuple[np.ndarray, np.ndarray]] = deque()
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._next = 0   # round-robin start among equally loaded endpoints

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "TritonSUT":
        for target, name in ((self._dispatch, "triton-dispatch"), (self._watch_health, "triton-health")):
            thread = threading.Thread(target=target, daemon=True, name=name)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Stop sending, wait for answers to what is in flight (at most the request timeout), close the clients."""
        deadline = time.monotonic() + self.request_timeout_s
        with self._ready:
            self._stopping = True
            self._ready.notify_all()
            while any(e.in_flight for e in self.endpoints) and time.monotonic() < deadline:
                self._ready.wait(timeout=0.1)
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads.clear()
        self._close_endpoints()
        for server in self.servers:
            server.stop()

    def _close_endpoints(self) -> None:
        for endpoint in self.endpoints:
            try:
                if endpoint.inputs is not None:
                    endpoint.inputs.close()
                endpoint.client.close()
            except Exception:  # noqa: BLE001  closing is best effort once the run is decided
                pass

    def endpoint_records(self) -> list[dict[str, object]]:
        """Per endpoint, as the record keeps it (records.record.EndpointRecord): what it serves (read before the
        run), whether this test started it, what it answered."""
        local = {server.url for server in self.servers}
        with self._lock:
            counts = [e.record() for e in self.endpoints]
        records = []
        for count in counts:
            url = count.pop("url")
            host, port = split_address(url)
            extras = self.infos[url].as_dict() if url in self.infos else {}   # engine path, max batch, version
            extras.pop("url", None)
            records.append({"host": host, "port": port, "protocol": "grpc", "model": extras.pop("model", ""),
                            "engine_sha256": extras.pop("engine_sha256", ""), "local": url in local, **count,
                            "extras": extras})
        return records

    # -- LoadGen callbacks -----------------------------------------------------------------------
    def issue(self, ids: list[int], indices: list[int]) -> None:
        id_array, index_array = np.asarray(ids, dtype=np.uint64), np.asarray(indices, dtype=np.int64)
        step = 1 if self.scenario is Scenario.Server else self._request_size(len(ids))
        with self._ready:
            self.counters.issued += len(ids)
            for start in range(0, len(ids), step):
                self._queue.append((id_array[start:start + step], index_array[start:start + step]))
            self._ready.notify_all()

    def _request_size(self, samples: int) -> int:
        """Samples per request: `batch_size`, but small enough that every endpoint gets two requests of a short
        query (an Offline query of 20 samples would otherwise be one request for one endpoint)."""
        return max(1, min(self.batch_size, -(-samples // (2 * len(self.endpoints)))))

    # -- sending ---------------------------------------------------------------------------------
    def _dispatch(self) -> None:
        while True:
            with self._ready:
                while not self._stopping and (not self._queue or (self.error is None and self._free() is None)):
                    self._ready.wait()
                if self._stopping:
                    pending = list(self._queue)
                    self._queue.clear()
                    failed, endpoint, item = True, None, None
                else:
                    item = self._queue.popleft()
                    failed = self.error is not None
                    endpoint = None if failed else self._free()
                    if endpoint is not None:
                        endpoint.in_flight += 1
                        slot = endpoint.inputs.acquire()
                    pending = [item] if failed else []
            for ids, _ in pending:
                self.complete_empty(ids)
            if self._stopping and endpoint is None and item is None:
                return
            if endpoint is not None:
                self._send(endpoint, slot, *item)

    def _free(self) -> Endpoint | None:
        """The endpoint with the fewest requests in flight, under the limit (round robin among equals)."""
        count = len(self.endpoints)
        order = [self.endpoints[(self._next + k) % count] for k in range(count)]
        best = min(order, key=lambda e: e.in_flight)
        if best.in_flight >= self.in_flight:
            return None
        self._next = (self.endpoints.index(best) + 1) % count
        return best

    def _send(self, endpoint: Endpoint, slot: int | None, ids: np.ndarray, indices: np.ndarray) -> None:
        import tritonclient.grpc as grpcclient

        answered = partial(self._answered, endpoint, slot, ids, indices)
        try:
            requests = endpoint.inputs.request(self.qsl, indices, slot)
            outputs = [grpcclient.InferRequestedOutput(name) for name in self.model.output_names]
            endpoint.client.async_infer(self.model.name, requests, answered, outputs=outputs,
                                        client_timeout=self.request_timeout_s)
        except BaseException as error:  # noqa: BLE001  recorded as the run's failure, never swallowed
            answered(None, error)

    # -- answers ---------------------------------------------------------------------------------
    def _answered(self, endpoint: Endpoint, slot: int | None, ids: np.ndarray, indices: np.ndarray, result,
                  error) -> None:
        responses = None
        if error is None:
            try:
                outputs = [result.as_numpy(name) for name in self.model.output_names]
                responses = self.postprocess(outputs, indices)
                if len(responses) != len(ids):
                    raise RuntimeError(f"{len(responses)} responses for {len(ids)} samples")
            except BaseException as failure:  # noqa: BLE001
                error = failure
        if responses is None:
            self.fail(EndpointFailed(f"Triton endpoint {endpoint.url} failed: {_describe(error)}"))
            self.complete_empty(ids)
        else:
            self.complete(ids, responses)
        with self._ready:
            endpoint.in_flight -= 1
            endpoint.inputs.release(slot)
            if responses is not None:
                endpoint.requests += 1
                endpoint.samples += len(ids)
            self._ready.notify_all()

    def _watch_health(self) -> None:
        """Ask every endpoint whether it is live, once a second: a node that dies while it has nothing in flight
        fails the run too."""
        from tritonclient.utils import InferenceServerException

        while True:
            with self._ready:
                if self._stopping or self.error is not None:
                    return
                self._ready.wait(timeout=HEALTH_INTERVAL_S)
                if self._stopping or self.error is not None:
                    return
            for endpoint in self.endpoints:
                try:
                    live = endpoint.client.is_server_live(client_timeout=max(HEALTH_INTERVAL_S * 5, 5.0))
                    problem = None if live else "it reports that it is not live"
                except InferenceServerException as error:
                    problem = _describe(error)
                if problem is not None:
                    self.fail(EndpointFailed(f"Triton endpoint {endpoint.url} failed its health check: {problem}"))
                    return

    # -- failure ---------------------------------------------------------------------------------
    def fail(self, error: BaseException) -> None:
        super().fail(error)
        with self._ready:
            self._ready.notify_all()     # the dispatcher completes what is queued empty


def _describe(error: BaseException) -> str:
    message = getattr(error, "message", None)
    status = getattr(error, "status", None)
    if callable(message):
        text = str(message())
        code = status() if callable(status) else None
        return f"{code}: {text}" if code else text
    return f"{type(error).__name__}: {error}"
