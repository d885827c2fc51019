"""Benchmark-wide defaults of qwen3.6-27b: the closed-division Qwen3.6-27B, served, under the MLCommons endpoints
client (--harness_type=endpoints), on the client's agentic replay (performance) and BFCL v4 (accuracy). `make run`
runs the substitute on a local vLLM with its own settings (code/qwen3_6/benchmark.py, `embedded_default`)."""
from code.common.config_registry import BenchmarkConfig


class Qwen36Base(BenchmarkConfig):
    benchmark = "qwen3.6-27b"
    model = "qwen3.6-27b"
    dataset = "qwen3_6_agentic_replay"
    batch_size = 1
    instances = 1
