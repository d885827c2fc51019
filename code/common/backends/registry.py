"""The backend plug-in point: what a backend is to the rest of the toolkit, and the table of backends.

A backend declares, in one class of its own module, its engine files (extension, whether a file is built for one
batch size), the precisions it builds, how to tell whether it can run here, its builder, its runner and, where it
has one, its C++ runner in the native core. The engine builder, the harness and `make build` ask this registry and
never name a backend. Adding a backend is adding its module and registering it (`BACKEND_PLUGINS.register(name,
"module:Class")` from the plug-in's own module, or one line in the table below for the toolkit's own); nothing is
imported until a backend is asked for.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Protocol, Sequence

from ..registry import Registry

if TYPE_CHECKING:
    from ..generation import Decoder
    from .base import Backend

# name -> "module:class" (relative to this package), each class instantiated on first use.
BACKEND_PLUGINS: "Registry[BackendPlugin]" = Registry("backend", package=__package__, make=lambda cls: cls(), entries={
    "onnxruntime": ".onnxruntime_plugin:OnnxRuntimePlugin",
    "tensorrt": ".tensorrt_plugin:TensorRTPlugin",
})
BACKENDS: tuple[str, ...] = BACKEND_PLUGINS.names()


@dataclass(frozen=True)
class Hardware:
    """What an engine is built for, recorded in its manifest: an engine is never reused on other hardware."""

    device: str                           # "cpu" | "gpu"
    gpu_name: str | None = None           # e.g. "NVIDIA H100 80GB HBM3"
    compute_capability: str | None = None  # e.g. "9.0"


@dataclass(frozen=True)
class BuildRequest:
    """Everything one engine build takes."""

    model: Path                       # the source ONNX model
    engine: Path                      # where the engine goes (written atomically)
    precision: str
    batch_size: int                   # the largest batch the engine must serve
    hardware: Hardware
    calibration_cache: Path | None    # INT8 ranges (ONNX Runtime's format), None for float precisions
    workspace_bytes: int              # builder scratch memory (GPU backends)
    timing_cache: Path | None         # persistent tactic timings (TensorRT), None where the backend has none
    log: Callable[[str], None]
    decoder: bool = False             # an LLM decoder graph with its weights in an external-data file beside it
    input_dtype: str = "fp32"         # "int8": INT8 engines take inputs quantized in preprocessing (TensorRT)


class BackendPlugin(Protocol):
    name: str
    engine_extension: str             # "onnx", "plan"
    batch_specific: bool              # an engine file is built for one batch size
    precisions: tuple[str, ...]
    opt_level: str                    # recorded in the manifest
    needs: str                        # what the backend needs, for `make build`'s table (one line)
    # The native core's C++ backend that runs this backend's engines without Python (registered in native/src/
    # backends/ under this name); None: the native core calls `create_backend`'s runner through its python backend.
    native_backend: str | None

    def availability(self) -> str | None:
        """None when the backend can run here; else why not, in a sentence that says what to do."""

    def runtime_version(self) -> str:
        """e.g. "onnxruntime 1.31.1"; UserError (naming what to do) when the runtime is missing."""

    def check_precision(self, precision: str) -> None:
        """UserError when this backend cannot build `precision`."""

    def hardware(self) -> Hardware:
        """What an engine built here now would be built for."""

    def quantization(self, precision: str) -> str | None:
        """The INT8 recipe recorded in the manifest; None for float precisions."""

    def build(self, request: BuildRequest) -> None:
        """Write the engine of `request`."""

    def create_backend(self, engine: Path, *, input_names: Sequence[str], threads: int, device: str,
                       instance: int = 0) -> "Backend":
        """Load `engine` for one backend instance (the `instance`-th of a run), fed the model's inputs by name. A
        plug-in whose backend declares fields of its own in fields.py (backends=...) and listed in
        backends.RUNTIME_FIELDS also takes `options`, those of them the config sets."""

    def create_decoder(self, engine: Path, *, threads: int, device: str, max_batch: int,
                       instance: int = 0) -> "Decoder":
        """Load a decoder engine (an LLM's decoder graph with its KV cache) for one instance of a generating run;
        UserError where the backend does not run decoders."""


def instance_count(plugin: BackendPlugin, instances: int) -> int:
    """The backend instances a run makes of the config's `instances`: a plug-in whose instances are per device
    (TensorRT: per GPU) says so with an `instance_count(instances)` method of its own; for the others it is the
    count itself."""
    per_device = getattr(plugin, "instance_count", None)
    return int(instances) if per_device is None else int(per_device(int(instances)))


def get_plugin(name: str) -> BackendPlugin:
    """The plug-in of backend `name`; UserError naming the valid choices for an unknown one."""
    return BACKEND_PLUGINS.get(name)
