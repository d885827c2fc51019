"""bench for the openai harness (`make bench RUN_ARGS="--benchmarks=llama3.1-8b --harness_type=openai"`), each figure
against a baseline measured in the same run, on the benchmark's own prompts:

(n) the harness's ceiling: Offline tokens/s and requests/s through LoadGen, the system under test and its client,
    with the toolkit's streaming test server answering as fast as it can (one token per chunk), against the bare
    client (serving/baseline.py: one asyncio loop, same requests, same requests in flight, no LoadGen);
(o) the first-token latency the harness adds: LoadGen's Server TTFT at p50 and p99, at a load that keeps one
    request in flight at a time, against the bare client's time to the first token of one request at a time; the
    figure is bare / harness, and the added milliseconds are printed beside it (goal: under 1 ms at p50);
(m) where the vLLM environment is made (make build RUN_ARGS=--harness_type=openai): Offline tokens/s through the
    harness against vLLM's own benchmark client (`vllm bench serve`) on one local vLLM server, same prompts and
    requests in flight (bench_vllm.py).
"""
from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from ..common.constants import Scenario
from ..common.errors import EXIT_FAILURE, UserError
from ..common.records.loadgen_log import read_detail
from ..common.tuning.ratios import Figure
from ..common.tuning.search import round_sig
from .serving_prompts import prompts_of, served_name

GOALS = {"m": 0.97, "n": 0.8, "o_p50_added_ms": 1.0}
CEILING_FIELDS = {"max_input_tokens": 512, "max_output_tokens": 128, "total_sample_count": 250}
CEILING_SECONDS = 15
TTFT_FIELDS = {"max_input_tokens": 512, "max_output_tokens": 4}
TTFT_QUERIES = 300
TTFT_QPS = 20.0


def serving_bench(bench, ctx, benchmark_name: str) -> list[Figure]:
    """The openai harness's figures (harness/plugins/openai.py names this function)."""
    from .harness import DownloadData, DownloadModel, PreprocessData

    for step in (DownloadModel, DownloadData, PreprocessData):
        step(ctx).run()
    figures = []
    with test_server(ctx, benchmark_name) as url:
        served = dataclasses.replace(ctx, args=dataclasses.replace(ctx.args, endpoints=(url,)), _registry=None)
        figures += ceiling(bench, served, benchmark_name, url)
        figures += first_token(bench, served, benchmark_name, url)
    from .bench_vllm import vllm_figures

    return figures + vllm_figures(bench, ctx, benchmark_name)


@contextmanager
def test_server(ctx, benchmark_name: str):
    """The toolkit's streaming test server in a process of its own, serving the benchmark's model name."""
    served = served_name(ctx, benchmark_name)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "code.common.serving.test_server", f"--port={port}",
                                f"--model={served}"], cwd=ctx.paths.repo, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        if not line.startswith("listening on"):
            raise UserError(f"The streaming test server did not start: {line}", exit_code=EXIT_FAILURE)
        yield line.split()[-1]
    finally:
        process.kill()
        process.wait()


def ceiling(bench, ctx, benchmark_name: str, url: str) -> list[Figure]:
    """(n): streamed tokens/s and requests/s, harness / bare client."""
    from ..common.serving.baseline import bare_run

    prompts, settings, served = prompts_of(ctx, benchmark_name, CEILING_FIELDS)
    in_flight = int(ctx.resolve(benchmark_name, Scenario.Offline)["openai_in_flight"])
    bare = bare_run(url, served, prompts, settings.max_new_tokens, in_flight, settings.eos_token_ids)
    ctx.log(f"{benchmark_name}: bare client {bare.tokens_per_second:,.0f} tokens/s, {bare.requests_per_second:,.1f} "
            f"requests/s ({bare.requests} requests, {in_flight} in flight)")
    folder = ctx.paths.bench_dir / f"{benchmark_name}-openai-ceiling"
    outcome = bench._short(ctx, benchmark_name, Scenario.Offline, folder,
                           offline_expected_qps=round_sig(bare.requests_per_second),
                           min_duration=CEILING_SECONDS * 1000, **CEILING_FIELDS)
    values = read_detail(Path(outcome.run_dir)).values
    tokens, samples = float(values.get("result_tokens_per_second") or 0), float(
        values.get("result_samples_per_second") or 0)
    if not tokens:
        raise UserError(f"The Offline run in {outcome.run_dir} reported no tokens per second: {outcome.reason}",
                        exit_code=EXIT_FAILURE)
    return [Figure("(n) openai harness ceiling, Offline on the streaming test server: harness vs bare client",
                   tokens, bare.tokens_per_second, "tokens/s", GOALS["n"]),
            Figure("(n) the same, requests", samples, bare.requests_per_second, "requests/s", GOALS["n"])]


def first_token(bench, ctx, benchmark_name: str, url: str) -> list[Figure]:
    """(o): time to first token at p50 and p99, bare client (one request at a time) / harness (Server, light)."""
    import numpy as np

    from ..common.serving.baseline import bare_run

    prompts, settings, served = prompts_of(ctx, benchmark_name, {**TTFT_FIELDS, "total_sample_count": 250})
    bare = bare_run(url, served, (prompts * 2)[:TTFT_QUERIES], settings.max_new_tokens, 1, settings.eos_token_ids,
                    rate=TTFT_QPS)
    bare_ms = {p: float(np.percentile(bare.first_token_s, p)) * 1000 for p in (50, 99)}
    outcome = bench._short(ctx, benchmark_name, Scenario.Server, ctx.paths.bench_dir / f"{benchmark_name}-openai-ttft",
                           server_target_qps=TTFT_QPS, min_query_count=TTFT_QUERIES, min_duration=1000,
                           **TTFT_FIELDS)
    values = read_detail(Path(outcome.run_dir)).values
    figures = []
    for percentile in (50, 99):
        key = f"result_first_token_{percentile:.2f}_percentile_latency_ns"
        harness_ms = float(values.get(key) or 0) / 1e6
        if not harness_ms:
            raise UserError(f"The Server run in {outcome.run_dir} logged no {key}: {outcome.reason}",
                            exit_code=EXIT_FAILURE)
        added = harness_ms - bare_ms[percentile]
        ctx.log(f"{benchmark_name}: first token p{percentile}: harness {harness_ms:.3f} ms, bare client "
                f"{bare_ms[percentile]:.3f} ms: {added:+.3f} ms added")
        goal = (bare_ms[50] / (bare_ms[50] + GOALS["o_p50_added_ms"])) if percentile == 50 else None
        figures.append(Figure(f"(o) first token p{percentile} at {TTFT_QPS:g} QPS: bare client / harness "
                              f"({added:+.3f} ms added)", harness_ms, bare_ms[percentile], "ms", goal,
                              higher_is_better=False))
    return figures
