"""The ONNX model a TensorRT engine is built from, prepared on the CPU (no GPU, no TensorRT needed).

TensorRT 11 builds strongly typed networks and has no precision flags: the precision lives in the ONNX file.
- fp32: the model as is (dynamic batch dimension, constants folded).
- fp16: every float tensor converted to float16 by onnxconverter-common, inputs and outputs kept float32, so
  the harness feeds and reads float32 on every precision.
- int8: explicit quantization, QDQ, by ONNX Runtime's quantize_static from the toolkit's calibration cache (the
  cache the ONNX Runtime engines use: its tensor names refer to onnxruntime_builder.prepare_model's graph), in the
  form TensorRT's INT8 kernels take: symmetric scales (every zero point 0), activations and weights QInt8 over the
  full 8 bits (no reduce_range: TensorRT accumulates in int32, no int16 saturation), weights per output channel,
  biases left in float (TensorRT adds them in its own precision). Q/DQ pairs sit where TensorRT's placement
  guidance puts them: on the inputs of weighted ops (Conv, ConvTranspose, Gemm, MatMul) only, not on their
  outputs; TensorRT fuses DQ -> Conv -> activation -> Q (the next layer's input) into one INT8 kernel. A
  convolution whose outputs each sum fewer than MIN_INT8_REDUCTION products (input channels per group x kernel
  area: depthwise 3x3 convolutions sum 9) stays in float: so few products do not average out the rounding of
  their 8-bit inputs.

Steps: onnxruntime_builder.prepare_model (dynamic batch; for int8 also ORT's quant_pre_process), then what
`polygraphy surgeon sanitize --fold-constants --cleanup --toposort` does, through Polygraphy's Python API (shape
inference, dead-node removal, topological sort, constant folding with ONNX-GraphSurgeon and ONNX Runtime, shape
inference again; the names of the tensors that remain are kept, so calibrated ranges still apply), then the
precision. Folding comes before quantization: folding a QDQ model would fold the weights' DequantizeLinear away.

INT8 choices, measured with torchvision MobileNetV2 on ../shared/data/imagenet_sample (1000 images), the
toolkit's MinMax cache of 500 images (resnet50's calibration count, imagenet_sample's calibration list), scored
with cpu_reference_session; FP32 83.9 % top-1 (100-image cache in brackets):
- every op ORT can quantize, Q/DQ on outputs too (ORT's default placement), symmetric: 80.1 % (80.6 %);
  per-tensor weights: (79.6 %). Asymmetric QUInt8 activations would reach (83.1 %), but TensorRT takes only
  zero point 0: ReLU6 outputs, [0, 6], keep 7 of the 8 bits.
- Q/DQ on the inputs of weighted ops only: 80.6 % (79.8 %); leaving the first convolution in float too: 81.1 %.
- ...and depthwise convolutions in float: 82.9 % (83.4 %); with per-tensor weights 83.2 %.
- ...and every convolution of reduction under 32 in float (the 17 depthwise ones, the 3-channel stem, the 16- and
  24-channel pointwise ones; 21 of 52): 83.6 % (83.5 %), 95.1 % of the images classified as FP32 does. Chosen.
  Leaving the final Gemm in float as well changed nothing (82.9 % with the depthwise rule).
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import EXIT_FAILURE, UserError
from ..fileio import atomic_path
from . import int8_input
from . import onnxruntime_builder as ort_builder

if TYPE_CHECKING:
    import onnx
    import onnxruntime

PRECISIONS = ("fp32", "fp16", "int8")
QUANTIZATION = ("QDQ on inputs of Conv/ConvTranspose/Gemm/MatMul; activations QInt8 symmetric; weights QInt8 "
                "symmetric per-channel, 8-bit; biases float; convs of reduction < 32 float; ORT quantize_static")
MIN_INT8_REDUCTION = 32            # a Conv whose outputs sum fewer products than this stays in float
_WEIGHTED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")
_QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")
_QUANTIZE_OPTIONS: dict[str, Any] = {
    "ActivationSymmetric": True,    # zero point 0: TensorRT supports symmetric quantization only
    "WeightSymmetric": True,
    "QuantizeBias": False,          # TensorRT adds biases in its own precision; int32 biases are ORT's convention
}


def check_precision(precision: str) -> None:
    if precision not in PRECISIONS:
        raise UserError(f"TensorRT engines support precisions {', '.join(PRECISIONS)}, not '{precision}'.")


def check_input_dtype(precision: str, input_dtype: str) -> None:
    """UserError unless `input_dtype` is one of int8_input.INPUT_DTYPES and fits `precision`."""
    if input_dtype not in int8_input.INPUT_DTYPES:
        raise UserError(f"input_dtype={input_dtype!r} is not valid. Valid choices: "
                        f"{', '.join(int8_input.INPUT_DTYPES)}.")
    if input_dtype == "int8" and precision != "int8":
        raise UserError(f"input_dtype=int8 goes with --precision=int8 (its scale comes from the INT8 calibration), "
                        f"not {precision}.")


def _require_cache(calibration_cache: Path | None) -> Path:
    if calibration_cache is None or not Path(calibration_cache).is_file():
        raise UserError(f"INT8 needs a calibration cache; {calibration_cache} is missing. Run `make calibrate`.",
                        exit_code=EXIT_FAILURE)
    return Path(calibration_cache)


def _uses_external_data(model: "onnx.ModelProto") -> bool:
    from onnx.external_data_helper import uses_external_data

    tensors = [*model.graph.initializer, *model.graph.sparse_initializer]
    for node in model.graph.node:
        tensors.extend(a.t for a in node.attribute if a.HasField("t"))
    return any(uses_external_data(t) for t in tensors if hasattr(t, "data_location"))


def _check_source(source: Path) -> None:
    """UnreadableModel for a file that is not ONNX; UserError for a model with external data (not supported)."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(source), load_external_data=False)
    except (DecodeError, OSError, ValueError) as error:
        raise ort_builder.UnreadableModel(str(error)) from None
    if _uses_external_data(model):
        raise UserError(f"{source} keeps its weights in external data files, which TensorRT engine builds do not "
                        "support yet. Use the model saved as one .onnx file (possible under 2 GB).",
                        exit_code=EXIT_FAILURE)


def sanitize(model_path: Path) -> "onnx.ModelProto":
    """What `polygraphy surgeon sanitize --fold-constants --cleanup --toposort` does to the model at
    `model_path`: shape inference, cleanup and topological sort, constant folding (passes until nothing more
    folds), shape inference. Tensor names of what remains are unchanged."""
    import onnx
    import onnx_graphsurgeon as gs
    from polygraphy.backend.onnx import fold_constants, gs_from_onnx, infer_shapes
    from polygraphy.logger import G_LOGGER

    source = onnx.load(str(model_path))
    # ONNX's shape inference throughout: ONNX Runtime's symbolic one (Polygraphy's default) needs sympy, and is
    # for transformer-style dynamic shapes; a CNN's shapes need only ONNX's.
    with G_LOGGER.verbosity(G_LOGGER.WARNING):
        graph = gs_from_onnx(infer_shapes(source, allow_onnxruntime=False))
        graph.cleanup().toposort()
        model = fold_constants(gs.export_onnx(graph), allow_onnxruntime_shape_inference=False)
        model = infer_shapes(model, allow_onnxruntime=False)
    nodes = [*model.graph.node, *(node for function in model.functions for node in function.node)]
    used = {node.domain for node in nodes} | {"", "ai.onnx"}
    kept = [opset for opset in model.opset_import if opset.domain in used]
    del model.opset_import[:]
    model.opset_import.extend(kept)          # the domains the graph uses, as the source declared them
    del model.metadata_props[:]
    model.metadata_props.extend(source.metadata_props)   # e.g. ORT's mark that quant_pre_process ran
    _name_nodes(model.graph)
    return model


def _name_nodes(graph: "onnx.GraphProto") -> None:
    """Give unnamed nodes unique names: quantization excludes nodes by name."""
    taken = {node.name for node in graph.node}
    for index, node in enumerate(graph.node):
        if not node.name:
            name = f"{node.op_type}_{index}"
            while name in taken:
                name += "_"
            node.name = name
            taken.add(name)


def float_convolutions(model: Path) -> list[str]:
    """Names of the Conv nodes that stay in float in an INT8 model: those whose every output sums fewer than
    MIN_INT8_REDUCTION products (input channels per group x kernel area), e.g. depthwise convolutions."""
    import numpy as np
    import onnx

    graph = onnx.load(str(model), load_external_data=False).graph
    shapes = {i.name: list(i.dims) for i in graph.initializer}
    return [node.name for node in graph.node
            if node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in shapes
            and int(np.prod(shapes[node.input[1]][1:])) < MIN_INT8_REDUCTION]


def _to_fp16(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """float16 everywhere but the model's inputs and outputs (Casts at the boundary)."""
    import warnings

    from onnxconverter_common import float16

    with warnings.catch_warnings():
        # One warning per weight value outside float16's range (e.g. 1e-8 kept as 1e-7): expected, not news.
        warnings.filterwarnings("ignore", message="the float32 number", category=UserWarning)
        return float16.convert_float_to_float16(model, keep_io_types=True)


def _quantize(model: Path, cache: Path, dest: Path) -> None:
    """Static QDQ quantization of `model` (prepared for quantization, sanitized) with the cached ranges; no
    calibration run here. Nodes that touch a tensor of non-finite range stay in float, and so do the
    float_convolutions."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.calibrate import load_tensors_data

    bad = ort_builder.non_finite_ranges(cache)
    excluded = [*ort_builder.nodes_touching(model, bad), *float_convolutions(model)]
    if bad:   # the ranges without them: no quantization parameters are computed from an infinite range
        payload = json.loads(Path(cache).read_text())
        payload["data"] = {name: entry for name, entry in payload["data"].items() if name not in bad}
        cache = dest.with_name("finite_ranges.json")
        cache.write_text(json.dumps(payload))
    method = load_tensors_data(cache).calibration_method   # quantize_static insists it matches the cache's
    quantize_static(str(model), str(dest), calibration_data_reader=None, quant_format=QuantFormat.QDQ,
                    per_channel=True, reduce_range=False, activation_type=QuantType.QInt8,
                    weight_type=QuantType.QInt8, calibrate_method=method, calibration_cache_path=str(cache),
                    op_types_to_quantize=list(_WEIGHTED_OPS), nodes_to_exclude=excluded,
                    # no Q/DQ on their outputs: the next weighted op's input Q/DQ quantizes what they feed it
                    extra_options={**_QUANTIZE_OPTIONS, "OpTypesToExcludeOutputQuantization": list(_WEIGHTED_OPS)})


def prepare(source: Path, dest: Path, precision: str, calibration_cache: Path | None = None,
            input_dtype: str = "fp32") -> None:
    """Write to `dest` (atomically) the ONNX model TensorRT parses for `precision` ("fp32", "fp16", "int8");
    input_dtype "int8" (int8 precision only) makes the model's inputs int8 with their calibrated scales
    (int8_input.py).

    UserError for an unknown precision, a missing calibration cache (int8) or a model with external data;
    onnxruntime_builder.UnreadableModel when `source` is not readable ONNX."""
    import onnx

    check_precision(precision)
    check_input_dtype(precision, input_dtype)
    cache = _require_cache(calibration_cache) if precision == "int8" else None
    _check_source(Path(source))
    with tempfile.TemporaryDirectory(prefix="tensorrt_onnx.") as tmp:
        work = Path(tmp)
        prepared = ort_builder.prepare_model(Path(source), work, for_quantization=cache is not None)
        model = sanitize(prepared)
        if precision == "fp16":
            model = _to_fp16(model)
        elif cache is not None:
            sanitized = work / "sanitized.onnx"
            onnx.save(model, str(sanitized))
            quantized = work / "quantized.onnx"
            _quantize(sanitized, cache, quantized)
            model = onnx.load(str(quantized))
            if input_dtype == "int8":
                model = int8_input.with_int8_input(model, int8_input.int8_input_scales(model, cache))
        with atomic_path(Path(dest), ".tmp.onnx") as out:
            onnx.save(model, str(out))


def _constant_values(graph: "onnx.GraphProto") -> dict[str, Any]:
    """Initializers and Constant node outputs of `graph`, as numpy arrays."""
    from onnx import numpy_helper

    values: dict[str, Any] = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    for node in graph.node:
        if node.op_type == "Constant":
            for attribute in node.attribute:
                if attribute.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(attribute.t)
    return values


def nonzero_zero_points(model: Path) -> list[str]:
    """Names of the zero points of QuantizeLinear/DequantizeLinear nodes that are not all zero (initializers or
    Constant outputs). [] means every quantization in the model is symmetric."""
    import numpy as np
    import onnx

    graph = onnx.load(str(model)).graph
    values = _constant_values(graph)
    names = {n.input[2] for n in graph.node if n.op_type in _QDQ_OPS and len(n.input) > 2 and n.input[2]}
    return sorted(name for name in names
                  if name not in values or np.any(np.asarray(values[name]).astype(np.float64) != 0))


def quantized_node_counts(model: Path) -> dict[str, int]:
    """{"QuantizeLinear": n, "DequantizeLinear": m} of the model's main graph."""
    import onnx

    nodes = onnx.load(str(model), load_external_data=False).graph.node
    return {op: sum(1 for n in nodes if n.op_type == op) for op in _QDQ_OPS}


def cpu_reference_session(model: Path, threads: int = 0) -> "onnxruntime.InferenceSession":
    """An ONNX Runtime CPU session that computes what TensorRT computes from the same QDQ model.

    Graph optimizations are disabled, so every QuantizeLinear/DequantizeLinear pair runs as written: fake
    quantization in float (round to the int8 grid, back to float, then the float op). That equals TensorRT's
    INT8 kernels (exact int8 products, int32 accumulation, rescale) up to float rounding. ORT's optimized CPU
    path would instead fuse the pairs into its own u8/s8 kernels, whose int16 saturation on x86 without VNNI is
    an artefact of that CPU, not the accuracy of the model. threads: intra-op threads, 0 lets ORT choose."""
    import onnxruntime as ort

    from .onnxruntime_session import session_options

    return ort.InferenceSession(str(model), session_options(threads, level="ORT_DISABLE_ALL"),
                                providers=["CPUExecutionProvider"])
