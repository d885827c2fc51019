"""TensorRT runner: one execution context fed through pinned memory with two batches in flight.

- Per instance: an execution context, a compute stream and a copy stream, and two buffer sets (for every I/O
  tensor a device buffer and a pinned host buffer sized for the largest batch), allocated once. A batch's samples
  are copied once on the host, straight into a set's pinned buffers (harness/qsl.PendingBatch gathers them there),
  or not at all with start_from_device (device-to-device copies from the performance set uploaded once per GPU,
  tensorrt_resident.py); its input copies go on the copy stream, the inference and output copies on the compute
  stream after the copy's event, and the host waits for the set's own event, never for a stream. Two callers per
  instance (the harness gives each instance `parallel_calls` worker threads) or `infer_batches` keep the next
  batch copying while the current one computes.
- The device is set before every allocation, copy, inference and release, in the thread doing it (CUDA's current
  device is per host thread).

`StreamRunner` talks to two small interfaces only: the execution context (`ExecutionContext`, four TensorRT
methods) and CUDA (`cuda_runtime.CudaCalls`); the tests run it on host-memory implementations of both.
"""
from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass
from typing import Iterable, Iterator, Mapping, Protocol, Sequence, cast

import numpy as np

from ..errors import EXIT_FAILURE, UserError
from .cuda_runtime import CudaCalls, host_array
from .tensorrt_loader import Shape, TensorInfo, dims_tuple
from .tensorrt_resident import RESIDENT_SETS, ResidentBatch, ResidentSets


class ExecutionContext(Protocol):
    """The part of `tensorrt.IExecutionContext` the runner uses."""

    def set_input_shape(self, name: str, shape: tuple[int, ...]) -> bool: ...
    def set_tensor_address(self, name: str, memory: int) -> bool: ...
    def execute_async_v3(self, stream_handle: int) -> bool: ...
    def get_tensor_shape(self, name: str) -> Shape: ...


@dataclass
class _Buffer:
    tensor: TensorInfo
    device: int
    host: int
    view: np.ndarray          # (max_batch, *sample_shape) over the pinned host buffer


@dataclass
class _BufferSet:
    """One batch in flight: a device and a pinned host buffer per I/O tensor, and the two events that order it (its
    inputs are on the GPU; its outputs are back in pinned memory)."""

    buffers: list[_Buffer]
    copied: int = 0
    done: int = 0

    def inputs(self) -> list[_Buffer]:
        return [b for b in self.buffers if b.tensor.is_input]

    def outputs(self) -> list[_Buffer]:
        return [b for b in self.buffers if not b.tensor.is_input]


@dataclass(frozen=True)
class Ticket:
    """A batch submitted to a runner (`StreamRunner.submit`), collected with `StreamRunner.collect`."""

    buffer_set: int
    count: int


class DirectBatch(Protocol):
    """A batch not gathered yet (harness/qsl.PendingBatch): it writes its samples straight into given arrays, so
    that the only host copy of a sample is the one into pinned memory."""

    count: int                                                              # samples in the batch

    def __getitem__(self, name: str) -> np.ndarray: ...
    def gather_into(self, out: Mapping[str, np.ndarray]) -> set[str]: ...   # the names it wrote


def _direct(inputs: object) -> DirectBatch | None:
    return cast(DirectBatch, inputs) if hasattr(inputs, "gather_into") else None


def _resident(inputs: object) -> ResidentBatch | None:
    return cast(ResidentBatch, inputs) if hasattr(inputs, "load_token") and hasattr(inputs, "stacked") else None


class StreamRunner:
    """One execution context with `buffer_sets` sets of buffers for `max_batch` samples, allocated once, all on GPU
    `gpu`: a copy stream brings inputs in, the context's stream computes and brings the outputs back, and events,
    not stream synchronizes, order the two streams and tell the host when a batch is done.

    `submit` fills a free set (the one host copy per sample, straight into its pinned buffers, or device-to-device
    copies from the performance set kept on the GPU), queues its input copies on the copy stream, then the inference
    and output copies on the compute stream after the copy's event; `collect` waits for the set's event and returns
    the outputs. Two callers (threads) or `infer_batches` keep two batches in flight, so a batch's input copy
    overlaps the previous batch's compute. The CUDA device is set before every call that uses it (it is per host
    thread in CUDA)."""

    def __init__(self, tensors: Sequence[TensorInfo], context: ExecutionContext, cuda: CudaCalls, max_batch: int,
                 input_names: Sequence[str], gpu: int = 0, buffer_sets: int = 2) -> None:
        inputs = [t for t in tensors if t.is_input]
        if sorted(t.name for t in inputs) != sorted(input_names):
            raise UserError(f"The engine has input(s) {', '.join(t.name for t in inputs) or 'none'}, the runner "
                            f"feeds {', '.join(input_names)}: the engine was built from another model. Rebuild it "
                            "with `make generate_engines`.", exit_code=EXIT_FAILURE)
        for tensor in tensors:
            if any(d < 0 for d in tensor.sample_shape):
                raise UserError(f"Engine tensor {tensor.name} has shape {tensor.shape}: only the batch dimension may "
                                "be dynamic for this runner.", exit_code=EXIT_FAILURE)
        if buffer_sets < 1:
            raise ValueError(f"buffer_sets must be at least 1, got {buffer_sets}")
        self.cuda, self.context, self.gpu, self.max_batch = cuda, context, gpu, int(max_batch)
        self.tensors = tuple(tensors)
        self._context_lock = threading.Lock()     # one enqueue at a time on the execution context
        self._free = threading.Condition()        # buffer sets not in flight
        self._batch: int | None = None            # the batch size the context's input shape is set to
        self._bound: int | None = None            # the buffer set the context's tensor addresses point at
        self._sets: list[_BufferSet] = []
        self._residents: ResidentSets | None = None
        self.stream = self.copy_stream = 0
        try:
            cuda.set_device(gpu)
            self.stream = cuda.stream_create()
            self.copy_stream = cuda.stream_create()
            for _ in range(buffer_sets):
                self._allocate_set()
        except BaseException:
            self.close()
            raise
        self._available = list(range(buffer_sets))

    @property
    def buffer_sets(self) -> int:
        return len(self._sets)

    def _allocate_set(self) -> None:
        """One more set of buffers, in `_sets` from the start so that close() frees what a failure left."""
        cuda, buffer_set = self.cuda, _BufferSet([])
        self._sets.append(buffer_set)
        for tensor in self.tensors:
            nbytes = max(1, self.max_batch * tensor.sample_bytes)
            buffer = _Buffer(tensor, cuda.malloc(nbytes), 0, np.empty(0))
            buffer_set.buffers.append(buffer)
            buffer.host = cuda.malloc_host(nbytes)
            buffer.view = host_array(buffer.host, (self.max_batch, *tensor.sample_shape), tensor.dtype)
        buffer_set.copied = cuda.event_create()
        buffer_set.done = cuda.event_create()

    # -- keeping the performance set on the GPU (NVIDIA's start_from_device) ------------------------
    def keep_inputs_on_device(self, residents: "ResidentSets | None" = None) -> None:
        """Batches that say which rows of the loaded performance set they are (`ResidentBatch`) are gathered on the
        GPU from one copy of that set per GPU and load (`residents`, shared by the runners on the GPU), with no
        host copy; other batches (warm-up) come from the host."""
        self._residents = residents if residents is not None else RESIDENT_SETS
        self._residents.join(self.gpu)

    def upload(self, loaded: ResidentBatch) -> None:
        """Put the performance set LoadGen just loaded (`loaded`: all of its rows) on this runner's GPU now, before
        the test's clock runs, unless another runner there did (start_from_device)."""
        if self._residents is not None:
            self.cuda.set_device(self.gpu)
            self._residents.rows(self.cuda, self.gpu, self.copy_stream, loaded,
                                 [b.tensor for b in self._sets[0].inputs()])

    # -- one batch ----------------------------------------------------------------------------------
    def submit(self, inputs: Mapping[str, np.ndarray] | DirectBatch) -> Ticket:
        """Queue one batch of at most max_batch samples ({input name: array} or a DirectBatch); waits for a free
        buffer set when every set is in flight."""
        ticket = self._submit(inputs, wait=True)
        assert ticket is not None
        return ticket

    def _submit(self, inputs: Mapping[str, np.ndarray] | DirectBatch, wait: bool) -> Ticket | None:
        """submit(); None, with nothing queued, when every set is in flight and `wait` is False."""
        names = [b.tensor.name for b in self._sets[0].inputs()]
        direct = _direct(inputs)
        count = int(direct.count) if direct is not None else len(inputs[names[0]])
        if not 1 <= count <= self.max_batch:
            raise ValueError(f"a batch of {count} samples; this runner takes 1 to {self.max_batch}")
        index = self._acquire(wait)
        if index is None:
            return None
        try:
            buffer_set = self._sets[index]
            self.cuda.set_device(self.gpu)
            self._copy_inputs(buffer_set, inputs, count)
            self.cuda.event_record(buffer_set.copied, self.copy_stream)
            with self._context_lock:
                self.cuda.stream_wait_event(self.stream, buffer_set.copied)
                self._enqueue(index, count)
                self.cuda.event_record(buffer_set.done, self.stream)
        except BaseException:
            self._release(index)
            raise
        return Ticket(index, count)

    def collect(self, ticket: Ticket) -> list[np.ndarray]:
        """The outputs of a submitted batch, in the engine's output order (copies: the set's buffers are reused)."""
        buffer_set = self._sets[ticket.buffer_set]
        try:
            self.cuda.set_device(self.gpu)
            self.cuda.event_synchronize(buffer_set.done)
            return [output.view[:ticket.count].copy() for output in buffer_set.outputs()]
        finally:
            self._release(ticket.buffer_set)

    def infer(self, inputs: Mapping[str, np.ndarray] | DirectBatch) -> list[np.ndarray]:
        """Outputs of one batch ({input name: array}) in the engine's output order; batches larger than the
        engine's are run in parts, two in flight."""
        names = [b.tensor.name for b in self._sets[0].inputs()]
        direct = _direct(inputs)
        if direct is not None and direct.count <= self.max_batch:
            return self.collect(self.submit(direct))
        arrays = {name: (direct or inputs)[name] for name in names}   # a larger batch is gathered, run in parts
        count = len(arrays[names[0]])
        for name in names:
            batch, expected = arrays[name], self._tensor(name).sample_shape
            if len(batch) != count or tuple(batch.shape[1:]) != expected:
                raise ValueError(f"batch of shape {batch.shape} for input {name} of per-sample "
                                 f"shape {expected}, {count} samples")
        if count > self.max_batch:
            parts = list(self.infer_batches({name: array[i:i + self.max_batch] for name, array in arrays.items()}
                                            for i in range(0, count, self.max_batch)))
            return [np.concatenate(outputs) for outputs in zip(*parts)]
        return self.collect(self.submit(arrays))

    def infer_batches(self, batches: Iterable[Mapping[str, np.ndarray] | DirectBatch]) -> Iterator[list[np.ndarray]]:
        """The outputs of each batch in turn, with up to `buffer_sets` batches in flight: batch n+1's input copy is
        queued before batch n's outputs are waited for."""
        pending: deque[Ticket] = deque()
        try:
            for batch in batches:
                # Wait for a set only while holding none: another caller of this runner doing the same (two
                # harness threads, each with a batch larger than the plan) can then never hold the sets crosswise.
                while (ticket := self._submit(batch, wait=not pending)) is None:
                    yield self.collect(pending.popleft())
                pending.append(ticket)
            while pending:
                yield self.collect(pending.popleft())
        finally:
            while pending:   # abandoned or failed: the sets are waited for and given back
                self.collect(pending.popleft())

    def _tensor(self, name: str) -> TensorInfo:
        return next(t for t in self.tensors if t.name == name)

    def _acquire(self, wait: bool = True) -> int | None:
        with self._free:
            while not self._available:
                if not wait:
                    return None
                self._free.wait()
            index = min(self._available)    # one caller keeps using one set: its addresses stay bound
            self._available.remove(index)
            return index

    def _release(self, index: int) -> None:
        with self._free:
            self._available.append(index)
            self._free.notify()

    def _copy_inputs(self, buffer_set: _BufferSet, inputs: Mapping[str, np.ndarray] | DirectBatch,
                     count: int) -> None:
        """The batch's inputs into the set's device buffers, queued on the copy stream."""
        buffers = buffer_set.inputs()
        resident = _resident(inputs) if self._residents is not None else None
        if self._residents is not None and resident is not None:
            rows = self._residents.rows(self.cuda, self.gpu, self.copy_stream, resident, [b.tensor for b in buffers])
            for buffer in buffers:
                rows.gather(self.cuda, buffer.tensor, buffer.device, resident.slots, self.copy_stream)
            return
        direct = _direct(inputs)
        written = direct.gather_into({b.tensor.name: b.view[:count] for b in buffers}) if direct is not None \
            else set()
        for buffer in buffers:
            if buffer.tensor.name not in written:
                np.copyto(buffer.view[:count], inputs[buffer.tensor.name], casting="same_kind")
            self.cuda.copy_to_device_async(buffer.device, buffer.host, count * buffer.tensor.sample_bytes,
                                           self.copy_stream)

    def _enqueue(self, index: int, count: int) -> None:
        """Inference of the batch in set `index` and the copies of its outputs, on the compute stream (under the
        context lock)."""
        buffer_set = self._sets[index]
        if self._bound != index:
            for buffer in buffer_set.buffers:
                if not self.context.set_tensor_address(buffer.tensor.name, buffer.device):
                    raise RuntimeError(f"TensorRT refused the address of tensor {buffer.tensor.name}")
            self._bound = index
        if count != self._batch:
            self._batch = None
            for buffer in buffer_set.inputs():
                if not self.context.set_input_shape(buffer.tensor.name, (count, *buffer.tensor.sample_shape)):
                    raise RuntimeError(f"TensorRT refused batch size {count} (the engine's profile allows 1 to "
                                       f"{self.max_batch})")
            self._batch = count
        if not self.context.execute_async_v3(self.stream):
            raise RuntimeError("TensorRT could not enqueue the inference (execute_async_v3 returned False)")
        for output in buffer_set.outputs():
            shape = dims_tuple(self.context.get_tensor_shape(output.tensor.name))
            if shape[:1] != (count,) or shape[1:] != output.tensor.sample_shape:
                raise RuntimeError(f"output {output.tensor.name} has shape {shape} for a batch of {count}; "
                                   f"expected ({count}, {', '.join(map(str, output.tensor.sample_shape))})")
            self.cuda.copy_to_host_async(output.host, output.device, count * output.tensor.sample_bytes,
                                         self.stream)

    def close(self) -> None:
        """Wait for the work in flight, then free the buffers, events and streams, on the runner's GPU
        (idempotent)."""
        sets, self._sets = self._sets, []
        streams, self.stream, self.copy_stream = (self.stream, self.copy_stream), 0, 0
        residents, self._residents = self._residents, None
        if not sets and not any(streams) and residents is None:
            return
        self.cuda.set_device(self.gpu)
        for stream in streams:
            if stream:
                self.cuda.synchronize(stream)
        if residents is not None:
            residents.leave(self.cuda, self.gpu)
        for buffer_set in sets:
            for buffer in buffer_set.buffers:
                if buffer.host:
                    self.cuda.free_host(buffer.host)
                self.cuda.free(buffer.device)
            for event in (buffer_set.copied, buffer_set.done):
                if event:
                    self.cuda.event_destroy(event)
        for stream in streams:
            if stream:
                self.cuda.stream_destroy(stream)
