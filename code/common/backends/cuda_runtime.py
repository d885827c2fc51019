"""CUDA from Python through cuda-python (`cuda.bindings.runtime`), NVIDIA's own bindings, as the TensorRT samples
use them: devices, streams, device and pinned host buffers, asynchronous copies.

`CudaCalls` is the small interface the TensorRT runner talks to; `CudaRuntime` implements it on a real GPU, and
the tests implement it on host memory. Every call checks its status and raises `CudaError` naming the call and
CUDA's own description of the error. cuda-python imports without a driver; its first call then fails with
cudaErrorInsufficientDriver (35), which becomes a message that says what is missing.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ..errors import UserError

INSUFFICIENT_DRIVER = 35   # cudaErrorInsufficientDriver: no driver, or one older than the CUDA runtime
NO_DEVICE = 100            # cudaErrorNoDevice


class CudaError(RuntimeError):
    """A CUDA call failed; `code` is the cudaError_t value."""

    def __init__(self, call: str, code: int, description: str) -> None:
        super().__init__(f"{call} failed: CUDA error {code} ({description})")
        self.call, self.code = call, code


@dataclass(frozen=True)
class DeviceInfo:
    index: int
    name: str
    compute_capability: str     # "9.0"
    memory_bytes: int


class CudaCalls(Protocol):
    """What the TensorRT runner needs from CUDA. Pointers and streams are plain integers."""

    def set_device(self, device: int) -> None: ...
    def malloc(self, nbytes: int) -> int: ...
    def free(self, pointer: int) -> None: ...
    def malloc_host(self, nbytes: int) -> int: ...          # page-locked (pinned) host memory
    def free_host(self, pointer: int) -> None: ...
    def stream_create(self) -> int: ...
    def stream_destroy(self, stream: int) -> None: ...
    def copy_to_device_async(self, device_pointer: int, host_pointer: int, nbytes: int, stream: int) -> None: ...
    def copy_to_host_async(self, host_pointer: int, device_pointer: int, nbytes: int, stream: int) -> None: ...
    def synchronize(self, stream: int) -> None: ...


def host_array(pointer: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A numpy view of `shape` and `dtype` over host memory at `pointer` (pinned memory, owned elsewhere)."""
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    buffer = (ctypes.c_byte * max(nbytes, 1)).from_address(pointer)
    return np.frombuffer(buffer, dtype=dtype, count=int(np.prod(shape, dtype=np.int64))).reshape(shape)


def require_cuda_python() -> Any:
    """The `cuda.bindings.runtime` module, or a UserError saying how to get it."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        raise UserError("cuda-python is not installed here; `make build` installs it (with TensorRT) on a machine "
                        "with an NVIDIA GPU and driver.", exit_code=1) from None
    return runtime


class CudaRuntime:
    """`CudaCalls` on the CUDA runtime API."""

    def __init__(self) -> None:
        self._rt = require_cuda_python()
        self._host_to_device = self._rt.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._device_to_host = self._rt.cudaMemcpyKind.cudaMemcpyDeviceToHost

    def _check(self, call: str, result: Any) -> Any:
        """The values of a cuda-python call's (status, *values) result, or CudaError."""
        status, *values = result if isinstance(result, tuple) else (result,)
        code = int(status)
        if code != 0:
            _, text = self._rt.cudaGetErrorString(status)
            description = text.decode(errors="replace") if isinstance(text, bytes) else str(text)
            raise CudaError(call, code, description)
        return values[0] if len(values) == 1 else tuple(values)

    # -- devices --------------------------------------------------------------------------------
    def device_count(self) -> int:
        return int(self._check("cudaGetDeviceCount", self._rt.cudaGetDeviceCount()))

    def device_info(self, device: int) -> DeviceInfo:
        props = self._check("cudaGetDeviceProperties", self._rt.cudaGetDeviceProperties(device))
        name = props.name.decode(errors="replace").rstrip("\x00") if isinstance(props.name, bytes) else str(props.name)
        return DeviceInfo(device, name, f"{props.major}.{props.minor}", int(props.totalGlobalMem))

    def versions(self) -> tuple[str, str]:
        """(driver, runtime) CUDA versions, e.g. ("12.8", "12.9")."""
        driver = int(self._check("cudaDriverGetVersion", self._rt.cudaDriverGetVersion()))
        runtime = int(self._check("cudaRuntimeGetVersion", self._rt.cudaRuntimeGetVersion()))
        return (f"{driver // 1000}.{driver % 1000 // 10}", f"{runtime // 1000}.{runtime % 1000 // 10}")

    def set_device(self, device: int) -> None:
        self._check("cudaSetDevice", self._rt.cudaSetDevice(device))

    # -- memory ---------------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        return int(self._check("cudaMalloc", self._rt.cudaMalloc(nbytes)))

    def free(self, pointer: int) -> None:
        self._check("cudaFree", self._rt.cudaFree(pointer))

    def malloc_host(self, nbytes: int) -> int:
        return int(self._check("cudaMallocHost", self._rt.cudaMallocHost(nbytes)))

    def free_host(self, pointer: int) -> None:
        self._check("cudaFreeHost", self._rt.cudaFreeHost(pointer))

    # -- streams and copies ---------------------------------------------------------------------
    def stream_create(self) -> int:
        stream = self._check("cudaStreamCreateWithFlags",
                             self._rt.cudaStreamCreateWithFlags(self._rt.cudaStreamNonBlocking))
        return int(stream)

    def stream_destroy(self, stream: int) -> None:
        self._check("cudaStreamDestroy", self._rt.cudaStreamDestroy(stream))

    def copy_to_device_async(self, device_pointer: int, host_pointer: int, nbytes: int, stream: int) -> None:
        self._check("cudaMemcpyAsync", self._rt.cudaMemcpyAsync(device_pointer, host_pointer, nbytes,
                                                                self._host_to_device, stream))

    def copy_to_host_async(self, host_pointer: int, device_pointer: int, nbytes: int, stream: int) -> None:
        self._check("cudaMemcpyAsync", self._rt.cudaMemcpyAsync(host_pointer, device_pointer, nbytes,
                                                                self._device_to_host, stream))

    def synchronize(self, stream: int) -> None:
        self._check("cudaStreamSynchronize", self._rt.cudaStreamSynchronize(stream))


def describe_cuda_failure(error: CudaError) -> str:
    """A sentence for people about a CUDA error met before any work (no driver, no device)."""
    if error.code == INSUFFICIENT_DRIVER:
        return ("CUDA found no usable NVIDIA driver (cudaErrorInsufficientDriver): install the driver, or one new "
                "enough for CUDA 12, and check that nvidia-smi works")
    if error.code == NO_DEVICE:
        return "CUDA found no GPU (cudaErrorNoDevice): check CUDA_VISIBLE_DEVICES and nvidia-smi"
    return str(error)
