"""make serve_llm: serve one LLM benchmark's model from an OpenAI-compatible server on this node until stopped.

The server half of the openai harness (documentation/llm_serving.md). `--engine=vllm` (the default) starts vLLM's
CPU build from .venv-vllm here, waits until it answers (the model listed, a short greedy generation returned),
prints its endpoint and the flags that point the harness at it, and stops it on Ctrl-C or SIGTERM, leaving no
process. `--engine=sglang` and `--engine=trtllm`, and vllm where its environment is not installed here (GPU nodes
install their own vLLM), print the command lines to run instead. Every command line has the rules' settings:
prefix caching off, a fixed seed, at most batch_size sequences, the model served under its toolkit name.

A benchmark with a serving engine of its own (wan-2.2-t2v-a14b: its diffusers pipeline behind
`POST /v1/videos/generations`, code/wan/video_server.py) is served by it here, whatever --engine says of LLMs.

The model is the one `make run` would run for the benchmark (the embedded substitute unless --model names
another), at the largest batch_size of the selected scenarios' configs.
"""
from __future__ import annotations

import socket

from ..common.errors import EXIT_OK, UserError
from .base import Context, Handler
from .serve_until import serve_until_stopped
from .harness import with_embedded_default

DEFAULT_ENGINE = "vllm"


class ServeLlm(Handler):
    def __init__(self, ctx: Context) -> None:
        super().__init__(with_embedded_default(ctx, test_run=False, benchmarks=ctx.args.benchmarks))

    def handle(self) -> int:
        from ..common.benchmark_api import get_benchmark
        from ..common.serving.engines import DEFAULT_PORT, VLLM, check_engine

        ctx = self.ctx
        benchmarks = sorted({b for b, _ in ctx.selected()})
        if len(benchmarks) != 1 or not get_benchmark(benchmarks[0]).generates_tokens:
            raise UserError(f"make serve_llm serves one LLM benchmark's model; the selection has "
                            f"{', '.join(benchmarks) or 'none'}. Name one with --benchmarks=..., e.g. "
                            f"--benchmarks=llama3.1-8b.")
        benchmark = benchmarks[0]
        configs = [ctx.resolve(b, s) for b, s in ctx.selected()]
        model = configs[0]["model"]
        batch = max(int(c.values.get("batch_size") or 1) for c in configs)
        port = ctx.args.harness_flags.get("port") or DEFAULT_PORT
        own = get_benchmark(benchmark).own_server
        if own:
            return self._serve_own(benchmark, own, model, configs[0].values, port)
        engine = check_engine(ctx.args.harness_flags.get("engine") or DEFAULT_ENGINE)
        if engine == VLLM and self._vllm_here():
            return self._serve(benchmark, model, batch, port)
        return self._print_commands(engine, benchmark, model, batch, port)

    def _vllm_here(self) -> bool:
        from ..common.serving.environment import installed_version

        return installed_version(self.ctx.paths.vllm_venv) is not None and not self.ctx.system.info.has_gpu

    def _serve(self, benchmark: str, model: str, batch: int, port: int) -> int:
        from ..common.serving.local_server import start_local_server

        ctx = self.ctx
        # Ctrl-C or SIGTERM while it starts stops it (start_local_server), and the command ends with the signal's
        # status; once it serves, a stop signal ends the wait below and the server is stopped in order.
        server = start_local_server(benchmark, model, {"batch_size": batch}, ctx.paths, port, host="0.0.0.0",
                                    log=ctx.log)
        host = socket.gethostname()
        return serve_until_stopped(ctx, server, "vLLM", port, [
            f"vLLM (CPU) serves {benchmark}'s model {model} (at most {batch} sequences, prefix caching off) at "
            f"{server.endpoint}, log {server.log_path}.",
            f"Run LoadGen against it with: --harness_type=openai --endpoints=http://{host}:{port}",
            "Ctrl-C stops it."])

    def _serve_own(self, benchmark: str, own: str, model: str, fields, port: int) -> int:
        """A benchmark with a serving engine of its own (GenerativeBenchmark.own_server, e.g. wan's diffusers
        pipeline behind /v1/videos/generations): served here, whatever the node; GPU nodes run their own server of
        that API (trtllm-serve VisualGen), which the harness drives the same way."""
        from ..common.benchmark_api import generative, get_benchmark

        ctx = self.ctx
        engine = ctx.args.harness_flags.get("engine")
        if engine and engine != own:
            raise UserError(f"--engine={engine}: make serve_llm serves {benchmark} with its own {own} server here; "
                            f"on GPU nodes start a server of its API (TensorRT-LLM's trtllm-serve VisualGen for "
                            f"{get_benchmark(benchmark).models[model].serving_api}) and point --endpoints at it. "
                            f"Leave --engine out.")
        server = generative(get_benchmark(benchmark)).start_server(model, fields, ctx.paths, port, "0.0.0.0",
                                                                   ctx.log)
        host = socket.gethostname()
        return serve_until_stopped(ctx, server, own, port, [
            f"The {own} server serves {benchmark}'s model {model} at {server.endpoint} (one request at a time, the "
            f"reference's settings), log {server.log_path}.",
            f"Run LoadGen against it with: --harness_type=openai --endpoints=http://{host}:{port}",
            "Ctrl-C stops it."])

    def _print_commands(self, engine: str, benchmark: str, model: str, batch: int, port: int) -> int:
        from ..common.benchmark_api import get_benchmark
        from ..common.serving.engines import VLLM, model_settings, shell_lines

        ctx = self.ctx
        try:
            served = get_benchmark(benchmark).serving_folder(model, ctx.paths, ctx.log)
            folder, dtype, length = str(served.folder), served.dtype, served.max_model_len
        except UserError as error:
            ctx.log(f"note: {error}")
            folder, dtype, length = "<the model's Hugging Face folder>", "bfloat16", 4096
        settings = model_settings(get_benchmark(benchmark).models[model], gpu_nodes=True, model_path=folder,
                                  port=port, max_num_seqs=batch, max_model_len=length, dtype=dtype)
        served_name = settings.served_name
        why = ("vLLM is not installed here (make build RUN_ARGS=\"--harness_type=openai\" installs its CPU build)"
               if engine == VLLM and not ctx.system.info.has_gpu else f"{engine} runs on GPU nodes")
        images = (f", at most {settings.images_per_prompt} image(s) per prompt" if settings.images_per_prompt
                  else "")
        sampling = ", the model's own sampling defaults" if settings.model_sampling_defaults else ""
        ctx.log(f"{why}: start it on each inference node with the MLPerf settings (prefix caching off, at most "
                f"{batch} sequences{images}{sampling}, {settings.tensor_parallel} GPU(s) per server, the model "
                f"served as '{served_name}'; with the model folder at the same path there):")
        for line in shell_lines(engine, settings):
            ctx.log(f"  {line}")
        ctx.log(f"then run LoadGen with: --harness_type=openai --endpoints=http://<node1>:{port},http://<node2>:{port}"
                f" (documentation/llm_serving.md)")
        return EXIT_OK
