"""ONNX Runtime as a backend plug-in: optimized / INT8 ONNX models, on the CPU (or CUDA where ORT has it)."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .base import Backend
from .registry import BuildRequest, Hardware

if TYPE_CHECKING:
    from ..generation import Decoder


class OnnxRuntimePlugin:
    name = "onnxruntime"
    engine_extension = "onnx"
    # An ONNX Runtime engine has a dynamic batch dimension: one file serves every batch size, so neither its name
    # nor its manifest carries one, and changing the batch size never asks for a rebuild.
    batch_specific = False
    precisions = ("fp32", "int8")
    needs = "the onnxruntime package (always installed)"
    native_backend = None      # the native core runs ONNX Runtime through its python backend

    @property
    def opt_level(self) -> str:
        from ..engines.onnxruntime_builder import OPT_LEVEL

        return OPT_LEVEL

    def availability(self) -> str | None:
        try:
            import onnxruntime  # noqa: F401
        except ImportError as error:
            return f"onnxruntime does not import ({error}): run make prebuild"
        return None

    def runtime_version(self) -> str:
        from ..engines.onnxruntime_builder import runtime_version

        return runtime_version()

    def check_precision(self, precision: str) -> None:
        from ..engines.onnxruntime_builder import check_precision

        check_precision(precision)

    def hardware(self) -> Hardware:
        from .onnxruntime_backend import cuda_available

        return Hardware("gpu" if cuda_available() else "cpu")

    def quantization(self, precision: str) -> str | None:
        from ..engines.onnxruntime_builder import QUANTIZATION

        return QUANTIZATION if precision == "int8" else None

    def build(self, request: BuildRequest) -> None:
        from ..engines import onnxruntime_builder
        from .onnxruntime_backend import providers_for

        if request.decoder:
            onnxruntime_builder.build_decoder_engine(request.model, request.engine, request.precision)
            return
        onnxruntime_builder.build(request.model, request.engine, request.precision,
                                  providers_for(request.hardware.device), request.calibration_cache)

    def create_backend(self, engine: Path, *, input_names: Sequence[str], threads: int, device: str,
                       instance: int = 0, options: Mapping[str, Any] | None = None) -> Backend:
        """`options`: inter_op_threads and intra_op_spinning where the config sets them (ORT's defaults else)."""
        from .onnxruntime_backend import OnnxRuntimeBackend

        options = options or {}
        return OnnxRuntimeBackend(Path(engine), input_names=input_names, threads=threads, device=device,
                                  inter_op_threads=int(options.get("inter_op_threads", 1)),
                                  spinning=bool(options.get("intra_op_spinning", True)))

    def create_decoder(self, engine: Path, *, threads: int, device: str, max_batch: int,
                       instance: int = 0) -> "Decoder":
        from .onnxruntime_decoder import OnnxRuntimeDecoder

        return OnnxRuntimeDecoder(Path(engine), threads=threads, max_batch=max_batch)
