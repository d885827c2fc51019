"""The lwis harness frees its backend instances (GPU memory, sessions) on every way out of a test: when making or
warming one up fails, when the SUT cannot be made, and in the test's process whatever the test's outcome (the
SUT's `close`, which the child calls after `stop`). Instances of a backend counted per device are made for every
device; an instance that takes two calls at once gets two callers; start_from_device needs the python harness.
"""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

import code.common.backends as backends_package
from code.common.benchmark_api import Responses, TensorSpec
from code.common.errors import UserError
from code.common.harness import child
from code.common.harness.plugins.inprocess import PythonHarness, backend_instances
from code.common.harness.registry import HarnessRun
from code.common.harness.spec import RunSpec

INPUT = TensorSpec("x", "float32", (2,))


class RecordingBackend:
    """A backend that returns its input and says when it is closed."""

    direct_batches = False

    def __init__(self, index: int, closed: list[int], parallel_calls: int = 1, fail_infer: bool = False) -> None:
        self.index, self.closed, self.parallel_calls, self.fail_infer = index, closed, parallel_calls, fail_infer
        self.input_names = ("x",)
        self.on_device = False
        self.uploaded: list[int] = []

    def infer(self, inputs):
        if self.fail_infer:
            raise RuntimeError("warm-up failed")
        return [np.asarray(inputs["x"])]

    def keep_inputs_on_device(self) -> None:
        self.on_device = True

    def upload(self, loaded) -> None:
        self.uploaded.append(loaded.count)

    def close(self) -> None:
        self.closed.append(self.index)


class Samples:
    directory = Path("/nonexistent")

    def __len__(self) -> int:
        return 4

    def load(self, index: int) -> np.ndarray:
        return np.full(2, index, np.float32)


def _spec(tmp_path: Path, harness: str = "python", **fields) -> RunSpec:
    return RunSpec(benchmark="resnet50", model="tiny", dataset="foolbox20", division="open", scenario="Offline",
                   test_mode="PerformanceOnly", loadgen_model="resnet50", log_dir=str(tmp_path / "run"),
                   scratch=str(tmp_path / "scratch"), engine=str(tmp_path / "engine"), engine_manifest={},
                   config={"workload_setting": "lwis_k_99_MaxP", "sources": {},
                           "fields": {"instances": 3, "batch_size": 2, "backend": "recording", **fields}},
                   system={"id": "test_system"},
                   user_conf=[], performance_sample_count=4, cpu_cores=1, test_run=True, rules_version="v6.1",
                   accuracy_threshold=None, invocation={}, harness=harness)


def _run(spec: RunSpec) -> HarnessRun:
    def postprocessor(model, samples):
        return lambda outputs, indices: Responses.fixed(np.ascontiguousarray(outputs[0]))
    benchmark = SimpleNamespace(models={"tiny": SimpleNamespace(inputs=(INPUT,))}, postprocessor=postprocessor)
    return HarnessRun(spec, benchmark, Samples(), None, Path(spec.log_dir), None)


@pytest.fixture
def made(monkeypatch):
    """The backends the harness makes: a list, and a way to decide how each is made."""
    state = SimpleNamespace(backends=[], closed=[], fail_at=None, fail_infer=False, parallel_calls=1, devices=None,
                            options=[])

    def create_backend(engine, *, backend, input_names, threads, device, instance, options=None):
        state.options.append(options)
        if instance == state.fail_at:
            raise UserError(f"instance {instance} could not be made")
        made = RecordingBackend(instance, state.closed, state.parallel_calls, state.fail_infer)
        state.backends.append(made)
        return made

    def get_plugin(name):
        if state.devices is None:
            return SimpleNamespace(name=name)
        return SimpleNamespace(name=name, instance_count=lambda instances: instances * state.devices)

    monkeypatch.setattr(backends_package, "create_backend", create_backend)
    monkeypatch.setattr(backends_package, "get_plugin", get_plugin)
    return state


def test_instances_made_before_one_that_fails_are_closed(made, tmp_path) -> None:
    made.fail_at = 2
    with pytest.raises(UserError, match="instance 2 could not be made"):
        backend_instances(_run(_spec(tmp_path)))
    assert sorted(made.closed) == [0, 1]


def test_instances_whose_warm_up_fails_are_closed(made, tmp_path) -> None:
    made.fail_infer = True
    with pytest.raises(RuntimeError, match="warm-up failed"):
        backend_instances(_run(_spec(tmp_path)))
    assert sorted(made.closed) == [0, 1, 2]


def test_instances_per_device_are_made_for_every_device_with_their_callers(made, tmp_path) -> None:
    made.devices, made.parallel_calls = 8, 2
    lines: list[str] = []
    spec = _spec(tmp_path)
    instances = backend_instances(_run(spec), log=lines.append)
    assert [b.index for b in instances.backends] == list(range(24))      # 3 per device on 8 devices
    assert len(instances.calls) == 48                                    # two callers per instance
    assert lines == [f"{spec.label}: recording runs 3 instance(s) per device on 8 devices: 24 instances"]
    instances.close()
    instances.close()                                                    # once
    assert sorted(made.closed) == list(range(24))


def test_start_from_device_needs_the_python_harness(made, tmp_path) -> None:
    instances = backend_instances(_run(_spec(tmp_path, start_from_device=True)))
    assert all(b.on_device for b in instances.backends)
    instances.close()
    with pytest.raises(UserError, match="start_from_device needs the python implementation"):
        backend_instances(_run(_spec(tmp_path, harness="native", start_from_device=True)))
    assert sorted(made.closed) == [0, 1, 2] and len(made.backends) == 3     # refused before any is made


def test_the_python_harness_sut_closes_its_instances(made, tmp_path) -> None:
    sut, _ = PythonHarness().create(_run(_spec(tmp_path)))
    sut.stop()
    assert made.closed == []
    sut.close()
    sut.close()
    assert sorted(made.closed) == [0, 1, 2]


class FakeSUT:
    def __init__(self, fail_close: bool = False) -> None:
        self.closed, self.fail_close, self.error = 0, fail_close, None

    def close(self) -> None:
        self.closed += 1
        if self.fail_close:
            raise RuntimeError("cudaFree failed")

    def endpoint_records(self) -> list:
        return []


@pytest.mark.parametrize("fail_close", [False, True])
def test_the_test_process_closes_the_sut_when_the_test_fails_before_loadgen_starts(monkeypatch, tmp_path, capsys,
                                                                                   fail_close) -> None:
    spec = _spec(tmp_path)
    Path(spec.log_dir).mkdir(parents=True)
    sut = FakeSUT(fail_close)
    monkeypatch.setattr(child, "get_benchmark", lambda name: SimpleNamespace(preprocessed=lambda *args: []))
    monkeypatch.setattr(child, "_system_under_test", lambda *args: (sut, None))

    def broken_settings(*args):
        raise RuntimeError("user.conf could not be read")
    monkeypatch.setattr(child, "test_settings", broken_settings)
    status, record = child._run_test(spec, Path(spec.log_dir), "now")
    assert status == 1 and record.status == "failed" and "user.conf could not be read" in record.error
    assert sut.closed == 1
    said = capsys.readouterr().err
    assert ("freeing its backend instances failed: RuntimeError: cudaFree failed" in said) == fail_close


def test_with_start_from_device_every_load_is_uploaded_by_every_instance(made, tmp_path) -> None:
    sut, qsl = PythonHarness().create(_run(_spec(tmp_path, start_from_device=True)))
    qsl.load([0, 1, 2])
    qsl.load([3])
    assert [b.uploaded for b in made.backends] == [[3, 1]] * 3
    sut.stop()
    sut.close()
    assert sorted(made.closed) == [0, 1, 2]
