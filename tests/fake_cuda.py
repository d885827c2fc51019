"""CUDA on host memory, for the TensorRT runner's tests: `FakeCuda` implements `cuda_runtime.CudaCalls` as a GPU
behaves where the runner could get it wrong.

- Device and pinned memory are real host allocations addressed by integers, each remembering the device that was
  current when it was made; a copy checks the kinds (device or pinned) and devices of both ends.
- Asynchronous work (copies, inferences, event records) is queued on its stream and runs only when the host
  waits: `synchronize(stream)`, `event_synchronize(event)` (the event's stream up to that record), or a stream
  that waits for an event (`stream_wait_event`) runs the other stream up to the event before its own next work.
  A runner that read outputs before waiting, or copied the wrong byte counts, gets wrong numbers.
- The current device is per host thread, as in CUDA. `calls` records every call with the device current in the
  calling thread, in order, so that tests can check which device each step ran on and in which order.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from code.common.backends.cuda_runtime import CudaError


@dataclass
class Call:
    name: str
    device: int           # current in the calling thread (-1: never set there)
    args: tuple = ()


@dataclass
class _Marker:
    done: bool = False


@dataclass
class _Stream:
    device: int
    queue: list[Callable[[], None]] = field(default_factory=list)


class FakeCuda:
    def __init__(self, gpus: int = 1, fail_malloc_at: int | None = None) -> None:
        self.gpus = gpus
        self.memory: dict[int, np.ndarray] = {}        # address -> the allocation (device and pinned alike)
        self.kinds: dict[int, str] = {}
        self.owner: dict[int, int] = {}                # address -> device current when it was allocated
        self.streams: dict[int, _Stream] = {}
        self.events: dict[int, int] = {}               # event -> device it was made on
        self._records: dict[int, tuple[int, _Marker]] = {}   # event -> (stream, marker of its last record)
        self.calls: list[Call] = []
        self._local = threading.local()
        self._lock = threading.RLock()
        self._next = 1
        self._fail_malloc_at = fail_malloc_at

    # -- the current device (per thread) ------------------------------------------------------------
    @property
    def device(self) -> int:
        return getattr(self._local, "device", -1)

    def _log(self, name: str, *args) -> None:
        self.calls.append(Call(name, self.device, args))

    def names(self) -> list[str]:
        return [c.name for c in self.calls]

    def device_count(self) -> int:
        return self.gpus

    def set_device(self, device: int) -> None:
        if not 0 <= device < self.gpus:
            raise CudaError("cudaSetDevice", 101, "invalid device ordinal")
        self._local.device = device
        self._log("set_device", device)

    def _handle(self) -> int:
        with self._lock:
            self._next += 1
            return self._next

    # -- memory -------------------------------------------------------------------------------------
    def _alloc(self, nbytes: int, kind: str) -> int:
        with self._lock:
            self._log(kind, nbytes)
            if self._fail_malloc_at is not None and \
                    sum(c.name.startswith("malloc") for c in self.calls) >= self._fail_malloc_at:
                raise CudaError("cudaMalloc", 2, "out of memory")
            block = np.zeros(nbytes, dtype=np.uint8)
            address = block.ctypes.data
            self.memory[address], self.kinds[address], self.owner[address] = block, kind, self.device
            return address

    def malloc(self, nbytes: int) -> int:
        return self._alloc(nbytes, "malloc")

    def malloc_host(self, nbytes: int) -> int:
        return self._alloc(nbytes, "malloc_host")

    def _free(self, pointer: int, kind: str) -> None:
        with self._lock:
            self._log("free" if kind == "malloc" else "free_host", pointer)
            assert self.kinds.pop(pointer) == kind
            del self.memory[pointer], self.owner[pointer]

    def free(self, pointer: int) -> None:
        self._free(pointer, "malloc")

    def free_host(self, pointer: int) -> None:
        self._free(pointer, "malloc_host")

    def _block_of(self, pointer: int) -> int:
        for base, block in self.memory.items():
            if base <= pointer < base + len(block):
                return base
        raise AssertionError(f"{pointer:#x} is not allocated")

    def device_bytes(self) -> int:
        return sum(len(self.memory[a]) for a, kind in self.kinds.items() if kind == "malloc")

    # -- streams, events, copies --------------------------------------------------------------------
    def stream_create(self) -> int:
        stream = self._handle()
        with self._lock:
            self.streams[stream] = _Stream(self.device)
        self._log("stream_create", stream)
        return stream

    def stream_destroy(self, stream: int) -> None:
        self._log("stream_destroy", stream)
        with self._lock:
            assert not self.streams.pop(stream).queue, "destroyed with work queued"

    def _enqueue(self, stream: int, operation: Callable[[], None]) -> None:
        with self._lock:
            assert self.streams[stream].device == self.device, "work queued on another device's stream"
            self.streams[stream].queue.append(operation)

    def _copy(self, name: str, dst: int, src: int, nbytes: int, stream: int, dst_kind: str, src_kind: str) -> None:
        self._log(name, dst, src, nbytes, stream)
        with self._lock:
            for pointer, kind in ((dst, dst_kind), (src, src_kind)):
                base = self._block_of(pointer)
                assert self.kinds[base] == kind, (name, kind, self.kinds[base])
                assert self._block_of(pointer + nbytes - 1) == base, f"{name} runs past its buffer"
                if kind == "malloc":
                    assert self.owner[base] == self.device, f"{name} touches GPU {self.owner[base]} memory " \
                                                            f"from GPU {self.device}"
        self._enqueue(stream, lambda: ctypes.memmove(dst, src, nbytes))

    def copy_to_device_async(self, device_pointer: int, host_pointer: int, nbytes: int, stream: int) -> None:
        # Pageable host memory is a plain numpy array: a start_from_device upload copies from it.
        kind = "malloc_host" if self._is_allocated(host_pointer) else None
        if kind is None:
            self._log("copy_to_device_async", device_pointer, host_pointer, nbytes, stream)
            data = ctypes.string_at(host_pointer, nbytes)       # read now: the caller keeps it until it syncs
            self._enqueue(stream, lambda: ctypes.memmove(device_pointer, data, nbytes))
            return
        self._copy("copy_to_device_async", device_pointer, host_pointer, nbytes, stream, "malloc", "malloc_host")

    def _is_allocated(self, pointer: int) -> bool:
        with self._lock:
            return any(base <= pointer < base + len(block) for base, block in self.memory.items())

    def copy_to_host_async(self, host_pointer: int, device_pointer: int, nbytes: int, stream: int) -> None:
        self._copy("copy_to_host_async", host_pointer, device_pointer, nbytes, stream, "malloc_host", "malloc")

    def copy_on_device_async(self, destination: int, source: int, nbytes: int, stream: int) -> None:
        self._copy("copy_on_device_async", destination, source, nbytes, stream, "malloc", "malloc")

    def _run(self, stream: int, until: _Marker | None = None) -> None:
        with self._lock:
            queue = self.streams[stream].queue
            while queue and not (until is not None and until.done):
                queue.pop(0)()

    def synchronize(self, stream: int) -> None:
        self._log("synchronize", stream)
        self._run(stream)

    def event_create(self) -> int:
        event = self._handle()
        with self._lock:
            self.events[event] = self.device
        self._log("event_create", event)
        return event

    def event_destroy(self, event: int) -> None:
        self._log("event_destroy", event)
        with self._lock:
            del self.events[event]
            self._records.pop(event, None)

    def event_record(self, event: int, stream: int) -> None:
        self._log("event_record", event, stream)
        marker = _Marker()
        with self._lock:
            assert self.events[event] == self.streams[stream].device, "event recorded on another device's stream"
            self._records[event] = (stream, marker)
        self._enqueue(stream, lambda: setattr(marker, "done", True))

    def stream_wait_event(self, stream: int, event: int) -> None:
        self._log("stream_wait_event", stream, event)
        with self._lock:
            recorded = self._records.get(event)
        if recorded is not None:
            other, marker = recorded
            self._enqueue(stream, lambda: self._run(other, until=marker))

    def event_synchronize(self, event: int) -> None:
        self._log("event_synchronize", event)
        with self._lock:
            recorded = self._records.get(event)
        if recorded is not None:
            stream, marker = recorded
            self._run(stream, until=marker)
