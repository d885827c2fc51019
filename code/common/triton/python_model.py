"""Triton python-backend model: runs the toolkit's own backend on an engine file (copied as `<model>/1/model.py`).

It runs inside Triton's python backend stub, in the Triton environment (.venv-triton), with the toolkit's source
tree on sys.path (the `toolkit_root` parameter). The config's parameters say which engine, backend, device and
intra-op threads. Every `execute` gets what Triton's dynamic batcher grouped: one backend call for all of it, then
each request gets its own rows back.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        params = {key: value["string_value"] for key, value in config.get("parameters", {}).items()}
        if params["toolkit_root"] not in sys.path:
            sys.path.insert(0, params["toolkit_root"])
        from code.common.backends import create_backend

        self.input_names = [spec["name"] for spec in config["input"]]
        self.output_names = [output["name"] for output in config["output"]]
        tail = str(args.get("model_instance_name", "")).rsplit("_", 1)[-1]
        self.backend = create_backend(Path(params["engine"]), backend=params["toolkit_backend"],
                                      input_names=self.input_names, threads=int(params["threads"]),
                                      device=params["device"], instance=int(tail) if tail.isdigit() else 0)

    def execute(self, requests):
        # Triton's dynamic batcher groups only requests whose inputs have one shape, so they concatenate.
        named = [{name: pb_utils.get_input_tensor_by_name(request, name).as_numpy() for name in self.input_names}
                 for request in requests]
        arrays = [inputs[self.input_names[0]] for inputs in named]
        try:
            batch = named[0] if len(named) == 1 else \
                {name: np.concatenate([inputs[name] for inputs in named]) for name in self.input_names}
            outputs = self.backend.infer(batch)
            if len(outputs) != len(self.output_names):
                raise RuntimeError(f"the engine returned {len(outputs)} outputs, the model config names "
                                   f"{len(self.output_names)}")
        except Exception as error:  # noqa: BLE001  each request gets the error; the server keeps serving
            message = f"{type(error).__name__}: {error}"
            return [pb_utils.InferenceResponse(error=pb_utils.TritonError(message)) for _ in requests]
        responses, start = [], 0
        for array in arrays:
            rows = slice(start, start + len(array))
            start += len(array)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor(name, np.ascontiguousarray(output[rows]))
                for name, output in zip(self.output_names, outputs)]))
        return responses

    def finalize(self):
        self.backend.close()
