"""Backends turn an engine file into a callable: `create_backend(...).infer({input name: batch}) -> outputs`.

Which backends exist, and what each builds and needs, is the registry's (registry.py). Runtime imports
(onnxruntime, tensorrt) happen when a backend is created, never at import.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from .base import Backend, NullBackend
from .registry import BACKENDS, get_plugin

__all__ = ["BACKENDS", "Backend", "NullBackend", "create_backend", "get_plugin", "runtime_options",
           "threads_per_instance"]

# Fields a backend declares for itself (fields.py: backends=...) that its plug-in is handed when a config sets them.
RUNTIME_FIELDS = ("inter_op_threads", "intra_op_spinning")


def threads_per_instance(fields, cpu_cores: int) -> int:
    """Intra-op threads of each backend instance: `intra_op_threads`, or when 0 the cores shared out evenly."""
    return int(fields.get("intra_op_threads") or 0) or max(1, cpu_cores // int(fields["instances"]))


def runtime_options(fields) -> dict:
    """The RUNTIME_FIELDS the config holds (a field of another backend is absent from its config)."""
    return {name: fields[name] for name in RUNTIME_FIELDS if fields.get(name) is not None}


def create_backend(engine_path: Path, *, backend: str, input_names: Sequence[str], threads: int,
                   device: str = "cpu", instance: int = 0, options: Mapping[str, Any] | None = None) -> Backend:
    """Load `engine_path` with `backend` for the `instance`-th backend instance of a run, fed the model's inputs
    `input_names`; `threads` is the intra-op thread count of this one instance (CPU backends); `options` the
    backend's own fields (runtime_options), handed to the plug-in only when there are some."""
    extra = {"options": dict(options)} if options else {}
    return get_plugin(backend).create_backend(Path(engine_path), input_names=tuple(input_names), threads=threads,
                                              device=device, instance=instance, **extra)
