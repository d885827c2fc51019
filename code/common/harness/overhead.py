"""Harness overhead probe: Offline samples/s of a bare LoadGen null SUT, or of the harness SUT with a
backend that returns at once. Each LoadGen test needs a process of its own:

    python3 -m code.common.harness.overhead {bare|harness} <outdir> <seconds> <batch_size> <instances>

Prints one JSON line: {"samples_per_second": ..., "valid": ...}.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from ..benchmark_api import Responses, TensorSpec
from ..constants import Scenario, TestMode
from ..paths import AUDIT_CONFIG, USER_CONF
from ..records.loadgen_log import read_detail
from .qsl import SampleLibrary
from .settings import test_settings, write_user_conf
from .sut import HarnessSUT

SAMPLES = 1024
TARGET_QPS = 2_000_000   # above what Python can complete, so the query is large


class _GeneratedSet:
    """Small generated samples: the probe measures the harness, not memory bandwidth."""

    directory = Path(".")
    inputs = (TensorSpec("input", "float32", (16,)),)

    def __init__(self) -> None:
        self.data = np.zeros((SAMPLES, 16), dtype=np.float32)

    def __len__(self) -> int:
        return SAMPLES

    def load(self, index: int) -> np.ndarray:
        return self.data[index]


def _bare_sut(lg):
    def issue(ids, indices):
        lg.QuerySamplesComplete([lg.QuerySampleResponse(i, 0, 0) for i in ids])

    return lg.ConstructFastSUT(issue, lambda: None)


def measure(kind: str, outdir: Path, seconds: float, batch_size: int, instances: int) -> dict:
    import mlperf_loadgen as lg

    outdir.mkdir(parents=True, exist_ok=True)
    qsl = SampleLibrary(_GeneratedSet(), SAMPLES, _GeneratedSet.inputs)
    sut = None
    if kind == "bare":
        lg_sut = _bare_sut(lg)
    elif kind == "harness":
        def null_backend(inputs: dict[str, np.ndarray], indices: np.ndarray) -> Responses:
            return Responses.rows(np.zeros(len(indices), dtype=np.int32))

        sut = HarnessSUT(Scenario.Offline, qsl, [null_backend] * instances, batch_size).start()
        lg_sut = sut.construct()
    else:
        raise ValueError(f"unknown probe kind {kind!r}: bare or harness")
    key = "resnet50.Offline"
    conf = write_user_conf(outdir / USER_CONF, [f"{key}.target_qps = {TARGET_QPS}",
                                                  f"{key}.min_duration = {int(seconds * 1000)}",
                                                  f"{key}.performance_sample_count_override = {SAMPLES}"])
    settings = test_settings(conf, "resnet50", Scenario.Offline, TestMode.PerformanceOnly)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(outdir)
    log_settings.enable_trace = False
    lg_qsl = qsl.construct()
    lg.StartTestWithLogSettings(lg_sut, lg_qsl, settings, log_settings, str(outdir / AUDIT_CONFIG))
    if sut is not None:
        sut.stop()
        if sut.error is not None:   # a failing backend completes empty at once: no figure of the harness
            raise RuntimeError(f"the null backend failed: {type(sut.error).__name__}: {sut.error}")
    log = read_detail(outdir)
    return {"samples_per_second": float(log.get("result_samples_per_second", 0.0)), "valid": log.valid}


if __name__ == "__main__":
    kind, outdir, seconds, batch, instances = sys.argv[1:6]
    print(json.dumps(measure(kind, Path(outdir), float(seconds), int(batch), int(instances))))
