"""Engine layer: backends, manifests, FP32/INT8 ONNX Runtime builds, calibration cache, engine lookup.

Uses a tiny generated conv net (random weights, fixed batch 1 so the dynamic-batch rewrite is exercised) and a
fake benchmark with generated tensors: accuracy here means nothing, equality and invalidation do.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from code.common.backends import NullBackend, create_backend
from code.common.benchmark_api import ModelSpec, PackagedBenchmark, TensorSpec
from code.common.config_registry import ConfigKey, ResolvedConfig
from code.common.constants import Scenario, WorkloadSetting
from code.common.harness.engine_build import build_engine, calibrate, locate_engine
from code.common.engines.manifest import CalibrationInfo, EngineManifest, is_current
from code.common import integrity
from code.common.errors import UserError
from code.common.paths import Paths

BENCH, MODEL, DATASET, SYSTEM = "fakebench", "tiny", "randoms", "Test_CPUx2"
SHAPE = (3, 16, 16)


def _tiny_model(seed: int = 0):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    weights = {
        "w1": rng.normal(0, 0.3, (8, 3, 3, 3)), "b1": rng.normal(0, 0.1, 8),
        "w2": rng.normal(0, 0.2, (16, 8, 3, 3)), "b2": rng.normal(0, 0.1, 16),
        "fc_w": rng.normal(0, 0.3, (10, 16)), "fc_b": rng.normal(0, 0.1, 10),
    }
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes, "tiny", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, *SHAPE])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=[numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


class _Set:
    def __init__(self, data: np.ndarray) -> None:
        self.data, self.directory = data, Path(".")

    def __len__(self) -> int:
        return len(self.data)

    def load(self, index: int) -> np.ndarray:
        return self.data[index]


class FakeBenchmark(PackagedBenchmark):
    """Just what the engine builder uses: model specs, preprocessed data and a calibration list (calibration_samples:
    PackagedBenchmark's, the list's entries of the preprocessed data)."""

    name = BENCH
    models = {MODEL: ModelSpec(MODEL, "random conv net", "open", (TensorSpec("input", "float32", SHAPE),), "-", "none")}

    def __init__(self, seed: int = 1) -> None:
        self.data = np.random.default_rng(seed).normal(0, 1, (40, *SHAPE)).astype(np.float32)
        self.preprocessed_calls = 0

    def preprocessed(self, model: str, dataset: str, paths: Paths) -> _Set:
        self.preprocessed_calls += 1
        return _Set(self.data)

    def calibration_indices(self, dataset: str, count: int, paths: Paths) -> list[int]:
        return list(range(0, len(self.data), max(1, len(self.data) // count)))[:count]


class GeneratorBenchmark(FakeBenchmark):
    """A benchmark that hands out calibration tensors itself, in batches."""

    def calibration_samples(self, model: str, dataset: str, count: int, paths: Paths):
        for start in range(0, count, 4):
            yield self.data[start:min(count, start + 4)]


def _config(**fields) -> ResolvedConfig:
    values = {"model": MODEL, "dataset": DATASET, "backend": "onnxruntime", "precision": "fp32", "batch_size": 4,
              "instances": 1, "intra_op_threads": 1, "calibration_images": 12, **fields}
    sources = {k: ("command line" if k in fields else "config class") for k in values}
    return ResolvedConfig(ConfigKey(BENCH, Scenario.Offline, SYSTEM, WorkloadSetting()), "test", "exact",
                          MappingProxyType(values), MappingProxyType(sources))


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    return tiny_model_paths(tmp_path)


def tiny_model_paths(tmp_path: Path) -> Paths:
    """A scratch under `tmp_path` holding the tiny model as the fake benchmark's model file."""
    import onnx

    p = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path)
    p.model_file(BENCH, MODEL).parent.mkdir(parents=True)
    onnx.save(_tiny_model(), str(p.model_file(BENCH, MODEL)))
    return p


def _reference(paths: Paths, batch: np.ndarray) -> np.ndarray:
    """The source model, one sample at a time (its batch is fixed at 1), unoptimized."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(paths.model_file(BENCH, MODEL)), options, providers=["CPUExecutionProvider"])
    return np.concatenate([session.run(None, {"input": sample[None]})[0] for sample in batch])


def _run(engine: Path, batch: np.ndarray) -> np.ndarray:
    with create_backend(engine, backend="onnxruntime", input_names=["input"], threads=1) as backend:
        return backend.infer({"input": batch})[0]


def test_a_configs_inter_op_threads_and_spinning_reach_the_onnxruntime_session(paths: Paths) -> None:
    from code.common.backends import runtime_options
    from code.common.engines.onnxruntime_session import ALLOW_SPINNING

    engine = build_engine(_config(), SYSTEM, paths, FakeBenchmark(), lambda line: None).path
    batch = FakeBenchmark().data[:2]
    options = runtime_options({"intra_op_threads": 2, "inter_op_threads": 2, "intra_op_spinning": False})
    assert options == {"inter_op_threads": 2, "intra_op_spinning": False}
    with create_backend(engine, backend="onnxruntime", input_names=["input"], threads=2, options=options) as backend:
        session = backend._session.get_session_options()
        assert session.inter_op_num_threads == 2 and session.get_session_config_entry(ALLOW_SPINNING) == "0"
        assert str(session.execution_mode).endswith("ORT_PARALLEL")
        np.testing.assert_allclose(backend.infer({"input": batch})[0], _run(engine, batch), atol=1e-5, rtol=1e-5)
    # ORT's defaults where a config sets neither (a TensorRT config has neither field).
    with create_backend(engine, backend="onnxruntime", input_names=["input"], threads=1,
                        options=runtime_options({"backend": "tensorrt"})) as backend:
        session = backend._session.get_session_options()
        assert session.inter_op_num_threads == 1 and session.get_session_config_entry(ALLOW_SPINNING) == "1"


def test_fp32_build_then_no_op(paths: Paths) -> None:
    messages: list[str] = []
    bench = FakeBenchmark()
    result = build_engine(_config(), SYSTEM, paths, bench, messages.append)
    assert result.rebuilt and result.path.is_file()
    assert result.path.name == "fakebench-Offline-cpu-fp32.lwis_k_99_MaxP.onnx"   # any batch size: no b<N>
    manifest = json.loads(paths.engine_manifest(result.path).read_text())
    assert manifest["precision"] == "fp32" and manifest["batch_size"] is None and manifest["calibration"] is None
    batch = bench.data[:4]
    np.testing.assert_allclose(_run(result.path, batch), _reference(paths, batch), atol=1e-4, rtol=1e-4)

    mtime = result.path.stat().st_mtime_ns
    messages.clear()
    again = build_engine(_config(), SYSTEM, paths, bench, messages.append)
    assert not again.rebuilt and again.manifest == result.manifest
    assert result.path.stat().st_mtime_ns == mtime and any("engine up to date" in m for m in messages)
    assert locate_engine(_config(), SYSTEM, paths, bench) == result.path


def test_an_onnxruntime_engine_serves_every_batch_size(paths: Paths) -> None:
    """Its batch dimension is dynamic: another batch size finds the same engine current, nothing is rebuilt."""
    bench = FakeBenchmark()
    first = build_engine(_config(), SYSTEM, paths, bench, lambda _: None)
    assert locate_engine(_config(batch_size=8), SYSTEM, paths, bench) == first.path
    again = build_engine(_config(batch_size=8), SYSTEM, paths, bench, lambda _: None)
    assert not again.rebuilt and again.path == first.path
    np.testing.assert_allclose(_run(first.path, bench.data[:8]), _reference(paths, bench.data[:8]), atol=1e-4,
                               rtol=1e-4)


@pytest.mark.parametrize("change", ["precision", "model_bytes", "manifest_deleted"])
def test_changed_inputs_rebuild(paths: Paths, change: str) -> None:
    import onnx

    bench = FakeBenchmark()
    first = build_engine(_config(), SYSTEM, paths, bench, lambda _: None)
    config = _config()
    if change == "precision":
        config = _config(precision="int8")
    elif change == "model_bytes":
        model = paths.model_file(BENCH, MODEL)
        onnx.save(_tiny_model(seed=7), str(model))
        with pytest.raises(UserError, match=r"does not match the sha256 recorded.*make download_model"):
            locate_engine(config, SYSTEM, paths, bench)
        integrity.forget_record(model)    # what the message says to do when the model was replaced on purpose
        with pytest.raises(UserError, match=r"model_sha256 changed.*make generate_engines"):
            locate_engine(config, SYSTEM, paths, bench)
    else:
        paths.engine_manifest(first.path).unlink()
        with pytest.raises(UserError, match="no readable manifest"):
            locate_engine(config, SYSTEM, paths, bench)
    second = build_engine(config, SYSTEM, paths, bench, lambda _: None)
    assert second.rebuilt
    assert (second.path == first.path) == (change in ("model_bytes", "manifest_deleted"))
    assert locate_engine(config, SYSTEM, paths, bench) == second.path


def test_int8_calibrates_caches_and_stays_close(paths: Paths) -> None:
    messages: list[str] = []
    bench = FakeBenchmark()
    fp32 = build_engine(_config(), SYSTEM, paths, bench, messages.append)
    int8 = build_engine(_config(precision="int8"), SYSTEM, paths, bench, messages.append)
    cache = paths.calibration_cache(BENCH, MODEL, DATASET, 12)
    assert cache.is_file() and any("calibration cache written" in m for m in messages)
    assert int8.manifest.calibration is not None and int8.manifest.calibration.count == 12
    import onnx
    ops = {n.op_type for n in onnx.load(str(int8.path)).graph.node}
    assert "QLinearConv" in ops, ops
    batch = bench.data[20:36]
    a, b = _run(fp32.path, batch).ravel(), _run(int8.path, batch).ravel()
    assert np.corrcoef(a, b)[0, 1] > 0.9

    messages.clear()
    assert not build_engine(_config(precision="int8"), SYSTEM, paths, bench, messages.append).rebuilt
    assert any("calibration cache up to date" in m for m in messages)

    # New calibration data: the cache is recomputed, so the engine is rebuilt.
    bench.data = bench.data[::-1].copy()
    assert build_engine(_config(precision="int8"), SYSTEM, paths, bench, messages.append).rebuilt
    # `make calibrate` always recomputes; the same ranges leave the engine current.
    before = cache.read_bytes()
    assert calibrate(_config(precision="int8"), paths, bench, messages.append) == cache
    assert cache.read_bytes() == before
    assert locate_engine(_config(precision="int8"), SYSTEM, paths, bench) == int8.path


def test_a_calibration_cache_of_a_changed_source_is_refused_naming_make_calibrate(paths: Paths) -> None:
    """The cache records what its samples were read from (the preprocessed set's manifest, which records the data
    set's sources): a set made again from an edited source stops the run before the engine is used."""
    bench = FakeBenchmark()
    preprocessed = paths.preprocessed_dir(BENCH, MODEL, DATASET)
    preprocessed.mkdir(parents=True)
    (preprocessed / "manifest.json").write_text(json.dumps({"count": 40, "source_val_map_sha256": "a" * 64}))
    int8 = build_engine(_config(precision="int8"), SYSTEM, paths, bench, lambda _: None)
    cache = paths.calibration_cache(BENCH, MODEL, DATASET, 12)
    assert locate_engine(_config(precision="int8"), SYSTEM, paths, bench) == int8.path
    kept = {path: path.read_bytes() for path in (cache, int8.path)}
    (preprocessed / "manifest.json").write_text(json.dumps({"count": 40, "source_val_map_sha256": "b" * 64}))
    with pytest.raises(UserError) as refused:
        locate_engine(_config(precision="int8"), SYSTEM, paths, bench)
    message = str(refused.value)
    assert refused.value.exit_code == 1 and str(cache) in message and str(preprocessed) in message
    assert 'make calibrate RUN_ARGS="--benchmarks=fakebench --scenarios=Offline --precision=int8"' in message
    assert {path: path.read_bytes() for path in kept} == kept            # nothing rewritten by the refusal
    calibrate(_config(precision="int8"), paths, bench, lambda _: None)      # as the message says: calibrate,
    assert build_engine(_config(precision="int8"), SYSTEM, paths, bench, lambda _: None).rebuilt   # then build
    assert locate_engine(_config(precision="int8"), SYSTEM, paths, bench) == int8.path


def test_calibration_samples_preferred(paths: Paths) -> None:
    bench = GeneratorBenchmark()
    result = build_engine(_config(precision="int8"), SYSTEM, paths, bench, lambda _: None)
    assert result.rebuilt and bench.preprocessed_calls == 0
    inputs = json.loads(paths.calibration_cache(BENCH, MODEL, DATASET, 12).read_text())["toolkit_inputs"]
    assert inputs["samples"] == 12


def test_locate_engine_missing_names_generate_engines(paths: Paths) -> None:
    with pytest.raises(UserError) as error:
        locate_engine(_config(precision="int8"), SYSTEM, paths, FakeBenchmark())
    message = str(error.value)
    assert error.value.exit_code == 1 and "there is no engine" in message
    assert 'make generate_engines RUN_ARGS="--benchmarks=fakebench --scenarios=Offline --precision=int8"' in message


def test_missing_model_names_download_model(paths: Paths) -> None:
    paths.model_file(BENCH, MODEL).unlink()
    for call in (build_engine, locate_engine):
        with pytest.raises(UserError, match=r'make download_model RUN_ARGS="--benchmarks=fakebench --model=tiny"'):
            call(_config(), SYSTEM, paths, FakeBenchmark(), *([print] if call is build_engine else []))


def test_fp16_on_onnxruntime_explains(paths: Paths) -> None:
    with pytest.raises(UserError, match="fp16 engines need the GPU backend"):
        build_engine(_config(precision="fp16"), SYSTEM, paths, FakeBenchmark(), print)


def test_backend_factory_errors(tmp_path: Path) -> None:
    try:
        import tensorrt  # noqa: F401
    except ImportError:
        with pytest.raises(UserError, match="TensorRT is not installed here") as error:
            create_backend(tmp_path / "x.plan", backend="tensorrt", input_names=["input"], threads=1)
        assert error.value.exit_code == 1
    with pytest.raises(UserError, match="Unknown backend 'tvm'"):
        create_backend(tmp_path / "x.onnx", backend="tvm", input_names=["input"], threads=1)
    with pytest.raises(UserError, match="No engine at"):
        create_backend(tmp_path / "x.onnx", backend="onnxruntime", input_names=["input"], threads=1)


def test_wrong_input_name(paths: Paths) -> None:
    engine = build_engine(_config(), SYSTEM, paths, FakeBenchmark(), lambda _: None).path
    with pytest.raises(UserError, match=r"has input\(s\) input, not images"):
        create_backend(engine, backend="onnxruntime", input_names=["images"], threads=1)


def test_null_backend_shape() -> None:
    backend = NullBackend((1000,), dtype="float32")
    (out,) = backend.infer({"input": np.ones((5, *SHAPE), dtype=np.float32)})
    assert out.shape == (5, 1000) and out.dtype == np.float32 and not out.any()


def test_manifest_round_trip(tmp_path: Path) -> None:
    manifest = EngineManifest("b", "m", "ab" * 32, "onnxruntime", "int8", 32, "cpu", "onnxruntime 1.31.1",
                              "ORT_ENABLE_EXTENDED", "QDQ", CalibrationInfo("d", 100, "MinMax", "cd" * 32))
    assert EngineManifest.from_json(manifest.to_json()) == manifest
    engine = tmp_path / "e.onnx"
    engine.write_bytes(b"x")
    manifest.of_engine(engine).write(tmp_path / "e.onnx.manifest.json")   # as a build writes it: with the file's digest
    assert is_current(engine, tmp_path / "e.onnx.manifest.json", manifest)
    other = EngineManifest.from_dict({**manifest.to_dict(), "batch_size": 64})
    assert not is_current(engine, tmp_path / "e.onnx.manifest.json", other)
    assert manifest.differences(other) == ["batch_size"]
    (tmp_path / "bad.json").write_text("{not json")
    assert EngineManifest.read(tmp_path / "bad.json") is None


def test_no_runtime_imported_at_import() -> None:
    code = ("import sys, code.common.backends, code.common.harness.engine_build, code.common.engines.manifest; "
            "print(sorted(m for m in ('onnxruntime', 'onnx', 'tensorrt') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


def test_a_tensor_of_infinite_range_stays_in_float(tmp_path: Path) -> None:
    """TensorFlow exports a padded max pool as Pad(-inf) -> MaxPool: quantizing the padded tensor would make every
    value NaN. Its nodes stay in float, and the INT8 model's outputs stay finite and close to FP32's."""
    import onnx
    from onnx import TensorProto, helper

    from code.common.engines import onnxruntime_builder as ort_builder

    rng = np.random.default_rng(3)
    weights = helper.make_tensor("w", TensorProto.FLOAT, [4, 1, 3, 3], rng.normal(0, 1, 36).astype(np.float32))
    pads = helper.make_tensor("pads", TensorProto.INT64, [8], [0, 0, 1, 1, 0, 0, 1, 1])
    minus_inf = helper.make_tensor("minus_inf", TensorProto.FLOAT, [], [float("-inf")])
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("Pad", ["r", "pads", "minus_inf"], ["p"], name="pad", mode="constant"),
         helper.make_node("MaxPool", ["p"], ["y"], name="pool", kernel_shape=[3, 3])],
        "padded_pool", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, 8, 8])], [weights, pads, minus_inf])
    model = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9), model)
    prepared = ort_builder.prepare_model(model, tmp_path, for_quantization=True)
    data = rng.normal(0, 1, (16, 1, 8, 8)).astype(np.float32)
    ranges = ort_builder.compute_ranges(prepared, [{"x": data[:8]}, {"x": data[8:]}])
    cache = tmp_path / "ranges.json"
    ort_builder.write_calibration_cache(cache, ranges, {})
    assert ort_builder.non_finite_ranges(cache) == {"p"}
    assert sorted(ort_builder.nodes_touching(prepared, {"p"})) == ["pad", "pool"]
    engine = tmp_path / "int8.onnx"
    ort_builder.build(model, engine, "int8", ["CPUExecutionProvider"], calibration_cache=cache)
    with create_backend(engine, backend="onnxruntime", input_names=["x"], threads=1) as backend:
        [quantized] = backend.infer({"x": data})
    with create_backend(model, backend="onnxruntime", input_names=["x"], threads=1) as backend:
        [reference] = backend.infer({"x": data})
    assert np.isfinite(quantized).all()
    assert np.abs(quantized - reference).max() < 0.1 * np.abs(reference).max()
