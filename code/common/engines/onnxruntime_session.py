"""ONNX Runtime session options, one definition for the builds that run ONNX Runtime (optimizing an engine,
calibrating, the CPU reference of a TensorRT plan) and for the onnxruntime backends that run engines."""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnxruntime

# ORT's session config keys for whether idle intra-op (and, in its parallel mode, inter-op) threads spin (its
# default) or sleep.
ALLOW_SPINNING = "session.intra_op.allow_spinning"
INTER_OP_ALLOW_SPINNING = "session.inter_op.allow_spinning"


def session_options(threads: int, level: str = "ORT_ENABLE_ALL", *, inter_op_threads: int = 1,
                    spinning: bool = True) -> "onnxruntime.SessionOptions":
    """A session of `threads` intra-op threads (0: ORT picks, the physical cores). One inter-op thread runs the
    operators one after another (parallelism comes from intra-op threads and from instances); more run ORT's
    parallel mode, where independent branches of the graph run at once. `spinning` False: idle intra-op threads
    sleep instead of spinning (ORT's allow_spinning), which frees the cores between calls."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = max(0, int(threads))
    options.inter_op_num_threads = max(1, int(inter_op_threads))
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL if options.inter_op_num_threads == 1 \
        else ort.ExecutionMode.ORT_PARALLEL
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    options.log_severity_level = 3                         # errors only; warnings are not the user's business
    spin = "1" if spinning else "0"
    options.add_session_config_entry(ALLOW_SPINNING, spin)
    if options.inter_op_num_threads > 1:
        options.add_session_config_entry(INTER_OP_ALLOW_SPINNING, spin)
    return options
