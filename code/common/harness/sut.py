"""The system under test: LoadGen queries -> batches -> backend instances in worker threads -> responses.

- Offline: the one big query is cut into work items of a few batches of `batch_size` (at most 512 samples, and at
  least four items per instance), shared by the workers; each item is completed with one LoadGen call.
- Server: workers form batches dynamically, waiting at most `batch_timeout_us` after a batch's first sample.
- SingleStream / MultiStream: the query is run at once on LoadGen's issuing thread (the next query waits
  for this one anyway, and a thread hop would only add latency).

Backends release the GIL while they compute, so several instances run in parallel. A response may have any
size (one class id, or one record per detected object): each batch's responses come back as one `Responses`
buffer with byte offsets, and the addresses LoadGen reads are computed from them with numpy. A failure in a
backend marks the run failed; every outstanding sample is then completed empty so that LoadGen ends.
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Mapping, Sequence

import numpy as np

from ..benchmark_api import Responses
from ..constants import Scenario
from .qsl import SampleLibrary
from .base import SUTBase

# ({input name: batch}, the batch's QSL indices) -> its responses
Infer = Callable[[Mapping[str, np.ndarray], np.ndarray], Responses]
_STOP = None


class HarnessSUT(SUTBase):
    def __init__(self, scenario: Scenario, qsl: SampleLibrary, instances: Sequence[Infer], batch_size: int,
                 batch_timeout_us: int = 0, direct_batches: bool = False) -> None:
        super().__init__(scenario)
        self.qsl = qsl
        # The instances take batches not gathered yet (qsl.PendingBatch), to gather them into their own buffers.
        self._batch = qsl.pending if direct_batches else qsl.gather
        self.instances = list(instances)
        self.batch_size = batch_size
        self.batch_timeout_s = batch_timeout_us / 1e6
        self._work: queue.Queue = queue.Queue()
        self._threads: list[threading.Thread] = []
        self.offline_batches_per_item = max(1, 512 // batch_size)

    # -- lifecycle -------------------------------------------------------------------------------
    def start(self) -> "HarnessSUT":
        if self.scenario in (Scenario.Offline, Scenario.Server):
            target = self._offline_worker if self.scenario is Scenario.Offline else self._server_worker
            for infer in self.instances:
                thread = threading.Thread(target=target, args=(infer,), daemon=True, name="sut-worker")
                thread.start()
                self._threads.append(thread)
        return self

    def stop(self) -> None:
        for _ in self._threads:
            self._work.put(_STOP)
        for thread in self._threads:
            thread.join(timeout=30)
        self._threads.clear()

    # -- LoadGen callbacks -----------------------------------------------------------------------
    def issue(self, ids: list[int], indices: list[int]) -> None:
        with self._lock:
            self.counters.issued += len(ids)
        if self.scenario is Scenario.Server:
            for pair in zip(ids, indices):
                self._work.put(pair)
            return
        # Work items are views of two arrays made once, so they cost no list building. An Offline item
        # holds several batches completed together: fewer LoadGen calls, and no latency matters there.
        id_array, index_array = np.asarray(ids, dtype=np.uint64), np.asarray(indices, dtype=np.int64)
        step = self.batch_size * (self._batches_per_item(len(ids)) if self.scenario is Scenario.Offline else 1)
        for start in range(0, len(ids), step):
            item = (id_array[start:start + step], index_array[start:start + step])
            if self.scenario is Scenario.Offline:
                self._work.put(item)
            else:
                self._run_item(self.instances[0], *item)

    def _batches_per_item(self, samples: int) -> int:
        """Batches in one Offline work item: up to `offline_batches_per_item`, but small enough that every instance
        gets several items (a short query of batch-1 samples would otherwise be one item for one instance)."""
        batches = -(-samples // self.batch_size)
        return max(1, min(self.offline_batches_per_item, -(-batches // (4 * max(1, len(self.instances))))))

    # -- workers ---------------------------------------------------------------------------------
    def _offline_worker(self, infer: Infer) -> None:
        while (item := self._work.get()) is not _STOP:
            self._run_item(infer, *item)

    def _server_worker(self, infer: Infer) -> None:
        while (first := self._work.get()) is not _STOP:
            ids, indices = [first[0]], [first[1]]
            deadline = time.perf_counter() + self.batch_timeout_s
            stop = False
            while len(ids) < self.batch_size:
                remaining = deadline - time.perf_counter()
                try:
                    item = self._work.get(timeout=remaining) if remaining > 0 else self._work.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                    break
                ids.append(item[0])
                indices.append(item[1])
            self._run_item(infer, np.asarray(ids, dtype=np.uint64), np.asarray(indices, dtype=np.int64))
            if stop:
                break

    def _run_item(self, infer: Infer, ids: np.ndarray, indices: np.ndarray) -> None:
        """Infer a work item in batches of `batch_size` and complete all its samples in one call."""
        if self.error is not None:
            self.complete_empty(ids)
            return
        try:
            parts = []
            for start in range(0, len(indices), self.batch_size):
                batch = indices[start:start + self.batch_size]
                parts.append(infer(self._batch(batch), batch))
                with self._lock:
                    self.counters.inferred += len(parts[-1])
            responses = Responses.join(parts)
            if len(responses) != len(ids):
                raise RuntimeError(f"backend returned {len(responses)} responses for {len(ids)} samples")
        except BaseException as error:  # noqa: BLE001  recorded, reported by the run, never swallowed
            self.fail(error)
            self.complete_empty(ids)
            return
        self.complete(ids, responses)
