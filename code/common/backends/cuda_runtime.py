"""CUDA from Python through cuda-python (`cuda.bindings.runtime`), NVIDIA's own bindings, as the TensorRT samples
use them: devices, streams, device and pinned host buffers, asynchronous copies.

`CudaCalls` is the small interface the TensorRT runner talks to; `CudaRuntime` implements it on a real GPU, and
the tests implement it on host memory. Every call checks its status and raises `CudaError` naming the call and
CUDA's own description of the error. cuda-python imports without a driver; every call that needs the driver then
fails with cudaErrorInsufficientDriver (35), and `describe_cuda_failure` adds what to do to CUDA's own words.
cudaDriverGetVersion is the exception: without a driver it succeeds and reports version 0, which `versions`
turns into the same error. The test environment holds the real cuda-python, so these paths are tested on a
machine without a driver.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from ..errors import EXIT_FAILURE, UserError

if TYPE_CHECKING:   # type-checked against stubs/cuda (generated from cuda-python 12.9)
    from cuda.bindings import runtime as cudart
else:
    cudart = None   # bound by require_cuda_python(): cuda-python is installed only in the tensorrt environment

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
    # Events order work across streams and tell the host when a batch is done, without a stream synchronize.
    def event_create(self) -> int: ...                      # without timing: the cheapest kind
    def event_destroy(self, event: int) -> None: ...
    def event_record(self, event: int, stream: int) -> None: ...
    def stream_wait_event(self, stream: int, event: int) -> None: ...
    def event_synchronize(self, event: int) -> None: ...
    def copy_on_device_async(self, destination: int, source: int, nbytes: int, stream: int) -> None: ...


def host_array(pointer: int, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A numpy view of `shape` and `dtype` over host memory at `pointer` (pinned memory, owned elsewhere)."""
    count = int(np.prod(shape, dtype=np.int64))
    buffer = (ctypes.c_byte * max(count * dtype.itemsize, 1)).from_address(pointer)
    return np.frombuffer(memoryview(buffer), dtype=dtype, count=count).reshape(shape)


def require_cuda_python() -> None:
    """Import `cuda.bindings.runtime` as this module's `cudart`, or raise a UserError saying how to get it."""
    try:
        from cuda.bindings import runtime
    except ImportError:
        raise UserError("cuda-python is not installed here; `make build` installs it (with TensorRT) on a machine "
                        "with an NVIDIA GPU and driver.", exit_code=EXIT_FAILURE) from None
    globals()["cudart"] = runtime


class CudaRuntime:
    """`CudaCalls` on the CUDA runtime API."""

    def __init__(self) -> None:
        require_cuda_python()

    @staticmethod
    def _ok(call: str, status: "cudart.cudaError_t") -> None:
        """CudaError unless `status` is cudaSuccess."""
        if status != cudart.cudaError_t.cudaSuccess:
            _, text = cudart.cudaGetErrorString(status)
            raise CudaError(call, int(status), text.decode(errors="replace"))

    # -- devices --------------------------------------------------------------------------------
    def device_count(self) -> int:
        status, count = cudart.cudaGetDeviceCount()
        self._ok("cudaGetDeviceCount", status)
        return int(count)

    def device_info(self, device: int) -> DeviceInfo:
        status, props = cudart.cudaGetDeviceProperties(device)
        self._ok("cudaGetDeviceProperties", status)
        name = props.name.decode(errors="replace").rstrip("\x00")
        return DeviceInfo(device, name, f"{props.major}.{props.minor}", int(props.totalGlobalMem))

    def versions(self) -> tuple[str, str]:
        """(driver, runtime) CUDA versions, e.g. ("12.8", "12.9")."""
        status, driver = cudart.cudaDriverGetVersion()
        self._ok("cudaDriverGetVersion", status)
        if int(driver) == 0:   # no driver: CUDA answers success and version 0
            raise CudaError("cudaDriverGetVersion", INSUFFICIENT_DRIVER, "no CUDA driver is installed: it reports "
                            "driver version 0")
        status, runtime = cudart.cudaRuntimeGetVersion()
        self._ok("cudaRuntimeGetVersion", status)
        return (f"{driver // 1000}.{driver % 1000 // 10}", f"{runtime // 1000}.{runtime % 1000 // 10}")

    def set_device(self, device: int) -> None:
        self._ok("cudaSetDevice", cudart.cudaSetDevice(device)[0])

    # -- memory ---------------------------------------------------------------------------------
    def malloc(self, nbytes: int) -> int:
        status, pointer = cudart.cudaMalloc(nbytes)
        self._ok("cudaMalloc", status)
        return int(pointer)

    def free(self, pointer: int) -> None:
        self._ok("cudaFree", cudart.cudaFree(pointer)[0])

    def malloc_host(self, nbytes: int) -> int:
        status, pointer = cudart.cudaMallocHost(nbytes)
        self._ok("cudaMallocHost", status)
        return int(pointer)

    def free_host(self, pointer: int) -> None:
        self._ok("cudaFreeHost", cudart.cudaFreeHost(pointer)[0])

    # -- streams and copies ---------------------------------------------------------------------
    def stream_create(self) -> int:
        status, stream = cudart.cudaStreamCreateWithFlags(cudart.cudaStreamNonBlocking)
        self._ok("cudaStreamCreateWithFlags", status)
        return int(stream)

    def stream_destroy(self, stream: int) -> None:
        self._ok("cudaStreamDestroy", cudart.cudaStreamDestroy(stream)[0])

    def copy_to_device_async(self, device_pointer: int, host_pointer: int, nbytes: int, stream: int) -> None:
        kind = cudart.cudaMemcpyKind.cudaMemcpyHostToDevice
        self._ok("cudaMemcpyAsync", cudart.cudaMemcpyAsync(device_pointer, host_pointer, nbytes, kind, stream)[0])

    def copy_to_host_async(self, host_pointer: int, device_pointer: int, nbytes: int, stream: int) -> None:
        kind = cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost
        self._ok("cudaMemcpyAsync", cudart.cudaMemcpyAsync(host_pointer, device_pointer, nbytes, kind, stream)[0])

    def synchronize(self, stream: int) -> None:
        self._ok("cudaStreamSynchronize", cudart.cudaStreamSynchronize(stream)[0])

    def copy_on_device_async(self, destination: int, source: int, nbytes: int, stream: int) -> None:
        kind = cudart.cudaMemcpyKind.cudaMemcpyDeviceToDevice
        self._ok("cudaMemcpyAsync", cudart.cudaMemcpyAsync(destination, source, nbytes, kind, stream)[0])

    # -- events ---------------------------------------------------------------------------------
    def event_create(self) -> int:
        status, event = cudart.cudaEventCreateWithFlags(cudart.cudaEventDisableTiming)
        self._ok("cudaEventCreateWithFlags", status)
        return int(event)

    def event_destroy(self, event: int) -> None:
        self._ok("cudaEventDestroy", cudart.cudaEventDestroy(event)[0])

    def event_record(self, event: int, stream: int) -> None:
        self._ok("cudaEventRecord", cudart.cudaEventRecord(event, stream)[0])

    def stream_wait_event(self, stream: int, event: int) -> None:
        self._ok("cudaStreamWaitEvent", cudart.cudaStreamWaitEvent(stream, event, 0)[0])

    def event_synchronize(self, event: int) -> None:
        self._ok("cudaEventSynchronize", cudart.cudaEventSynchronize(event)[0])

    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes of the current device."""
        status, free, total = cudart.cudaMemGetInfo()
        self._ok("cudaMemGetInfo", status)
        return int(free), int(total)


def describe_cuda_failure(error: CudaError) -> str:
    """CUDA's own error (the call, the code, CUDA's description) and a sentence for people about what to do."""
    if error.code == INSUFFICIENT_DRIVER:
        advice = ("CUDA found no usable NVIDIA driver (cudaErrorInsufficientDriver): install the driver, or one new "
                  "enough for CUDA 12, and check that nvidia-smi works")
    elif error.code == NO_DEVICE:
        advice = "CUDA found no GPU (cudaErrorNoDevice): check CUDA_VISIBLE_DEVICES and nvidia-smi"
    else:
        advice = "the GPU could not be used; check nvidia-smi, and run make selftest_gpu for a first check"
    return f"{error}. {advice}"
