"""ONNX Runtime backend: an engine file (an ONNX model already optimized by the builder) -> InferenceSession.

Optimization level at load: ORT_ENABLE_ALL, not DISABLE_ALL. The engine is saved at ORT_ENABLE_EXTENDED
(portable, see engines/onnxruntime_builder.py); the CPU layout transform (NCHWc blocked convolutions, sized to
this CPU's vector width) only exists at the ALL/LAYOUT level and cannot be saved portably, so it must run at load.
Measured on a 2-core AVX2 EPYC, MobileNetV2 FP32, batch 32, 2 threads: DISABLE_ALL 101 img/s, ENABLE_ALL 212 img/s;
session creation 20 ms vs 27 ms. Re-running the level-1/2 passes on an optimized graph finds nothing more to do.

ORT releases the GIL in `run`, so instances in parallel Python threads scale. Same machine, img/s for
1 instance x 2 threads / 2 instances x 1 thread / 1 x 1: FP32 batch 1 184 / 196 / 106, batch 32 181 / 178 / 107;
INT8 batch 1 239 / 282 / 117, batch 32 266 / 276 / 137.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from ..engines.onnxruntime_session import session_options
from ..errors import EXIT_FAILURE, UserError
from .base import Backend

CPU = "CPUExecutionProvider"
CUDA = "CUDAExecutionProvider"


def available_providers() -> list[str]:
    import onnxruntime as ort

    return list(ort.get_available_providers())


def cuda_available() -> bool:
    return CUDA in available_providers()


def providers_for(device: str) -> list[str]:
    """CUDA then CPU (for the ops CUDA lacks) on "gpu"; CPU only on "cpu".

    ORT's TensorRT provider is left out on purpose: it compiles its own TensorRT engine at every session
    start (minutes, per instance). TensorRT engines are the `tensorrt` backend's job.
    """
    if device == "cpu":
        return [CPU]
    if device != "gpu":
        raise ValueError(f"unknown device {device!r}: cpu or gpu")
    if not cuda_available():
        raise UserError("This engine was built for the GPU, but this ONNX Runtime has no CUDA execution provider "
                        f"(available: {', '.join(available_providers())}). Rebuild the engine here with "
                        "`make generate_engines`, or install onnxruntime-gpu.", exit_code=EXIT_FAILURE)
    return [CUDA, CPU]


class OnnxRuntimeBackend(Backend):
    def __init__(self, engine_path: Path, *, input_names: Sequence[str], threads: int, device: str = "cpu",
                 inter_op_threads: int = 1, spinning: bool = True) -> None:
        import onnxruntime as ort

        engine_path = Path(engine_path)
        if not engine_path.is_file():
            raise UserError(f"No engine at {engine_path}; build it with `make generate_engines`.",
                            exit_code=EXIT_FAILURE)
        self.device = device
        self._session: ort.InferenceSession | None = ort.InferenceSession(
            str(engine_path), session_options(threads, inter_op_threads=inter_op_threads, spinning=spinning),
            providers=providers_for(device))
        inputs = [i.name for i in self._session.get_inputs()]
        if sorted(inputs) != sorted(input_names):
            raise UserError(f"{engine_path} has input(s) {', '.join(inputs)}, not {', '.join(input_names)}: the "
                            "engine was built from another model. Rebuild it with `make generate_engines`.",
                            exit_code=EXIT_FAILURE)
        self.input_names = tuple(input_names)
        self.output_names = [o.name for o in self._session.get_outputs()]

    def infer(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if self._session is None:
            raise RuntimeError("backend is closed")
        return self._session.run(self.output_names, {name: inputs[name] for name in self.input_names})

    def close(self) -> None:
        self._session = None
