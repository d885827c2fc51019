"""Real TensorRT plans built without a GPU, with TensorRT-RTX standing in for TensorRT in these builder tests only.

TensorRT-RTX (PyPI's tensorrt-rtx-cu12-bindings and -libs, in the test environment through pyproject.toml's `dev`
extra) is NVIDIA's TensorRT for RTX GPUs. Its Python API is TensorRT 11's for everything the toolkit's builder
uses, and its builder, ONNX parser and plan serialization run on a machine without a GPU or driver. It imports as
`tensorrt_rtx_bindings`; the `rtx_as_tensorrt` fixture binds it as `tensorrt` for these tests only (an explicit
alias in sys.modules; the toolkit's own code imports `tensorrt` and knows nothing of it). The tests then call the
toolkit's unchanged builder (tensorrt_onnx.prepare, then tensorrt_builder.build_plan) on MobileNetV2 (random
weights), NanoDet-m (../shared/models) and a ResNet-50-shaped network (random weights) at fp32, fp16 and int8.

What works without a GPU (TensorRT-RTX 1.7.1.116): parsing, building and serializing plans; the network
definition; the builder's own layer report, a VERBOSE log message ("Layers: ...") that the DETAILED profiling
verbosity fills with what the engine inspector reports per layer (input and output data types, the ONNX nodes a
layer came from) and the I/O tensors' optimization profile. What does not: deserializing a plan
(`deserialize_cuda_engine` logs cudaError 35 creating a stream and returns None), so there is no ICudaEngine and no
IEngineInspector here; and plans of batch 256 or more (the builder then asks for device memory of the workspace
size and fails with OutOfMemory), so the profiles built here are those of the configs with batches up to 32.
"""
from __future__ import annotations

import platform
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from code.common.backends import tensorrt_builder, tensorrt_loader
from code.common.engines import onnxruntime_builder as ort_builder
from code.common.engines import tensorrt_onnx
from code.common.errors import UserError
from tests import resnet50_shaped_onnx
from tests.conftest import SHARED

# TensorRT-RTX keeps the timing-cache API but ignores it, with a DeprecationWarning at each use: the builder's
# timing-cache path runs here, its effect only on TensorRT.
pytestmark = pytest.mark.filterwarnings("ignore:.*Timing cache operations are no-ops in TensorRT-RTX")

PRECISIONS = ("fp32", "fp16", "int8")
WORKSPACE = 1 << 30
COMPUTE_LAYERS = ("correlation", "gemm")    # the layer report's convolutions and fully connected layers


@dataclass(frozen=True)
class Model:
    name: str
    input_name: str
    sample_shape: tuple[int, ...]
    batch_size: int
    batch_from: str           # where the batch size comes from


def _config_batch(scenario: str, system_id: str, model: str) -> int:
    """The batch size resnet50's TensorRT config asks for on `system_id`."""
    from code.common.config_registry import ConfigRegistry
    from code.common.constants import Scenario, WorkloadSetting

    config = ConfigRegistry.load(["resnet50"]).resolve("resnet50", Scenario(scenario), [system_id],
                                                       WorkloadSetting(), overrides={"model": model})
    assert config["backend"] == "tensorrt", config
    return int(config["batch_size"])


MODELS = {
    "mobilenet_v2": lambda: Model("mobilenet_v2", "input", (3, 224, 224),
                                  _config_batch("Offline", "L4x1", "mobilenet_v2"), "resnet50 Offline on L4x1"),
    "resnet50_shaped": lambda: Model("resnet50_shaped", resnet50_shaped_onnx.INPUT_NAME,
                                     resnet50_shaped_onnx.INPUT_SHAPE,
                                     _config_batch("MultiStream", "H100_SXM_80GBx1", "resnet50"),
                                     "resnet50 MultiStream on H100_SXM_80GBx1"),
    # The yolo benchmark has no TensorRT config yet: a batch of 4.
    "nanodet-m": lambda: Model("nanodet-m", "input_1:0", (3, 416, 416), 4, "this test"),
}


# -- TensorRT-RTX as tensorrt ---------------------------------------------------------------------------------

class BuildLog:
    """Every message TensorRT logs while the fixture is active (VERBOSE and up), with its severity."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str]] = []

    def since(self, start: int) -> list[tuple[str, str]]:
        return self.messages[start:]


@pytest.fixture(scope="module")
def rtx_as_tensorrt():
    """TensorRT-RTX bound as `tensorrt` (sys.modules alias) for this module's builder tests, its messages
    recorded by a logger that the builder gets in place of the toolkit's (warnings only). Undone afterwards: the
    toolkit's modules are left with no TensorRT bound and a fresh logger cache."""
    try:
        import tensorrt_rtx_bindings as rtx
    except ImportError as error:
        if sys.platform == "linux" and platform.machine() == "x86_64":
            pytest.fail(f"TensorRT-RTX does not import here ({error}), though its wheels are for this platform: "
                        "`make test` installs it from the locked requirements/main.txt (pyproject's dev extra)")
        pytest.skip(f"TensorRT-RTX has wheels for Linux x86-64 and Windows only, not {sys.platform} "
                    f"{platform.machine()}: no TensorRT plan can be built in this test environment")
    log = BuildLog()

    class RecordingLogger(rtx.ILogger):
        def __init__(self) -> None:
            rtx.ILogger.__init__(self)

        def log(self, severity, msg) -> None:
            log.messages.append((str(severity).rsplit(".", 1)[-1], msg))

    recorder = RecordingLogger()
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(sys.modules, "tensorrt", rtx)
        patch.setattr(tensorrt_loader, "trt", tensorrt_loader.trt)     # require_tensorrt() rebinds it
        patch.setattr(tensorrt_builder, "logger", lambda: recorder)
        tensorrt_loader.logger.cache_clear()
        yield rtx, log
    tensorrt_loader.logger.cache_clear()


# -- the models, prepared and built as the toolkit does -----------------------------------------------------

@dataclass
class Built:
    model: Model
    precision: str
    prepared: Path
    plan: Path
    messages: list[tuple[str, str]]

    @property
    def layer_report(self) -> str:
        reports = [m for _, m in self.messages if m.startswith("Layers:")]
        assert len(reports) == 1, "the builder logged no layer report (DETAILED profiling verbosity)"
        return reports[0]


def _source(name: str, work: Path) -> Path:
    if name == "mobilenet_v2":
        import onnx

        from code.resnet50 import mobilenet_v2
        from tests.test_mobilenet_v2 import _random_mobilenet_state_dict

        path = work / "mobilenet_v2.onnx"
        onnx.save(mobilenet_v2.build_onnx(_random_mobilenet_state_dict()), str(path))
        return path
    if name == "resnet50_shaped":
        return resnet50_shaped_onnx.write(work / "resnet50_shaped.onnx")
    from code.yolo.models import NANODET_FILE

    path = SHARED / "models" / NANODET_FILE
    if not path.is_file():
        pytest.skip(f"{path} is absent: the shared models live beside the repository")
    return path


def _calibration_cache(source: Path, model: Model, work: Path) -> Path:
    """INT8 ranges over 2 random samples, in the toolkit's cache format (the ranges mean nothing; structure does)."""
    prepared = ort_builder.prepare_model(source, work, for_quantization=True)
    data = np.random.default_rng(3).uniform(-1, 1, (2, *model.sample_shape)).astype(np.float32)
    ranges = ort_builder.compute_ranges(prepared, [{model.input_name: data}])
    cache = work / "calibration.json"
    ort_builder.write_calibration_cache(cache, ranges, {"test": "random samples"})
    return cache


@pytest.fixture(scope="module")
def build(rtx_as_tensorrt, tmp_path_factory):
    """build(model name, precision) -> Built: prepared with tensorrt_onnx.prepare and built with
    tensorrt_builder.build_plan at the model's config batch size; each plan is built once per module."""
    _, log = rtx_as_tensorrt
    done: dict[tuple[str, str], Built] = {}
    sources: dict[str, tuple[Model, Path, Path]] = {}

    def get(name: str, precision: str) -> Built:
        if (name, precision) in done:
            return done[(name, precision)]
        if name not in sources:
            work = tmp_path_factory.mktemp(name)
            model = MODELS[name]()
            source = _source(name, work)
            sources[name] = (model, source, _calibration_cache(source, model, work))
        model, source, cache = sources[name]
        work = tmp_path_factory.mktemp(f"{name}-{precision}")
        prepared, plan = work / "prepared.onnx", work / f"{name}-{precision}-b{model.batch_size}.plan"
        tensorrt_onnx.prepare(source, prepared, precision, cache if precision == "int8" else None)
        start = len(log.messages)
        tensorrt_builder.build_plan(prepared, plan, batch_size=model.batch_size, workspace_bytes=WORKSPACE,
                                    timing_cache=work / "timing.cache", log=lambda _: None)
        done[(name, precision)] = Built(model, precision, prepared, plan, log.since(start))
        return done[(name, precision)]

    return get


CASES = [(name, precision) for name in MODELS for precision in PRECISIONS]


def _network(rtx, prepared: Path):
    """The strongly typed network TensorRT-RTX's parser makes of `prepared`, as build_plan makes it."""
    logger = rtx.Logger(rtx.Logger.ERROR)
    builder = rtx.Builder(logger)
    network = builder.create_network(1 << int(rtx.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    parser = rtx.OnnxParser(network, logger)
    ok = parser.parse_from_file(str(prepared))
    errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
    return builder, network, parser, ok, errors


@dataclass(frozen=True)
class EngineLayer:
    """One line of the builder's layer report."""

    kind: str                         # LayerType: correlation, gemm, kgen, ...
    inputs: tuple[str, ...]           # data types of its inputs (Float, Half, Int8, ...)
    outputs: tuple[str, ...]
    onnx_nodes: tuple[str, ...]       # the ONNX nodes it was made from (Metadata)


def _engine_layers(report: str) -> list[EngineLayer]:
    layers = []
    for line in report.splitlines():
        if not line.startswith("Name: "):
            continue
        inputs = line.split("Inputs: [", 1)[1].split("], Constants: [", 1)[0]
        outputs = line.split("Outputs: [", 1)[1].split("], TacticName: ", 1)[0]
        layers.append(EngineLayer(re.search(r"LayerType: (\w+)", line).group(1),
                                  tuple(re.findall(r"Datatype: (\w+)", inputs)),
                                  tuple(re.findall(r"Datatype: (\w+)", outputs)),
                                  tuple(re.findall(r"\[ONNX Layer: ([^\]]+)\]", line))))
    return layers


def _profile(report: str, input_name: str) -> tuple[list[int], list[int], list[int]]:
    """(min, opt, max) shapes of an input, from the layer report's I/O tensors."""
    line = next(line for line in report.split("I/O Tensors:", 1)[1].splitlines()
                if line.strip().startswith(f"Name: {input_name},"))
    shapes = [re.search(rf"{kind}Shape: \[([-\d,]+)\]", line).group(1) for kind in ("Min", "Opt", "Max")]
    return tuple([int(d) for d in shape.split(",")] for shape in shapes)


def _weighted_nodes(prepared: Path) -> tuple[set[str], set[str]]:
    """(quantized, float) names of the Conv/Gemm/MatMul nodes of a prepared model: quantized where Q/DQ feed
    their data input."""
    import onnx

    graph = onnx.load(str(prepared)).graph
    dequantized = {out for n in graph.node if n.op_type == "DequantizeLinear" for out in n.output}
    weighted = [n for n in graph.node if n.op_type in ("Conv", "ConvTranspose", "Gemm", "MatMul")]
    quantized = {n.name for n in weighted if n.input[0] in dequantized}
    return quantized, {n.name for n in weighted} - quantized


def _max_pools_feeding_quantize(prepared: Path) -> set[str]:
    """Names of the MaxPool nodes whose every consumer is a QuantizeLinear."""
    import onnx

    graph = onnx.load(str(prepared)).graph
    consumers: dict[str, list[str]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node.op_type)
    return {n.name for n in graph.node if n.op_type == "MaxPool"
            and consumers.get(n.output[0]) and set(consumers[n.output[0]]) == {"QuantizeLinear"}}


# -- tests ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,precision", CASES)
def test_rtx_stand_in_builds_a_plan_without_parser_errors(rtx_as_tensorrt, build, name: str, precision: str):
    """TensorRT-RTX standing in for TensorRT: the toolkit's builder makes a plan of each model and precision; the
    parser reports no error and the builder logs none."""
    rtx, _ = rtx_as_tensorrt
    built = build(name, precision)
    assert built.plan.is_file() and built.plan.stat().st_size > 100_000
    assert [m for severity, m in built.messages if severity in ("ERROR", "INTERNAL_ERROR")] == []
    _, network, _, ok, errors = _network(rtx, built.prepared)
    assert ok and errors == [] and network.num_layers > 50


@pytest.mark.parametrize("name,precision", CASES)
def test_rtx_stand_in_plan_input_is_dynamic_in_batch_with_the_configs_profile(rtx_as_tensorrt, build, name: str,
                                                                              precision: str):
    """TensorRT-RTX standing in for TensorRT: the plan's input has a dynamic batch, and its one optimization
    profile spans batch 1 to the config's batch size, which is also the optimum."""
    rtx, _ = rtx_as_tensorrt
    built = build(name, precision)
    _, network, _, _, _ = _network(rtx, built.prepared)
    assert network.num_inputs == 1 and tuple(network.get_input(0).shape) == (-1, *built.model.sample_shape)
    batch, sample = built.model.batch_size, list(built.model.sample_shape)
    assert _profile(built.layer_report, built.model.input_name) == ([1, *sample], [batch, *sample],
                                                                     [batch, *sample]), built.model.batch_from
    assert batch == {"mobilenet_v2": 32, "resnet50_shaped": 8, "nanodet-m": 4}[name]


@pytest.mark.parametrize("name", MODELS)
def test_rtx_stand_in_fp16_layers_run_in_half_precision(rtx_as_tensorrt, build, name: str):
    """TensorRT-RTX standing in for TensorRT: in the fp16 plan every convolution and fully connected layer reads
    and writes half precision (network definition and builder's layer report); float appears only in the layers
    made from the Casts at the float32 input and outputs; neither the fp16 nor the fp32 plan has INT8, and the
    fp32 plan has no half precision."""
    import onnx

    rtx, _ = rtx_as_tensorrt
    built = build(name, "fp16")
    _, network, _, _, _ = _network(rtx, built.prepared)
    weighted_layers = [network.get_layer(i) for i in range(network.num_layers)
                       if network.get_layer(i).type in (rtx.LayerType.CONVOLUTION, rtx.LayerType.MATRIX_MULTIPLY)]
    assert weighted_layers
    for layer in weighted_layers:
        assert layer.get_output(0).dtype == rtx.DataType.HALF, layer.name
    casts = {n.name for n in onnx.load(str(built.prepared)).graph.node if n.op_type == "Cast"}
    weighted = set().union(*_weighted_nodes(built.prepared))
    assert casts and weighted
    made_from: set[str] = set()
    for layer in _engine_layers(built.layer_report):
        nodes = set(layer.onnx_nodes)
        types = set(layer.inputs + layer.outputs)
        assert "Int8" not in types, layer
        if "Float" in types:
            assert nodes & casts, f"float outside the boundary casts: {layer}"
        if nodes & weighted:
            made_from |= nodes & weighted
            if not nodes & casts:
                assert types == {"Half"}, layer
    assert made_from == weighted, "a weighted ONNX node has no layer in the plan"
    fp32 = _engine_layers(build(name, "fp32").layer_report)
    assert all({"Half", "Int8"}.isdisjoint(layer.inputs + layer.outputs) for layer in fp32)


@pytest.mark.parametrize("name", MODELS)
def test_rtx_stand_in_int8_appears_only_where_qdq_put_it(rtx_as_tensorrt, build, name: str):
    """TensorRT-RTX standing in for TensorRT: in the int8 plan the Q/DQ layers of the network are those of the
    prepared ONNX; every convolution or fully connected layer that the ONNX feeds through Q/DQ reads INT8, every
    one it leaves in float (tensorrt_onnx's small-reduction rule) reads float; no engine layer reads or writes
    INT8 unless it was made from a QuantizeLinear/DequantizeLinear node (or is a max pool that a QuantizeLinear
    follows), and every layer that writes INT8 was made from a QuantizeLinear."""
    rtx, _ = rtx_as_tensorrt
    built = build(name, "int8")
    counts = tensorrt_onnx.quantized_node_counts(built.prepared)
    _, network, _, _, _ = _network(rtx, built.prepared)
    kinds = [network.get_layer(i).type for i in range(network.num_layers)]
    assert kinds.count(rtx.LayerType.QUANTIZE) == counts["QuantizeLinear"] > 0
    assert kinds.count(rtx.LayerType.DEQUANTIZE) == counts["DequantizeLinear"] > 0

    quantized, in_float = _weighted_nodes(built.prepared)
    assert quantized
    # In float: the convolutions of small reduction (MobileNetV2's depthwise ones and its stem; NanoDet's stem).
    assert set(tensorrt_onnx.float_convolutions(built.prepared)) == in_float
    assert len(in_float) == {"mobilenet_v2": 21, "resnet50_shaped": 0, "nanodet-m": 1}[name]
    pooled_then_quantized = _max_pools_feeding_quantize(built.prepared)
    layers = _engine_layers(built.layer_report)
    seen: dict[str, set[str]] = {}
    for layer in layers:
        qdq = [node for node in layer.onnx_nodes if node.endswith(("_QuantizeLinear", "_DequantizeLinear"))]
        if "Int8" in layer.inputs + layer.outputs and not qdq:
            # Max pooling commutes with quantization (both monotonic): TensorRT moves the QuantizeLinear that
            # follows a MaxPool ahead of it and pools INT8 values, as its Q/DQ placement guide describes.
            assert layer.kind == "maxpool" and set(layer.onnx_nodes) <= pooled_then_quantized, layer
            continue
        if "Int8" in layer.outputs:
            assert any(node.endswith("_QuantizeLinear") for node in qdq), layer
        if layer.kind in COMPUTE_LAYERS:
            for node in set(layer.onnx_nodes) & (quantized | in_float):
                seen.setdefault(node, set()).update(layer.inputs[:1])
    assert set(seen) == quantized | in_float, "a weighted ONNX node has no convolution or gemm layer in the plan"
    for node, types in seen.items():
        assert types == ({"Int8"} if node in quantized else {"Float"}), (node, types)


def test_rtx_stand_in_refuses_a_model_with_a_fixed_batch(rtx_as_tensorrt, tmp_path: Path):
    """TensorRT-RTX standing in for TensorRT: NanoDet-m as shipped has a fixed batch of 1; the builder refuses
    it before building, naming the input and what to build from, and writes no plan."""
    _, log = rtx_as_tensorrt
    source = _source("nanodet-m", tmp_path)
    plan = tmp_path / "fixed.plan"
    start = len(log.messages)
    with pytest.raises(UserError, match=r"input input_1:0 has the fixed shape \(1, 3, 416, 416\).*batch\) "
                                        r"dimension must be dynamic.*make generate_engines") as error:
        tensorrt_builder.build_plan(source, plan, batch_size=4, workspace_bytes=WORKSPACE, timing_cache=None,
                                    log=lambda _: None)
    assert str(source) in str(error.value) and not plan.exists()
    assert [m for severity, m in log.since(start) if severity in ("ERROR", "INTERNAL_ERROR")] == []


def test_rtx_stand_in_cannot_deserialize_a_plan_without_a_gpu(rtx_as_tensorrt, build):
    """TensorRT-RTX standing in for TensorRT, on a machine without a GPU: a plan does not deserialize (so neither
    an ICudaEngine nor its IEngineInspector exists here); TensorRT says CUDA refused, and nothing crashes."""
    rtx, log = rtx_as_tensorrt
    try:
        from cuda.bindings import runtime
    except ImportError:
        pytest.skip("cuda-python is not installed: whether this machine has a GPU is unknown")
    status, count = runtime.cudaGetDeviceCount()
    if status == runtime.cudaError_t.cudaSuccess and count > 0:
        pytest.skip("this machine has a GPU: plans deserialize here")
    recorder = tensorrt_builder.logger()
    start = len(log.messages)
    engine = rtx.Runtime(recorder).deserialize_cuda_engine(build("mobilenet_v2", "fp32").plan.read_bytes())
    assert engine is None
    assert any("cudaError" in m for severity, m in log.since(start) if severity == "ERROR")
