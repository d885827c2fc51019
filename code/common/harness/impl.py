"""Which implementation runs a test of the lwis harness: `native` (the C++ core of code/common/native) or `python`
(sut.py). The field `harness_impl` asks for one; this module settles what runs.

Native is the default where it can serve: the core is built from these sources, and the test is one the core
implements (one backend call per batch of the lwis harness; the LLM harness streams tokens and the Triton harness
runs in Triton servers, both in Python). Where it cannot, a default falls back to python, with the reason in the
value's source (kept in metadata.json; still a default, so a command that repeats the run does not ask for python);
a native asked for by the invocation stops the plan with the reason.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType

from ..config_registry import FIELD_DEFAULT, ResolvedConfig, set_by_invocation
from ..constants import HarnessType
from ..errors import UserError
from ..fields import HARNESS_IMPLS

NATIVE, PYTHON = HARNESS_IMPLS
FIELD = "harness_impl"


def fallback_source(why: str) -> str:
    """The source of a default that could not be native: still the field's default (never asked for again)."""
    return f"{FIELD_DEFAULT} (python fallback: {why})"


def why_not_native(benchmark_name: str, model: str, harness_type: HarnessType, build_root: Path) -> str | None:
    """Why a test cannot run on the native core; None when it can."""
    from ..benchmark_api import get_benchmark
    from ..native.build import not_ready

    if harness_type is not HarnessType.lwis:
        return f"the {harness_type.value} harness has one implementation, in Python (the native core implements lwis)"
    spec = get_benchmark(benchmark_name).models.get(model)
    if spec is not None and spec.decoder:
        return (f"{benchmark_name} streams tokens through the LLM harness (continuous batching), which is Python; "
                f"the native core serves models of one call per batch")
    return not_ready(build_root)


def settle(config: ResolvedConfig, harness_type: HarnessType, build_root: Path) -> ResolvedConfig:
    """`config` with the implementation that will run: native as asked, or python. UserError when the invocation
    asked for native and it cannot serve."""
    if config.get(FIELD) != NATIVE:
        return config
    why = why_not_native(config.benchmark, config["model"], harness_type, build_root)
    if why is None:
        return config
    if set_by_invocation(config.sources[FIELD]):
        raise UserError(f"--harness_impl=native cannot run {config.benchmark} {config.scenario.value}: {why}. "
                        f"Leave --harness_impl out, or set --harness_impl=python.")
    return dataclasses.replace(config, values=MappingProxyType({**config.values, FIELD: PYTHON}),
                               sources=MappingProxyType({**config.sources, FIELD: fallback_source(why)}))
