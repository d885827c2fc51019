"""The backend plug-in point: backends come from one registry, the engine builder and the harness never name
one, and a backend added as files (here one defined in this test module) builds, is found and is invalidated on
other hardware without any change to the builder."""
from __future__ import annotations

import shutil
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from code.common.backends import BACKENDS, create_backend, get_plugin, registry
from code.common.backends.base import Backend
from code.common.backends.registry import BuildRequest, Hardware
from code.common.config_registry import ConfigKey, ResolvedConfig
from code.common.constants import Scenario, WorkloadSetting
from code.common.harness.engine_build import build_engine, engine_batch_size, locate_engine
from code.common.errors import UserError
from code.common.fields import FIELDS
from code.common.paths import Paths
from tests.test_engines import BENCH, DATASET, MODEL, SYSTEM, FakeBenchmark, tiny_model_paths


class CopyBackend(Backend):
    def __init__(self, engine: Path, input_names: tuple[str, ...], instance: int) -> None:
        import onnxruntime as ort

        self.input_names, self.instance = input_names, instance
        self.session = ort.InferenceSession(str(engine), providers=["CPUExecutionProvider"])

    def infer(self, inputs: dict[str, np.ndarray]) -> list[np.ndarray]:
        return self.session.run(None, dict(inputs))


class CopyPlugin:
    """A backend whose "engine" is the model itself with a fixed batch of its own; it claims a GPU."""

    name = "copy"
    engine_extension = "copy.onnx"
    batch_specific = True
    precisions = ("fp32",)
    opt_level = "none"
    needs = "nothing"
    native_backend = None
    gpu = ("Test GPU 80GB", "9.0")
    builds: list[BuildRequest] = []

    def availability(self) -> str | None:
        return None

    def runtime_version(self) -> str:
        return "copy 1.0"

    def check_precision(self, precision: str) -> None:
        if precision not in self.precisions:
            raise UserError(f"copy engines are fp32 only, not {precision}")

    def hardware(self) -> Hardware:
        return Hardware("gpu", *CopyPlugin.gpu)

    def quantization(self, precision: str) -> str | None:
        return None

    def build(self, request: BuildRequest) -> None:
        CopyPlugin.builds.append(request)
        shutil.copyfile(request.model, request.engine)

    def create_backend(self, engine: Path, *, input_names: tuple[str, ...], threads: int, device: str,
                       instance: int = 0) -> Backend:
        return CopyBackend(engine, input_names, instance)


@pytest.fixture
def copy_backend(monkeypatch: pytest.MonkeyPatch):
    registry.BACKEND_PLUGINS.register("copy", f"{__name__}:CopyPlugin")   # as a backend's own module would
    CopyPlugin.builds = []
    CopyPlugin.gpu = ("Test GPU 80GB", "9.0")
    yield CopyPlugin
    registry.BACKEND_PLUGINS.unregister("copy")


def _config(**fields) -> ResolvedConfig:
    values = {"model": MODEL, "dataset": DATASET, "backend": "copy", "precision": "fp32", "batch_size": 4,
              "instances": 1, "calibration_images": 12, **fields}
    return ResolvedConfig(ConfigKey(BENCH, Scenario.Offline, SYSTEM, WorkloadSetting()), "test", "exact",
                          MappingProxyType(values), MappingProxyType({k: "test" for k in values}))


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return tiny_model_paths(tmp_path)


def test_the_registry_names_the_backends_and_the_fields_offer_them() -> None:
    assert BACKENDS == ("onnxruntime", "tensorrt")
    assert FIELDS["backend"].choices == BACKENDS
    assert get_plugin("onnxruntime").engine_extension == "onnx" and not get_plugin("onnxruntime").batch_specific
    assert get_plugin("tensorrt").engine_extension == "plan" and get_plugin("tensorrt").batch_specific
    assert get_plugin("tensorrt").precisions == ("fp32", "fp16", "int8")
    with pytest.raises(UserError, match="Unknown backend 'tvm'. Available: onnxruntime, tensorrt"):
        get_plugin("tvm")


def test_a_backend_added_as_files_builds_and_runs_through_the_builder(copy_backend, paths: Paths) -> None:
    config = _config()
    assert engine_batch_size(config) == 4
    first = build_engine(config, SYSTEM, paths, FakeBenchmark(), lambda _: None)
    assert first.rebuilt and first.path.name.startswith("fakebench-Offline-gpu-b4-fp32.")
    assert first.manifest.gpu_name == "Test GPU 80GB" and first.manifest.compute_capability == "9.0"
    request = copy_backend.builds[-1]
    assert request.batch_size == 4 and request.hardware.gpu_name == "Test GPU 80GB"
    assert request.timing_cache is not None and "copy_1.0-Test_GPU_80GB-sm9.0" in request.timing_cache.name
    assert request.workspace_bytes == 4 << 30
    assert locate_engine(config, SYSTEM, paths, FakeBenchmark()) == first.path
    assert not build_engine(config, SYSTEM, paths, FakeBenchmark(), lambda _: None).rebuilt
    with create_backend(first.path, backend="copy", input_names=["input"], threads=1, instance=3) as backend:
        assert backend.instance == 3
        assert backend.infer({"input": np.zeros((1, 3, 16, 16), np.float32)})[0].shape == (1, 10)
    # Another batch size is another plan.
    assert build_engine(_config(batch_size=8), SYSTEM, paths, FakeBenchmark(), lambda _: None).path != first.path


def test_an_engine_is_never_reused_on_another_gpu(copy_backend, paths: Paths) -> None:
    build_engine(_config(), SYSTEM, paths, FakeBenchmark(), lambda _: None)
    copy_backend.gpu = ("Other GPU 24GB", "8.9")
    with pytest.raises(UserError, match=r"gpu_name, compute_capability changed") as error:
        locate_engine(_config(), SYSTEM, paths, FakeBenchmark())
    assert "make generate_engines" in str(error.value)
    assert build_engine(_config(), SYSTEM, paths, FakeBenchmark(), lambda _: None).rebuilt


def test_the_backend_refuses_a_precision_it_cannot_build(copy_backend, paths: Paths) -> None:
    with pytest.raises(UserError, match="copy engines are fp32 only, not int8"):
        build_engine(_config(precision="int8"), SYSTEM, paths, FakeBenchmark(), lambda _: None)


def test_tensorrt_without_tensorrt_says_how_to_get_it(paths: Paths) -> None:
    try:
        import tensorrt  # noqa: F401
        pytest.skip("TensorRT is installed here")
    except ImportError:
        pass
    plugin = get_plugin("tensorrt")
    assert "TensorRT is not installed here" in (plugin.availability() or "")
    for call in (lambda: build_engine(_config(backend="tensorrt"), SYSTEM, paths, FakeBenchmark(), print),
                 lambda: locate_engine(_config(backend="tensorrt"), SYSTEM, paths, FakeBenchmark()),
                 lambda: create_backend(paths.build / "x.plan", backend="tensorrt", input_names=["input"], threads=1)):
        with pytest.raises(UserError, match="make build on a machine with an NVIDIA GPU") as error:
            call()
        assert error.value.exit_code == 1


def test_selftest_gpu_without_a_gpu_stops_with_the_reason_and_a_report(tmp_path: Path) -> None:
    import json

    from code.main import main

    try:
        import tensorrt  # noqa: F401
        pytest.skip("TensorRT is installed here")
    except ImportError:
        pass
    scratch = tmp_path / "scratch"
    assert main(["--action=selftest_gpu", f"--scratch_path={scratch}"], log=lambda _: None) == 1
    report = json.loads((Paths.create(scratch=scratch).build / "selftest_gpu" / "report.json").read_text())
    # CUDA is asked first (tests/test_selftest_gpu.py): no driver here, or no GPU behind cuda-python's driver
    assert "no NVIDIA driver on this machine" in report["stopped"] or "CUDA found no" in report["stopped"], \
        report["stopped"]
