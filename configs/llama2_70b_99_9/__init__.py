"""Benchmark-wide defaults of llama2-70b-99.9: the closed-division Llama-2-70b-chat on MLCommons' 24576 OpenOrca
samples. The model runs on serving engines only (--harness_type=openai); the speed hints are estimates for a
70-billion-parameter model and `make run` runs the substitute with its own (code/llama2_70b/benchmark.py,
`embedded_default`)."""
from code.common.config_registry import BenchmarkConfig
from code.common.constants import AccuracyTarget

# The benchmark has only a 99.9 % accuracy target: its configs register NVIDIA's high_accuracy workloads.
ONLY_TARGET = AccuracyTarget.k_99_9


class Llama2Base(BenchmarkConfig):
    benchmark = "llama2-70b-99.9"
    model = "llama2-70b-chat"
    dataset = "open_orca"
    batch_size = 8
    instances = 1
