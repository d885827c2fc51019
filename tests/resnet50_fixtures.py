"""Test fixtures for benchmark resnet50."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np

NUM_CLASSES_WITH_BACKGROUND = 1001


def make_reference_like_model(path: Path, seed: int = 0) -> Path:
    """A tiny ONNX model with the MLPerf ResNet50-v1.5 reference's interface, and RANDOM weights.

    Interface as in resnet50_v1.onnx: input `input_tensor:0` float32 [N,3,224,224]; outputs `ArgMax:0`
    int64 [N] (class 1..1000, 0 = background) and `softmax_tensor:0` float32 [N,1001], in that order.
    Body: Conv 3->8 (stride 4) + Relu + GlobalAveragePool + Flatten + Gemm to 1001 classes.

    Its weights are random (seeded), so its predictions are arbitrary and ITS ACCURACY IS MEANINGLESS:
    use it to test plumbing (names, shapes, dtypes, label offset), never to judge a pipeline's accuracy.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    init = [
        numpy_helper.from_array(rng.normal(0, 0.1, (8, 3, 3, 3)).astype(np.float32), "conv.weight"),
        numpy_helper.from_array(rng.normal(0, 0.1, 8).astype(np.float32), "conv.bias"),
        numpy_helper.from_array(rng.normal(0, 1.0, (NUM_CLASSES_WITH_BACKGROUND, 8)).astype(np.float32), "fc.weight"),
        numpy_helper.from_array(rng.normal(0, 0.1, NUM_CLASSES_WITH_BACKGROUND).astype(np.float32), "fc.bias"),
    ]
    nodes = [
        helper.make_node("Conv", ["input_tensor:0", "conv.weight", "conv.bias"], ["conv"], kernel_shape=[3, 3],
                         strides=[4, 4], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["conv"], ["relu"]),
        helper.make_node("GlobalAveragePool", ["relu"], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], transB=1),
        helper.make_node("Softmax", ["logits"], ["softmax_tensor:0"], axis=1),
        helper.make_node("ArgMax", ["logits"], ["ArgMax:0"], axis=1, keepdims=0),
    ]
    graph = helper.make_graph(
        nodes, "resnet50_v1_reference_like",
        [helper.make_tensor_value_info("input_tensor:0", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("ArgMax:0", TensorProto.INT64, ["N"]),
         helper.make_tensor_value_info("softmax_tensor:0", TensorProto.FLOAT, ["N", NUM_CLASSES_WITH_BACKGROUND])],
        initializer=init,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              doc_string="random weights: interface test fixture, accuracy meaningless")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, path)
    return path


def write_accuracy_log(path: Path, responses: Iterable[tuple[int, np.ndarray]]) -> Path:
    """An mlperf_log_accuracy.json as LoadGen writes it, from (qsl_idx, response array) pairs."""
    entries = [{"seq_id": seq, "qsl_idx": int(index), "data": np.asarray(data).tobytes().hex().upper()}
               for seq, (index, data) in enumerate(responses)]
    path.write_text(json.dumps(entries))
    return path
