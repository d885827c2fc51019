"""Benchmark-wide defaults of llama3.1-8b: the closed-division Llama-3.1-8B-Instruct on MLCommons' 13368 CNN/DailyMail
validation samples, fp32 decoder graph, continuous batching.

`batch_size` is the number of sequences one instance decodes together (new ones join between decode steps). On a
CPU one instance uses every core: a decode step is a few large matrix products that the runtime's thread pool
spreads well, and a second instance would only split the same memory bandwidth. The speed hints are for the
8-billion-parameter model; `make run` runs the 135-million-parameter substitute with its own (see
code/llama3_1_8b/benchmark.py, `embedded_default`).
"""
from code.common.config_registry import BenchmarkConfig


class LlamaBase(BenchmarkConfig):
    benchmark = "llama3.1-8b"
    model = "llama3.1-8b-instruct"
    dataset = "cnn_eval"
    batch_size = 8
    instances = 1
