"""Backends turn an engine file into a callable: `create_backend(...).infer(batch) -> outputs`.

Runtime imports (onnxruntime, tensorrt) happen when a backend is created, never at import.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import UserError
from .base import Backend, NullBackend

BACKENDS = ("onnxruntime", "tensorrt")

__all__ = ["BACKENDS", "Backend", "NullBackend", "create_backend", "threads_per_instance"]


def threads_per_instance(fields, cpu_cores: int) -> int:
    """Intra-op threads of each backend instance: `intra_op_threads`, or when 0 the cores shared out evenly."""
    return int(fields.get("intra_op_threads") or 0) or max(1, cpu_cores // int(fields["instances"]))


def create_backend(engine_path: Path, *, backend: str, input_name: str, threads: int,
                   device: str = "cpu") -> Backend:
    """Load `engine_path` with `backend`; `threads` is the intra-op thread count of this one instance."""
    if backend == "onnxruntime":
        from .onnxruntime_backend import OnnxRuntimeBackend

        return OnnxRuntimeBackend(Path(engine_path), input_name=input_name, threads=threads, device=device)
    if backend == "tensorrt":
        from .tensorrt_backend import TensorRTBackend

        return TensorRTBackend(Path(engine_path), input_name=input_name, threads=threads, device=device)
    raise UserError(f"Unknown backend '{backend}'. Valid choices: {', '.join(BACKENDS)}.")
