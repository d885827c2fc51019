"""ONNX Runtime session options, one definition for the builds that run ONNX Runtime (optimizing an engine,
calibrating, the CPU reference of a TensorRT plan) and for the onnxruntime backends that run engines."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnxruntime


def session_options(threads: int, level: str = "ORT_ENABLE_ALL") -> "onnxruntime.SessionOptions":
    """One sequential session: parallelism comes from intra-op threads and from instances, not inter-op."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(0, int(threads))   # 0: ORT picks (physical cores)
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.log_severity_level = 3                         # errors only; warnings are not the user's business
    return options
