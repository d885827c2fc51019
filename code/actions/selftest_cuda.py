"""The CUDA part of selftest_gpu: what a GPU machine must do right before any TensorRT plan can run, checked with
cuda-python alone (no TensorRT needed).

On every visible GPU: make it current, create a non-blocking stream and two CUDA events, allocate pinned host
memory and two device buffers, then on the stream copy a known byte pattern host -> device, device -> device and
device -> host between event records, wait on the last event (not on the stream), and compare the bytes that came
back with the bytes sent. The event times give the copy bandwidths (reported, never judged). Everything allocated
is released, in reverse order, even when a step fails.

Before CUDA is asked anything, `cuda_readiness` says in words why it cannot answer: no NVIDIA driver library on this
machine, or cuda-python not installed.
"""
from __future__ import annotations

import ctypes
import functools
from dataclasses import asdict, dataclass
from typing import Callable, Protocol

import numpy as np

from ..common.backends.cuda_runtime import CudaCalls, CudaRuntime, host_array

ROUND_TRIP_BYTES = 64 << 20        # 64 MiB: large enough for a bandwidth figure, small for any GPU
DRIVER_LIBRARY = "libcuda.so.1"    # what the CUDA runtime loads; installed by the NVIDIA driver, not by CUDA


class CudaCheckCalls(CudaCalls, Protocol):
    """CudaCalls plus the time between two events (their bandwidth figures)."""

    def event_elapsed_ms(self, start: int, end: int) -> float: ...


class CudaCheckRuntime(CudaRuntime):
    """`CudaCheckCalls` on the CUDA runtime API (cuda-python), with CudaRuntime's status checks: its events keep
    timing (the runner's do not need it)."""

    # Each method imports `cudart` when it runs: cuda_runtime binds it when CudaRuntime() is made.

    def event_create(self) -> int:
        from ..common.backends.cuda_runtime import cudart

        status, event = cudart.cudaEventCreate()
        self._ok("cudaEventCreate", status)
        return int(event)

    def event_elapsed_ms(self, start: int, end: int) -> float:
        from ..common.backends.cuda_runtime import cudart

        status, milliseconds = cudart.cudaEventElapsedTime(start, end)
        self._ok("cudaEventElapsedTime", status)
        return float(milliseconds)


@dataclass(frozen=True)
class DeviceCheck:
    """What the round trip on one GPU found."""

    device: int
    nbytes: int
    bytes_match: bool
    mismatched_bytes: int
    host_to_device_gb_s: float
    device_to_device_gb_s: float
    device_to_host_gb_s: float

    def as_dict(self) -> dict[str, object]:
        return asdict(self)

    def line(self) -> str:
        verdict = "bytes match" if self.bytes_match else f"{self.mismatched_bytes} bytes DIFFER"
        return (f"GPU {self.device}: {self.nbytes >> 20} MiB host -> device -> device -> host through pinned memory, "
                f"{verdict}; {self.host_to_device_gb_s:.1f} / {self.device_to_device_gb_s:.1f} / "
                f"{self.device_to_host_gb_s:.1f} GB/s")


def _gb_s(nbytes: int, milliseconds: float) -> float:
    return round(nbytes / (milliseconds * 1e6), 2) if milliseconds > 0 else 0.0


def check_device(cuda: CudaCheckCalls, device: int, nbytes: int | None = None) -> DeviceCheck:
    """The round trip of `nbytes` (default ROUND_TRIP_BYTES) on GPU `device`; CudaError from the first call that
    fails, after releasing what was made."""
    nbytes = ROUND_TRIP_BYTES if nbytes is None else nbytes
    release: list[Callable[[], None]] = []
    try:
        cuda.set_device(device)
        stream = cuda.stream_create()
        release.append(lambda: cuda.stream_destroy(stream))
        events = []
        for _ in range(4):
            event = cuda.event_create()
            release.append(functools.partial(cuda.event_destroy, event))
            events.append(event)
        pinned_out = cuda.malloc_host(nbytes)
        release.append(lambda: cuda.free_host(pinned_out))
        pinned_in = cuda.malloc_host(nbytes)
        release.append(lambda: cuda.free_host(pinned_in))
        first = cuda.malloc(nbytes)
        release.append(lambda: cuda.free(first))
        second = cuda.malloc(nbytes)
        release.append(lambda: cuda.free(second))

        sent = host_array(pinned_out, (nbytes,), np.dtype(np.uint8))
        sent[:] = np.random.default_rng(device).integers(0, 256, nbytes, dtype=np.uint8)
        received = host_array(pinned_in, (nbytes,), np.dtype(np.uint8))
        received[:] = ~sent            # every byte differs until the copy back lands
        cuda.event_record(events[0], stream)
        cuda.copy_to_device_async(first, pinned_out, nbytes, stream)
        cuda.event_record(events[1], stream)
        cuda.copy_on_device_async(second, first, nbytes, stream)
        cuda.event_record(events[2], stream)
        cuda.copy_to_host_async(pinned_in, second, nbytes, stream)
        cuda.event_record(events[3], stream)
        cuda.event_synchronize(events[3])
        times = [cuda.event_elapsed_ms(events[i], events[i + 1]) for i in range(3)]
        mismatched = int(np.count_nonzero(received != sent))
        return DeviceCheck(device, nbytes, mismatched == 0, mismatched, *(_gb_s(nbytes, t) for t in times))
    finally:
        for step in reversed(release):
            step()


def cuda_readiness() -> str | None:
    """Why CUDA cannot be asked anything here, in words; None when the driver library loads and cuda-python
    imports (CUDA itself may still refuse: no GPU visible, a driver too old)."""
    try:
        ctypes.CDLL(DRIVER_LIBRARY)
        driver = True
    except OSError:
        driver = False
    try:
        from cuda.bindings import runtime  # noqa: F401
        python = True
    except ImportError:
        python = False
    if not driver:
        return (f"no NVIDIA driver on this machine ({DRIVER_LIBRARY} does not load): selftest_gpu needs a machine "
                "with an NVIDIA GPU and its driver (nvidia-smi must list the GPU)"
                + ("" if python else "; there, make build installs cuda-python and TensorRT"))
    if not python:
        return "cuda-python is not installed here: run make build, which installs it (with TensorRT) on a GPU machine"
    return None
