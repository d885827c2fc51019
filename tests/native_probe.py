"""Run LoadGen with a system under test of the native core, in a process of its own.

`python -m tests.native_probe <lib dir or "wheel"> <kind> <scenario> <outdir> [target]` prints a JSON line: the
detail log's loadgen_* fields and results, and the SUT's counters. `lib dir` is put first on sys.path, so
`mlperf_loadgen` is the native build's ("wheel": the installed wheel, for comparison). Kinds: `reference` (LoadGen's
BasicSUT: completes inside IssueQuery), `native` (batcher threads, null backend), `python` (batcher threads, a numpy
backend answering each sample's first input byte), `python-window` (the same with a 100 ms Server batching window),
`failing` (a Python backend that raises on its third batch). Python backends report the size of every batch.
"""
from __future__ import annotations

import json
import sys
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
        return np.repeat(np.asarray(indices, dtype=np.uint8)[:, None], 8, axis=1)   # 8 bytes: the index

    batches = []

    def answer(batch, indices):
        rows = np.frombuffer(batch, dtype=np.uint8).reshape(len(indices), 8)
        batches.append(len(indices))
        if kind == "failing" and len(batches) == 3:
            raise RuntimeError("the backend broke on its third batch")
        data = np.ascontiguousarray(rows[:, :1])
        return data.ravel(), np.arange(len(indices) + 1, dtype=np.int64)

    sut = None
    if kind != "wheel-python":
        import toolkit_native as tn

        qsl = tn.SampleLibrary(SAMPLES, SAMPLES, load)
        if kind == "reference":
            sut = tn.ReferenceSut()
        else:
            backend = tn.NullBackend(4) if kind == "native" else tn.PythonBackend(answer)
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
    settings.mode = lg.TestMode.AccuracyOnly if kind == "python" else lg.TestMode.PerformanceOnly
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
                      batch_sizes=batches)
    for line in (Path(outdir) / "mlperf_log_detail.txt").read_text().splitlines():
        entry = json.loads(line.split(":::MLLOG", 1)[1])
        if entry["key"].startswith(("loadgen_", "result_")):
            result[entry["key"]] = entry["value"]
    accuracy = Path(outdir) / "mlperf_log_accuracy.json"
    if kind == "python" and accuracy.is_file():
        result["accuracy"] = json.loads(accuracy.read_text())
    return result


if __name__ == "__main__":
    args = sys.argv[1:]
    print(json.dumps(main(args[0], args[1], args[2], args[3] if len(args) > 3 else tempfile.mkdtemp(),
                          *(float(a) for a in args[4:]))))
