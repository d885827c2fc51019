"""Run LoadGen with a system under test of the native core, in a process of its own.

`python -m tests.native_probe <lib dir or "wheel"> <kind> <scenario> <outdir> [target]` prints a JSON line: the
detail log's loadgen_* fields and results, and the SUT's counters. `lib dir` is put first on sys.path, so
`mlperf_loadgen` is the native build's ("wheel": the installed wheel, for comparison). Kinds: `reference` (LoadGen's
BasicSUT: completes inside IssueQuery), `native` (batcher threads, null backend), `python` (batcher threads, a numpy
backend answering each sample's first input byte), `python-window` (the same with a 100 ms Server batching window),
`failing` (a Python backend that raises on its third batch), `padded` (two named inputs, one of two varying axes
padded with 7 to buckets: every batch the core gathers is compared with named_inputs.gather_input's), `in-place`
(a Python backend that checks every batch's samples and counts the batches read where the loaded set holds them and
those copied, in AccuracyOnly and PerformanceOnly: Offline at batch 8; Server at batch 4 within 2 ms, whose samples
LoadGen draws at random). Python backends report the size of every batch.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import tempfile
from pathlib import Path

import numpy as np

SAMPLES = 64


def main(lib: str, kind: str, scenario: str, outdir: str, target: float = 2000.0) -> dict:
    if lib != "wheel":
        sys.path.insert(0, lib)
    import mlperf_loadgen as lg

    result: dict = {"module": lg.__file__}

    def load(indices):
        return [(np.repeat(np.asarray(indices, dtype=np.uint8)[:, None], 8, axis=1), None)]   # 8 bytes: the index

    batches = []
    if kind == "padded":
        return {"module": lg.__file__, **padded(lg, scenario, outdir)}
    if kind == "in-place":
        return {"module": lg.__file__, **in_place(lg, scenario, outdir)}

    callers = set()

    def answer(inputs, indices):
        [(batch, shape)] = inputs
        rows = np.frombuffer(batch, dtype=np.uint8).reshape(shape)
        batches.append(len(indices))
        callers.add(threading.get_ident())
        if kind in ("failing", "inline-failing") and len(batches) == 3:
            raise RuntimeError("the backend broke on its third batch")
        data = np.ascontiguousarray(rows[:, :1])
        return data.ravel(), np.arange(len(indices) + 1, dtype=np.int64)

    sut = None
    if kind != "wheel-python":
        import toolkit_native as tn

        qsl = tn.SampleLibrary(SAMPLES, SAMPLES, [tn.InputLayout("index", 1, [8], b"\0", [])], load)
        if kind == "reference":
            sut = tn.ReferenceSut()
        elif kind.startswith("inline"):     # SingleStream's: the query runs on LoadGen's issuing thread
            try:
                tn.Sut(qsl, [tn.PythonBackend(answer)] * 2, 1, 0, True)
            except ValueError as error:
                result["two_instances"] = str(error)
            threads = len(os.listdir("/proc/self/task"))
            sut = tn.Sut(qsl, [tn.PythonBackend(answer)], 1, 0, True)
            sut.start()
            result["threads_started"] = len(os.listdir("/proc/self/task")) - threads
        else:
            backend = tn.create_backend("null", {"response_bytes": "4"}) if kind == "native" \
                else tn.PythonBackend(answer)
            sut = tn.Sut(qsl, [backend, backend], 8, 100_000 if kind == "python-window" else 1000)
            sut.start()
        sut_handle, qsl_handle = sut.handle, qsl.handle
    else:
        def issue(samples):
            lg.QuerySamplesComplete([lg.QuerySampleResponse(s.id, 0, 0) for s in samples])
        sut_handle = lg.ConstructSUT(issue, lambda: None)
        qsl_handle = lg.ConstructQSL(SAMPLES, SAMPLES, lambda i: None, lambda i: None)
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = lg.TestMode.AccuracyOnly if kind in ("python", "inline") else lg.TestMode.PerformanceOnly
    settings.server_target_latency_ns = 1_000_000_000   # the window must not make the run INVALID
    settings.min_duration_ms, settings.min_query_count = 1000, 100
    settings.offline_expected_qps = settings.server_target_qps = target
    log = lg.LogSettings()
    Path(outdir).mkdir(parents=True, exist_ok=True)
    log.log_output.outdir = outdir
    log.log_output.copy_summary_to_stdout = False
    lg.StartTestWithLogSettings(sut_handle, qsl_handle, settings, log, "")
    if kind not in ("reference", "wheel-python"):
        sut.stop()
        result.update(issued=sut.issued, completed=sut.completed, batches=sut.batches, error=sut.error,
                      batch_sizes=batches, callers=len(callers), main_thread_called=threading.get_ident() in callers)
    for line in (Path(outdir) / "mlperf_log_detail.txt").read_text().splitlines():
        entry = json.loads(line.split(":::MLLOG", 1)[1])
        if entry["key"].startswith(("loadgen_", "result_")):
            result[entry["key"]] = entry["value"]
    accuracy = Path(outdir) / "mlperf_log_accuracy.json"
    if kind in ("python", "inline") and accuracy.is_file():
        result["accuracy"] = json.loads(accuracy.read_text())
    return result


def padded(lg, scenario: str, outdir: str) -> dict:
    """Samples {"id": int32 [1], "m": int16 [h, w]} of varying h and w, "m" padded with 7 to buckets (2, 4, 8); the
    core's batches against what the Python sample library gathers for the same samples."""
    import toolkit_native as tn

    from code.common.benchmark_api import Padding, TensorSpec
    from code.common.named_inputs import gather_input, stack_samples

    inputs = (TensorSpec("id", "int32", (1,)), TensorSpec("m", "int16", (None, None), Padding(7, (2, 4, 8))))
    rng = np.random.default_rng(5)

    class Set:
        directory = Path(".")
        shapes = rng.integers(1, 9, size=(SAMPLES, 2))

        def __len__(self):
            return SAMPLES

        def load(self, index):
            h, w = self.shapes[index]
            return {"id": np.array([index], np.int32), "m": (np.arange(h * w, dtype=np.int16) + 100 * index)
                    .reshape(h, w)}

    samples, stacked, slots = Set(), {}, {}

    def load(indices):
        stacked.update(stack_samples(samples, indices, inputs))
        slots.update({int(index): slot for slot, index in enumerate(indices)})
        return [(stacked[spec.name].data, stacked[spec.name].extents) for spec in inputs]

    checked = {"batches": 0, "mismatches": 0}

    def answer(batch, indices):
        checked["batches"] += 1
        rows = np.array([slots[int(i)] for i in indices])
        for spec, (data, shape) in zip(inputs, batch, strict=True):
            got = np.frombuffer(data, dtype=spec.dtype).reshape(shape)
            expected = gather_input(stacked[spec.name], rows, spec)
            checked["mismatches"] += int(got.shape != expected.shape or not np.array_equal(got, expected))
        return np.zeros(len(indices), np.uint8), np.arange(len(indices) + 1, dtype=np.int64)

    layouts = [tn.InputLayout(spec.name, np.dtype(spec.dtype).itemsize, [-1 if s is None else s for s in spec.shape],
                              np.array(spec.padding.value if spec.padding else 0, spec.dtype).tobytes(),
                              list(spec.padding.buckets) if spec.padding else []) for spec in inputs]
    qsl = tn.SampleLibrary(SAMPLES, SAMPLES, layouts, load)
    sut = tn.Sut(qsl, [tn.PythonBackend(answer)], 8, 1000)
    sut.start()
    _run(lg, sut, qsl, scenario, "AccuracyOnly", outdir)
    sut.stop()
    return {**checked, "error": sut.error, "completed": sut.completed}


def _run(lg, sut, qsl, scenario: str, mode: str, outdir: str) -> None:
    """One short LoadGen test of `sut` at 2000 samples/s, its logs in `outdir`."""
    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario)
    settings.mode = getattr(lg.TestMode, mode)
    settings.server_target_latency_ns = 1_000_000_000
    settings.min_duration_ms, settings.min_query_count = 100, 64
    settings.offline_expected_qps = settings.server_target_qps = 2000
    log = lg.LogSettings()
    Path(outdir).mkdir(parents=True, exist_ok=True)
    log.log_output.outdir = outdir
    log.log_output.copy_summary_to_stdout = False
    lg.StartTestWithLogSettings(sut.handle, qsl.handle, settings, log, "")


def in_place(lg, scenario: str, outdir: str) -> dict:
    """Per test mode: the batches whose samples were read where the loaded set holds them, those copied, and those
    whose bytes were not their samples'."""
    import toolkit_native as tn

    held: list[np.ndarray] = []

    def load(indices):
        held[:] = [np.repeat(np.asarray(indices, dtype=np.uint8)[:, None], 8, axis=1)]
        return [(held[0], None)]

    counts: dict = {}

    def answer(inputs, indices):
        [(batch, shape)] = inputs
        rows = np.frombuffer(batch, dtype=np.uint8).reshape(shape)
        start, end = held[0].ctypes.data, held[0].ctypes.data + held[0].nbytes
        where = "in_place" if start <= rows.ctypes.data < end else "copied"
        counts[where] = counts.get(where, 0) + 1
        counts["wrong"] = counts.get("wrong", 0) + int(not np.array_equal(rows[:, 0], np.asarray(indices) % 256))
        return np.zeros(len(indices), np.uint8), np.arange(len(indices) + 1, dtype=np.int64)

    qsl = tn.SampleLibrary(SAMPLES, SAMPLES, [tn.InputLayout("index", 1, [8], b"\0", [])], load)
    sut = tn.Sut(qsl, [tn.PythonBackend(answer)], 8 if scenario == "Offline" else 4,
                 0 if scenario == "Offline" else 2000)
    sut.start()
    result = {}
    for mode in ("AccuracyOnly", "PerformanceOnly"):
        counts.clear()
        _run(lg, sut, qsl, scenario, mode, f"{outdir}/{mode}")
        result[mode] = dict(counts)
    sut.stop()
    return {**result, "error": sut.error}


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(main(args[0], args[1], args[2], args[3] if len(args) > 3 else tempfile.mkdtemp(),
                          *(float(a) for a in args[4:]))))
