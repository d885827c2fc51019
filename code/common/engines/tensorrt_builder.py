"""TensorRT plans: a prepared ONNX model (tensorrt_onnx.prepare: precision already in its types and Q/DQ nodes)
-> a serialized engine for one batch size, written with the API that TensorRT 10 and 11 share.

- Strongly typed network: TensorRT 11 has no precision flags (no BuilderFlag.FP16/INT8, no calibrators, no
  per-layer precision); every tensor's type comes from the ONNX. TensorRT 10 builds the same network the same way.
- One optimization profile per plan: the batch dimension of every input from 1 (Server and the last Offline
  batch are partial) to the plan's batch size, which is also the optimum.
- A persistent timing cache per TensorRT version and GPU: tactic timings measured once are reused by every later
  build on that GPU (minutes saved per engine), and never offered to another GPU or TensorRT version.
- Detailed profiling verbosity, so that `trtexec --loadEngine ... --dumpLayerInfo` or the engine inspector can
  say which kernels and precisions each layer got.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..errors import UserError
from ..fileio import atomic_path, write_atomically

# TensorRT names used only behind a version check (none: everything here exists in TensorRT 10 and 11).
VERSION_GUARDED_TENSORRT_NAMES: tuple[str, ...] = ()
OPT_LEVEL = "TensorRT default builder optimization level (3), strongly typed"


def _parse(trt: Any, network: Any, logger: Any, onnx_path: Path) -> None:
    parser = trt.OnnxParser(network, logger)
    if parser.parse_from_file(str(onnx_path)):
        return
    errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
    raise UserError(f"TensorRT's ONNX parser refused {onnx_path}:\n  " + "\n  ".join(errors or ["(no message)"]),
                    exit_code=1)


def _profile(builder: Any, network: Any, batch_size: int) -> Any:
    """Batch 1 to `batch_size` (optimum `batch_size`) for every input; other dimensions as the model fixes them."""
    profile = builder.create_optimization_profile()
    for index in range(network.num_inputs):
        tensor = network.get_input(index)
        sample = tuple(int(d) for d in tensor.shape)[1:]
        if any(d < 0 for d in sample):
            raise UserError(f"Input {tensor.name} has shape {tuple(tensor.shape)}: only the batch dimension may be "
                            "dynamic in the models this builder takes.", exit_code=1)
        profile.set_shape(tensor.name, (1, *sample), (batch_size, *sample), (batch_size, *sample))
    return profile


def build_plan(onnx_path: Path, plan: Path, *, batch_size: int, workspace_bytes: int, timing_cache: Path | None,
               log: Callable[[str], None]) -> None:
    """Parse `onnx_path` into a strongly typed network and write its serialized engine to `plan` atomically;
    `timing_cache` is read when present and written back after the build."""
    from ..backends.tensorrt_backend import _logger, require_tensorrt

    trt = require_tensorrt()
    logger = _logger(trt)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    _parse(trt, network, logger, onnx_path)
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(workspace_bytes))
    config.profiling_verbosity = trt.ProfilingVerbosity.DETAILED
    config.add_optimization_profile(_profile(builder, network, batch_size))
    if timing_cache is not None:
        previous = timing_cache.read_bytes() if timing_cache.is_file() else b""
        cache = config.create_timing_cache(previous)
        if not config.set_timing_cache(cache, False):
            log(f"the timing cache {timing_cache} does not fit this TensorRT and GPU: starting a new one")
            config.set_timing_cache(config.create_timing_cache(b""), False)
        elif previous:
            log(f"reusing tactic timings from {timing_cache}")
    log(f"TensorRT {trt.__version__}: building (minutes for a large model) ...")
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise UserError(f"TensorRT could not build an engine from {onnx_path} (its messages are above).",
                        exit_code=1)
    with atomic_path(plan) as tmp:
        tmp.write_bytes(memoryview(serialized))
    if timing_cache is not None:
        timing_cache.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(timing_cache, bytes(memoryview(config.get_timing_cache().serialize())))
