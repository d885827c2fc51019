"""The real cuda-python (pinned in the test environment) on a machine without an NVIDIA driver: every CUDA call the
TensorRT runner makes fails with CUDA's own error (the call, cudaErrorInsufficientDriver, CUDA's description)
and the toolkit's sentence on what to do, never with a TypeError from the bindings; and the runner creates no
TensorRT object before CUDA has answered (TensorRT's lean runtime crashes when it meets a CUDA without a GPU).

On a machine with a driver these tests skip: there the calls succeed, and `make selftest_gpu` checks them.
"""
from __future__ import annotations

import inspect
import platform
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from code.common.backends import cuda_runtime, tensorrt_backend, tensorrt_loader, tensorrt_runner
from code.common.backends.cuda_runtime import CudaCalls, CudaError, CudaRuntime, describe_cuda_failure
from code.common.errors import UserError

CUDA_TEXT = "CUDA driver version is insufficient for CUDA runtime version"   # cudaGetErrorString(35)
ADVICE = "CUDA found no usable NVIDIA driver (cudaErrorInsufficientDriver): install the driver"
POINTER, STREAM, NBYTES = 0x7F00_0000_0000, 0x5555_0000_1000, 4096   # plain integers, as the runner passes them
EVENT = 0x5555_0000_2000


@pytest.fixture(scope="module")
def cuda() -> CudaRuntime:
    """The toolkit's CudaRuntime on the real cuda-python; skips where a driver answers."""
    try:
        from cuda.bindings import runtime
    except ImportError as error:
        if sys.platform in ("linux", "win32"):
            pytest.fail(f"cuda-python does not import ({error}): `make test` installs it from the locked "
                        "requirements/main.txt (pyproject's dev extra)")
        pytest.skip(f"cuda-python has no wheels for {sys.platform} {platform.machine()}")
    status, count = runtime.cudaGetDeviceCount()
    if status == runtime.cudaError_t.cudaSuccess:
        pytest.skip(f"this machine has an NVIDIA driver ({count} GPU(s)): `make selftest_gpu` checks CUDA here")
    return CudaRuntime()


# Every call of the runner's CUDA interface (cuda_runtime.CudaCalls), with arguments of the kinds the runner passes.
RUNNER_CALLS = {
    "set_device": ((0,), "cudaSetDevice"),
    "malloc": ((NBYTES,), "cudaMalloc"),
    "free": ((POINTER,), "cudaFree"),
    "malloc_host": ((NBYTES,), "cudaMallocHost"),
    "free_host": ((POINTER,), "cudaFreeHost"),
    "stream_create": ((), "cudaStreamCreateWithFlags"),
    "stream_destroy": ((STREAM,), "cudaStreamDestroy"),
    "copy_to_device_async": ((POINTER, POINTER + NBYTES, NBYTES, STREAM), "cudaMemcpyAsync"),
    "copy_to_host_async": ((POINTER + NBYTES, POINTER, NBYTES, STREAM), "cudaMemcpyAsync"),
    "synchronize": ((STREAM,), "cudaStreamSynchronize"),
    "copy_on_device_async": ((POINTER, POINTER + NBYTES, NBYTES, STREAM), "cudaMemcpyAsync"),
    "event_create": ((), "cudaEventCreateWithFlags"),
    "event_destroy": ((EVENT,), "cudaEventDestroy"),
    "event_record": ((EVENT, STREAM), "cudaEventRecord"),
    "stream_wait_event": ((STREAM, EVENT), "cudaStreamWaitEvent"),
    "event_synchronize": ((EVENT,), "cudaEventSynchronize"),
}
# ...and those the backend, the plugin, `make build` and `make selftest_gpu` make before any work.
DEVICE_CALLS = {
    "device_count": ((), "cudaGetDeviceCount"),
    "device_info": ((0,), "cudaGetDeviceProperties"),
    "versions": ((), "cudaDriverGetVersion"),
    "memory_info": ((), "cudaMemGetInfo"),
}


def test_the_table_covers_every_call_of_the_runners_cuda_interface():
    protocol = {name for name, member in vars(CudaCalls).items()
                if inspect.isfunction(member) and not name.startswith("_")}
    assert protocol == set(RUNNER_CALLS)
    public = {name for name, member in vars(CudaRuntime).items()
              if isinstance(member, types.FunctionType) and not name.startswith("_")}
    assert public == set(RUNNER_CALLS) | set(DEVICE_CALLS)


@pytest.mark.parametrize("method", [*RUNNER_CALLS, *DEVICE_CALLS])
def test_each_cuda_call_fails_with_cudas_own_error_and_the_toolkits_sentence(cuda: CudaRuntime, method: str):
    args, call = {**RUNNER_CALLS, **DEVICE_CALLS}[method]
    with pytest.raises(CudaError) as raised:     # a TypeError (arguments the bindings refuse) would fail here
        getattr(cuda, method)(*args)
    error = raised.value
    assert error.call == call and error.code == cuda_runtime.INSUFFICIENT_DRIVER
    message = describe_cuda_failure(error)
    assert message.startswith(f"{call} failed: CUDA error 35 (")
    assert ADVICE in message
    if method != "versions":      # cudaDriverGetVersion succeeds without a driver, reporting version 0
        assert f"({CUDA_TEXT})" in message


def test_without_a_driver_versions_is_an_error_not_driver_0(cuda: CudaRuntime):
    from cuda.bindings import runtime

    status, driver = runtime.cudaDriverGetVersion()
    assert status == runtime.cudaError_t.cudaSuccess and driver == 0     # what CUDA itself answers
    with pytest.raises(CudaError, match="no CUDA driver is installed"):
        cuda.versions()


class UntouchedContext:
    """An execution context that records any use (there must be none)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __getattr__(self, name: str):
        self.calls.append(name)
        raise AssertionError(f"the runner used the context ({name}) although CUDA had failed")


def test_the_stream_runner_stops_at_its_first_cuda_call(cuda: CudaRuntime):
    tensors = [tensorrt_loader.TensorInfo("input", True, np.dtype(np.float32), (-1, 3, 8, 8)),
               tensorrt_loader.TensorInfo("logits", False, np.dtype(np.float32), (-1, 10))]
    context = UntouchedContext()
    with pytest.raises(CudaError, match=rf"cudaSetDevice failed: CUDA error 35 \({CUDA_TEXT}\)"):
        tensorrt_runner.StreamRunner(tensors, context, cuda, 4, ["input"])
    assert context.calls == []


class RecordingModule(types.ModuleType):
    """A module that hands out another module's attributes and records which ones were asked for."""

    def __init__(self, real: types.ModuleType) -> None:
        super().__init__(real.__name__)
        self._real, self.used = real, []

    def __getattr__(self, name: str):
        self.used.append(name)
        return getattr(self._real, name)


@pytest.fixture
def recorded_tensorrt(cuda, monkeypatch):
    """TensorRT-RTX (the stand-in of the builder tests, tests/test_tensorrt_rtx_plans.py) bound as `tensorrt`
    through a module that records every name the toolkit takes from it."""
    rtx = pytest.importorskip("tensorrt_rtx_bindings", reason="TensorRT-RTX has wheels for Linux x86-64 only")
    recorded = RecordingModule(rtx)
    monkeypatch.setitem(sys.modules, "tensorrt", recorded)
    monkeypatch.setattr(tensorrt_loader, "trt", tensorrt_loader.trt)
    tensorrt_loader.logger.cache_clear()
    yield recorded
    tensorrt_loader.logger.cache_clear()


def test_the_backend_creates_no_tensorrt_object_before_cuda_answers(recorded_tensorrt, tmp_path: Path):
    plan = tmp_path / "model.plan"
    plan.write_bytes(b"a plan is never read before CUDA has a GPU")
    with pytest.raises(UserError) as raised:
        tensorrt_backend.TensorRTBackend(plan, input_names=["input"])
    message = str(raised.value)
    assert message.startswith(f"cudaGetDeviceCount failed: CUDA error 35 ({CUDA_TEXT}). {ADVICE}")
    assert recorded_tensorrt.used == ["__version__"]       # imported and asked its version; nothing created


def test_the_plugin_and_make_build_say_what_cuda_answered(cuda: CudaRuntime):
    from code.actions.environment import Build
    from code.common.backends.tensorrt_plugin import TensorRTPlugin

    with pytest.raises(UserError) as raised:
        TensorRTPlugin().hardware()
    assert str(raised.value).startswith(f"cudaGetDeviceCount failed: CUDA error 35 ({CUDA_TEXT}). {ADVICE}")
    version, note = Build._cuda_python()
    assert version == "12.9.10"
    assert note.startswith("cudaDriverGetVersion failed: CUDA error 35 (no CUDA driver is installed") and ADVICE in note
