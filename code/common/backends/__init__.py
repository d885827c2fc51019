"""Backends turn an engine file into a callable: `create_backend(...).infer({input name: batch}) -> outputs`.

Which backends exist, and what each builds and needs, is the registry's (registry.py). Runtime imports
(onnxruntime, tensorrt) happen when a backend is created, never at import.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from .base import Backend, NullBackend
from .registry import BACKENDS, get_plugin

__all__ = ["BACKENDS", "Backend", "NullBackend", "create_backend", "get_plugin", "threads_per_instance"]


def threads_per_instance(fields, cpu_cores: int) -> int:
    """Intra-op threads of each backend instance: `intra_op_threads`, or when 0 the cores shared out evenly."""
    return int(fields.get("intra_op_threads") or 0) or max(1, cpu_cores // int(fields["instances"]))


def create_backend(engine_path: Path, *, backend: str, input_names: Sequence[str], threads: int,
                   device: str = "cpu", instance: int = 0) -> Backend:
    """Load `engine_path` with `backend` for the `instance`-th backend instance of a run, fed the model's inputs
    `input_names`; `threads` is the intra-op thread count of this one instance (CPU backends)."""
    return get_plugin(backend).create_backend(Path(engine_path), input_names=tuple(input_names), threads=threads,
                                              device=device, instance=instance)
