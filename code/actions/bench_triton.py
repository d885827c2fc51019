"""bench for the Triton harness (`make bench RUN_ARGS="--harness_type=triton ..."`), each figure against a baseline
of the same run, on the benchmark's Offline engine:

(h) Offline samples/s through the Triton harness (a local server, the config's instances and dynamic batching) /
    through the in-process harness, same engine, batch size, instances and threads.
(i) Offline samples/s with two local servers / with one (for the record: on a machine of a few cores two servers
    share the same cores, so this cannot scale here; on separate nodes it is the scale-out).
(j) Batch-1 latency of one request through Triton (as the harness sends it: the sample through shared memory,
    the request over gRPC on localhost, the server's queue and python backend, back) / the same engine called
    in-process, p50 and p99 of sequential calls: the Triton path's per-request overhead is their difference,
    printed beside them (for the record).
"""
from __future__ import annotations

import dataclasses
import json
import time

import numpy as np

from ..common.constants import LWIS, HarnessType, Scenario
from ..common.harness.plugins.triton import TRITON
from ..common.tuning.ratios import Figure
from .base import Context
from .harness import DownloadData, DownloadModel, GenerateEngines, PreprocessData

GOALS = {"h": 0.8}
LATENCY_CALLS = 300          # sequential batch-1 calls per latency measurement (after LATENCY_WARMUP)
LATENCY_WARMUP = 20


def with_harness(ctx: Context, harness: HarnessType, endpoints: tuple[str, ...] = ()) -> Context:
    workload = dataclasses.replace(ctx.args.workload, harness_type=harness)
    return dataclasses.replace(ctx, args=dataclasses.replace(ctx.args, workload=workload, endpoints=endpoints),
                               _registry=None)


def triton_bench(bench, ctx: Context, benchmark_name: str) -> list[Figure]:
    from ..common.backends import create_backend, threads_per_instance
    from ..common.benchmark_api import get_benchmark
    from ..common.harness.engine_build import locate_engine
    from ..common.harness.triton_system import start_servers, triton_model
    from ..common.named_inputs import named_sample

    triton, in_process = with_harness(ctx, HarnessType(TRITON)), with_harness(ctx, HarnessType(LWIS))
    for each in (triton, in_process):
        for step in (DownloadModel, DownloadData, PreprocessData, GenerateEngines):
            step(each).run()
    offline = triton.resolve(benchmark_name, Scenario.Offline)
    benchmark = get_benchmark(benchmark_name)
    model_name = offline["model"]
    layout = f"batch {offline['batch_size']}, {offline['instances']} instance(s)"
    ctx.log(f"{benchmark_name}: {model_name} {offline['precision']} Offline, {layout}: in-process vs Triton")
    local = bench._harness_offline(in_process, benchmark_name, 100.0, f"{benchmark_name}-offline-in-process")
    served = bench._harness_offline(triton, benchmark_name, local, f"{benchmark_name}-offline-triton")
    figures = [Figure(f"(h) {model_name} Offline ({layout}): Triton harness vs in-process harness", served, local,
                      "samples/s", GOALS["h"])]

    engine = locate_engine(offline, ctx.system.system_id, ctx.paths, benchmark)
    manifest = json.loads(ctx.paths.engine_manifest(engine).read_text())
    spec = benchmark.models[model_name]
    model = triton_model(benchmark_name, spec, engine, manifest, offline.values,
                         ctx.system.info.cpu.cores)
    servers = start_servers(model, [ctx.paths.bench_dir / f"triton-server-{n}" for n in (1, 2)])
    try:
        one = bench._harness_offline(with_harness(ctx, HarnessType(TRITON), (servers[0].url,)), benchmark_name,
                                     served, f"{benchmark_name}-offline-triton-1-server")
        two = bench._harness_offline(with_harness(ctx, HarnessType(TRITON), tuple(s.url for s in servers)),
                                     benchmark_name, one, f"{benchmark_name}-offline-triton-2-servers")
        figures.append(Figure(f"(i) {model_name} Offline: two local Triton servers vs one (for the record)", two,
                              one, "samples/s", None))
        samples = benchmark.preprocessed(model_name, offline["dataset"], ctx.paths)
        sample = {name: array[None] for name, array in named_sample(samples.load(0), spec.inputs).items()}
        remote = _request_latencies(servers[0].url, model, samples)
    finally:
        for server in servers:
            server.stop()
    backend = create_backend(engine, backend=offline["backend"], input_names=[i.name for i in spec.inputs],
                             threads=threads_per_instance(offline, ctx.system.info.cpu.cores),
                             device=manifest.get("device", "cpu"))
    try:
        direct = _call_latencies(lambda: backend.infer(sample))
    finally:
        backend.close()
    for name, quantile in (("p50", 0.5), ("p99", 0.99)):
        through, raw = (float(np.quantile(latencies, quantile)) for latencies in (remote, direct))
        ctx.log(f"{model_name} batch 1 {name}: {through:.3f} ms through Triton, {raw:.3f} ms in-process: "
                f"{through - raw:+.3f} ms per request on the Triton path")
        figures.append(Figure(f"(j) {model_name} batch-1 {name} latency: in-process engine / through Triton "
                              f"(for the record)", through, raw, "ms", None, higher_is_better=False))
    return figures


def _request_latencies(url: str, model, samples) -> list[float]:
    """ms of sequential batch-1 requests to `url`, each sent as the harness sends it (the batch gathered into a
    shared memory region for a server on this machine) and answered (synchronous gRPC infer)."""
    import tritonclient.grpc as grpcclient

    from ..common.harness.qsl import SampleLibrary
    from ..common.harness.triton_system import request_layout
    from ..common.triton.client import connect
    from ..common.triton.inputs import endpoint_inputs

    qsl = SampleLibrary(samples, 1, model.inputs)
    qsl.load([0])
    client = connect(url)
    inputs = endpoint_inputs(url, client, dataclasses.replace(request_layout(model), batch_size=1), 1, "bench")
    try:
        outputs = [grpcclient.InferRequestedOutput(o.name) for o in model.outputs]
        index = np.zeros(1, dtype=np.int64)

        def call():
            slot = inputs.acquire()
            try:
                client.infer(model.name, inputs.request(qsl, index, slot), outputs=outputs)
            finally:
                inputs.release(slot)
        return _call_latencies(call)
    finally:
        inputs.close()
        client.close()


def _call_latencies(call) -> list[float]:
    for _ in range(LATENCY_WARMUP):
        call()
    latencies = []
    for _ in range(LATENCY_CALLS):
        start = time.perf_counter()
        call()
        latencies.append((time.perf_counter() - start) * 1e3)
    return latencies

