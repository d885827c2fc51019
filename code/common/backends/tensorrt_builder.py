"""TensorRT plans: a prepared ONNX model (tensorrt_onnx.prepare: precision already in its types and Q/DQ nodes)
-> a serialized engine for one batch size, written with the API that TensorRT 10 and 11 share.

- Strongly typed network: TensorRT 11 has no precision flags (no BuilderFlag.FP16/INT8, no calibrators, no
  per-layer precision); every tensor's type comes from the ONNX. TensorRT 10 builds the same network the same way.
- One optimization profile per plan: the batch dimension of every input from 1 (Server and the last Offline
  batch are partial) to the plan's batch size, which is also the optimum. A model whose batch dimension is fixed
  is refused before the build, with a message naming the input.
- A persistent timing cache per TensorRT version and GPU: tactic timings measured once are reused by every later
  build on that GPU (minutes saved per engine), and never offered to another GPU or TensorRT version.
- Detailed profiling verbosity, so that `trtexec --loadEngine ... --dumpLayerInfo` or the engine inspector can
  say which kernels and precisions each layer got.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..errors import EXIT_FAILURE, UserError
from ..fileio import atomic_path, write_atomically
from .tensorrt_loader import dims_tuple, logger, require_tensorrt

if TYPE_CHECKING:   # type-checked against stubs/tensorrt (generated from the TensorRT 11.4 bindings)
    import tensorrt as trt

# TensorRT names used only behind a version check (none: everything here exists in TensorRT 10 and 11).
VERSION_GUARDED_TENSORRT_NAMES: tuple[str, ...] = ()
OPT_LEVEL = "TensorRT default builder optimization level (3), strongly typed"


def _parse(network: "trt.INetworkDefinition", onnx_path: Path) -> "trt.OnnxParser":
    """The parser that filled `network` (kept alive as long as the network: it owns the weights it parsed)."""
    import tensorrt as trt

    parser = trt.OnnxParser(network, logger())
    if parser.parse_from_file(str(onnx_path)):
        return parser
    errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
    raise UserError(f"TensorRT's ONNX parser refused {onnx_path}:\n  " + "\n  ".join(errors or ["(no message)"]),
                    exit_code=EXIT_FAILURE)


def _check_dynamic_batch(network: "trt.INetworkDefinition", onnx_path: Path) -> None:
    """UserError for an input whose batch dimension is fixed: the plan's profile spans batch 1 to the plan's
    batch size, which such a model cannot take (TensorRT would refuse it mid-build, naming profile dimensions)."""
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        shape = dims_tuple(tensor.shape)
        if not shape or shape[0] >= 0:
            raise UserError(f"{onnx_path}: input {tensor.name} has the fixed shape {shape}; a TensorRT plan here "
                            "serves batches from 1 to its batch size, so the model's first (batch) dimension must "
                            "be dynamic. Build from the model `make generate_engines` prepares "
                            "(tensorrt_onnx.prepare makes the batch dimension dynamic), not from the source model.",
                            exit_code=EXIT_FAILURE)


def _profile(builder: "trt.Builder", network: "trt.INetworkDefinition",
             batch_size: int) -> "trt.IOptimizationProfile":
    """Batch 1 to `batch_size` (optimum `batch_size`) for every input; other dimensions as the model fixes them."""
    import tensorrt as trt

    profile = builder.create_optimization_profile()
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        shape = dims_tuple(tensor.shape)
        if any(d < 0 for d in shape[1:]):
            raise UserError(f"Input {tensor.name} has shape {shape}: only the batch dimension may be dynamic in the "
                            "models this builder takes.", exit_code=EXIT_FAILURE)
        smallest, largest = trt.Dims((1, *shape[1:])), trt.Dims((batch_size, *shape[1:]))
        profile.set_shape(tensor.name, smallest, largest, largest)
    return profile


def _use_timing_cache(config: "trt.IBuilderConfig", path: Path, log: Callable[[str], None]) -> None:
    """Give the build a timing cache holding the timings of `path` where they were measured by this TensorRT on this
    GPU; a cache of another version or GPU (TensorRT may then load it, empty, or refuse it) is left out and said
    so, never reported as reused."""
    previous = path.read_bytes() if path.is_file() else b""
    cache = config.create_timing_cache(b"")
    reused = False
    if previous:
        loaded = config.create_timing_cache(previous)
        # combine() copies the entries of a cache of this exact TensorRT version and this GPU (ignore_mismatch
        # False); for any other it copies nothing and returns False.
        reused = loaded is not None and cache.combine(loaded, False)
        if not reused:
            log(f"the timing cache {path} was written by another TensorRT version or GPU: its timings are not used, "
                "a new cache replaces it")
    if not config.set_timing_cache(cache, False):
        raise UserError("TensorRT refused a new, empty timing cache (its messages are above).", exit_code=EXIT_FAILURE)
    if reused:
        log(f"reusing tactic timings from {path}")


def build_plan(onnx_path: Path, plan: Path, *, batch_size: int, workspace_bytes: int, timing_cache: Path | None,
               log: Callable[[str], None]) -> None:
    """Parse `onnx_path` into a strongly typed network and write its serialized engine to `plan` atomically;
    `timing_cache` is read when present and written back after the build."""
    version = require_tensorrt()
    import tensorrt as trt

    builder = trt.Builder(logger())
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    parser = _parse(network, onnx_path)
    _check_dynamic_batch(network, onnx_path)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_bytes))
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    config.add_optimization_profile(_profile(builder, network, batch_size))
    if timing_cache is not None:
        _use_timing_cache(config, timing_cache, log)
    log(f"TensorRT {version}: building (minutes for a large model) ...")
    serialized = builder.build_serialized_network(network, config)
    del parser
    if serialized is None:
        raise UserError(f"TensorRT could not build an engine from {onnx_path} (its messages are above).",
                        exit_code=EXIT_FAILURE)
    with atomic_path(plan) as tmp:
        tmp.write_bytes(memoryview(serialized))
    if timing_cache is not None:
        timing_cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(timing_cache, bytes(memoryview(config.get_timing_cache().serialize())))
