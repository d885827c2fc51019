"""An int8 engine input for INT8 plans, as NVIDIA's ResNet-50 harness feeds its engines (`input_dtype="int8"`,
`input_format="linear"`): the image is quantized once, in preprocessing, with the calibrated scale of the model's
input tensor, so a sample is 150 kB (3x224x224 int8) instead of 602 kB of float32, and the host copies, the PCIe
transfer and the preprocessed set on disk shrink fourfold.

- The scale is the one TensorRT's Q/DQ model uses for that tensor: symmetric, from the calibration cache's range
  of the graph input, computed by ONNX Runtime's own `compute_scale_zp` as `quantize_static` computes every
  activation scale (max |range| / 127, zero point 0).
- `quantize` is ONNX's QuantizeLinear (x / scale in float32, rounded half to even, saturated to -128..127), so a
  quantized sample dequantizes (`dequantize`, q * scale) to within half a scale step of the float sample, and to
  exactly what the Q/DQ model's own input QuantizeLinear would have made of it.
- `with_int8_input` rewrites a prepared INT8 Q/DQ model: the graph input keeps its name and becomes int8,
  followed by a DequantizeLinear with that scale. A QuantizeLinear that read the float input with the same scale
  is dropped and its readers read the int8 input (TensorRT then sees input -> DQ -> Conv, the shape it fuses into
  one INT8 convolution); other readers (a first convolution left in float, e.g. MobileNetV2's stem) read the
  dequantized tensor.

The rewritten model is both what TensorRT builds the plan from and what ONNX Runtime scores on the CPU
(tensorrt_onnx.cpu_reference_session), fed the same int8 samples.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping

import numpy as np

from ..benchmark_api import Log
from ..errors import EXIT_FAILURE, UserError
from ..preprocessed_store import PreprocessedSamples, Samples, SourceSample, Store, write_store

if TYPE_CHECKING:
    import onnx

INPUT_DTYPES = ("fp32", "int8")
DEQUANTIZED_SUFFIX = "_dequantized"


def input_scale(cache: Path, name: str) -> float:
    """The symmetric int8 scale of tensor `name` from an ONNX Runtime calibration cache (our cache files)."""
    from onnx import TensorProto
    from onnxruntime.quantization.calibrate import load_tensors_data
    from onnxruntime.quantization.quant_utils import compute_scale_zp, get_qmin_qmax_for_qType

    ranges = load_tensors_data(Path(cache))
    if name not in ranges:
        raise UserError(f"The calibration cache {cache} has no range for the input {name}; run make calibrate "
                        "again.", exit_code=EXIT_FAILURE)
    low, high = (np.asarray(v, dtype=np.float32).reshape(-1)[0] for v in ranges[name].range_value)
    if not (np.isfinite(low) and np.isfinite(high)):
        raise UserError(f"The calibrated range of input {name} is not finite: it cannot be fed as int8.",
                        exit_code=EXIT_FAILURE)
    qmin, qmax = get_qmin_qmax_for_qType(TensorProto.INT8, symmetric=True)
    _, scale = compute_scale_zp(low, high, qmin, qmax, symmetric=True)
    return float(np.asarray(scale, dtype=np.float32))


def quantize(values: np.ndarray, scale: float) -> np.ndarray:
    """ONNX QuantizeLinear with zero point 0: int8(saturate(round_half_even(values / scale)))."""
    scaled = np.asarray(values, dtype=np.float32) / np.float32(scale)
    return np.clip(np.rint(scaled), -128, 127).astype(np.int8)


def dequantize(values: np.ndarray, scale: float) -> np.ndarray:
    """ONNX DequantizeLinear with zero point 0."""
    return np.asarray(values).astype(np.float32) * np.float32(scale)


def _constant(graph: "onnx.GraphProto", name: str) -> np.ndarray | None:
    from onnx import numpy_helper

    for initializer in graph.initializer:
        if initializer.name == name:
            return numpy_helper.to_array(initializer)
    return None


def _same_quantizer(graph: "onnx.GraphProto", node: "onnx.NodeProto", scale: float) -> bool:
    """Whether QuantizeLinear `node` quantizes to int8 with `scale` and zero point 0."""
    found = _constant(graph, node.input[1])
    zero = _constant(graph, node.input[2]) if len(node.input) > 2 and node.input[2] else None
    return (found is not None and found.size == 1 and np.float32(found.reshape(-1)[0]) == np.float32(scale)
            and zero is not None and zero.dtype == np.int8 and not np.any(zero))


def with_int8_input(model: "onnx.ModelProto", scales: Mapping[str, float]) -> "onnx.ModelProto":
    """A copy of `model` whose inputs named in `scales` are int8, each dequantized with its scale (see above)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph = model.graph
    for name, scale in scales.items():
        value = next((v for v in graph.input if v.name == name), None)
        if value is None or value.type.tensor_type.elem_type != TensorProto.FLOAT:
            raise UserError(f"The model has no float input {name} to feed as int8.", exit_code=EXIT_FAILURE)
        value.type.tensor_type.elem_type = TensorProto.INT8
        dropped = [n for n in graph.node if n.op_type == "QuantizeLinear" and n.input[0] == name
                   and _same_quantizer(graph, n, scale)]
        renames = {n.output[0]: name for n in dropped}
        for node in dropped:
            graph.node.remove(node)
        dequantized = name + DEQUANTIZED_SUFFIX
        readers = False
        for node in graph.node:
            for index, tensor in enumerate(node.input):
                if tensor == name:
                    node.input[index], readers = dequantized, True
                elif tensor in renames:
                    node.input[index] = renames[tensor]
        if readers or any(o.name == name for o in graph.output):
            graph.initializer.extend([numpy_helper.from_array(np.array(scale, dtype=np.float32), name + "_scale"),
                                      numpy_helper.from_array(np.array(0, dtype=np.int8), name + "_zero_point")])
            graph.node.insert(0, helper.make_node("DequantizeLinear", [name, name + "_scale", name + "_zero_point"],
                                                  [dequantized], name=name + "_DequantizeLinear"))
    onnx.checker.check_model(model)
    return model


def int8_input_scales(model: "onnx.ModelProto", cache: Path) -> dict[str, float]:
    """The scale of every float graph input of `model` (initializers excluded), from the calibration cache."""
    from onnx import TensorProto

    initializers = {i.name for i in model.graph.initializer}
    return {v.name: input_scale(cache, v.name) for v in model.graph.input
            if v.name not in initializers and v.type.tensor_type.elem_type == TensorProto.FLOAT}


def write_int8_store(float_set: PreprocessedSamples, store: Store, scale: float, log: Log,
                     cls: type[Samples] = PreprocessedSamples) -> Samples:  # type: ignore[assignment]
    """Write (or reuse) `store`, the int8 form of `float_set` (int8_store), quantizing each float sample once."""
    samples = [SourceSample(float_set.directory / name, name, tuple(int(v) for v in float_set.values[index]))
               for index, name in enumerate(float_set.file_names)]
    return write_store(store, samples, lambda path: quantize(np.load(path, allow_pickle=False), scale), log,
                       float_set.hint, cls)
