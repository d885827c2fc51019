"""A small convolutional network generated from a seed (random weights, batch fixed at 1): the model `make
selftest_gpu` builds into TensorRT plans and compares with ONNX Runtime. Its outputs mean nothing; equality does."""
from __future__ import annotations

from pathlib import Path

import numpy as np

INPUT_NAME, OUTPUT_NAME = "input", "logits"
INPUT_SHAPE = (3, 32, 32)
CLASSES = 10


def write_conv_net(path: Path, seed: int = 0) -> Path:
    """Conv-ReLU, strided Conv-ReLU, global average pool, fully connected: the layer kinds of an image
    classifier, in opset 13, saved to `path`."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    weights = {
        "w1": rng.normal(0, 0.3, (16, 3, 3, 3)), "b1": rng.normal(0, 0.1, 16),
        "w2": rng.normal(0, 0.15, (32, 16, 3, 3)), "b2": rng.normal(0, 0.1, 32),
        "fc_w": rng.normal(0, 0.3, (CLASSES, 32)), "fc_b": rng.normal(0, 0.1, CLASSES),
    }
    nodes = [
        helper.make_node("Conv", [INPUT_NAME, "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], name="conv1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv2"),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["pool"], name="pool"),
        helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], [OUTPUT_NAME], transB=1, name="fc"),
    ]
    graph = helper.make_graph(
        nodes, "probe", [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, [1, *INPUT_SHAPE])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [1, CLASSES])],
        initializer=[numpy_helper.from_array(v.astype(np.float32), k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def inputs(count: int, seed: int = 1) -> np.ndarray:
    """`count` input samples drawn from a standard normal distribution, like normalised images."""
    return np.random.default_rng(seed).normal(0, 1, (count, *INPUT_SHAPE)).astype(np.float32)


def write_calibration_cache(model: Path, cache: Path, work: Path, count: int = 32) -> Path:
    """INT8 ranges of `model` over `count` generated samples, in the toolkit's calibration cache format."""
    from . import onnxruntime_builder as ort_builder

    prepared = ort_builder.prepare_model(model, work, for_quantization=True)
    data = inputs(count, seed=7)
    ranges = ort_builder.compute_ranges(prepared, ({INPUT_NAME: data[i:i + 8]} for i in range(0, count, 8)))
    ort_builder.write_calibration_cache(cache, ranges, {"probe": True, "count": count})
    return cache
