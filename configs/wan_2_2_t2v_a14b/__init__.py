"""Benchmark-wide defaults of wan-2.2-t2v-a14b: the closed-division Wan2.2-T2V-A14B-Diffusers on the 248 VBench
prompts, one video at a time per pipeline process. The speed hints are estimates for the full model (720x1280, 81
frames, 20 steps); `make run` runs the substitute at 64x64 on 4 prompts with its own (code/wan/benchmark.py,
`embedded_default`)."""
from code.common.config_registry import BenchmarkConfig


class WanBase(BenchmarkConfig):
    benchmark = "wan-2.2-t2v-a14b"
    model = "wan-2.2-t2v-a14b"
    dataset = "vbench_prompts"
    batch_size = 1
    instances = 1
