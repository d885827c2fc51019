"""A Triton Inference Server model repository for one engine: `<repository>/<model>/config.pbtxt` and a version 1.

Two layouts, one shape:

- ONNX Runtime engines (any machine): Triton's python backend, with `1/model.py` (python_model.py of this package)
  running the toolkit's own backend on the engine file, so Triton serves exactly what the in-process harness runs.
- TensorRT plans (NVIDIA GPUs, in NVIDIA's Triton container): Triton's own tensorrt backend, `1/model.plan` a link
  to the plan; nothing of the toolkit runs inside the server.

The config carries dynamic batching (max batch = the config's batch_size, queue delay = server_batch_timeout_us),
the instance count (the config's instances) and, as parameters, the engine's path and sha256, which clients read
back (get_model_config) to record what each endpoint serves.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..benchmark_api import TensorSpec
from ..errors import UserError
from ..fileio import write_atomically
from ..paths import REPO_ROOT

PYTHON_MODEL = Path(__file__).with_name("python_model.py")
VERSION = "1"

# numpy dtype name -> Triton's data type (config.pbtxt spells it TYPE_<name>, the client <name>).
TRITON_DTYPES = {"float32": "FP32", "float16": "FP16", "float64": "FP64", "int64": "INT64", "int32": "INT32",
                 "int16": "INT16", "int8": "INT8", "uint8": "UINT8", "bool": "BOOL"}


def triton_dtype(numpy_name: str) -> str:
    try:
        return TRITON_DTYPES[numpy_name]
    except KeyError:
        raise UserError(f"Triton has no data type for numpy's {numpy_name}; supported: "
                        f"{', '.join(TRITON_DTYPES)}.") from None


@dataclass(frozen=True)
class TritonModel:
    """What one repository entry serves, and how."""

    name: str                         # the model's name in the repository and in every request
    engine: Path
    engine_sha256: str
    toolkit_backend: str              # onnxruntime (python backend) or tensorrt (Triton's tensorrt backend)
    device: str                       # cpu or gpu
    inputs: tuple[TensorSpec, ...]   # the model's named inputs, one sample each (no batch axis)
    outputs: tuple[TensorSpec, ...]   # the engine's outputs, in its order
    max_batch_size: int
    instances: int
    threads: int                      # intra-op threads of each instance (python backend)
    max_queue_delay_us: int

    @property
    def tensorrt(self) -> bool:
        return self.toolkit_backend == "tensorrt"

    def parameters(self) -> dict[str, str]:
        return {"engine": str(self.engine), "engine_sha256": self.engine_sha256,
                "toolkit_backend": self.toolkit_backend, "device": self.device, "threads": str(self.threads),
                "toolkit_root": str(REPO_ROOT)}


def _dims(shape: tuple[int | None, ...]) -> str:
    return ", ".join("-1" if size is None else str(int(size)) for size in shape)


def _tensor(spec: TensorSpec) -> str:
    return (f'  {{\n    name: "{spec.name}"\n    data_type: TYPE_{triton_dtype(spec.dtype)}\n'
            f'    dims: [ {_dims(spec.shape)} ]\n  }}')


def config_pbtxt(model: TritonModel) -> str:
    """The model's config.pbtxt (protobuf text format)."""
    kind = "KIND_GPU" if model.device == "gpu" else "KIND_CPU"
    lines = [f'name: "{model.name}"',
             'backend: "tensorrt"' if model.tensorrt else 'backend: "python"',
             f"max_batch_size: {model.max_batch_size}",
             "input [\n" + ",\n".join(_tensor(i) for i in model.inputs) + "\n]",
             "output [\n" + ",\n".join(_tensor(o) for o in model.outputs) + "\n]",
             f"instance_group [\n  {{\n    count: {model.instances}\n    kind: {kind}\n  }}\n]",
             f"dynamic_batching {{\n  max_queue_delay_microseconds: {model.max_queue_delay_us}\n}}"]
    if model.tensorrt:
        lines.append('default_model_filename: "model.plan"')
    for key, value in model.parameters().items():
        lines.append(f'parameters {{\n  key: "{key}"\n  value: {{ string_value: {json.dumps(value)} }}\n}}')
    return "\n".join(lines) + "\n"


def write_repository(model: TritonModel, repository: Path) -> Path:
    """Write (or rewrite) `repository/<model.name>`; returns the repository folder. Other models in it are kept."""
    folder = repository / model.name
    shutil.rmtree(folder, ignore_errors=True)
    version = folder / VERSION
    version.mkdir(parents=True)
    write_atomically(folder / "config.pbtxt", config_pbtxt(model))
    if model.tensorrt:
        (version / "model.plan").symlink_to(Path(model.engine).resolve())
    else:
        shutil.copyfile(PYTHON_MODEL, version / "model.py")
    return repository


def engine_outputs(engine: Path) -> tuple[TensorSpec, ...]:
    """An ONNX engine's outputs, names and types as the runtime returns them (no batch axis)."""
    import onnx
    from onnx import helper

    graph = onnx.load(str(engine), load_external_data=False).graph
    outputs = []
    for value in graph.output:
        tensor = value.type.tensor_type
        dims = tuple(d.dim_value if d.HasField("dim_value") else None for d in tensor.shape.dim)
        dtype = helper.tensor_dtype_to_np_dtype(tensor.elem_type).name
        outputs.append(TensorSpec(value.name, dtype, dims[1:]))
    return tuple(outputs)
