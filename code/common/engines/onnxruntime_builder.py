"""ONNX Runtime engines: an ONNX model -> an optimized ONNX model (FP32, or INT8 by static quantization).

Choices, measured with torchvision MobileNetV2 on ../shared/data/imagenet_sample (1000 images), 100 calibration
images (every tenth), ORT 1.31.1 on a 2-core AMD EPYC (AVX2, no VNNI), batch 32, 2 threads:

- Saved at ORT_ENABLE_EXTENDED, not ALL: ALL bakes in the NCHWc layout of this CPU's vector width (ORT warns the
  file "should only be used in the same environment"); the backend applies that layout at load (see
  backends/onnxruntime_backend.py), so nothing is lost: both run FP32 at ~205 img/s here. For INT8 the saved file
  already holds the fused QLinearConv/QLinearAdd/QGemm graph; it runs as fast as fusing the QDQ model at load.
- INT8 is QDQ (ORT's recommended format; TensorRT reads the same format), weights QInt8 per channel with
  reduce_range (7-bit), activations QUInt8. Without VNNI, x86 u8*s8 dot products (vpmaddubsw) saturate at int16:
  full 8-bit weights fall to 74.1 % top-1, 7-bit ones give 82.9 % (FP32 83.9 %). QInt8 activations run at FP32
  speed on x86 (no fast s8*s8 kernel) and reach 76.6 %. Per-tensor weights: 75.8 %, no faster.
- Ranges by MinMax: 82.9 % (calibration 6 s); Percentile 99.999 81.0 % symmetric / 82.6 % asymmetric (15 s);
  Entropy (128 bins) 81.5 % (16 s).
- Result: INT8 82.9 % vs FP32 83.9 % top-1; ~310 vs ~200 img/s (1.55x); engine 3.7 MB vs 14 MB.
"""
from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import numpy as np

from ..errors import EXIT_FAILURE, UserError
from ..fileio import atomic_path

if TYPE_CHECKING:
    from onnxruntime.quantization import TensorsData

OPT_LEVEL = "ORT_ENABLE_EXTENDED"
CALIBRATION_METHOD = "MinMax"      # the default; calibration_ranges.py computes the others
QUANTIZATION = "QDQ; weights QInt8 per-channel reduce_range; activations QUInt8; ORT quantize_static"
SUPPORTED_PRECISIONS = ("fp32", "int8")
_CACHE_KEY = "toolkit_inputs"   # our key in ORT's calibration JSON; ORT's loader ignores keys it does not know


class UnreadableModel(Exception):
    """The source model file does not parse as ONNX (truncated or damaged)."""


def runtime_version() -> str:
    import onnxruntime as ort

    return f"onnxruntime {ort.__version__}"


def check_precision(precision: str) -> None:
    if precision == "fp16":
        raise UserError("fp16 engines need the GPU backend: ONNX Runtime's CPU provider has no fp16 kernels for "
                        "these models. Use --precision=fp32 or --precision=int8 here, or --backend=tensorrt "
                        "--precision=fp16 on a machine with an NVIDIA GPU.")
    if precision not in SUPPORTED_PRECISIONS:
        raise UserError(f"ONNX Runtime engines support precisions {', '.join(SUPPORTED_PRECISIONS)}, "
                        f"not '{precision}'.")


def prepare_model(source: Path, work: Path, for_quantization: bool) -> Path:
    """Copy of `source` with a dynamic batch dimension; for quantization, also ORT's pre-processing
    (shape inference, constant folding, BatchNorm fusion), so calibration sees the graph that gets quantized."""
    import onnx
    from google.protobuf.message import DecodeError

    try:
        model = onnx.load(str(source))
    except (DecodeError, OSError, ValueError) as error:
        raise UnreadableModel(str(error)) from None
    changed = False
    initializers = {i.name for i in model.graph.initializer}
    for value in (*model.graph.input, *model.graph.output):
        dims = value.type.tensor_type.shape.dim
        if value.name not in initializers and len(dims) > 0 and dims[0].HasField("dim_value"):
            dims[0].dim_param = "N"     # replaces the fixed value (a oneof)
            changed = True
    if changed:
        del model.graph.value_info[:]   # inferred shapes held the fixed batch; they are inferred again
    dynamic = work / "dynamic.onnx"
    onnx.save(model, str(dynamic))
    if not for_quantization:
        return dynamic
    from onnxruntime.quantization import quant_pre_process

    # Symbolic shape inference is for transformer-style dynamic shapes; ONNX shape inference covers CNNs.
    quant_pre_process(str(dynamic), str(work / "prepared.onnx"), skip_symbolic_shape=True)
    return work / "prepared.onnx"


def optimize(source: Path, engine: Path, providers: list[str]) -> None:
    """Let ORT optimize `source` for `providers` and save the result atomically as `engine`."""
    import onnxruntime as ort

    from .onnxruntime_session import session_options

    with atomic_path(engine, ".tmp.onnx") as tmp:   # ORT picks the format from the extension
        options = session_options(threads=1, level=OPT_LEVEL)
        options.optimized_model_filepath = str(tmp)
        ort.InferenceSession(str(source), options, providers=providers)


class _Batches:
    """ORT CalibrationDataReader over batches of named inputs."""

    def __init__(self, batches: Iterable[Mapping[str, np.ndarray]]) -> None:
        self._batches = iter(batches)

    def get_next(self) -> dict[str, np.ndarray] | None:
        batch = next(self._batches, None)
        return None if batch is None else dict(batch)


def compute_ranges(model: Path, batches: Iterable[Mapping[str, np.ndarray]],
                   method: str = CALIBRATION_METHOD) -> "TensorsData":
    """Activation ranges of `model` (prepared with prepare_model) over the calibration batches, each
    {input name: array}."""
    from onnxruntime.quantization import CalibrationMethod, create_calibrator

    with tempfile.TemporaryDirectory(prefix="calibrate.") as work:
        calibrator = create_calibrator(Path(model), [], augmented_model_path=str(Path(work) / "augmented.onnx"),
                                       calibrate_method=CalibrationMethod[method], extra_options={})
        # One batch per collect_data call: the calibrator keeps every intermediate output of a call in memory.
        for batch in batches:
            calibrator.collect_data(_Batches([batch]))
        return calibrator.compute_data()


def write_calibration_cache(path: Path, ranges: "TensorsData", inputs: dict[str, Any]) -> None:
    """ORT's own cache format (so quantize_static reads it), plus what the ranges were computed from."""
    from onnxruntime.quantization import save_tensors_data

    with atomic_path(path) as tmp:
        save_tensors_data(ranges, tmp)
        payload = json.loads(tmp.read_text())
        payload[_CACHE_KEY] = inputs
        tmp.write_text(json.dumps(payload, sort_keys=True))


def calibration_cache_inputs(path: Path) -> dict[str, Any] | None:
    """What an existing cache was computed from; None when it is missing or not ours."""
    try:
        inputs = json.loads(Path(path).read_text()).get(_CACHE_KEY)
    except (OSError, ValueError, AttributeError):
        return None
    return inputs if isinstance(inputs, dict) else None


def non_finite_ranges(cache: Path) -> set[str]:
    """Tensors whose calibrated range is not finite, e.g. the -inf padding a TensorFlow max pool is exported with
    (NanoDet-m): no 8-bit scale holds such a range, and quantizing it turns every value of the tensor into NaN."""
    data = json.loads(Path(cache).read_text()).get("data", {})
    bad = set()
    for name, entry in data.items():
        bounds = [entry.get(side, {}).get("data") for side in ("lowest", "highest")] if isinstance(entry, dict) else []
        values = [v for bound in bounds if isinstance(bound, list) for v in bound]
        if not np.all(np.isfinite(np.asarray(values, dtype=np.float64))):
            bad.add(name)
    return bad


def nodes_touching(model: Path, tensors: set[str]) -> list[str]:
    """The names of the nodes that read or write any of `tensors` (such nodes stay in float)."""
    import onnx

    graph = onnx.load(str(model), load_external_data=False).graph
    return [node.name for node in graph.node if tensors & {*node.input, *node.output}]


def quantize(prepared: Path, cache: Path, dest: Path) -> None:
    """Static QDQ quantization of a prepared model with the cached ranges (no calibration run here). Nodes that
    touch a tensor of non-finite range stay in float."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.calibrate import load_tensors_data

    bad = non_finite_ranges(cache)
    excluded = nodes_touching(prepared, bad)
    if bad:   # the ranges without them: no quantization parameters are computed from an infinite range
        payload = json.loads(Path(cache).read_text())
        payload["data"] = {name: entry for name, entry in payload["data"].items() if name not in bad}
        cache = Path(dest).with_name("finite_ranges.json")
        cache.write_text(json.dumps(payload))
    method = load_tensors_data(cache).calibration_method   # quantize_static insists it matches the cache's
    quantize_static(str(prepared), str(dest), calibration_data_reader=None, quant_format=QuantFormat.QDQ,
                    per_channel=True, reduce_range=True, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, calibrate_method=method,
                    calibration_cache_path=str(cache), nodes_to_exclude=excluded)


def build_decoder_engine(source: Path, engine: Path, precision: str) -> None:
    """An LLM decoder's engine: the decoder graph itself (fp32), its weights copied beside the engine name.
    ONNX Runtime applies its graph optimizations when it loads it (ORT_ENABLE_ALL, backends/onnxruntime_decoder.py):
    a saved optimized copy would be another 540 MB to 32 GB on disk for a load that takes seconds."""
    from .external_data import place_decoder

    if precision != "fp32":
        raise UserError(f"LLM decoder engines are fp32 here, not {precision}.")
    place_decoder(source, engine, copy=True)


def build(source: Path, engine: Path, precision: str, providers: list[str],
          calibration_cache: Path | None = None) -> None:
    """Write the engine for `precision` from the model at `source`."""
    check_precision(precision)
    with tempfile.TemporaryDirectory(prefix="engine.") as work:
        prepared = prepare_model(source, Path(work), for_quantization=precision == "int8")
        if precision == "int8":
            if calibration_cache is None or not calibration_cache.is_file():
                raise UserError(f"INT8 needs a calibration cache; {calibration_cache} is missing. "
                                "Run `make calibrate`.", exit_code=EXIT_FAILURE)
            quantized = Path(work) / "quantized.onnx"
            quantize(prepared, calibration_cache, quantized)
            prepared = quantized
        optimize(prepared, engine, providers)
