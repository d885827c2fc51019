"""TensorRT as a backend plug-in: plans for NVIDIA GPUs, built from ONNX whose types carry the precision."""
from __future__ import annotations

import tempfile
from pathlib import Path

from ..engines.tensorrt_onnx import PRECISIONS
from ..errors import EXIT_FAILURE, UserError
from typing import TYPE_CHECKING, Sequence

from .base import Backend
from .registry import BuildRequest, Hardware

if TYPE_CHECKING:
    from ..generation import Decoder

# The LLM decoders: their graph (code/common/decoder_graph.py's contract: standard ONNX ops, dynamic batch and
# sequence axes, the KV cache as inputs and outputs) is what a TensorRT build takes, with one optimization profile for
# prefill and one for decode steps; that build and a runner that keeps the cache on the GPU are not written yet.
DECODER_NOT_YET = ("TensorRT does not run the LLM decoders in this toolkit yet (their ONNX graph is the input such "
                   "an engine would be built from). Run the LLM benchmarks with --backend=onnxruntime.")


class TensorRTPlugin:
    name = "tensorrt"
    engine_extension = "plan"
    batch_specific = True          # a plan's optimization profile is built for one batch size
    precisions = PRECISIONS
    needs = ("an NVIDIA GPU and driver, TensorRT and cuda-python (make build installs the tensorrt environment "
             "where it finds a GPU)")
    # The native core runs TensorRT plans through its python backend (this runner); a C++ runner of its own would
    # be native/src/backends/tensorrt_backend.cc (steps in native/CMakeLists.txt) named here.
    native_backend = None

    @property
    def opt_level(self) -> str:
        from .tensorrt_builder import OPT_LEVEL

        return OPT_LEVEL

    def availability(self) -> str | None:
        try:
            self.runtime_version()
            self.hardware()
        except UserError as error:
            return str(error)
        return None

    def runtime_version(self) -> str:
        from .tensorrt_loader import require_tensorrt

        return f"tensorrt {require_tensorrt()}"

    def check_precision(self, precision: str) -> None:
        from ..engines.tensorrt_onnx import check_precision

        check_precision(precision)

    def hardware(self) -> Hardware:
        """The GPU plans are built for here; all visible GPUs must be of one kind (a plan is per GPU model)."""
        from .cuda_runtime import CudaError, CudaRuntime, describe_cuda_failure

        try:
            cuda = CudaRuntime()
            devices = [cuda.device_info(i) for i in range(cuda.device_count())]
        except CudaError as error:
            raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
        if not devices:
            raise UserError("CUDA sees no GPU here: TensorRT engines need one (check nvidia-smi and "
                            "CUDA_VISIBLE_DEVICES).", exit_code=EXIT_FAILURE)
        kinds = sorted({(d.name, d.compute_capability) for d in devices})
        if len(kinds) > 1:
            raise UserError("The visible GPUs differ (" + "; ".join(f"{n}, compute capability {c}" for n, c in kinds)
                            + "): a plan is built for one GPU model. Choose GPUs of one kind with "
                              "CUDA_VISIBLE_DEVICES.", exit_code=EXIT_FAILURE)
        return Hardware("gpu", *kinds[0])

    def quantization(self, precision: str) -> str | None:
        from ..engines.tensorrt_onnx import QUANTIZATION

        return QUANTIZATION if precision == "int8" else None

    def build(self, request: BuildRequest) -> None:
        from ..engines import tensorrt_onnx
        from . import tensorrt_builder

        if request.decoder:
            raise UserError(DECODER_NOT_YET)
        with tempfile.TemporaryDirectory(prefix="tensorrt.") as work:
            prepared = Path(work) / "prepared.onnx"
            request.log(f"preparing the ONNX model for TensorRT ({request.precision}) ...")
            tensorrt_onnx.prepare(request.model, prepared, request.precision, request.calibration_cache,
                                  request.input_dtype)
            tensorrt_builder.build_plan(prepared, request.engine, batch_size=request.batch_size,
                                        workspace_bytes=request.workspace_bytes, timing_cache=request.timing_cache,
                                        log=request.log)

    def instance_count(self, instances: int) -> int:
        """`instances` counts instances per GPU, as NVIDIA's gpu_inference_streams: a run makes that many for each
        visible GPU (TensorRTBackend puts instance i on GPU i mod count)."""
        from .cuda_runtime import CudaRuntime
        from .tensorrt_backend import gpu_count

        return int(instances) * gpu_count(CudaRuntime())

    def create_backend(self, engine: Path, *, input_names: Sequence[str], threads: int, device: str,
                       instance: int = 0) -> Backend:
        from .tensorrt_backend import TensorRTBackend

        return TensorRTBackend(Path(engine), input_names=input_names, threads=threads, device=device,
                               instance=instance)

    def create_decoder(self, engine: Path, *, threads: int, device: str, max_batch: int,
                       instance: int = 0) -> "Decoder":
        raise UserError(DECODER_NOT_YET)
