"""TensorRT backend: a plan file -> one execution context per backend instance on one GPU, run by a StreamRunner.

- GPUs: `instances` counts instances per GPU (NVIDIA's `gpu_inference_streams`); the harness makes that many for
  every visible GPU (TensorRTPlugin.instance_count) and instance i runs on GPU i mod count. The device is set
  before every engine load, context creation, allocation, copy, inference and release, in the thread doing it.
- The parts, in the shape of Polygraphy's backend/trt: tensorrt_loader.py (the bindings, plan deserialization
  shared per GPU, engine checks), tensorrt_runner.py (buffers, streams, execution), tensorrt_resident.py (the
  performance set kept on each GPU: start_from_device), and tensorrt_builder.py beside them (ONNX -> plan).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from ..errors import EXIT_FAILURE, UserError
from .base import Backend
from .cuda_runtime import CudaCalls, CudaError, CudaRuntime, describe_cuda_failure
from .tensorrt_loader import ENGINES, check_inputs, describe_engine, no_context, profile_max_batch, require_tensorrt
from .tensorrt_resident import ResidentBatch
from .tensorrt_runner import StreamRunner

if TYPE_CHECKING:
    import tensorrt as trt


def gpu_count(cuda: CudaRuntime) -> int:
    """The visible GPUs; a UserError saying what is missing where CUDA finds none."""
    try:
        count = cuda.device_count()
    except CudaError as error:
        raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
    if count < 1:
        raise UserError("CUDA found no GPU: check CUDA_VISIBLE_DEVICES and nvidia-smi", exit_code=EXIT_FAILURE)
    return count


def instance_gpu(instance: int, gpus: int) -> int:
    """The GPU of the `instance`-th instance of a run: instances go to the GPUs in turn, so that every GPU gets
    `instances` of them when the harness makes `instances` x GPUs (TensorRTPlugin.instance_count)."""
    return instance % max(1, gpus)


class TensorRTBackend(Backend):
    """One instance: an execution context on one GPU, fed by a StreamRunner with two buffer sets. It accepts two
    calls at once (`parallel_calls`), so that the harness's two callers keep a batch copying while one computes."""

    direct_batches = True     # batches are gathered straight into the runner's pinned buffers

    def __init__(self, engine_path: Path, *, input_names: Sequence[str], threads: int = 0, device: str = "gpu",
                 instance: int = 0, buffer_sets: int = 2) -> None:
        require_tensorrt()
        engine_path = Path(engine_path)
        if not engine_path.is_file():
            raise UserError(f"No engine at {engine_path}; build it with `make generate_engines`.",
                            exit_code=EXIT_FAILURE)
        cuda = CudaRuntime()
        self._cuda: CudaCalls = cuda
        self.input_names, self._plan = tuple(input_names), engine_path
        # The GPU count first, before any TensorRT object: TensorRT's runtime does not survive a CUDA without a GPU.
        self._gpu = instance_gpu(instance, gpu_count(cuda))
        self.parallel_calls = buffer_sets
        self._runner: StreamRunner | None = None
        self._context: "trt.IExecutionContext | None" = None
        try:
            engine = ENGINES.acquire(engine_path, self._gpu, cuda)
        except CudaError as error:
            raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
        try:
            tensors = describe_engine(engine)
            check_inputs(engine_path, tensors, self.input_names)
            cuda.set_device(self._gpu)
            self._context = engine.create_execution_context()    # alive as long as the runner uses it
            if self._context is None:
                raise UserError(no_context(engine_path, self._gpu), exit_code=EXIT_FAILURE)
            self._runner = StreamRunner(tensors, self._context, cuda, profile_max_batch(engine, self.input_names),
                                        self.input_names, self._gpu, buffer_sets=buffer_sets)
        except BaseException as error:
            del engine                 # the error's traceback keeps this frame: no reference to the engine in it
            self._runner = None
            self._free_context()
            ENGINES.release(engine_path, self._gpu, cuda)
            if isinstance(error, CudaError):
                raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
            raise

    @property
    def gpu(self) -> int:
        return self._gpu

    def infer(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        if self._runner is None:
            raise RuntimeError("backend is closed")
        return self._runner.infer(inputs)   # a PendingBatch too (direct_batches)

    def keep_inputs_on_device(self) -> None:
        if self._runner is None:
            raise RuntimeError("backend is closed")
        self._runner.keep_inputs_on_device()

    def upload(self, loaded: ResidentBatch) -> None:
        """The performance set LoadGen loaded, onto this instance's GPU (start_from_device; once per GPU)."""
        if self._runner is not None:
            self._runner.upload(loaded)

    def _free_context(self) -> None:
        context, self._context = self._context, None
        if context is not None:
            self._cuda.set_device(self._gpu)
            del context

    def close(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            runner.close()
            del runner                 # its reference to the context goes with it
            self._free_context()
            ENGINES.release(self._plan, self._gpu, self._cuda)
