"""TensorRT runner: a plan file -> one execution context per backend instance, each on its own CUDA stream.

Per instance (NVIDIA's `gpu_inference_streams`): an execution context, a non-blocking stream, and for every I/O
tensor a device buffer and a pinned host buffer sized for the largest batch, allocated once; tensor addresses are
bound once. A batch's named inputs are copied into their pinned buffers, then on the instance's stream: host-to-device
copies, `execute_async_v3`, device-to-host copies of exactly the batch's outputs, one synchronize. The engine is
deserialized once per process and GPU and shared by the instances on that GPU; instances are spread over the
visible GPUs in turn (instance i on GPU i mod count).

`StreamRunner` holds that logic and talks to two small interfaces only: the execution context (`ExecutionContext`,
four TensorRT methods) and CUDA (`cuda_runtime.CudaCalls`); the tests run it on host-memory implementations of both.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Protocol, Sequence

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


def require_tensorrt() -> str:
    """TensorRT's version, with the module bound as this module's `trt`; a UserError (exit 1) saying how to get
    a machine that has it where it does not import."""
    try:
        import tensorrt
    except ImportError:
        raise UserError(MISSING, exit_code=EXIT_FAILURE) from None
    except OSError as error:   # the bindings load but a TensorRT library is missing
        raise UserError(f"TensorRT is installed but does not load ({error}); run make build again on the GPU "
                        "machine, it reinstalls the tensorrt environment", exit_code=EXIT_FAILURE) from None
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


class StreamRunner:
    """One execution context on one stream, with buffers for `max_batch` samples allocated once."""

    def __init__(self, tensors: Sequence[TensorInfo], context: ExecutionContext, cuda: CudaCalls, max_batch: int,
                 input_names: Sequence[str], gpu: int = 0) -> None:
        inputs = [t for t in tensors if t.is_input]
        if sorted(t.name for t in inputs) != sorted(input_names):
            raise UserError(f"The engine has input(s) {', '.join(t.name for t in inputs) or 'none'}, the runner "
                            f"feeds {', '.join(input_names)}: the engine was built from another model. Rebuild it "
                            "with `make generate_engines`.", exit_code=EXIT_FAILURE)
        for tensor in tensors:
            if any(d < 0 for d in tensor.sample_shape):
                raise UserError(f"Engine tensor {tensor.name} has shape {tensor.shape}: only the batch dimension may "
                                "be dynamic for this runner.", exit_code=EXIT_FAILURE)
        self.cuda, self.context, self.gpu, self.max_batch = cuda, context, gpu, int(max_batch)
        self._lock = threading.Lock()   # one batch at a time on this context and its buffers
        self._batch: int | None = None  # the batch size the context's input shape is set to
        self._buffers: list[_Buffer] = []
        cuda.set_device(gpu)
        self.stream = cuda.stream_create()
        try:
            for tensor in tensors:
                nbytes = max(1, self.max_batch * tensor.sample_bytes)
                buffer = _Buffer(tensor, cuda.malloc(nbytes), 0, np.empty(0))
                self._buffers.append(buffer)          # from here on, close() frees it
                buffer.host = cuda.malloc_host(nbytes)
                buffer.view = host_array(buffer.host, (self.max_batch, *tensor.sample_shape), tensor.dtype)
                device = buffer.device
                if not context.set_tensor_address(tensor.name, device):
                    raise RuntimeError(f"TensorRT refused the address of tensor {tensor.name}")
        except BaseException:
            self.close()
            raise
        self._inputs = [b for b in self._buffers if b.tensor.is_input]
        self._outputs = [b for b in self._buffers if not b.tensor.is_input]

    def infer(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Outputs of one batch ({input name: array}) in the engine's output order; batches larger than the
        engine's are run in parts."""
        count = len(inputs[self._inputs[0].tensor.name])
        if count > self.max_batch:
            parts = [self.infer({name: array[i:i + self.max_batch] for name, array in inputs.items()})
                     for i in range(0, count, self.max_batch)]
            return [np.concatenate(outputs) for outputs in zip(*parts)]
        for buffer in self._inputs:
            batch, expected = inputs[buffer.tensor.name], buffer.tensor.sample_shape
            if len(batch) != count or tuple(batch.shape[1:]) != expected:
                raise ValueError(f"batch of shape {batch.shape} for input {buffer.tensor.name} of per-sample "
                                 f"shape {expected}, {count} samples")
        with self._lock:
            self.cuda.set_device(self.gpu)
            if count != self._batch:
                for buffer in self._inputs:
                    if not self.context.set_input_shape(buffer.tensor.name, (count, *buffer.tensor.sample_shape)):
                        raise RuntimeError(f"TensorRT refused batch size {count} (the engine's profile allows 1 to "
                                           f"{self.max_batch})")
                self._batch = count
            for buffer in self._inputs:
                np.copyto(buffer.view[:count], inputs[buffer.tensor.name], casting="same_kind")
                self.cuda.copy_to_device_async(buffer.device, buffer.host, count * buffer.tensor.sample_bytes,
                                               self.stream)
            if not self.context.execute_async_v3(self.stream):
                raise RuntimeError("TensorRT could not enqueue the inference (execute_async_v3 returned False)")
            shapes = []
            for output in self._outputs:
                shape = dims_tuple(self.context.get_tensor_shape(output.tensor.name))
                if shape[:1] != (count,) or shape[1:] != output.tensor.sample_shape:
                    raise RuntimeError(f"output {output.tensor.name} has shape {shape} for a batch of {count}; "
                                       f"expected ({count}, {', '.join(map(str, output.tensor.sample_shape))})")
                shapes.append(shape)
                self.cuda.copy_to_host_async(output.host, output.device, count * output.tensor.sample_bytes,
                                             self.stream)
            self.cuda.synchronize(self.stream)
            # Copies: the pinned buffers are overwritten by the next batch.
            return [output.view[:count].copy() for output in self._outputs]

    def close(self) -> None:
        """Free the buffers and the stream (idempotent)."""
        buffers, self._buffers = self._buffers, []
        for buffer in buffers:
            if buffer.host:
                self.cuda.free_host(buffer.host)
            self.cuda.free(buffer.device)
        stream, self.stream = getattr(self, "stream", 0), 0
        if stream:
            self.cuda.stream_destroy(stream)


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
    """Engines deserialized once per (plan, GPU) and process, shared by the instances on that GPU."""

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

    def release(self, plan: Path, gpu: int) -> None:
        key = (str(Path(plan).resolve()), gpu)
        with self._lock:
            loaded = self._engines.get(key)
            if loaded is not None:
                loaded.users -= 1
                if loaded.users <= 0:
                    del self._engines[key]


_ENGINES = _SharedEngines()


@functools.cache
def logger() -> "trt.Logger":
    """One TensorRT logger per process (warnings and errors); call after require_tensorrt()."""
    return trt.Logger(trt.Logger.WARNING)


class TensorRTBackend(Backend):
    def __init__(self, engine_path: Path, *, input_names: Sequence[str], threads: int = 0, device: str = "gpu",
                 instance: int = 0) -> None:
        require_tensorrt()
        engine_path = Path(engine_path)
        if not engine_path.is_file():
            raise UserError(f"No engine at {engine_path}; build it with `make generate_engines`.",
                            exit_code=EXIT_FAILURE)
        cuda = CudaRuntime()
        try:
            gpus = cuda.device_count()
        except CudaError as error:
            raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
        if gpus < 1:   # before any TensorRT object: TensorRT's runtime does not survive a CUDA without a GPU
            raise UserError("CUDA sees no GPU (cudaGetDeviceCount reports 0): check nvidia-smi and "
                            "CUDA_VISIBLE_DEVICES.", exit_code=EXIT_FAILURE)
        self.input_names, self._plan, self._gpu = tuple(input_names), engine_path, instance % gpus
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
            context = engine.create_execution_context()
            self._runner: StreamRunner | None = StreamRunner(tensors, context, cuda,
                                                             profile_max_batch(engine, self.input_names),
                                                             self.input_names, self._gpu)
        except BaseException as error:
            _ENGINES.release(engine_path, self._gpu)
            if isinstance(error, CudaError):
                raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
            raise
        self._context: "trt.IExecutionContext | None" = context   # alive as long as the runner uses it

    def infer(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if self._runner is None:
            raise RuntimeError("backend is closed")
        return self._runner.infer(inputs)

    def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.close()
            self._context = None
            _ENGINES.release(self._plan, self._gpu)
