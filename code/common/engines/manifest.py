"""The inputs an engine was built from. An engine whose manifest equals the expected one is current;
anything else (missing, unreadable, any field different) means rebuild."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..fileio import write_atomically

# Bump when the builder's output for the same inputs changes (new passes, other quantization recipe):
# every existing engine then reads as stale.
BUILDER_VERSION = 1


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
    batch_size: int
    device: str                  # "cpu" | "gpu"
    runtime_version: str         # e.g. "onnxruntime 1.31.1": engines are only trusted by the runtime that wrote them
    opt_level: str               # optimization level the engine was saved at
    quantization: str | None = None          # the INT8 recipe, None otherwise
    calibration: CalibrationInfo | None = None
    builder_version: int = BUILDER_VERSION

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
        """Names of the fields that differ, for messages."""
        return [f.name for f in dataclasses.fields(self) if getattr(self, f.name) != getattr(other, f.name)]


def is_current(engine: Path, manifest_path: Path, expected: EngineManifest) -> bool:
    """The engine file exists and its manifest records exactly the expected inputs."""
    return Path(engine).is_file() and EngineManifest.read(manifest_path) == expected


