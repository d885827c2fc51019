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
    # Served (trtllm-serve VisualGen, or the toolkit's own video server): a video comes back whole, so a request
    # waiting in the server's queue is silence. Two in flight keep a server making one while the next waits; the
    # silence allowed is a queue of two videos of the full model on a GPU with room to spare (an LLM's 600 s would
    # fail a healthy run). One warm-up video: each is a whole generation.
    openai_in_flight = 2
    openai_request_timeout_s = 3600.0
    openai_warmup_requests = 1
