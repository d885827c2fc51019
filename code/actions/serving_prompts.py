"""The prompts `make bench` sends to serving engines, as the openai harness sends them (bench_serving.py,
bench_vllm.py)."""
from __future__ import annotations

from ..common.benchmark_api import get_benchmark
from ..common.constants import Scenario


def prompts_of(ctx, benchmark_name: str, fields: dict) -> tuple[list, object, str]:
    """(prompts as the harness sends them, generation settings, served model name) under `fields`' caps."""
    config = ctx.resolve(benchmark_name, Scenario.Offline)
    benchmark = get_benchmark(benchmark_name)
    model = config["model"]
    samples = benchmark.preprocessed(model, config["dataset"], ctx.paths)
    if fields.get("max_input_tokens"):
        samples = samples.capped(int(fields["max_input_tokens"]))
    count = min(len(samples), int(fields.get("total_sample_count") or len(samples)))
    settings = benchmark.generation(model, {**config.values, **fields}, ctx.paths)
    return [samples.load(i) for i in range(count)], settings, served_name(ctx, benchmark_name)


def served_name(ctx, benchmark_name: str) -> str:
    """The name servers serve the benchmark's configured model under (its Hugging Face id)."""
    model = ctx.resolve(benchmark_name, Scenario.Offline)["model"]
    return get_benchmark(benchmark_name).models[model].served_name or model
