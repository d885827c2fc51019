"""bench: the harness's speed, each figure a ratio against a baseline measured in the same run.

(a) Offline samples/s of the harness with a backend that returns at once / a bare LoadGen null SUT.
(b) Offline samples/s of the model through the harness / raw ONNX Runtime on the same preprocessed inputs,
    same engine, batch size, instances and threads.
(c) The highest Server target QPS that LoadGen rates VALID for the model on this machine (short runs).
Runs on the embedded default unless RUN_ARGS choose otherwise.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from types import MappingProxyType

import numpy as np

from ..common.benchmark_api import get_benchmark
from ..common.constants import Scenario, TestMode
from ..common.harness.runner import plan_test, run_test
from .base import Context, Handler
from .harness import DownloadData, DownloadModel, GenerateEngines, PreprocessData, with_embedded_default

GOALS = {"a": 0.8, "b": 0.95}
PROBE_SECONDS = 5
RUN_SECONDS = 15


def _with(ctx: Context, scenarios: tuple[Scenario, ...], **fields) -> Context:
    args = dataclasses.replace(ctx.args, scenarios=scenarios, test_run=True,
                               overrides=MappingProxyType({**ctx.args.overrides, **fields}))
    return dataclasses.replace(ctx, args=args, _registry=None)


class Bench(Handler):
    def __init__(self, ctx: Context) -> None:
        super().__init__(with_embedded_default(ctx))

    def handle(self) -> int:
        ctx = _with(self.ctx, (Scenario.Offline, Scenario.Server))
        for step in (DownloadModel, DownloadData, PreprocessData, GenerateEngines):
            step(ctx).run()
        benchmark_name = ctx.args.benchmarks[0]
        offline = ctx.resolve(benchmark_name, Scenario.Offline)
        rows = []

        bare = self._probe("bare", offline)
        harness = self._probe("harness", offline)
        rows.append(("(a) harness overhead, Offline, backend returns at once", harness, bare, "samples/s", "a"))

        # Raw ONNX Runtime before and after the harness run: their mean cancels slow drifts of the machine.
        raw_before = self._raw_throughput(ctx, benchmark_name, offline)
        run = self._harness_offline(ctx, benchmark_name, raw_before)
        raw = (raw_before + self._raw_throughput(ctx, benchmark_name, offline)) / 2
        rows.append((f"(b) {offline['model']} Offline through the harness vs raw ONNX Runtime", run, raw,
                     "samples/s", "b"))

        best, lowest_invalid = self._server_search(ctx, benchmark_name, upper=raw)
        self.ctx.log(f"\nBenchmark of the harness on {ctx.system.system_id} ({offline['model']}, batch "
                     f"{offline['batch_size']}, {offline['instances']} instance(s)):")
        for label, value, baseline, unit, goal in rows:
            ratio = value / baseline if baseline else float("nan")
            verdict = "meets" if ratio >= GOALS[goal] else "BELOW"
            self.ctx.log(f"  {label}: {value:,.0f} / {baseline:,.0f} {unit} = {ratio:.3f} "
                         f"({verdict} the goal >= {GOALS[goal]})")
        self.ctx.log(f"  (c) highest VALID Server target QPS for {offline['model']}: {best:.1f} "
                     f"({best / raw:.2f} of the raw Offline throughput; {RUN_SECONDS} s runs)")
        if lowest_invalid is not None and not best:
            qps, reasons = lowest_invalid
            self.ctx.log(f"      no rate down to {qps:g} QPS was VALID; there: {reasons[0] if reasons else '?'}")
        return 0

    # -- (a) ---------------------------------------------------------------------------------------
    def _probe(self, kind: str, config) -> float:
        outdir = self.ctx.paths.log_dir / "bench" / f"overhead-{kind}"
        command = [sys.executable, "-m", "code.common.harness.overhead", kind, str(outdir), str(PROBE_SECONDS),
                   str(config["batch_size"]), str(config["instances"])]
        done = subprocess.run(command, cwd=self.ctx.paths.repo, capture_output=True, text=True, check=True)
        return json.loads(done.stdout.strip().splitlines()[-1])["samples_per_second"]

    # -- (b) ---------------------------------------------------------------------------------------
    def _raw_throughput(self, ctx: Context, benchmark_name: str, config) -> float:
        """ONNX Runtime alone: the same engine, batches, instances and threads, no LoadGen."""
        from ..common.backends import create_backend
        from ..common.engines.builder import locate_engine

        benchmark = get_benchmark(benchmark_name)
        engine = locate_engine(config, ctx.system.system_id, ctx.paths, benchmark)
        samples = benchmark.preprocessed(config["model"], config["dataset"], ctx.paths)
        batch_size, instances = int(config["batch_size"]), int(config["instances"])
        data = np.stack([samples.load(i % len(samples)) for i in range(batch_size)])
        threads = int(config.get("intra_op_threads") or 0) or max(1, ctx.system.info.cpu.cores // instances)
        input_name = benchmark.models[config["model"]].input_name
        backends = [create_backend(engine, backend=config["backend"], input_name=input_name, threads=threads)
                    for _ in range(instances)]
        for backend in backends:
            backend.infer(data)   # warm-up
        done = [0] * instances
        stop = time.monotonic() + RUN_SECONDS

        def loop(slot: int) -> None:
            while time.monotonic() < stop:
                benchmark.postprocess(config["model"], backends[slot].infer(data))
                done[slot] += batch_size

        start = time.monotonic()
        workers = [threading.Thread(target=loop, args=(i,)) for i in range(instances)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        return sum(done) / (time.monotonic() - start)

    def _harness_offline(self, ctx: Context, benchmark_name: str, raw: float) -> float:
        run_ctx = _with(ctx, (Scenario.Offline,), min_duration=RUN_SECONDS * 1000, offline_expected_qps=raw)
        record = self._run(run_ctx, benchmark_name, Scenario.Offline, "offline")
        return float(record["metric"]["value"])

    # -- (c) ---------------------------------------------------------------------------------------
    def _server_search(self, ctx: Context, benchmark_name: str, upper: float) -> tuple[float, tuple | None]:
        """Bisect the target QPS between 0 and the raw throughput; VALID runs move the floor up.
        Returns the best VALID rate and (rate, reasons) of the lowest INVALID one."""
        low, high, best, lowest_invalid = 0.0, upper, 0.0, None
        for step in range(5):
            qps = round((low + high) / 2, 1)
            # LoadGen's early stopping needs about 460 queries within the bound to rate a p99 VALID.
            run_ctx = _with(ctx, (Scenario.Server,), min_duration=RUN_SECONDS * 1000, min_query_count=500,
                            server_target_qps=qps)
            record = self._run(run_ctx, benchmark_name, Scenario.Server, f"server-{step}-{qps:g}")
            valid = bool(record.get("valid"))
            self.ctx.log(f"Server at {qps:g} QPS: {'VALID' if valid else 'INVALID'}")
            if valid:
                low, best = qps, qps
            else:
                high, lowest_invalid = qps, (qps, record.get("reasons") or [record.get("error", "")])
        return best, lowest_invalid

    def _run(self, ctx: Context, benchmark_name: str, scenario: Scenario, name: str) -> dict:
        log_dir = self.ctx.paths.log_dir / "bench" / name
        spec = plan_test(ctx, benchmark_name, scenario, TestMode.PerformanceOnly, log_dir=log_dir, purpose="bench")
        return run_test(spec, ctx.paths.repo, log=lambda _: None)
