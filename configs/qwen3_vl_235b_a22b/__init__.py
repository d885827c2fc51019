"""Benchmark-wide defaults of qwen3-vl-235b-a22b: the closed-division model on the Shopify product catalogue. The model
runs on serving engines only (--harness_type=openai); the speed hints are estimates for the full model, and `make run`
runs the substitute on its own product set with its own (code/qwen3_vl/benchmark.py, `embedded_default`)."""
from code.common.config_registry import BenchmarkConfig


class Qwen3VLBase(BenchmarkConfig):
    benchmark = "qwen3-vl-235b-a22b"
    model = "qwen3-vl-235b-a22b"
    dataset = "shopify_product_catalogue"
    batch_size = 8
    instances = 1
