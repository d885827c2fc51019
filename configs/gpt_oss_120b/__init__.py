"""Benchmark-wide defaults of gpt-oss-120b: the closed-division model on MLCommons' data set. The model runs on serving
engines only (--harness_type=openai); the speed hints are estimates for the full model, and `make run` runs the
substitute with its own (code/gpt_oss_120b/benchmark.py, `embedded_default`)."""
from code.common.config_registry import BenchmarkConfig


class GptOssBase(BenchmarkConfig):
    benchmark = "gpt-oss-120b"
    model = "gpt-oss-120b"
    dataset = "gpt_oss_eval"
    batch_size = 8
    instances = 1
