"""The Triton harness (`--harness_type=triton`): LoadGen here, inference in Triton Inference Servers over gRPC, a
local one started for each test or running ones, one per node (`--endpoints`). triton_system.py makes the
servers and the SUT (triton_sut.py); the local server runs from its own environment (.venv-triton), which
`make build` and `make run` make.
"""
from __future__ import annotations

from ...fields import Field
from ..registry import HarnessFlag, HarnessPlugin, HarnessRun, parse_port

TRITON = "triton"


class TritonHarness(HarnessPlugin):
    name = TRITON
    harness_type = TRITON
    implementation = "python"
    description = "Triton Inference Servers over gRPC: a local one per test, or running ones (--endpoints)"
    bench_figures = "code.actions.bench_triton:triton_bench"
    # batch_size is the model's max batch, instances its instance count and server_batch_timeout_us the dynamic
    # batcher's queue delay.
    fields = (
        Field("triton_in_flight", int, 4, "Triton harness: requests in flight per endpoint at most (each of up to "
              "batch_size samples; Server: one sample each).", minimum=1, maximum=100_000),
        Field("triton_request_timeout_s", float, 60.0, "Triton harness: longest wait for one request's answer; an "
              "endpoint that takes longer fails the run.", minimum=0.1, maximum=3600.0),
    )

    flags = (
        HarnessFlag("endpoints", "host:port (gRPC) of running Triton servers (make serve_triton starts one), one or "
                    "more per node. Default: a local server started for each test. --triton_endpoints is the same "
                    "setting", aliases=("triton_endpoints",)),
        HarnessFlag("triton_port", "the gRPC port make serve_triton serves on (default 8001)"),
    )

    def parse_flag(self, name: str, text: str):
        if name == "endpoints":
            from ...triton.client import parse_endpoints

            return parse_endpoints(text)
        return parse_port(text, name)

    def preflight(self, fields, args, paths) -> None:
        from ..triton_system import check_servable

        check_servable(fields, args.endpoints, paths.triton_venv)

    def needs_environment(self, args, for_run: bool) -> bool:
        """A local server runs from the Triton environment: make build makes it for the Triton harness, make run
        where no --endpoints name running servers."""
        return args.workload.harness_type.value == TRITON and not (for_run and args.endpoints)

    def make_environment(self, ctx) -> None:
        """The server environment (.venv-triton), hash-checked from requirements/triton.txt."""
        import subprocess
        import sys

        from ...errors import UserError

        bootstrap = ctx.paths.repo / "scripts" / "bootstrap_venv.py"
        venv = ctx.paths.triton_venv
        if subprocess.call([sys.executable, str(bootstrap), "--environment", "triton", "--venv", str(venv)]) != 0:
            raise UserError(f"The Triton environment could not be installed into {venv} (the installer's messages "
                            f"are above; the package registry must be reachable).", exit_code=1)

    def capabilities(self, ctx) -> list[tuple[str, str, str]]:
        from ...errors import UserError
        from ...triton.server import find_installation

        try:
            installation = find_installation(ctx.paths.triton_venv)
        except UserError:
            return [("Triton server", "not installed",
                     'for --harness_type=triton: make build RUN_ARGS="--harness_type=triton"')]
        version = next(iter(installation.dist.parents[1].glob("nvidia_pytriton-*.dist-info")), None)
        name = version.name.removesuffix(".dist-info").replace("_", "-") if version else "nvidia-pytriton"
        return [("Triton server", name,
                 f"tritonserver with the python backend, in {installation.venv.name} (--harness_type=triton)")]

    def run_options(self, args, paths) -> dict:
        return {"endpoints": list(args.endpoints)}

    def layout_tunable(self, args) -> str | None:
        if not args.endpoints:
            return None     # each test starts its own server from the repository it writes with the layout
        return ("--endpoints names Triton servers that run already, with the model configuration they were started "
                "with; tune on the server's node without --endpoints, then start the servers again")

    def interrupted(self) -> None:
        import sys

        servers = sys.modules.get("code.common.triton.server")
        if servers is not None:
            servers.stop_all()      # the test's local server

    def create(self, run: HarnessRun):
        from ..triton_system import triton_system

        return triton_system(run.spec, run.benchmark, run.samples, run.log_dir)
