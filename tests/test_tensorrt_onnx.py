"""The ONNX side of TensorRT engines, prepared on the CPU: fp32 / fp16 / int8 (QDQ) models, checked with ONNX Runtime.

Fast tests use a tiny generated conv net (random weights, fixed batch 1 so the dynamic-batch rewrite is exercised)
and a calibration cache computed on random data: accuracy there means nothing, structure and closeness do. The
MobileNetV2 test (real torchvision weights, ../shared/data/imagenet_sample) checks INT8 top-1 against FP32.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from code.common.engines import onnxruntime_builder as ort_builder
from code.common.engines import tensorrt_onnx
from code.common.engines.tensorrt_onnx import (
    cpu_reference_session, nonzero_zero_points, prepare, quantized_node_counts,
)
from code.common.errors import UserError
from tests.test_engines import _tiny_model as engines_tiny_model

SHAPE = (3, 16, 16)


def _tiny_model(seed: int = 0, foldable: bool = False):
    """The conv net of tests/test_engines.py. foldable: the first conv's weight is the sum of two constants and
    the classifier's input is reshaped to a shape computed from the classifier weight's Shape (constant
    subgraphs that only folding removes)."""
    import onnx
    from onnx import helper, numpy_helper

    model = engines_tiny_model(seed)
    if not foldable:
        return model
    graph = model.graph
    w1 = next(i for i in graph.initializer if i.name == "w1")
    half = numpy_helper.to_array(w1) / 2
    graph.initializer.remove(w1)
    graph.initializer.extend([numpy_helper.from_array(half, "w1a"), numpy_helper.from_array(half, "w1b"),
                              numpy_helper.from_array(np.array(1, np.int64), "one"),
                              numpy_helper.from_array(np.array([0], np.int64), "zero"),
                              numpy_helper.from_array(np.array([-1], np.int64), "minus_one")])
    nodes = list(graph.node)
    assert nodes[5].op_type == "Flatten"
    nodes[5:6] = [
        helper.make_node("Shape", ["fc_w"], ["fc_shape"], name="constant_shape"),
        helper.make_node("Gather", ["fc_shape", "one"], ["fc_in"], axis=0, name="constant_gather"),
        helper.make_node("Unsqueeze", ["fc_in", "zero"], ["fc_in_1d"], name="constant_unsqueeze"),
        helper.make_node("Concat", ["minus_one", "fc_in_1d"], ["flat_shape"], axis=0, name="constant_concat"),
        helper.make_node("Reshape", ["pool", "flat_shape"], ["flat"], name="reshape"),
    ]
    nodes.insert(0, helper.make_node("Add", ["w1a", "w1b"], ["w1"], name="constant_add"))
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    return model


def _reference(source: Path, batch: np.ndarray) -> np.ndarray:
    """The source model, one sample at a time (its batch is fixed at 1), unoptimized."""
    return np.concatenate([cpu_reference_session(source).run(None, {"input": sample[None]})[0] for sample in batch])


def _run(model: Path, batch: np.ndarray) -> np.ndarray:
    return cpu_reference_session(model, threads=1).run(None, {"input": batch})[0]


def _data(seed: int, count: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (count, *SHAPE)).astype(np.float32)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path]:
    """The tiny model and a calibration cache for it, made as the toolkit makes one (random calibration data)."""
    import onnx

    root = tmp_path_factory.mktemp("tiny")
    source = root / "tiny.onnx"
    onnx.save(_tiny_model(), str(source))
    data = _data(1, 40)
    work = root / "calibrate"
    work.mkdir()
    prepared = ort_builder.prepare_model(source, work, for_quantization=True)
    ranges = ort_builder.compute_ranges(prepared, ({"input": data[i:i + 10]} for i in range(0, 40, 10)))
    cache = root / "tiny.calib.json"
    ort_builder.write_calibration_cache(cache, ranges, {"test": "random data"})
    return source, cache


@pytest.fixture(scope="module")
def built(tiny, tmp_path_factory) -> dict[str, Path]:
    source, cache = tiny
    out = tmp_path_factory.mktemp("prepared")
    models = {}
    for precision in tensorrt_onnx.PRECISIONS:
        models[precision] = out / f"{precision}.onnx"
        prepare(source, models[precision], precision, cache if precision == "int8" else None)
    assert sorted(p.name for p in out.iterdir()) == ["fp16.onnx", "fp32.onnx", "int8.onnx"]   # no temp files left
    return models


def test_public_names() -> None:
    for name in ("prepare", "nonzero_zero_points", "quantized_node_counts", "cpu_reference_session"):
        assert callable(getattr(tensorrt_onnx, name)), name
    assert isinstance(tensorrt_onnx.QUANTIZATION, str) and "\n" not in tensorrt_onnx.QUANTIZATION
    assert "symmetric" in tensorrt_onnx.QUANTIZATION and "QDQ" in tensorrt_onnx.QUANTIZATION


def _batch_dim(value) -> str:
    dim = value.type.tensor_type.shape.dim[0]
    return dim.dim_param if dim.HasField("dim_param") else str(dim.dim_value)


@pytest.mark.parametrize("precision", tensorrt_onnx.PRECISIONS)
def test_dynamic_batch_and_float32_io(built: dict[str, Path], precision: str) -> None:
    import onnx
    from onnx import TensorProto

    graph = onnx.load(str(built[precision])).graph
    for value in (*graph.input, *graph.output):
        assert value.type.tensor_type.elem_type == TensorProto.FLOAT, value.name
        assert not _batch_dim(value).isdigit(), (value.name, _batch_dim(value))
    for count in (1, 5):
        assert _run(built[precision], _data(2, count)).shape == (count, 10)


def test_fp32_matches_source(tiny, built: dict[str, Path]) -> None:
    batch = _data(3, 5)
    np.testing.assert_allclose(_run(built["fp32"], batch), _reference(tiny[0], batch), atol=1e-4, rtol=1e-4)
    np.testing.assert_allclose(_run(built["fp32"], batch[:1]), _reference(tiny[0], batch[:1]), atol=1e-4, rtol=1e-4)
    assert quantized_node_counts(built["fp32"]) == {"QuantizeLinear": 0, "DequantizeLinear": 0}


def test_fp16_has_half_weights_and_stays_close(built: dict[str, Path]) -> None:
    import onnx
    from onnx import TensorProto

    graph = onnx.load(str(built["fp16"])).graph
    types = {i.name: i.data_type for i in graph.initializer}
    assert {types[name] for name in ("w1", "w2", "fc_w")} == {TensorProto.FLOAT16}
    assert TensorProto.FLOAT not in types.values()
    for count in (1, 5):
        batch = _data(4, count)
        np.testing.assert_allclose(_run(built["fp16"], batch), _run(built["fp32"], batch), atol=0.05, rtol=0.05)


def test_int8_is_symmetric_qdq_with_float_biases(built: dict[str, Path]) -> None:
    import onnx
    from onnx import TensorProto

    model = built["int8"]
    counts = quantized_node_counts(model)
    assert counts["QuantizeLinear"] > 0 and counts["DequantizeLinear"] > 0, counts
    assert nonzero_zero_points(model) == []
    graph = onnx.load(str(model)).graph
    initializers = {i.name: i for i in graph.initializer}
    dequantized = {n.output[0]: n for n in graph.node if n.op_type == "DequantizeLinear"}
    for node in graph.node:
        if node.op_type == "DequantizeLinear":
            assert initializers.get(node.input[0]) is None or \
                initializers[node.input[0]].data_type != TensorProto.INT32, node.name   # no int32 (bias) data
        if node.op_type in ("Conv", "Gemm"):
            bias = node.input[2]
            assert bias not in dequantized and initializers[bias].data_type == TensorProto.FLOAT, node.name
    convs = [n for n in graph.node if n.op_type == "Conv"]
    # The first conv sums 3 x 3 x 3 = 27 products per output (< MIN_INT8_REDUCTION): float. The second: int8.
    assert [c.input[0] in dequantized for c in convs] == [False, True]
    assert [c.input[1] in dequantized for c in convs] == [False, True]
    gemm = next(n for n in graph.node if n.op_type == "Gemm")
    assert gemm.input[0] in dequantized and gemm.input[1] in dequantized
    assert all(n.input[0] not in {c.output[0] for c in convs} for n in graph.node if n.op_type == "QuantizeLinear")


def test_int8_output_follows_fp32(built: dict[str, Path]) -> None:
    for count in (1, 5):
        batch = _data(5, count)
        a, b = _run(built["fp32"], batch).ravel(), _run(built["int8"], batch).ravel()
        assert np.corrcoef(a, b)[0, 1] > 0.95


def test_zero_point_and_count_helpers_read_what_is_there(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp_nonzero"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "zp_nonzero"], ["dq"]),
             helper.make_node("Constant", [], ["zp_zero"], value=numpy_helper.from_array(np.zeros(1, np.int8))),
             helper.make_node("QuantizeLinear", ["dq", "s", "zp_zero"], ["q2"]),
             helper.make_node("DequantizeLinear", ["q2", "s", "zp_zero"], ["y"])]
    graph = helper.make_graph(
        nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        initializer=[numpy_helper.from_array(np.array(0.1, np.float32), "s"),
                     numpy_helper.from_array(np.array(3, np.int8), "zp_nonzero")])
    path = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    assert nonzero_zero_points(path) == ["zp_nonzero"]
    assert quantized_node_counts(path) == {"QuantizeLinear": 2, "DequantizeLinear": 2}


def test_constant_subgraphs_are_folded_names_kept(tmp_path: Path) -> None:
    import onnx

    source = tmp_path / "foldable.onnx"
    onnx.save(_tiny_model(foldable=True), str(source))
    dest = tmp_path / "fp32.onnx"
    prepare(source, dest, "fp32")
    graph = onnx.load(str(dest)).graph
    ops = [n.op_type for n in graph.node]
    assert not {"Add", "Shape", "Gather", "Unsqueeze", "Concat"} & set(ops), ops
    assert "Reshape" in ops
    initializers = {i.name for i in graph.initializer}
    assert {"w1", "flat_shape"} <= initializers and not {"w1a", "w1b"} & initializers
    assert {o for n in graph.node for o in n.output} >= {"c1", "r1", "c2", "r2", "pool", "flat", "logits"}
    batch = _data(6, 5)
    np.testing.assert_allclose(_run(dest, batch), _reference(source, batch), atol=1e-4, rtol=1e-4)


def test_missing_cache_and_unknown_precision(tiny, tmp_path: Path) -> None:
    source, _ = tiny
    for cache in (None, tmp_path / "absent.calib.json"):
        with pytest.raises(UserError, match=r"INT8 needs a calibration cache.*Run `make calibrate`") as error:
            prepare(source, tmp_path / "int8.onnx", "int8", cache)
        assert error.value.exit_code == 1
    with pytest.raises(UserError, match=r"precisions fp32, fp16, int8, not 'bf16'"):
        prepare(source, tmp_path / "bf16.onnx", "bf16")
    assert not list(tmp_path.glob("*.onnx"))


def test_external_data_is_refused(tmp_path: Path) -> None:
    import onnx

    source = tmp_path / "external.onnx"
    onnx.save(_tiny_model(), str(source), save_as_external_data=True, all_tensors_to_one_file=True,
              location="external.data", size_threshold=0)
    with pytest.raises(UserError, match="external data files, which TensorRT engine builds do not support yet"):
        prepare(source, tmp_path / "fp32.onnx", "fp32")
    assert not (tmp_path / "fp32.onnx").exists()


def test_unreadable_source(tmp_path: Path) -> None:
    source = tmp_path / "broken.onnx"
    source.write_bytes(b"\x08\x07 not a model")
    with pytest.raises(ort_builder.UnreadableModel):
        prepare(source, tmp_path / "fp32.onnx", "fp32")


def test_reference_session_runs_qdq_as_written(built: dict[str, Path]) -> None:
    import onnxruntime as ort

    session = cpu_reference_session(built["int8"], threads=1)
    options = session.get_session_options()
    assert options.graph_optimization_level == ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    assert options.intra_op_num_threads == 1
    assert session.get_providers() == ["CPUExecutionProvider"]


# -- MobileNetV2 on imagenet_sample -------------------------------------------------------------------

@pytest.fixture(scope="module")
def imagenet_mobilenet(tmp_path_factory):
    """MobileNetV2 and the preprocessed imagenet_sample, fetched and preprocessed by the toolkit, in a scratch whose
    calibration caches stay under the test's folder."""
    from code.common.paths import Paths
    from code.main import main
    from tests.conftest import MOBILENET, SHARED, seed_downloads

    if not (SHARED / "data" / "imagenet_sample").is_dir():
        pytest.skip(f"{SHARED / 'data' / 'imagenet_sample'} is absent: the shared evaluation data lives beside the "
                    "repository")
    root = tmp_path_factory.mktemp("imagenet")
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs", repo=root)
    seed_downloads(paths, MOBILENET)
    args = ["--benchmarks=resnet50", "--model=mobilenet_v2", "--dataset=imagenet_sample", "--scenarios=offline",
            f"--scratch_path={paths.scratch}", f"--log_dir={paths.log_dir}"]
    for action in ("download_model", "download_data", "preprocess_data"):
        assert main([f"--action={action}", *args], log=lambda _: None) == 0, action
    return paths


def _calibration_config():
    """What the toolkit calibrates MobileNetV2 on imagenet_sample with: resnet50's calibration count."""
    from code.common.config_registry import ConfigKey, ResolvedConfig
    from code.common.constants import Scenario, WorkloadSetting
    from configs.resnet50 import ResNet50Base

    values = {"model": "mobilenet_v2", "dataset": "imagenet_sample", "backend": "tensorrt", "precision": "int8",
              "batch_size": 32, "calibration_images": ResNet50Base.calibration_images}
    sources = {k: "config class" for k in values}
    return ResolvedConfig(ConfigKey("resnet50", Scenario.Offline, "Test_CPUx2", WorkloadSetting()), "test", "exact",
                          MappingProxyType(values), MappingProxyType(sources))


def test_mobilenet_v2_int8_top1_within_one_point(shared_dir: Path, imagenet_mobilenet, tmp_path: Path) -> None:
    from code.common.harness.engine_build import calibrate
    from code.resnet50 import models, preprocessing
    from code.resnet50.benchmark import BENCHMARK

    paths, start = imagenet_mobilenet, time.perf_counter()
    cache = calibrate(_calibration_config(), paths, BENCHMARK, lambda _: None)
    assert json.loads(cache.read_text())["toolkit_inputs"]["samples"] == 500
    source = paths.model_file("resnet50", "mobilenet_v2")
    fp32, int8 = tmp_path / "fp32.onnx", tmp_path / "int8.onnx"
    prepare(source, fp32, "fp32")
    prepare(source, int8, "int8", cache)
    assert nonzero_zero_points(int8) == []
    counts = quantized_node_counts(int8)

    images = preprocessing.preprocessed("mobilenet_v2", "imagenet_sample", paths)
    labels = np.asarray(images.labels) + models.facts("mobilenet_v2").label_offset
    sessions = {"fp32": cpu_reference_session(fp32), "int8": cpu_reference_session(int8)}
    predictions: dict[str, list[np.ndarray]] = {name: [] for name in sessions}
    for first in range(0, len(images), 100):
        batch = np.stack([images.load(i) for i in range(first, min(first + 100, len(images)))])
        for name, session in sessions.items():
            predictions[name].append(session.run(None, {"input": batch})[0].argmax(axis=1))
    correct = {name: int((np.concatenate(p) == labels).sum()) for name, p in predictions.items()}
    agree = int((np.concatenate(predictions["fp32"]) == np.concatenate(predictions["int8"])).sum())
    print(f"MobileNetV2 imagenet_sample top-1: fp32 {correct['fp32'] / 10:.1f} %, int8 {correct['int8'] / 10:.1f} % "
          f"({agree / 10:.1f} % same class); {counts}; {time.perf_counter() - start:.0f} s")
    assert len(labels) == 1000 and abs(correct["fp32"] - 838) <= 5, correct   # torchvision's 83.8 %
    assert correct["fp32"] - correct["int8"] <= 10, correct                  # within 1 point of top-1
