"""make serve_triton: serve one benchmark's engine from a Triton Inference Server on this node until stopped.

The scale-out half of the Triton harness: start one on each inference node, then run LoadGen on any node with
`--harness_type=triton --endpoints=node1:8001,node2:8001`. The engine is the one `make run_harness` would use
for the same benchmark, scenario and config (built with `make generate_engines` and --harness_type=triton), and the
harness checks that every endpoint serves exactly that engine (its sha256).
"""
from __future__ import annotations

import json

from ..common.errors import UserError
from ..common.harness.plugins.triton import TRITON
from .base import Handler
from .serve_until import serve_until_stopped

DEFAULT_PORT = 8001


class ServeTriton(Handler):
    def handle(self) -> int:
        from ..common.benchmark_api import get_benchmark
        from ..common.harness.engine_build import locate_engine
        from ..common.harness.triton_system import check_servable, start_servers, triton_model

        ctx = self.ctx
        if ctx.args.workload.harness_type != TRITON:
            raise UserError('make serve_triton serves the Triton harness\'s engine: add --harness_type=triton to '
                            'RUN_ARGS (with --benchmarks and --scenarios, as for make run_harness).')
        selected = ctx.selected()
        if len(selected) != 1:
            raise UserError(f"make serve_triton serves one benchmark and scenario; the selection has "
                            f"{len(selected) or 'none'} ({', '.join(f'{b} {s.value}' for b, s in selected)}). "
                            f"Name one with --benchmarks=... --scenarios=....")
        benchmark_name, scenario = selected[0]
        config = ctx.resolve(benchmark_name, scenario)
        benchmark = get_benchmark(benchmark_name)
        engine = locate_engine(config, ctx.system.system_id, ctx.paths, benchmark)
        manifest = json.loads(ctx.paths.engine_manifest(engine).read_text())
        check_servable(config.values, (), ctx.paths.triton_venv)
        model = triton_model(benchmark_name, benchmark.models[config["model"]], engine, manifest, config.values,
                             ctx.system.info.cpu.cores)
        port = ctx.args.harness_flags.get("triton_port") or DEFAULT_PORT
        # Ctrl-C while it starts is a KeyboardInterrupt, on which start_servers stops it; once it serves, a stop
        # signal ends the wait below and the server is stopped in order.
        [server] = start_servers(model, [ctx.paths.triton / f"serve-{port}"], [port])
        return serve_until_stopped(ctx, server, "Triton", port, [
            f"Serving {benchmark_name} {scenario.value} ({config['model']}, engine {engine.name}, sha256 "
            f"{model.engine_sha256[:12]}) as model '{model.name}' on gRPC port {port}: "
            f"--endpoints=<this host>:{port}. Log: {server.log_path}. Ctrl-C stops it."])
