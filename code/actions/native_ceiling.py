"""The harness's ceiling with a null backend: one LoadGen PerformanceOnly test, in a process of its own.

    python -m code.actions.native_ceiling <lib dir> <kind> <Offline|Server> <outdir> <target_qps> <seconds>

`lib dir` (the native build's, build/native/lib) goes first on sys.path, so the three kinds run on the same LoadGen:
- `reference`: a minimal C++ SUT that completes every sample inside IssueQuery (the BasicSUT of LoadGen's
  loadgen/benchmark/repro.cpp): the limit;
- `reference-batched`: the same, completing in calls of the native harness's batch size (NATIVE_BATCH): LoadGen's
  own cost per completed sample then falls inside the measured time, as for any SUT that completes batch by batch;
- `native`: the native harness core (toolkit_native.Sut) with its C++ null backend (created by name, as a backend
  plug-in's C++ runner is);
- `python`: the Python harness (HarnessSUT) with a backend that returns at once.
The target is server_target_qps (Server, p99 bound 10 ms) or offline_expected_qps (Offline), the run lasts at least
`seconds`. Prints one JSON line: validity, the Server p99 latency, the samples/s LoadGen measured, the SUT's counters.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

KINDS = ("reference", "reference-batched", "native", "python")
SAMPLES = 1024           # in the performance set, of SAMPLE_FLOATS float32 each: the harness, not memory bandwidth
SAMPLE_FLOATS = 16
RESPONSE_BYTES = 4       # one int32 per sample, as a classifier answers
LATENCY_BOUND_NS = 10_000_000
MIN_QUERY_COUNT = 100
# The native SUT with a null backend on a small machine: one batcher thread (a second only competes with LoadGen's
# issuing and logging threads for the cores, and a null backend gains nothing from running twice at once); batches
# of up to 64 samples, waiting at most 200 us after a batch's first sample. Near the ceiling (a sample every few us)
# a batch fills within that wait, so each wake-up and LoadGen completion call serves tens of samples, while the wait
# is 2 % of the 10 ms bound. Measured on 2 cores at 600k samples/s, 3 s runs: two instances were INVALID (p99
# 12-33 ms) where one was VALID (p99 2.4-3.6 ms); batches of 16 had a longer p99 (3.5-5.2 ms), of 256 the same as 64;
# waits of 50 us to 1 ms made no clear difference.
NATIVE_INSTANCES, NATIVE_BATCH, NATIVE_TIMEOUT_US = 1, 64, 200
# The Python harness, for the record: one worker (its per-sample costs hold the GIL), same batches and wait.
PYTHON_INSTANCES, PYTHON_BATCH, PYTHON_TIMEOUT_US = 1, 64, 200


INPUT = ("input", "float32", (SAMPLE_FLOATS,))   # one named input (name, dtype, per-sample shape)


def _samples(indices) -> list[tuple[np.ndarray, None]]:
    return [(np.zeros((len(indices), SAMPLE_FLOATS), dtype=np.float32), None)]


def _settings(lg, scenario: str, target: float, seconds: float):
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.PerformanceOnly
    settings.server_target_qps = settings.offline_expected_qps = target
    settings.server_target_latency_ns = LATENCY_BOUND_NS
    settings.min_duration_ms = int(seconds * 1000)
    settings.min_query_count = MIN_QUERY_COUNT
    return settings


def _python_sut(scenario: str):
    """The toolkit's Python harness and sample library, with a backend that returns at once."""
    from ..common.benchmark_api import Responses, TensorSpec
    from ..common.constants import Scenario
    from ..common.harness.qsl import SampleLibrary
    from ..common.harness.sut import HarnessSUT

    class GeneratedSet:
        directory = Path(".")
        data = np.zeros((SAMPLES, SAMPLE_FLOATS), dtype=np.float32)

        def __len__(self) -> int:
            return SAMPLES

        def load(self, index: int) -> np.ndarray:
            return self.data[index]

    zeros = np.zeros(512 * RESPONSE_BYTES, dtype=np.uint8)          # HarnessSUT's largest item: 512 samples
    offsets = np.arange(513, dtype=np.int64) * RESPONSE_BYTES

    def null_backend(inputs: dict[str, np.ndarray], indices: np.ndarray) -> Responses:
        return Responses(zeros, offsets[:len(indices) + 1])

    qsl = SampleLibrary(GeneratedSet(), SAMPLES, (TensorSpec(*INPUT),))
    sut = HarnessSUT(Scenario.parse(scenario), qsl, [null_backend] * PYTHON_INSTANCES, PYTHON_BATCH,
                     PYTHON_TIMEOUT_US).start()
    return sut, sut.construct(), qsl.construct()


def run(lib: str, kind: str, scenario: str, outdir: Path, target: float, seconds: float) -> dict:
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}: one of {', '.join(KINDS)}")
    if scenario not in ("Offline", "Server"):
        raise ValueError(f"unknown scenario {scenario!r}: Offline or Server")
    sys.path.insert(0, str(lib))
    import mlperf_loadgen as lg

    counters: dict = {}
    if kind == "python":
        sut, sut_handle, qsl_handle = _python_sut(scenario)
    else:
        import toolkit_native as tn

        name, dtype, shape = INPUT
        layout = tn.InputLayout(name, np.dtype(dtype).itemsize, list(shape), bytes(np.dtype(dtype).itemsize), [])
        qsl = tn.SampleLibrary(SAMPLES, SAMPLES, [layout], _samples)
        if kind.startswith("reference"):
            sut = tn.ReferenceSut(NATIVE_BATCH if kind == "reference-batched" else 0)
        else:
            null = tn.create_backend("null", {"response_bytes": str(RESPONSE_BYTES)})
            sut = tn.Sut(qsl, [null] * NATIVE_INSTANCES, NATIVE_BATCH, NATIVE_TIMEOUT_US)
            sut.start()
        sut_handle, qsl_handle = sut.handle, qsl.handle
    outdir.mkdir(parents=True, exist_ok=True)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.log_output.copy_summary_to_stdout = False
    log_settings.enable_trace = False
    lg.StartTestWithLogSettings(sut_handle, qsl_handle, _settings(lg, scenario, target, seconds), log_settings, "")
    if kind == "native":
        sut.stop()
        counters = {"issued": sut.issued, "completed": sut.completed, "batches": sut.batches, "error": sut.error}
    elif kind == "python":
        sut.stop()
        counters = {"issued": sut.counters.issued, "completed": sut.counters.completed,
                    "error": "" if sut.error is None else repr(sut.error)}

    from ..common.records.loadgen_log import read_detail

    log = read_detail(outdir)
    measured = log.get("result_completed_samples_per_sec" if scenario == "Server" else "result_samples_per_second")
    p99 = log.get("result_99.00_percentile_latency_ns") if scenario == "Server" else None
    return {"kind": kind, "scenario": scenario, "target_qps": target, "seconds": seconds, "module": lg.__file__,
            "validity": log.get("result_validity"), "valid": log.valid,
            "p99_latency_ns": None if p99 is None else float(p99),
            "samples_per_second": None if measured is None else float(measured),
            "min_duration_met": log.get("result_min_duration_met"),
            "perf_constraints_met": log.get("result_perf_constraints_met"),
            "early_stopping_met": log.get("early_stopping_met"), **counters}


if __name__ == "__main__":
    lib_dir, kind_arg, scenario_arg, out_arg, target_arg, seconds_arg = sys.argv[1:7]
    print(json.dumps(run(lib_dir, kind_arg, scenario_arg, Path(out_arg), float(target_arg), float(seconds_arg))))
