"""make selftest_gpu: the CUDA part (round trip of bytes through device memory, events) on a host-memory CUDA, the
handler's CUDA-only path when TensorRT is absent, and the stop with a reason where there is no NVIDIA driver (this
machine: no driver; cuda-python's own error where cuda-python is installed)."""
from __future__ import annotations

import ctypes
import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from code.actions import selftest_cuda
from code.actions.selftest_cuda import DeviceCheck, check_device, cuda_readiness
from code.common.backends.cuda_runtime import CudaError, DeviceInfo
from code.common.paths import Paths
from code.main import main


def _driver_loads() -> bool:
    try:
        ctypes.CDLL(selftest_cuda.DRIVER_LIBRARY)
        return True
    except OSError:
        return False


def _has_cuda_python() -> bool:
    try:
        from cuda.bindings import runtime  # noqa: F401
        return True
    except ImportError:
        return False


def _has_tensorrt() -> bool:
    try:
        import tensorrt  # noqa: F401
        return True
    except ImportError:
        return False


class HostCuda:
    """CudaCheckCalls on host memory: asynchronous work waits in its stream's queue until an event recorded after it
    is waited on (as on a GPU); `corrupt` flips one byte of every device-to-device copy."""

    def __init__(self, devices: int = 1, corrupt: bool = False, fail_malloc: bool = False) -> None:
        self.devices, self.corrupt, self.fail_malloc = devices, corrupt, fail_malloc
        self.blocks: dict[int, tuple[str, np.ndarray]] = {}
        self.queues: dict[int, list[Callable[[], None]]] = {}
        self.events: dict[int, float | None] = {}
        self.current = -1
        self.clock = 0.0
        self.on_device: list[tuple[str, int]] = []
        self._handles = 0

    def _handle(self) -> int:
        self._handles += 1
        return self._handles

    def _alloc(self, kind: str, nbytes: int) -> int:
        self.on_device.append((kind, self.current))
        if self.fail_malloc and kind == "device":
            raise CudaError("cudaMalloc", 2, "out of memory")
        block = np.zeros(nbytes, dtype=np.uint8)
        self.blocks[block.ctypes.data] = (kind, block)
        return block.ctypes.data

    def _free(self, kind: str, pointer: int) -> None:
        assert self.blocks.pop(pointer)[0] == kind

    # -- CudaCalls -------------------------------------------------------------------------------
    def set_device(self, device: int) -> None:
        if not 0 <= device < self.devices:
            raise CudaError("cudaSetDevice", 101, "invalid device ordinal")
        self.current = device

    def malloc(self, nbytes: int) -> int:
        return self._alloc("device", nbytes)

    def free(self, pointer: int) -> None:
        self._free("device", pointer)

    def malloc_host(self, nbytes: int) -> int:
        return self._alloc("pinned", nbytes)

    def free_host(self, pointer: int) -> None:
        self._free("pinned", pointer)

    def stream_create(self) -> int:
        stream = self._handle()
        self.queues[stream] = []
        return stream

    def stream_destroy(self, stream: int) -> None:
        assert not self.queues.pop(stream), "stream destroyed with work queued"

    def _copy(self, dst: int, src: int, nbytes: int, stream: int, kinds: tuple[str, str]) -> None:
        assert (self.blocks[dst][0], self.blocks[src][0]) == kinds
        self.queues[stream].append(lambda: ctypes.memmove(dst, src, nbytes))

    def copy_to_device_async(self, device_pointer: int, host_pointer: int, nbytes: int, stream: int) -> None:
        self._copy(device_pointer, host_pointer, nbytes, stream, ("device", "pinned"))

    def copy_to_host_async(self, host_pointer: int, device_pointer: int, nbytes: int, stream: int) -> None:
        self._copy(host_pointer, device_pointer, nbytes, stream, ("pinned", "device"))

    def synchronize(self, stream: int) -> None:
        raise AssertionError("the check waits on its last event, not on the stream")

    # -- what the check adds ---------------------------------------------------------------------
    def copy_on_device_async(self, dst: int, src: int, nbytes: int, stream: int) -> None:
        self._copy(dst, src, nbytes, stream, ("device", "device"))
        if self.corrupt:
            self.queues[stream].append(lambda: self.blocks[dst][1].__setitem__(7, self.blocks[dst][1][7] ^ 1))

    def event_create(self) -> int:
        event = self._handle()
        self.events[event] = None
        return event

    def event_record(self, event: int, stream: int) -> None:
        def record() -> None:
            self.clock += 0.5
            self.events[event] = self.clock

        self.queues[stream].append(record)

    def event_synchronize(self, event: int) -> None:
        for queue in self.queues.values():
            while self.events[event] is None and queue:
                queue.pop(0)()
        assert self.events[event] is not None, "waited on an event never recorded"

    def event_elapsed_ms(self, start: int, end: int) -> float:
        first, last = self.events[start], self.events[end]
        assert first is not None and last is not None
        return last - first

    def event_destroy(self, event: int) -> None:
        del self.events[event]

    # -- the handler's part ----------------------------------------------------------------------
    def versions(self) -> tuple[str, str]:
        return ("12.8", "12.9")

    def device_count(self) -> int:
        return self.devices

    def device_info(self, device: int) -> DeviceInfo:
        return DeviceInfo(device, "Host Memory GPU", "9.0", 80 << 30)


@pytest.mark.parametrize("device", [0, 1])
def test_round_trip_checks_every_byte_and_releases_everything(device: int) -> None:
    cuda = HostCuda(devices=2)
    result = check_device(cuda, device, nbytes=1 << 16)
    assert result == DeviceCheck(device, 1 << 16, True, 0, result.host_to_device_gb_s,
                                 result.device_to_device_gb_s, result.device_to_host_gb_s)
    assert all(value > 0 for value in (result.host_to_device_gb_s, result.device_to_device_gb_s,
                                       result.device_to_host_gb_s))
    assert cuda.on_device == [("pinned", device)] * 2 + [("device", device)] * 2   # made on the GPU checked
    assert not cuda.blocks and not cuda.queues and not cuda.events
    assert "bytes match" in result.line() and f"GPU {device}" in result.line()


def test_a_corrupted_copy_is_counted_not_missed() -> None:
    cuda = HostCuda(corrupt=True)
    result = check_device(cuda, 0, nbytes=4096)
    assert not result.bytes_match and result.mismatched_bytes == 1
    assert "1 bytes DIFFER" in result.line()
    assert not cuda.blocks and not cuda.events


def test_a_failing_call_raises_cuda_error_after_releasing_what_was_made() -> None:
    cuda = HostCuda(fail_malloc=True)
    with pytest.raises(CudaError, match="cudaMalloc failed: CUDA error 2"):
        check_device(cuda, 0, nbytes=4096)
    assert not cuda.blocks and not cuda.queues and not cuda.events
    with pytest.raises(CudaError, match="invalid device ordinal"):
        check_device(HostCuda(devices=1), 3, nbytes=16)


def _selftest(tmp_path: Path) -> tuple[int, dict]:
    scratch = tmp_path / "scratch"
    status = main(["--action=selftest_gpu", f"--scratch_path={scratch}"], log=lambda _: None)
    return status, json.loads((Paths.create(scratch=scratch).build / "selftest_gpu" / "report.json").read_text())


def test_without_tensorrt_the_cuda_part_runs_alone_on_every_gpu(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    if _has_tensorrt():
        pytest.skip("TensorRT is installed here: the full check would run")
    monkeypatch.setattr(selftest_cuda, "cuda_readiness", lambda: None)
    monkeypatch.setattr(selftest_cuda, "CudaCheckRuntime", lambda: HostCuda(devices=2))
    monkeypatch.setattr(selftest_cuda, "ROUND_TRIP_BYTES", 1 << 12)
    status, report = _selftest(tmp_path)
    assert status == 0
    assert [gpu["index"] for gpu in report["gpus"]] == [0, 1]
    assert [(check["device"], check["bytes_match"], check["nbytes"]) for check in report["cuda_check"]] == \
        [(0, True, 4096), (1, True, 4096)]
    assert report["tensorrt"].startswith("not checked: TensorRT is not installed here")
    assert "precisions" not in report and "stopped" not in report


def test_a_round_trip_that_differs_fails_the_selftest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if _has_tensorrt():
        pytest.skip("TensorRT is installed here")
    monkeypatch.setattr(selftest_cuda, "cuda_readiness", lambda: None)
    monkeypatch.setattr(selftest_cuda, "CudaCheckRuntime", lambda: HostCuda(corrupt=True))
    monkeypatch.setattr(selftest_cuda, "ROUND_TRIP_BYTES", 1 << 12)
    status, report = _selftest(tmp_path)
    assert status == 1 and report["cuda_check"][0]["mismatched_bytes"] == 1


def test_no_driver_here_stops_at_once_with_the_reason(tmp_path: Path) -> None:
    if _driver_loads():
        pytest.skip("an NVIDIA driver library loads here")
    status, report = _selftest(tmp_path)
    assert status == 1
    assert report["stopped"].startswith("no NVIDIA driver on this machine (libcuda.so.1 does not load)")
    assert "nvidia-smi" in report["stopped"] and "cuda_check" not in report


def test_readiness_names_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selftest_cuda, "DRIVER_LIBRARY", "libnot-a-driver-library.so.404")
    assert cuda_readiness().startswith("no NVIDIA driver on this machine (libnot-a-driver-library.so.404")
    monkeypatch.setattr(selftest_cuda, "DRIVER_LIBRARY", "libc.so.6")   # a library that loads, as a driver would
    if _has_cuda_python():
        assert cuda_readiness() is None
    else:
        assert cuda_readiness().startswith("cuda-python is not installed here: run make build")


@pytest.mark.skipif(not _has_cuda_python() or _driver_loads(), reason="needs cuda-python and no NVIDIA driver")
def test_real_cuda_python_without_a_driver_fails_with_cudas_own_error(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = selftest_cuda.CudaCheckRuntime()
    for call in (cuda.device_count, cuda.event_create, lambda: check_device(cuda, 0, nbytes=16)):
        with pytest.raises(CudaError) as error:
            call()
        assert error.value.code == 35     # cudaErrorInsufficientDriver, not a TypeError
    monkeypatch.setattr(selftest_cuda, "DRIVER_LIBRARY", "libc.so.6")   # past the library check, to CUDA itself
    status, report = _selftest(tmp_path)
    assert status == 1 and "CUDA found no usable NVIDIA driver" in report["stopped"]
