"""TensorRT instances on several GPUs, and the backend's failure paths, with fake CUDA (tests/fake_cuda.py) exposing
2 and 8 GPUs and a fake `tensorrt` module standing in for the bindings.

CUDA's current device is per host thread and is whatever was set last: every engine load, context creation,
allocation, copy, inference and release must find its instance's GPU current. The fakes check it at each step:
an allocation remembers its device, a copy refuses memory of another device, work queued on a stream of another
device is refused, and the fake engine and context record the device current when they are made and freed.
"""
from __future__ import annotations

import sys
import threading
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from code.common.backends import cuda_runtime, tensorrt_backend, tensorrt_loader
from code.common.backends.tensorrt_backend import TensorRTBackend
from code.common.backends.tensorrt_plugin import TensorRTPlugin
from code.common.errors import UserError
from tests.fake_cuda import Call, FakeCuda
from tests.fake_engine import SAMPLE, TENSORS, WEIGHTS, FakeContext

MAX_BATCH = 4


class FakeEngine:
    """The ICudaEngine methods the backend calls, for TENSORS; contexts made on the current device."""

    def __init__(self, cuda: FakeCuda, fail_context: bool) -> None:
        self.cuda, self.gpu, self.fail_context = cuda, cuda.device, fail_context
        self.num_io_tensors = len(TENSORS)

    def get_tensor_name(self, index: int) -> str:
        return TENSORS[index].name

    def get_tensor_mode(self, name: str) -> str:
        return "INPUT" if name == "input" else "OUTPUT"

    def get_tensor_dtype(self, name: str) -> str:
        return f"DataType.{'HALF' if name == 'total' else 'FLOAT'}"

    def get_tensor_shape(self, name: str) -> tuple[int, ...]:
        return next(t.shape for t in TENSORS if t.name == name)

    def get_tensor_profile_shape(self, name: str, profile: int) -> list[tuple[int, ...]]:
        return [(1, *SAMPLE), (MAX_BATCH, *SAMPLE), (MAX_BATCH, *SAMPLE)]

    def create_execution_context(self) -> "DeviceContext | None":
        self.cuda.calls.append(Call("create_execution_context", self.cuda.device, (self.gpu,)))
        return None if self.fail_context else DeviceContext(self.cuda, MAX_BATCH, self.gpu)

    def __del__(self) -> None:
        self.cuda.calls.append(Call("engine_freed", self.cuda.device, (self.gpu,)))


class DeviceContext(FakeContext):
    def __init__(self, cuda: FakeCuda, max_batch: int, gpu: int) -> None:
        super().__init__(cuda, max_batch)
        self.gpu = gpu

    def __del__(self) -> None:
        self.cuda.calls.append(Call("context_freed", self.cuda.device, (self.gpu,)))


def fake_tensorrt(cuda: FakeCuda, fail_context: bool = False) -> SimpleNamespace:
    class Runtime:
        def __init__(self, logger) -> None:
            pass

        def deserialize_cuda_engine(self, plan: bytes) -> FakeEngine:
            cuda.calls.append(Call("deserialize_cuda_engine", cuda.device))
            return FakeEngine(cuda, fail_context)

    class Logger:
        WARNING = "warning"

        def __init__(self, level: str) -> None:
            self.level = level

    return SimpleNamespace(__version__="11.4.0-fake", Runtime=Runtime, Logger=Logger,
                           TensorIOMode=SimpleNamespace(INPUT="INPUT", OUTPUT="OUTPUT"))


@pytest.fixture
def gpus(monkeypatch, tmp_path):
    """A function (gpu count, fail_context) -> (fake CUDA, plan path) that makes the backend use the fakes."""
    def install(count: int, fail_context: bool = False) -> tuple[FakeCuda, Path]:
        cuda = FakeCuda(gpus=count)
        monkeypatch.setattr(tensorrt_loader, "trt", fake_tensorrt(cuda, fail_context))
        monkeypatch.setattr(tensorrt_backend, "require_tensorrt", lambda: "11.4.0-fake")
        monkeypatch.setattr(tensorrt_backend, "CudaRuntime", lambda: cuda)
        monkeypatch.setattr(cuda_runtime, "CudaRuntime", lambda: cuda)
        tensorrt_loader.logger.cache_clear()
        plan = tmp_path / "model.plan"
        plan.write_bytes(b"plan")
        return cuda, plan

    yield install
    tensorrt_loader.logger.cache_clear()


def _devices(cuda: FakeCuda, name: str) -> list[int]:
    return [c.device for c in cuda.calls if c.name == name]


@pytest.mark.parametrize("count", [2, 8])
def test_every_gpu_gets_instances_per_gpu_and_every_step_runs_on_its_gpu(gpus, count: int) -> None:
    cuda, plan = gpus(count)
    per_gpu = 3
    total = TensorRTPlugin().instance_count(per_gpu)
    assert total == per_gpu * count                          # `instances` is per GPU, as gpu_inference_streams
    backends = [TensorRTBackend(plan, input_names=["input"], instance=i) for i in range(total)]
    assert Counter(b.gpu for b in backends) == {gpu: per_gpu for gpu in range(count)}
    # One engine per GPU, deserialized with that GPU current; each context made on its engine's GPU, also for the
    # instances made after another GPU's (instance `count` comes after instance `count - 1` on the last GPU).
    assert sorted(_devices(cuda, "deserialize_cuda_engine")) == list(range(count))
    made = [c for c in cuda.calls if c.name == "create_execution_context"]
    assert [c.device for c in made] == [c.args[0] for c in made] == [i % count for i in range(total)]
    # Every buffer, stream and event of an instance is on its GPU.
    for backend in backends:
        runner = backend._runner
        assert runner is not None and runner.gpu == backend.gpu
        for buffer_set in runner._sets:
            assert {cuda.owner[b.device] for b in buffer_set.buffers} == {backend.gpu}
            assert {cuda.events[buffer_set.copied], cuda.events[buffer_set.done]} == {backend.gpu}
        assert cuda.streams[runner.stream].device == cuda.streams[runner.copy_stream].device == backend.gpu
    del runner
    # Inference from fresh threads (no device current there yet), two per instance as the harness calls them:
    # the fakes refuse any copy or work on another device's memory or stream.
    errors: list[BaseException] = []

    def work(backend: TensorRTBackend, seed: int) -> None:
        try:
            for i in range(3):
                batch = np.random.default_rng(seed + i).normal(0, 1, (1 + i, *SAMPLE)).astype(np.float32)
                features, _ = backend.infer({"input": batch})
                np.testing.assert_allclose(features, batch.reshape(len(batch), -1) @ WEIGHTS, rtol=1e-5, atol=1e-5)
        except BaseException as error:  # noqa: BLE001  reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(b, 100 * n + k)) for n, b in enumerate(backends) for k in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    # Release: contexts, buffers and engines freed with their GPU current.
    start = len(cuda.calls)
    for backend in backends:
        backend.close()
    released = cuda.calls[start:]
    assert sorted((c.device, c.args[0]) for c in released if c.name == "context_freed") == \
        sorted((b.gpu, b.gpu) for b in backends)
    assert sorted(c.device for c in released if c.name == "engine_freed") == list(range(count))
    assert all(c.device == c.args[0] for c in released if c.name in ("engine_freed", "context_freed"))
    assert cuda.memory == {} and cuda.streams == {} and cuda.events == {}


def test_a_context_tensorrt_cannot_create_is_explained_and_nothing_is_left(gpus) -> None:
    cuda, plan = gpus(2, fail_context=True)
    with pytest.raises(UserError, match=r"could not create an execution context .* on GPU 1 .*fewer instances per "
                                        r"GPU") as refused:
        TensorRTBackend(plan, input_names=["input"], instance=1)
    assert refused.value.exit_code == 1
    assert _devices(cuda, "engine_freed") == [1] and cuda.memory == {}


def _module_folder(tmp_path: Path, body: str) -> Path:
    """A folder holding a package `tensorrt` whose import runs `body`."""
    package = tmp_path / "fake_site" / "tensorrt"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    return package.parent


@pytest.mark.parametrize("body", [
    "raise ImportError('libnvinfer.so.10: cannot open shared object file: No such file or directory')\n",
    "raise OSError('libnvinfer_plugin.so.10: cannot open shared object file')\n",
    "import tensorrt_libs_that_are_not_there\n",
])
def test_missing_tensorrt_libraries_are_told_apart_from_a_missing_tensorrt(monkeypatch, tmp_path, body) -> None:
    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    monkeypatch.syspath_prepend(str(_module_folder(tmp_path, body)))
    with pytest.raises(UserError) as refused:
        tensorrt_loader.require_tensorrt()
    assert "bindings are installed but its libraries do not load" in str(refused.value)
    assert "not installed" not in str(refused.value) and refused.value.exit_code == 1
    assert ("libnvinfer" in str(refused.value)) or ("tensorrt_libs_that_are_not_there" in str(refused.value))


def test_a_missing_tensorrt_says_it_is_not_installed(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", None)      # import tensorrt: ModuleNotFoundError for tensorrt
    with pytest.raises(UserError, match="TensorRT is not installed here"):
        tensorrt_loader.require_tensorrt()


@pytest.mark.parametrize("system", ["H100_SXM_80GBx8", "H200_SXM_141GBx8", "H100_SXM_80GBx1"])
def test_the_shipped_gpu_configs_use_every_gpu_of_their_system(gpus, system: str) -> None:
    from code.common.config_registry import ConfigRegistry
    from code.common.constants import Scenario, WorkloadSetting
    from code.common.systems.known import KNOWN_SYSTEMS

    count = next(s.gpu_count for s in KNOWN_SYSTEMS if s.id == system)
    gpus(count)
    registry = ConfigRegistry.load(["resnet50"])
    for scenario in (Scenario.Offline, Scenario.Server):
        config = registry.resolve("resnet50", scenario, [system], WorkloadSetting(), cpu_cores=16)
        assert config["backend"] == "tensorrt"
        per_gpu = int(config["instances"])
        total = TensorRTPlugin().instance_count(per_gpu)
        assert Counter(tensorrt_backend.instance_gpu(i, count) for i in range(total)) == \
            {gpu: per_gpu for gpu in range(count)}, (system, scenario)
