"""TensorRT backend: only the check that TensorRT exists. The engine runner is not part of this toolkit yet,
and nothing here pretends otherwise."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import NotImplementedYet, UserError
from .base import Backend

MISSING = ("TensorRT is not installed here; run make build on a machine with an NVIDIA GPU, "
           "or use --backend=onnxruntime")


def require_tensorrt():
    """The `tensorrt` module, or a UserError (exit 1) saying how to get a machine that has it."""
    try:
        import tensorrt
    except ImportError:
        raise UserError(MISSING, exit_code=1) from None
    return tensorrt


class TensorRTBackend(Backend):
    def __init__(self, engine_path: Path, *, input_name: str, threads: int = 0, device: str = "gpu") -> None:
        require_tensorrt()
        raise NotImplementedYet("--backend=tensorrt", "the TensorRT engine runner")

    def infer(self, batch: np.ndarray) -> list[np.ndarray]:  # pragma: no cover - never constructed
        raise NotImplementedError
