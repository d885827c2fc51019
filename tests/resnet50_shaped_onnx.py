"""A ResNet-50-shaped ONNX model with random weights, written with the `onnx` helpers (no torch): the layer kinds
and shapes of ResNet-50 v1.5 as MLPerf's reference model has them, for tests that need that graph but not its
accuracy (TensorRT plan builds).

Stem: 7x7/2 convolution (64), BatchNormalization, ReLU, 3x3/2 max pool. Four stages of bottleneck blocks (3, 4,
6, 3 blocks; widths 64, 128, 256, 512, expanded 4x): 1x1 -> 3x3 (stride 2 in the first block of stages 2-4, on
the 3x3 as in v1.5) -> 1x1 convolutions, each followed by BatchNormalization, ReLU after the first two and after
the residual Add; the first block of each stage projects its shortcut with a strided 1x1 convolution and
BatchNormalization. Then global average pool, flatten and a 2048 -> 1000 fully connected layer. Input `input`
[N, 3, 224, 224] float32 with a dynamic batch, output `logits` [N, 1000]. 53 convolutions, 53 BatchNormalizations,
16 residual Adds, 25.6 M parameters, as ResNet-50.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

INPUT_NAME, OUTPUT_NAME = "input", "logits"
INPUT_SHAPE = (3, 224, 224)
CLASSES = 1000
STAGES = ((3, 64, 1), (4, 128, 2), (6, 256, 2), (3, 512, 2))   # (blocks, width, stride of the first block)
EXPANSION = 4


class _Graph:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.initializers: list = []

    def _constant(self, name: str, value: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(value.astype(np.float32), name))
        return name

    def conv_bn(self, x: str, name: str, c_in: int, c_out: int, kernel: int, stride: int = 1,
                relu: bool = True, last_in_block: bool = False) -> str:
        """Conv (He-initialised, no bias) -> BatchNormalization (-> ReLU); returns the output tensor's name."""
        from onnx import helper

        weight = self.rng.normal(0, np.sqrt(2.0 / (c_in * kernel * kernel)), (c_out, c_in, kernel, kernel))
        pad = kernel // 2
        self.nodes.append(helper.make_node(
            "Conv", [x, self._constant(f"{name}.weight", weight)], [f"{name}.conv"], name=f"{name}.conv",
            kernel_shape=[kernel, kernel], strides=[stride, stride], pads=[pad] * 4))
        # A block's last BatchNormalization starts small (as zero-init-residual training leaves it), so that
        # activations keep their scale through 16 residual Adds.
        gamma = self.rng.uniform(0.1, 0.3, c_out) if last_in_block else self.rng.uniform(0.8, 1.2, c_out)
        bn = [self._constant(f"{name}.bn.{part}", value) for part, value in (
            ("scale", gamma), ("bias", self.rng.normal(0, 0.1, c_out)), ("mean", self.rng.normal(0, 0.1, c_out)),
            ("var", self.rng.uniform(0.5, 1.5, c_out)))]
        out = f"{name}.bn"
        self.nodes.append(helper.make_node("BatchNormalization", [f"{name}.conv", *bn], [out], name=out,
                                           epsilon=1e-5))
        if not relu:
            return out
        self.nodes.append(helper.make_node("Relu", [out], [f"{name}.relu"], name=f"{name}.relu"))
        return f"{name}.relu"

    def bottleneck(self, x: str, name: str, c_in: int, width: int, stride: int) -> str:
        from onnx import helper

        c_out = width * EXPANSION
        y = self.conv_bn(x, f"{name}.1", c_in, width, 1)
        y = self.conv_bn(y, f"{name}.2", width, width, 3, stride)
        y = self.conv_bn(y, f"{name}.3", width, c_out, 1, relu=False, last_in_block=True)
        shortcut = x if (c_in == c_out and stride == 1) else \
            self.conv_bn(x, f"{name}.downsample", c_in, c_out, 1, stride, relu=False)
        self.nodes.append(helper.make_node("Add", [y, shortcut], [f"{name}.add"], name=f"{name}.add"))
        self.nodes.append(helper.make_node("Relu", [f"{name}.add"], [f"{name}.out"], name=f"{name}.out"))
        return f"{name}.out"


def build_onnx(seed: int = 0):
    """The model as an onnx.ModelProto (opset 13, IR 8)."""
    import onnx
    from onnx import TensorProto, helper

    g = _Graph(seed)
    x = g.conv_bn(INPUT_NAME, "stem", INPUT_SHAPE[0], 64, 7, 2)
    g.nodes.append(helper.make_node("MaxPool", [x], ["stem.pool"], name="stem.pool", kernel_shape=[3, 3],
                                    strides=[2, 2], pads=[1, 1, 1, 1]))
    x, channels = "stem.pool", 64
    for stage, (blocks, width, stride) in enumerate(STAGES, start=1):
        for block in range(blocks):
            x = g.bottleneck(x, f"layer{stage}.{block}", channels, width, stride if block == 0 else 1)
            channels = width * EXPANSION
    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="pool"))
    g.nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flatten"))
    fc_w = g._constant("fc.weight", g.rng.normal(0, np.sqrt(1.0 / channels), (CLASSES, channels)))
    fc_b = g._constant("fc.bias", np.zeros(CLASSES))
    g.nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], [OUTPUT_NAME], name="fc", transB=1))
    graph = helper.make_graph(
        g.nodes, "resnet50_shaped",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["N", *INPUT_SHAPE])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["N", CLASSES])], initializer=g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def write(path: Path, seed: int = 0) -> Path:
    import onnx

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(build_onnx(seed), str(path))
    return path
