"""The endpoints harness (`--harness_type=endpoints`): the round's endpoints track, where the unmodified MLCommons
endpoints client (mlcommons/endpoints, `inference-endpoint`) is the load generator instead of LoadGen, and sends
the benchmark's queries to OpenAI-compatible servers.

The client needs Python >= 3.12 and is not on PyPI: `make build RUN_ARGS="--harness_type=endpoints"` makes its
environment (.venv-endpoints) from the checkout MLCOMMONS_ENDPOINTS_DIR names (code/common/endpoints_client/).
The parts of a run on it (its YAML, the client as a child process, the gates on its report) are in that package;
the tests of a benchmark on it arrive with the benchmarks it serves (qwen3.6-27b first), so `make run` with this
harness says so and runs nothing (documentation/endpoints.md).
"""
from __future__ import annotations

from ..registry import HarnessFlag, HarnessPlugin

ENDPOINTS = "endpoints"


class EndpointsHarness(HarnessPlugin):
    name = ENDPOINTS
    harness_type = ENDPOINTS
    implementation = "python"
    generates_tokens = True
    needs_engine = False
    description = ("the MLCommons endpoints client (inference-endpoint, Python >= 3.12, from your checkout at "
                   "MLCOMMONS_ENDPOINTS_DIR) as the load generator, against OpenAI-compatible servers")
    flags = (
        HarnessFlag("endpoints", "comma list of http://host:port of running OpenAI-compatible LLM servers (make "
                    "serve_llm starts one), one or more per node. Default: a local server started for each test"),
    )

    def parse_flag(self, name: str, text: str):
        from ...serving.endpoints import parse_endpoints

        return tuple(endpoint.url for endpoint in parse_endpoints([i.strip() for i in text.split(",") if i.strip()]))

    def preflight(self, fields, args, paths) -> None:
        from ...errors import NotImplementedYet

        raise NotImplementedYet(f"make run with --harness_type={ENDPOINTS}",
                                "the benchmarks the endpoints client serves (qwen3.6-27b first; "
                                "documentation/endpoints.md says what works today)")

    def needs_environment(self, args, for_run: bool) -> bool:
        """make build makes the client's environment for this harness; make run does not yet (it runs nothing)."""
        return args.workload.harness_type.value == ENDPOINTS and not for_run

    def make_environment(self, ctx) -> None:
        from ...endpoints_client.environment import BFCL_EXTRA, ensure_environment

        client = ensure_environment(ctx.paths.endpoints_venv, extras=(BFCL_EXTRA,), log=ctx.log)
        modified = " (the checkout has local changes: not the unmodified client)" if client.modified else ""
        ctx.log(f"MLCommons endpoints client {client.client_version} at {client.commit[:8]}{modified}, on Python "
                f"{client.python_version} ({client.interpreter}, found by {client.interpreter_found_by}), in "
                f"{client.venv}")

    def capabilities(self, ctx) -> list[tuple[str, str, str]]:
        from ...endpoints_client.environment import environment_row

        return [environment_row(ctx.paths.endpoints_venv)]
