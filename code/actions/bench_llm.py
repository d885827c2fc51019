"""bench for the benchmarks that generate tokens (llama3.1-8b), each figure against a baseline of the same run:

(f) Offline tokens/s through the harness (LoadGen, continuous batching) / a bare greedy loop over the same decoder,
    batch size and prompts (code/common/harness/llm_baseline.py: fixed batches, no LoadGen).
(g) Server at a load the machine holds (a fraction of the Offline sample rate just measured): VALID, and the first
    token (TTFT) and per-output-token (TPOT) p99 latencies against the round's bounds, as bound / measured.
"""
from __future__ import annotations

from pathlib import Path

from ..common.benchmark_api import get_benchmark
from ..common.constants import Scenario
from ..common.errors import EXIT_FAILURE, UserError
from ..common.records.early_stopping import server_min_queries
from ..common.records.loadgen_log import read_detail
from ..common.tuning.ratios import Figure
from ..common.tuning.search import round_sig

GOALS = {"f": 0.9, "latency": 1.0}
RUN_SECONDS = 20                 # each Offline measurement
# (g)'s target rate, as a fraction of the Offline samples/s at SERVER_FIELDS. Offline fills batches of 8; a Server
# load of the same order fills them too, and then a decode step of 8 rows (~47 ms on 2 cores) plus a prefill chunk
# (~50 ms) reaches the 100 ms TPOT bound by itself. A quarter keeps the batch small, so that no step is much longer
# than one chunk and one small step (~75 ms) (measured: TPOT p99 100.5 ms at 0.35, with 32-token chunks).
SERVER_LOAD = 0.25
# (g)'s queries: the fewest early stopping accepts for a VALID p99 (every query within both bounds), and a few more.
SERVER_QUERIES = server_min_queries() + 11
SERVER_FIELDS = {"max_input_tokens": 128, "max_output_tokens": 16}


def llm_bench(bench, ctx, benchmark_name: str) -> list[Figure]:
    """The LLM harness's figures for `make bench` (harness/plugins/llm.py names this function)."""
    from .harness import DownloadData, DownloadModel, GenerateEngines, PreprocessData

    for step in (DownloadModel, DownloadData, PreprocessData, GenerateEngines):
        step(ctx).run()
    return llm_figures(bench, ctx, benchmark_name)


def _bare_loop(ctx, benchmark_name: str, config) -> tuple[float, float]:
    """(tokens/s, samples/s) of the bare greedy loop over the config's engine, prompts and batch size."""
    from ..common.backends import threads_per_instance
    from ..common.backends.registry import get_plugin
    from ..common.harness.engine_build import locate_engine
    from ..common.harness.llm_baseline import greedy_static
    from ..common.harness.settings import effective_dataset_size

    benchmark = get_benchmark(benchmark_name)
    settings = benchmark.generation(config["model"], config.values, ctx.paths)
    engine = locate_engine(config, ctx.system.system_id, ctx.paths, benchmark)
    samples = benchmark.preprocessed(config["model"], config["dataset"], ctx.paths)
    if config.get("max_input_tokens"):
        samples = samples.capped(int(config["max_input_tokens"]))
    count = effective_dataset_size(config.values, len(samples))
    prompts = [samples.load(i) for i in range(count)]
    decoder = get_plugin(config["backend"]).create_decoder(
        engine, threads=threads_per_instance(config, ctx.system.info.cpu.cores), device="cpu",
        max_batch=settings.max_batch)
    try:
        greedy_static(decoder, prompts[:1], settings)   # warm-up
        result = greedy_static(decoder, prompts, settings)
    finally:
        decoder.close()
    return result.tokens / result.seconds, len(prompts) / result.seconds


def llm_figures(bench, ctx, benchmark_name: str) -> list[Figure]:
    """(f) and, where the benchmark has a Server scenario, (g)."""
    offline = ctx.resolve(benchmark_name, Scenario.Offline)
    model = offline["model"]
    bare_tokens, bare_samples = _bare_loop(ctx, benchmark_name, offline)
    ctx.log(f"{benchmark_name}: bare greedy loop {bare_tokens:.1f} tokens/s ({bare_samples:.2f} samples/s), batch "
            f"{offline['batch_size']}")
    outcome = bench._short(ctx, benchmark_name, Scenario.Offline, ctx.paths.bench_dir / f"{benchmark_name}-offline",
                           offline_expected_qps=round_sig(bare_samples), min_duration=RUN_SECONDS * 1000)
    values = read_detail(Path(outcome.run_dir)).values
    tokens = float(values.get("result_tokens_per_second") or 0)
    if not tokens:
        raise UserError(f"The Offline run in {outcome.run_dir} reported no tokens per second: {outcome.reason}",
                        exit_code=EXIT_FAILURE)
    figures = [Figure(f"(f) {model} Offline: harness vs bare greedy loop (batch {offline['batch_size']})",
                      tokens, bare_tokens, "tokens/s", GOALS["f"])]
    if not ctx.registry.systems_for(benchmark_name, Scenario.Server):
        return figures
    # LoadGen's early stopping rates a Server run of token latencies VALID only after 459 queries within both
    # bounds (p99): at the substitute's make run caps that is a quarter of an hour on 2 cores, so (g) shortens
    # prompts and outputs (SERVER_FIELDS) and sizes its rate on an Offline run with the same caps.
    short = bench._short(ctx, benchmark_name, Scenario.Offline, ctx.paths.bench_dir / f"{benchmark_name}-offline-short",
                         offline_expected_qps=round_sig(bare_samples * 4), min_duration=RUN_SECONDS * 1000,
                         **SERVER_FIELDS)
    samples_per_s = float(read_detail(Path(short.run_dir)).values.get("result_samples_per_second") or 0)
    if not samples_per_s:
        raise UserError(f"The Offline run in {short.run_dir} reported no samples per second: {short.reason}",
                        exit_code=EXIT_FAILURE)
    rate = round_sig(samples_per_s * SERVER_LOAD)
    server = bench._short(ctx, benchmark_name, Scenario.Server, ctx.paths.bench_dir / f"{benchmark_name}-server",
                          server_target_qps=rate, min_duration=1000, min_query_count=SERVER_QUERIES, **SERVER_FIELDS)
    figures_of = read_detail(Path(server.run_dir)).token_latencies()
    state = "VALID" if server.valid else f"INVALID ({server.reason})"
    caps = ", ".join(f"{k}={v}" for k, v in SERVER_FIELDS.items())
    ctx.log(f"{benchmark_name} Server at {rate:g} QPS ({SERVER_LOAD:g} x the Offline {samples_per_s:.2f} samples/s, "
            f"{caps}, {SERVER_QUERIES} queries): {state}")
    for name, measured, bound in (("TTFT", *_pair(figures_of, "ttft")), ("TPOT", *_pair(figures_of, "tpot"))):
        if measured is None or not bound:
            raise UserError(f"The Server run in {server.run_dir} logged no {name} p99 or bound.",
                            exit_code=EXIT_FAILURE)
        figures.append(Figure(f"(g) {model} Server {rate:g} QPS, {state.split(' ')[0]}: {name} p99 vs the round's "
                              f"bound", measured / 1e6, bound / 1e6, "ms", GOALS["latency"], higher_is_better=False))
    return figures


def _pair(figures, which: str) -> tuple[float | None, float | None]:
    """(p99, bound) in ns of TTFT ("ttft") or TPOT ("tpot") from a run's token latencies."""
    if figures is None:
        return None, None
    return getattr(figures, f"{which}_p99_ns"), getattr(figures, f"{which}_bound_ns")

