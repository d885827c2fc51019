"""TensorRT loader: the TensorRT bindings (imported on first use, with a sentence for people where they do not load),
a plan file -> a deserialized engine shared by the instances on one GPU, and the checks of an engine against what
the runner feeds it (I/O tensors, types, the profile's largest batch).

The engine is deserialized once per process and GPU and shared by the instances on that GPU; the device is set
before an engine is loaded and before it is freed (CUDA's current device is per host thread).
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, Sequence

import numpy as np

from ..errors import EXIT_FAILURE, UserError
from .cuda_runtime import CudaCalls

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


class SharedEngines:
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


ENGINES = SharedEngines()


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


def check_inputs(plan: Path, tensors: Sequence[TensorInfo], input_names: Sequence[str]) -> None:
    """UserError when the engine's inputs are not the ones the benchmark feeds (an engine of another model)."""
    engine_inputs = [t.name for t in tensors if t.is_input]
    if sorted(engine_inputs) != sorted(input_names):
        raise UserError(f"{plan} has input(s) {', '.join(engine_inputs)}, not "
                        f"{', '.join(input_names)}: the engine was built from another model. Rebuild it "
                        "with `make generate_engines`.", exit_code=EXIT_FAILURE)
