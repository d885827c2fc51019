"""selftest_gpu: the first thing to run on a machine with an NVIDIA GPU. It says which CUDA, GPUs and TensorRT are
here, then checks in two parts:

1. CUDA (cuda-python only, runs whether TensorRT is installed or not): on every GPU, a stream, events, pinned host
   memory and device buffers, and a round trip of a byte pattern host -> device -> device -> host, compared byte
   for byte (selftest_cuda.py).
2. TensorRT, when it is installed: a small generated network built into a TensorRT plan at fp32, fp16 and int8
   (the same ONNX preparation and builder as `make generate_engines`), each plan run on two instances (two
   execution contexts on two streams) at several batch sizes, every output compared with ONNX Runtime on the CPU
   running the same prepared ONNX. Without TensorRT this part is skipped and said so.

With no NVIDIA driver (or no GPU, or no cuda-python) it stops at once with the reason in words. Everything it found
is printed and written to build/selftest_gpu/report.json, so one run tells whether the GPU path works and, if not,
where it stops. Exit status 0 when every check that ran passed.
"""
from __future__ import annotations

import json
import platform
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.fileio import write_atomically
from .base import Handler

if TYPE_CHECKING:
    from .selftest_cuda import CudaCheckRuntime

PLAN_BATCH = 8
BATCHES = (1, 5, 8, 13)           # 13 > the plan's batch: the runner runs it in two parts
INSTANCES = 2
# Largest |TensorRT - ONNX Runtime| over the largest |ONNX Runtime| output. fp32 may run in TF32 (TensorRT's
# default on Ampere and newer); int8 is compared with the same Q/DQ model run as written (fake quantization).
TOLERANCE = {"fp32": 5e-3, "fp16": 2e-2, "int8": 5e-2}


class SelftestGpu(Handler):
    def handle(self) -> int:
        report: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine()}
        out = self.ctx.paths.build / "selftest_gpu"
        out.mkdir(parents=True, exist_ok=True)
        try:
            cuda = self._environment(report)
            report["cuda_check"] = self._cuda_check(cuda, report["gpus"])
            version = self._tensorrt(report)
            if version is not None:
                with tempfile.TemporaryDirectory(prefix="selftest_gpu.") as work:
                    report["precisions"] = {p: self._precision(p, Path(work), out) for p in TOLERANCE}
        except UserError as error:
            report["stopped"] = str(error)
            self._write(out, report)
            raise
        self._write(out, report)
        failed = [f"GPU {c['device']} round trip" for c in report["cuda_check"] if not c["bytes_match"]]
        failed += [p for p, result in report.get("precisions", {}).items() if not result["ok"]]
        if failed:
            self.ctx.log(f"selftest_gpu FAILED for {', '.join(failed)}: see {out / 'report.json'}")
            return EXIT_FAILURE
        if "precisions" not in report:
            self.ctx.log(f"selftest_gpu: the CUDA part passed on {len(report['gpus'])} GPU(s); the TensorRT part did "
                         f"not run ({report['tensorrt']}). Report: {out / 'report.json'}")
            return EXIT_OK
        self.ctx.log(f"selftest_gpu passed: CUDA round trips on {len(report['gpus'])} GPU(s), TensorRT plans at "
                     f"{', '.join(TOLERANCE)} match ONNX Runtime. Report: {out / 'report.json'}. Next: make run")
        return EXIT_OK

    def _tensorrt(self, report: dict[str, Any]) -> str | None:
        """TensorRT's version; None (the reason in the report) when it is not installed."""
        from ..common.backends.tensorrt_loader import require_tensorrt

        try:
            version = require_tensorrt()
        except UserError as error:
            report["tensorrt"] = f"not checked: {error}"
            self.ctx.log(f"TensorRT: {error}. The TensorRT part (plans) is skipped.")
            return None
        report["tensorrt"] = version
        self.ctx.log(f"TensorRT {version}")
        return version

    def _cuda_check(self, cuda: "CudaCheckRuntime", gpus: list[dict[str, Any]]) -> list[dict[str, Any]]:
        from ..common.backends.cuda_runtime import CudaError
        from .selftest_cuda import check_device

        results = []
        for gpu in gpus:
            try:
                result = check_device(cuda, gpu["index"])
            except CudaError as error:
                raise UserError(f"GPU {gpu['index']}: {error}", exit_code=EXIT_FAILURE) from None
            self.ctx.log(result.line())
            results.append(result.as_dict())
        return results

    def _environment(self, report: dict[str, Any]) -> "CudaCheckRuntime":
        from ..common.backends.cuda_runtime import CudaError, describe_cuda_failure
        from .selftest_cuda import CudaCheckRuntime, cuda_readiness

        reason = cuda_readiness()
        if reason is not None:
            raise UserError(reason, exit_code=EXIT_FAILURE)
        try:
            cuda = CudaCheckRuntime()
            driver, runtime = cuda.versions()
            devices = [cuda.device_info(i) for i in range(cuda.device_count())]
        except CudaError as error:
            raise UserError(describe_cuda_failure(error), exit_code=EXIT_FAILURE) from None
        report["cuda"] = {"driver": driver, "runtime": runtime}
        report["gpus"] = [{"index": d.index, "name": d.name, "compute_capability": d.compute_capability,
                           "memory_gib": round(d.memory_bytes / 2**30, 1)} for d in devices]
        self.ctx.log(f"CUDA driver {driver}, runtime {runtime}; GPUs: "
                     + ("; ".join(f"{d.index}: {d.name} (sm {d.compute_capability})" for d in devices) or "none"))
        if not devices:
            raise UserError("CUDA sees no GPU (check nvidia-smi and CUDA_VISIBLE_DEVICES).", exit_code=EXIT_FAILURE)
        return cuda

    def _precision(self, precision: str, work: Path, out: Path) -> dict[str, Any]:
        from ..common.backends import tensorrt_builder
        from ..common.backends.tensorrt_backend import TensorRTBackend
        from ..common.engines import probe_model, tensorrt_onnx

        folder = work / precision
        folder.mkdir()
        model = probe_model.write_conv_net(folder / "probe.onnx")
        cache = None
        if precision == "int8":
            cache = probe_model.write_calibration_cache(model, folder / "calibration.json", folder)
        prepared = folder / "prepared.onnx"
        tensorrt_onnx.prepare(model, prepared, precision, cache)
        plan = out / f"probe-{precision}-b{PLAN_BATCH}.plan"
        started = time.perf_counter()
        tensorrt_builder.build_plan(prepared, plan, batch_size=PLAN_BATCH, workspace_bytes=1 << 30,
                                    timing_cache=out / "timing.cache", log=self.ctx.log)
        build_s = time.perf_counter() - started
        reference = tensorrt_onnx.cpu_reference_session(prepared)
        backends = [TensorRTBackend(plan, input_names=[probe_model.INPUT_NAME], instance=i) for i in range(INSTANCES)]
        errors: dict[str, float] = {}
        try:
            for batch_size in BATCHES:
                data = probe_model.inputs(batch_size, seed=batch_size)
                expected = reference.run(None, {probe_model.INPUT_NAME: data})[0]
                scale = float(np.abs(expected).max()) or 1.0
                for index, backend in enumerate(backends):
                    got = backend.infer({probe_model.INPUT_NAME: data})[0]
                    if got.shape != expected.shape:
                        raise UserError(f"{precision}: TensorRT gave shape {got.shape} for batch {batch_size}, "
                                        f"ONNX Runtime {expected.shape}", exit_code=EXIT_FAILURE)
                    errors[f"batch {batch_size}, instance {index}"] = float(np.abs(got - expected).max()) / scale
            latencies = _latencies(backends[0], {probe_model.INPUT_NAME: probe_model.inputs(PLAN_BATCH)})
        finally:
            for backend in backends:
                backend.close()
        worst = max(errors.values())
        ok = worst <= TOLERANCE[precision]
        self.ctx.log(f"{precision}: plan built in {build_s:.1f} s; worst relative difference {worst:.2e} "
                     f"(tolerance {TOLERANCE[precision]:.0e}) {'ok' if ok else 'MISMATCH'}; batch {PLAN_BATCH} "
                     f"p50 {latencies['p50_ms']:.3f} ms")
        return {"ok": ok, "worst_relative_difference": worst, "tolerance": TOLERANCE[precision],
                "differences": errors, "build_seconds": round(build_s, 2), "plan_bytes": plan.stat().st_size,
                "quantized_nodes": tensorrt_onnx.quantized_node_counts(prepared), **latencies}

    @staticmethod
    def _write(out: Path, report: dict[str, Any]) -> None:
        write_atomically(out / "report.json", json.dumps(report, indent=2) + "\n")


def _latencies(backend, data: dict[str, np.ndarray], runs: int = 50) -> dict[str, float]:
    """Wall time of whole infer calls (copies in and out included) at one batch size, after a warm-up."""
    backend.infer(data)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        backend.infer(data)
        times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return {"p50_ms": statistics.median(times), "p99_ms": times[int(0.99 * (len(times) - 1))]}
