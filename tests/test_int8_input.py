"""int8 engine inputs (engines/int8_input.py): ONNX's QuantizeLinear in numpy, the calibrated input scale, the Q/DQ
model rewritten to take int8, the int8 form of a preprocessed set, and the rule that picks it; on generated
networks and data. The ImageNet figures are in tests/test_int8_imagenet.py."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from code.common.engines import onnxruntime_builder as ort_builder
from code.common.engines import tensorrt_onnx
from code.common.engines.input_samples import wants_int8_input
from code.common.engines.int8_input import dequantize, input_scale, quantize, with_int8_input
from code.common.errors import UserError

SHAPE = (3, 16, 16)


def _conv_net(stem_kernel: int, seed: int = 0):
    """Conv 3->8 (stem_kernel x stem_kernel) + Relu, Conv 8->8 3x3 + Relu, GlobalAveragePool, Gemm to 10. A 7x7 stem
    sums 147 products and is quantized; a 3x3 one sums 27 and stays in float (tensorrt_onnx.MIN_INT8_REDUCTION)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    pad = stem_kernel // 2
    weights = {"w1": rng.normal(0, 0.2, (8, 3, stem_kernel, stem_kernel)), "b1": rng.normal(0, 0.1, 8),
               "w2": rng.normal(0, 0.2, (8, 8, 3, 3)), "b2": rng.normal(0, 0.1, 8),
               "fc_w": rng.normal(0, 0.3, (10, 8)), "fc_b": rng.normal(0, 0.1, 10)}
    nodes = [helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[pad] * 4),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1] * 4),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("GlobalAveragePool", ["r2"], ["pool"]),
             helper.make_node("Flatten", ["pool"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "net", [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", *SHAPE])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              initializer=[numpy_helper.from_array(v.astype(np.float32), k)
                                           for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _data(seed: int, count: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (count, *SHAPE)).astype(np.float32)


@pytest.fixture(scope="module", params=[7, 3], ids=["quantized stem", "float stem"])
def prepared(request, tmp_path_factory) -> dict:
    """The source net, its calibration cache, and the TensorRT INT8 model with float and with int8 input."""
    import onnx

    root = tmp_path_factory.mktemp(f"stem{request.param}")
    source = root / "net.onnx"
    onnx.save(_conv_net(request.param), str(source))
    prepared = ort_builder.prepare_model(source, root, for_quantization=True)
    data = _data(1, 40)
    cache = root / "net.calib.json"
    ort_builder.write_calibration_cache(cache, ort_builder.compute_ranges(
        prepared, ({"input": data[i:i + 10]} for i in range(0, 40, 10))), {"test": "random data"})
    float_input, int8_input = root / "float_input.onnx", root / "int8_input.onnx"
    tensorrt_onnx.prepare(source, float_input, "int8", cache)
    tensorrt_onnx.prepare(source, int8_input, "int8", cache, input_dtype="int8")
    return {"stem": request.param, "cache": cache, "float": float_input, "int8": int8_input}


def test_quantize_is_onnx_quantize_linear_and_comes_back_within_half_a_step() -> None:
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    scale = 0.0173
    values = np.random.default_rng(2).normal(0, 1, (4, *SHAPE)).astype(np.float32)
    values[0, 0, 0, :4] = [3.0, -3.0, 0.5 * scale, 1.5 * scale]          # saturated both ways; halves to even
    graph = helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"])], "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("q", TensorProto.INT8, None)],
        initializer=[numpy_helper.from_array(np.array(scale, np.float32), "s"),
                     numpy_helper.from_array(np.array(0, np.int8), "z")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    quantized = quantize(values, scale)
    assert quantized.dtype == np.int8 and quantized.nbytes * 4 == values.nbytes
    assert np.array_equal(quantized, session.run(None, {"x": values})[0])
    assert quantized[0, 0, 0, :4].tolist() == [127, -128, 0, 2]
    inside = np.abs(values) <= 127 * scale
    error = np.abs(dequantize(quantized, scale) - values)
    assert error[inside].max() <= scale / 2 * (1 + 1e-5)


def test_the_input_scale_is_the_one_the_qdq_model_quantizes_its_input_with(prepared) -> None:
    import onnx
    from onnx import numpy_helper

    graph = onnx.load(str(prepared["float"])).graph
    quantizers = [n for n in graph.node if n.op_type == "QuantizeLinear" and n.input[0] == "input"]
    if prepared["stem"] != 7:
        assert quantizers == []        # a float stem reads its input as floats: no scale to agree with
        return
    node = quantizers[0]
    found = next(numpy_helper.to_array(i) for i in graph.initializer if i.name == node.input[1])
    assert np.float32(found) == np.float32(input_scale(prepared["cache"], "input"))


def test_the_int8_input_model_computes_what_the_float_qdq_model_computes(prepared) -> None:
    import onnx

    model = onnx.load(str(prepared["int8"]))
    graph = model.graph
    assert graph.input[0].name == "input" and graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT8
    readers = [n for n in graph.node if "input" in n.input]
    assert [n.op_type for n in readers] == ["DequantizeLinear"]      # the int8 input goes to one dequantization
    follower = [n.op_type for n in graph.node if readers[0].output[0] in n.input]
    assert follower == ["Conv"]     # quantized stem: its Q/DQ input pair became this one DequantizeLinear
    assert sum(n.op_type == "QuantizeLinear" and n.input[0] == "input" for n in graph.node) == 0
    assert tensorrt_onnx.nonzero_zero_points(prepared["int8"]) == []

    scale = input_scale(prepared["cache"], "input")
    data = _data(5, 6)
    as_int8 = quantize(data, scale)
    got = tensorrt_onnx.cpu_reference_session(prepared["int8"]).run(None, {"input": as_int8})[0]
    reference = tensorrt_onnx.cpu_reference_session(prepared["float"])
    if prepared["stem"] == 7:   # the float model quantizes its input with the same scale first: the same numbers
        expected = reference.run(None, {"input": data})[0]
    else:                       # a float stem sees the dequantized sample
        expected = reference.run(None, {"input": dequantize(as_int8, scale)})[0]
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


def test_int8_input_is_refused_where_it_does_not_fit(tmp_path: Path) -> None:
    import onnx

    source = tmp_path / "net.onnx"
    onnx.save(_conv_net(7), str(source))
    with pytest.raises(UserError, match="input_dtype=int8 goes with --precision=int8"):
        tensorrt_onnx.prepare(source, tmp_path / "x.onnx", "fp16", input_dtype="int8")
    with pytest.raises(UserError, match="Valid choices: fp32, int8"):
        tensorrt_onnx.prepare(source, tmp_path / "x.onnx", "int8", input_dtype="uint4")
    with pytest.raises(UserError, match="no float input nothing"):
        with_int8_input(onnx.load(str(source)), {"nothing": 0.1})
    with pytest.raises(UserError, match="for TensorRT INT8 engines"):
        wants_int8_input({"input_dtype": "int8", "backend": "onnxruntime", "precision": "int8"})
    assert not wants_int8_input({"backend": "tensorrt", "precision": "int8"})
    assert wants_int8_input({"input_dtype": "int8", "backend": "tensorrt", "precision": "int8"})


def test_the_int8_form_of_a_preprocessed_set(tmp_path: Path) -> None:
    from code.common.engines.int8_input import write_int8_store
    from code.common.preprocessed_store import SourceSample, Store, int8_store, open_store, write_store

    raw = tmp_path / "raw"
    raw.mkdir()
    data = _data(7, 12)
    for index, sample in enumerate(data):
        np.save(raw / f"s{index}.npy", sample)
    store = Store(benchmark="resnet50", model="net", dataset="generated", directory=tmp_path / "pre" / "net",
                  map_name="val_map.txt", columns=("label",), shape=SHAPE, dtype="float32",
                  preprocessing="generated v1", sources={"count": len(data), "source": "generated"})
    floats = write_store(store, [SourceSample(raw / f"s{i}.npy", f"s{i}.npy", (i % 3,)) for i in range(len(data))],
                         lambda path: np.load(path), lambda _: None, "make download_data")
    scale = 0.02
    hint = " --backend=tensorrt --precision=int8 --input_dtype=int8"
    written = write_int8_store(floats, int8_store(store, scale, hint), scale, lambda _: None)
    assert written.directory == tmp_path / "pre" / "net-int8"
    assert written.column("label").tolist() == floats.column("label").tolist()
    for index in range(len(data)):
        sample = written.load(index)
        assert sample.dtype == np.int8 and sample.nbytes * 4 == floats.load(index).nbytes
        inside = np.abs(data[index]) <= 127 * scale
        assert np.abs(dequantize(sample, scale) - data[index])[inside].max() <= scale / 2 * (1 + 1e-5)
    assert open_store(int8_store(store, scale, hint)).file_names == written.file_names
    with pytest.raises(UserError, match=r"stale \(preprocessing changed\).*--input_dtype=int8"):
        open_store(int8_store(store, 0.03, hint))          # another calibration: another scale


def test_the_harness_feeds_the_engine_the_input_type_it_takes() -> None:
    from code.common.engines.input_samples import engine_inputs
    from code.resnet50.benchmark import BENCHMARK

    fields = {"model": "mobilenet_v2", "backend": "tensorrt", "precision": "int8"}
    (as_float,) = engine_inputs(BENCHMARK, fields)
    (as_int8,) = engine_inputs(BENCHMARK, {**fields, "input_dtype": "int8"})
    assert (as_float.dtype, as_int8.dtype) == ("float32", "int8")
    assert as_int8.name == as_float.name and as_int8.shape == as_float.shape == (3, 224, 224)
