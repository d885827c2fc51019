"""Benchmark-wide defaults of llama3.1-8b-edge: the same model and harness as llama3.1-8b, on MLCommons' 5000-sample
edge subset (SingleStream and Offline)."""
from code.common.config_registry import BenchmarkConfig


class LlamaEdgeBase(BenchmarkConfig):
    benchmark = "llama3.1-8b-edge"
    model = "llama3.1-8b-instruct"
    dataset = "cnn_eval_5000"
    batch_size = 8
    instances = 1
