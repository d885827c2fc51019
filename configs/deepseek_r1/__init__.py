"""Benchmark-wide defaults of deepseek-r1: the closed-division model on MLCommons' data set. The model runs on serving
engines only (--harness_type=openai); the speed hints are estimates for the full model, and `make run` runs the
substitute with its own (code/deepseek_r1/benchmark.py, `embedded_default`)."""
from code.common.config_registry import BenchmarkConfig


class DeepSeekBase(BenchmarkConfig):
    benchmark = "deepseek-r1"
    model = "deepseek-r1"
    dataset = "deepseek_r1_eval"
    batch_size = 8
    instances = 1
