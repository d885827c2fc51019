"""Run the harness SUT through the real LoadGen on tiny generated samples, in a process of its own.

`python -m tests.loadgen_probe <Scenario> <outdir> [fail_after] [mode] [variable]` prints a JSON line with what
happened. The backend is a small numpy computation whose answer depends on the input, so responses can be checked:
one int32 per sample, or with `variable` a detection-shaped response of `index % 3` float32 records
[index, 1, 2, 3, 4, 5, 6] (an empty response for every third sample).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from code.common.benchmark_api import Responses, TensorSpec
from code.common.constants import Scenario, TestMode
from code.common.records.loadgen_log import read_detail
from code.common.harness.qsl import SampleLibrary
from code.common.harness.settings import test_settings, write_user_conf
from code.common.harness.sut import HarnessSUT


class TinySet:
    directory = Path(".")
    inputs = (TensorSpec("input", "float32", (4,)),)

    def __init__(self, count: int) -> None:
        self.data = np.arange(count * 4, dtype=np.float32).reshape(count, 4)

    def __len__(self) -> int:
        return len(self.data)

    def load(self, index: int) -> np.ndarray:
        return self.data[index]


def variable_response(index: int) -> np.ndarray:
    record = np.array([index, 1, 2, 3, 4, 5, 6], dtype=np.float32)
    return np.tile(record, (index % 3, 1))


def main(scenario_name: str, outdir: str, fail_after: int = -1, mode: str = "PerformanceOnly",
         variable: bool = False) -> None:
    import mlperf_loadgen as lg

    scenario = Scenario(scenario_name)
    calls = {"n": 0}

    def infer(inputs: dict[str, np.ndarray], indices: np.ndarray) -> Responses:
        calls["n"] += 1
        if 0 <= fail_after < calls["n"]:
            raise ValueError("injected backend failure")
        if variable:
            return Responses.pieces([variable_response(int(i)) for i in indices])
        return Responses.rows((inputs["input"].sum(axis=1) // 4).astype(np.int32))   # = 4 * index + 1.5 -> index*4+1

    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    qsl = SampleLibrary(TinySet(64), 64, TinySet.inputs)
    sut = HarnessSUT(scenario, qsl, [infer, infer], batch_size=8, batch_timeout_us=500).start()
    key = f"resnet50.{scenario.value}"
    # SingleStream/MultiStream end on a query count, not a duration: LoadGen pre-generates queries for
    # 2 x min_duration / target_latency, and a probe faster than target_latency would run out of them.
    streams = scenario in (Scenario.SingleStream, Scenario.MultiStream)
    lines = [f"{key}.min_duration = {0 if streams else 500}", f"{key}.min_query_count = {700 if streams else 1}",
             f"{key}.performance_sample_count_override = 64", f"{key}.target_qps = 2000",
             f"{key}.target_latency = 0.05"]
    settings = test_settings(write_user_conf(out / "user.conf", lines), "resnet50", scenario, TestMode(mode))
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(out)
    log_settings.enable_trace = False
    lg_sut, lg_qsl = sut.construct(), qsl.construct()
    lg.StartTestWithLogSettings(lg_sut, lg_qsl, settings, log_settings, str(out / "audit.config"))
    sut.stop()
    log = read_detail(out)
    metric = log.metric()
    print(json.dumps({"completed": sut.counters.completed, "issued": sut.counters.issued,
                      "error": repr(sut.error) if sut.error else None, "scenario": log.scenario.value,
                      "metric": metric.value if metric else None, "calls": calls["n"],
                      "num_errors": int(log.get("num_errors", 0))}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else -1,
         sys.argv[4] if len(sys.argv) > 4 else "PerformanceOnly", len(sys.argv) > 5 and sys.argv[5] == "variable")
