"""TensorRT runner: a plan file -> one execution context per backend instance, fed through pinned memory with two
batches in flight.

- GPUs: `instances` counts instances per GPU (NVIDIA's `gpu_inference_streams`); the harness makes that many for
  every visible GPU (TensorRTPlugin.instance_count) and instance i runs on GPU i mod count. The device is set
  before every engine load, context creation, allocation, copy, inference and release, in the thread doing it
  (CUDA's current device is per host thread).
- Per instance: an execution context, a compute stream and a copy stream, and two buffer sets (for every I/O
  tensor a device buffer and a pinned host buffer sized for the largest batch), allocated once. A batch's samples
  are copied once on the host, straight into a set's pinned buffers (harness/qsl.PendingBatch gathers them there),
  or not at all with start_from_device (device-to-device copies from the performance set uploaded once per GPU);
  its input copies go on the copy stream, the inference and output copies on the compute stream after the copy's
  event, and the host waits for the set's own event, never for a stream. Two callers per instance (the harness
  gives each instance `parallel_calls` worker threads) or `infer_batches` keep the next batch copying while the
  current one computes.
- The engine is deserialized once per process and GPU and shared by the instances on that GPU.

`StreamRunner` holds that logic and talks to two small interfaces only: the execution context (`ExecutionContext`,
four TensorRT methods) and CUDA (`cuda_runtime.CudaCalls`); the tests run it on host-memory implementations of both.
"""
from __future__ import annotations

import functools
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator, Mapping, Protocol, Sequence, cast

import numpy as np

from ..errors import EXIT_FAILURE, UserError
from .base import Backend
from .cuda_runtime import CudaCalls, CudaError, CudaRuntime, describe_cuda_failure, host_array

if TYPE_CHECKING:   # type-checked against stubs/tensorrt (generated from the TensorRT 11.4 bindings)
    import tensorrt as trt
else:
    trt = None      # bound by require_tensorrt(): TensorRT is installed only in the tensorrt environment

MISSING = ("TensorRT is not installed here; run make build on a machine with an NVIDIA GPU, "
           "or use --backend=onnxruntime")
# TensorRT names used only behind a version check (none: everything here exists in TensorRT 10 and 11).
VERSION_GUARDED_TENSORRT_NAMES: tuple[str, ...] = ()
# TensorRT DataType names -> numpy (bfloat16, fp8 and fp4 have no numpy type: such I/O tensors are refused).
_NUMPY_TYPES = {"FLOAT": np.float32, "HALF": np.float16, "INT8": np.int8, "UINT8": np.uint8, "INT32": np.int32,
                "INT64": np.int64, "BOOL": np.bool_}


def libraries_missing(error: BaseException) -> str:
    """What a TensorRT whose Python bindings are installed but whose libraries do not load is, for people."""
    return (f"TensorRT's Python bindings are installed but its libraries do not load ({error}): the TensorRT "
            "libraries (libnvinfer and the others of tensorrt-cu12-libs) are missing or do not match the bindings. Run "
            "make build again on the GPU machine (it reinstalls the tensorrt environment), or put the libraries of a "
            "TensorRT install on LD_LIBRARY_PATH.")


def require_tensorrt() -> str:
    """TensorRT's version, with the module bound as this module's `trt`; a UserError (exit 1) saying how to get
    a machine that has it where it does not import."""
    try:
        import tensorrt
    except ModuleNotFoundError as error:
        if error.name != "tensorrt":     # a module the bindings import is missing: a broken install
            raise UserError(libraries_missing(error), exit_code=EXIT_FAILURE) from None
        raise UserError(MISSING, exit_code=EXIT_FAILURE) from None
    except (ImportError, OSError) as error:   # the bindings are there, a TensorRT library (libnvinfer) is not
        raise UserError(libraries_missing(error), exit_code=EXIT_FAILURE) from None
    globals()["trt"] = tensorrt
    return str(tensorrt.__version__)


@dataclass(frozen=True)
class TensorInfo:
    """One I/O tensor of an engine: shape with -1 for the dynamic batch dimension."""

    name: str
    is_input: bool
    dtype: np.dtype
    shape: tuple[int, ...]

    @property
    def sample_shape(self) -> tuple[int, ...]:
        return self.shape[1:]

    @property
    def sample_bytes(self) -> int:
        return int(np.prod(self.sample_shape, dtype=np.int64)) * self.dtype.itemsize


class Shape(Protocol):
    """A shape as TensorRT gives it (`tensorrt.Dims`) or as a tuple: a length and integer items."""

    def __len__(self) -> int: ...
    def __getitem__(self, index: int) -> int: ...


def dims_tuple(shape: Shape) -> tuple[int, ...]:
    return tuple(int(shape[i]) for i in range(len(shape)))


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


class ResidentBatch(DirectBatch, Protocol):
    """A batch of the performance set as LoadGen loaded it: which rows (`slots`) of which load (`load_token`), and
    the loaded rows per input (`stacked`), which a runner keeping the set on the GPU uploads once per load."""

    slots: np.ndarray
    load_token: int

    def stacked(self, name: str) -> np.ndarray: ...


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
                rows.gather(self.cuda, buffer, resident.slots, self.copy_stream)
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


@dataclass
class _ResidentSet:
    """The performance set of one load on the GPU: per input, the loaded rows in one device buffer."""

    token: int
    rows: dict[str, int]            # input name -> device pointer of its rows
    nbytes: int = 0

    @classmethod
    def upload(cls, cuda: CudaCalls, stream: int, batch: ResidentBatch, inputs: Sequence[TensorInfo]
               ) -> "_ResidentSet":
        resident = cls(batch.load_token, {})
        try:
            for tensor in inputs:
                stored = batch.stacked(tensor.name)
                if not np.can_cast(stored.dtype, tensor.dtype, "same_kind"):
                    raise UserError(f"start_from_device: the performance set stores input {tensor.name} as "
                                    f"{stored.dtype}, the engine takes {tensor.dtype}: preprocess the data for this "
                                    "engine (`make preprocess_data`) or rebuild the engine", exit_code=EXIT_FAILURE)
                rows = np.ascontiguousarray(stored, dtype=tensor.dtype)
                if tuple(rows.shape[1:]) != tensor.sample_shape:
                    raise UserError(f"start_from_device: the performance set's input {tensor.name} has samples of "
                                    f"shape {rows.shape[1:]}, the engine takes {tensor.sample_shape}",
                                    exit_code=EXIT_FAILURE)
                resident.rows[tensor.name] = cuda.malloc(max(1, rows.nbytes))
                resident.nbytes += rows.nbytes
                cuda.copy_to_device_async(resident.rows[tensor.name], rows.ctypes.data, rows.nbytes, stream)
            cuda.synchronize(stream)    # once per load: `rows` may be a temporary
        except BaseException:
            resident.free(cuda)
            raise
        return resident

    def gather(self, cuda: CudaCalls, buffer: _Buffer, slots: np.ndarray, stream: int) -> None:
        """Rows `slots` into `buffer`'s device memory, one device-to-device copy per run of consecutive rows."""
        size, source = buffer.tensor.sample_bytes, self.rows[buffer.tensor.name]
        slots = np.asarray(slots, dtype=np.int64)
        breaks = np.flatnonzero(np.diff(slots) != 1) + 1
        for start, end in zip([0, *breaks.tolist()], [*breaks.tolist(), len(slots)]):
            cuda.copy_on_device_async(buffer.device + start * size, source + int(slots[start]) * size,
                                      (end - start) * size, stream)

    def free(self, cuda: CudaCalls) -> None:
        rows, self.rows = self.rows, {}
        for pointer in rows.values():
            cuda.free(pointer)


class ResidentSets:
    """The performance set on each GPU, one copy per GPU shared by the runners there (start_from_device): uploaded
    by the first runner that meets a new load, freed when the next load replaces it or the GPU's last runner
    closes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sets: dict[int, _ResidentSet] = {}
        self._users: dict[int, int] = {}

    def join(self, gpu: int) -> None:
        with self._lock:
            self._users[gpu] = self._users.get(gpu, 0) + 1

    def rows(self, cuda: CudaCalls, gpu: int, stream: int, batch: ResidentBatch,
             inputs: Sequence[TensorInfo]) -> _ResidentSet:
        with self._lock:
            resident = self._sets.get(gpu)
            if resident is None or resident.token != batch.load_token:
                if resident is not None:   # LoadGen loads a new set only when every query of the last is done
                    del self._sets[gpu]
                    resident.free(cuda)
                resident = self._sets[gpu] = _ResidentSet.upload(cuda, stream, batch, inputs)
            return resident

    def leave(self, cuda: CudaCalls, gpu: int) -> None:
        with self._lock:
            self._users[gpu] = self._users.get(gpu, 1) - 1
            if self._users[gpu] <= 0:
                del self._users[gpu]
                resident = self._sets.pop(gpu, None)
                if resident is not None:
                    resident.free(cuda)

    def on_gpu(self, gpu: int) -> int:
        """Bytes of the performance set held on `gpu` now."""
        with self._lock:
            resident = self._sets.get(gpu)
            return resident.nbytes if resident is not None else 0


RESIDENT_SETS = ResidentSets()


# -- the real engine ---------------------------------------------------------------------------------

def numpy_dtype(data_type: "trt.DataType | str") -> np.dtype:
    """numpy dtype of a `tensorrt.DataType` (by its name, e.g. DataType.HALF -> float16)."""
    name = str(data_type).rsplit(".", 1)[-1]
    if name not in _NUMPY_TYPES:
        raise UserError(f"Engine I/O tensors of type {name} are not supported by this runner (supported: "
                        f"{', '.join(_NUMPY_TYPES)}).", exit_code=EXIT_FAILURE)
    return np.dtype(_NUMPY_TYPES[name])


def describe_engine(engine: "trt.ICudaEngine") -> list[TensorInfo]:
    """The I/O tensors of a `tensorrt.ICudaEngine`, in the engine's order."""
    tensors = []
    for index in range(engine.num_io_tensors):
        name = engine.get_tensor_name(index)
        tensors.append(TensorInfo(name, engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT,
                                  numpy_dtype(engine.get_tensor_dtype(name)),
                                  dims_tuple(engine.get_tensor_shape(name))))
    return tensors


def profile_max_batch(engine: "trt.ICudaEngine", input_names: Sequence[str]) -> int:
    """The largest batch of the engine's first optimization profile that every input takes."""
    return min(int(engine.get_tensor_profile_shape(name, 0)[2][0]) for name in input_names)


@dataclass
class _Loaded:
    runtime: "trt.Runtime"
    engine: "trt.ICudaEngine"
    users: int = 0


class _SharedEngines:
    """Engines deserialized once per (plan, GPU) and process, shared by the instances on that GPU. The device is set
    before an engine is loaded and before it is freed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: dict[tuple[str, int], _Loaded] = {}

    def acquire(self, plan: Path, gpu: int, cuda: CudaCalls) -> "trt.ICudaEngine":
        key = (str(Path(plan).resolve()), gpu)
        with self._lock:
            loaded = self._engines.get(key)
            if loaded is None:
                cuda.set_device(gpu)
                runtime = trt.Runtime(logger())
                engine = runtime.deserialize_cuda_engine(Path(plan).read_bytes())
                if engine is None:
                    raise UserError(f"TensorRT {trt.__version__} could not load {plan} (see its messages above): a "
                                    "plan only loads with the TensorRT version and GPU it was built for. Rebuild it "
                                    "with `make generate_engines`.", exit_code=EXIT_FAILURE)
                loaded = self._engines[key] = _Loaded(runtime, engine)
            loaded.users += 1
            return loaded.engine

    def release(self, plan: Path, gpu: int, cuda: CudaCalls) -> None:
        key = (str(Path(plan).resolve()), gpu)
        with self._lock:
            loaded = self._engines.get(key)
            if loaded is not None:
                loaded.users -= 1
                if loaded.users <= 0:
                    cuda.set_device(gpu)       # the engine's device memory is freed as it goes
                    del self._engines[key]
                    del loaded


_ENGINES = _SharedEngines()


@functools.cache
def logger() -> "trt.Logger":
    """One TensorRT logger per process (warnings and errors); call after require_tensorrt()."""
    return trt.Logger(trt.Logger.WARNING)


def no_context(plan: Path, gpu: int) -> str:
    """Why an instance has no execution context, for people."""
    return (f"TensorRT could not create an execution context for {plan} on GPU {gpu} (create_execution_context "
            "returned None; TensorRT's message is above). It is most often GPU memory: each instance's context "
            "holds the plan's activation memory for its largest batch. Run fewer instances per GPU (--instances) or "
            "a smaller batch (--batch_size), or free the GPU (nvidia-smi lists what uses it).")


def gpu_count(cuda: CudaRuntime) -> int:
    """The visible GPUs; a UserError saying what is missing where CUDA finds none."""
    try:
        count = cuda.device_count()
    except CudaError as error:
        raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
    if count < 1:
        raise UserError("CUDA found no GPU: check CUDA_VISIBLE_DEVICES and nvidia-smi", exit_code=EXIT_FAILURE)
    return count


def instance_gpu(instance: int, gpus: int) -> int:
    """The GPU of the `instance`-th instance of a run: instances go to the GPUs in turn, so that every GPU gets
    `instances` of them when the harness makes `instances` x GPUs (TensorRTPlugin.instance_count)."""
    return instance % max(1, gpus)


class TensorRTBackend(Backend):
    """One instance: an execution context on one GPU, fed by a StreamRunner with two buffer sets. It accepts two
    calls at once (`parallel_calls`), so that the harness's two callers keep a batch copying while one computes."""

    direct_batches = True     # batches are gathered straight into the runner's pinned buffers

    def __init__(self, engine_path: Path, *, input_names: Sequence[str], threads: int = 0, device: str = "gpu",
                 instance: int = 0, buffer_sets: int = 2) -> None:
        require_tensorrt()
        engine_path = Path(engine_path)
        if not engine_path.is_file():
            raise UserError(f"No engine at {engine_path}; build it with `make generate_engines`.",
                            exit_code=EXIT_FAILURE)
        cuda = CudaRuntime()
        self._cuda: CudaCalls = cuda
        self.input_names, self._plan = tuple(input_names), engine_path
        # The GPU count first, before any TensorRT object: TensorRT's runtime does not survive a CUDA without a GPU.
        self._gpu = instance_gpu(instance, gpu_count(cuda))
        self.parallel_calls = buffer_sets
        self._runner: StreamRunner | None = None
        self._context: "trt.IExecutionContext | None" = None
        try:
            engine = _ENGINES.acquire(engine_path, self._gpu, cuda)
        except CudaError as error:
            raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
        try:
            tensors = describe_engine(engine)
            engine_inputs = [t.name for t in tensors if t.is_input]
            if sorted(engine_inputs) != sorted(self.input_names):
                raise UserError(f"{engine_path} has input(s) {', '.join(engine_inputs)}, not "
                                f"{', '.join(self.input_names)}: the engine was built from another model. Rebuild it "
                                "with `make generate_engines`.", exit_code=EXIT_FAILURE)
            cuda.set_device(self._gpu)
            self._context = engine.create_execution_context()    # alive as long as the runner uses it
            if self._context is None:
                raise UserError(no_context(engine_path, self._gpu), exit_code=EXIT_FAILURE)
            self._runner = StreamRunner(tensors, self._context, cuda, profile_max_batch(engine, self.input_names),
                                        self.input_names, self._gpu, buffer_sets=buffer_sets)
        except BaseException as error:
            del engine                 # the error's traceback keeps this frame: no reference to the engine in it
            self._runner = None
            self._free_context()
            _ENGINES.release(engine_path, self._gpu, cuda)
            if isinstance(error, CudaError):
                raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
            raise

    @property
    def gpu(self) -> int:
        return self._gpu

    def infer(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if self._runner is None:
            raise RuntimeError("backend is closed")
        return self._runner.infer(inputs)   # a PendingBatch too (direct_batches)

    def keep_inputs_on_device(self) -> None:
        if self._runner is None:
            raise RuntimeError("backend is closed")
        self._runner.keep_inputs_on_device()

    def upload(self, loaded: ResidentBatch) -> None:
        """The performance set LoadGen loaded, onto this instance's GPU (start_from_device; once per GPU)."""
        if self._runner is not None:
            self._runner.upload(loaded)

    def _free_context(self) -> None:
        context, self._context = self._context, None
        if context is not None:
            self._cuda.set_device(self._gpu)
            del context

    def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.close()
            del runner                 # its reference to the context goes with it
            self._free_context()
            _ENGINES.release(self._plan, self._gpu, self._cuda)
