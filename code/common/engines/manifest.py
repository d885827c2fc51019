"""The inputs an engine was built from, and the size and sha256 of the file the build wrote. An engine is
current when its manifest records exactly the expected inputs and the file on disk still has the recorded size
and sha256; anything else (missing, unreadable, any input different, a truncated or replaced file) means
rebuild, and `engine_problem` says which. The manifest also records each file's digest with its modification time
(`engine_files`: the engine and its external data), so a large engine is checked without reading it while its
size and time are unchanged (integrity.py)."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..fileio import external_data, model_sha256, model_size, write_atomically
from ..integrity import FileDigest, record_problem

# Bump when the builder's output for the same inputs changes (new passes, other quantization recipe):
# every existing engine then reads as stale.
BUILDER_VERSION = 2   # 2: nodes touching a tensor of non-finite calibrated range stay in float


@dataclass(frozen=True)
class CalibrationInfo:
    dataset: str
    count: int
    method: str                  # e.g. "MinMax"
    cache_sha256: str            # of the calibration cache file the engine was quantized with


@dataclass(frozen=True)
class EngineManifest:
    benchmark: str
    model: str
    model_sha256: str
    backend: str                 # "onnxruntime" | "tensorrt"
    precision: str               # "fp32" | "fp16" | "int8"
    batch_size: int | None       # the batch size a plan is built for; None: the engine serves any batch size
    device: str                  # "cpu" | "gpu"
    runtime_version: str         # e.g. "onnxruntime 1.31.1": engines are only trusted by the runtime that wrote them
    opt_level: str               # optimization level the engine was saved at
    quantization: str | None = None          # the INT8 recipe, None otherwise
    calibration: CalibrationInfo | None = None
    builder_version: int = BUILDER_VERSION
    # The GPU a plan is built for (None on the CPU): a TensorRT plan only runs on the GPU model it was built for.
    gpu_name: str | None = None
    compute_capability: str | None = None
    # What the build wrote: not inputs, so left out of equality (an expected manifest has them None).
    engine_size: int | None = field(default=None, compare=False)
    engine_sha256: str | None = field(default=None, compare=False)
    engine_files: dict[str, dict[str, Any]] | None = field(default=None, compare=False)   # name -> FileDigest

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "EngineManifest":
        values = dict(data)
        if values.get("calibration") is not None:
            values["calibration"] = CalibrationInfo(**values["calibration"])
        return cls(**values)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "EngineManifest":
        return cls.from_dict(json.loads(text))

    @classmethod
    def read(cls, path: Path) -> "EngineManifest | None":
        """The manifest at `path`, or None when it is missing or not a manifest of this toolkit."""
        try:
            return cls.from_json(Path(path).read_text())
        except (OSError, ValueError, TypeError):
            return None

    def write(self, path: Path) -> None:
        write_atomically(Path(path), self.to_json().encode())

    def differences(self, other: "EngineManifest") -> list[str]:
        """Names of the input fields that differ, for messages."""
        return [f.name for f in dataclasses.fields(self)
                if f.compare and getattr(self, f.name) != getattr(other, f.name)]

    def of_engine(self, engine: Path) -> "EngineManifest":
        """This manifest with the size and sha256 of the engine file as written, and each file's digest."""
        files = [p for p in (Path(engine), external_data(engine)) if p.is_file()]
        return dataclasses.replace(self, engine_size=model_size(engine), engine_sha256=model_sha256(engine),
                                   engine_files={p.name: FileDigest.of(p).to_dict() for p in files})

    def file_digests(self) -> dict[str, FileDigest] | None:
        """The recorded digest of each engine file; None for a manifest written before they were recorded."""
        if not self.engine_files:
            return None
        digests = {name: FileDigest.from_dict(entry) for name, entry in self.engine_files.items()}
        return None if any(d is None for d in digests.values()) else digests  # type: ignore[return-value]


def engine_problem(engine: Path, manifest_path: Path, expected: EngineManifest) -> str | None:
    """Why `engine` is not the current engine for `expected` (one clause for a message), or None when it is."""
    engine = Path(engine)
    if not engine.is_file():
        return f"there is no engine at {engine}"
    found = EngineManifest.read(manifest_path)
    if found is None:
        return f"{engine} has no readable manifest (an interrupted build?)"
    if found != expected:
        return f"{engine} was built from other inputs ({', '.join(found.differences(expected))} changed)"
    if found.engine_size is None or found.engine_sha256 is None:
        return f"the manifest of {engine} records no size and sha256 of it"
    digests = found.file_digests()
    if digests is not None:
        files = {p.name for p in (engine, external_data(engine)) if p.is_file()}
        if files - set(digests):
            return f"{engine} has files its manifest does not record ({', '.join(sorted(files - set(digests)))})"
        why = record_problem(engine, digests)
        return why
    size = model_size(engine)
    if size != found.engine_size:
        return (f"{engine} is {size} bytes, its manifest records {found.engine_size} (truncated or replaced since "
                f"it was built)")
    if model_sha256(engine) != found.engine_sha256:
        return f"{engine} does not match the sha256 its manifest records (changed since it was built)"
    return None


def is_current(engine: Path, manifest_path: Path, expected: EngineManifest) -> bool:
    """The engine file exists, its manifest records exactly the expected inputs, and the file is the one built."""
    return engine_problem(engine, manifest_path, expected) is None


