"""Which harness plug-in runs a test: the implementation its config's `harness_impl` names where that one can run
it, else (for a default) the first of its harness type that can, the reason kept in the value's source; and the
plug-in the planner and the child process then ask (`choose`)."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from types import MappingProxyType

from ..benchmark_api import generates_tokens
from ..config_registry import ResolvedConfig, fallback_source, set_by_invocation
from ..errors import UserError
from .registry import HARNESSES, IMPL_FIELD, HarnessPlugin, Selection, of_type


def selection(config: ResolvedConfig, harness_type: str, build_root: Path,
              environment_made: bool = False) -> Selection:
    return Selection(config.benchmark, config["model"], generates_tokens(config.benchmark), harness_type,
                     Path(build_root), environment_made)


def settle(config: ResolvedConfig, harness_type: str, build_root: Path,
           environment_made: bool = False) -> ResolvedConfig:
    """`config` with the implementation that will run: the one `harness_impl` names where it can, else (where the
    value is the default) the first of the harness type's that can, with the reason in the value's source (kept in
    metadata.json; still a default, so a command that repeats the run does not ask for it). UserError when the
    invocation asked for an implementation that cannot run. `environment_made`: the command makes the harness's
    environment before its first test (make run), so what it would make does not count as missing."""
    asked = config.get(IMPL_FIELD)
    if asked is None:
        return config
    where = selection(config, harness_type, build_root, environment_made)
    candidates = of_type(harness_type, where.generates_tokens)
    # Several plug-ins of one type may share an implementation name (the in-process LLM harness and a benchmark's
    # own engines are both python): the one that can run the test is the one asked for.
    named = next((p for p in candidates if p.implementation == asked and p.why_not(where) is None), None) or \
        next((p for p in candidates if p.implementation == asked), None) or \
        next((p for p in HARNESSES.loaded() if p.implementation == asked), None)
    why = named.why_not(where) if named is not None else f"no harness implementation is named {asked}"
    if why is None and named in candidates:
        return config
    if why is None:
        why = f"the {harness_type} harness has no {asked} implementation"
    if set_by_invocation(config.sources[IMPL_FIELD]):
        raise UserError(f"--{IMPL_FIELD}={asked} cannot run {config.benchmark} {config.scenario.value}: {why}. "
                        f"Leave --{IMPL_FIELD} out, or set --{IMPL_FIELD}="
                        f"{'/'.join(p.implementation for p in candidates if p.implementation != asked) or 'python'}.")
    fallback = next((p for p in candidates if p.why_not(where) is None), None)
    if fallback is None:
        return config      # nothing else can run it: the planner says why (choose)
    return dataclasses.replace(
        config, values=MappingProxyType({**config.values, IMPL_FIELD: fallback.implementation}),
        sources=MappingProxyType({**config.sources, IMPL_FIELD: fallback_source(why)}))


def choose(config: ResolvedConfig, harness_type: str, build_root: Path) -> HarnessPlugin:
    """The plug-in that runs a test of the settled `config`; UserError saying why none can."""
    where = selection(config, harness_type, build_root)
    candidates = of_type(harness_type, where.generates_tokens)
    asked = config.get(IMPL_FIELD)
    for plugin in sorted(candidates, key=lambda p: p.implementation != asked):
        if plugin.why_not(where) is None:
            return plugin
    kind = "generates tokens" if where.generates_tokens else "runs one call per batch"
    serving = [f"--harness_type={p.harness_type} ({p.name})" for p in HARNESSES.loaded()
               if p.generates_tokens == where.generates_tokens]
    if not candidates:
        raise UserError(f"{config.benchmark} {kind}, and no harness of type {harness_type} serves such a benchmark. "
                        f"Harnesses that do: {', '.join(serving) or 'none'}.")
    reasons = "; ".join(f"{p.name}: {p.why_not(where)}" for p in candidates)
    raise UserError(f"No implementation of the {harness_type} harness can run {config.benchmark} here ({reasons}).")


def refuse_served_only(harness, model) -> None:
    """UserError for a model only serving engines run (ModelSpec.served_only) under a harness that needs a local
    engine file."""
    if model.served_only and harness.needs_engine:
        raise UserError(f"{model.name} runs on serving engines only (the in-process decoder graph is not built for a "
                        f"model of its size): add --harness_type=openai, with --endpoints=... naming your servers "
                        f"(documentation/llm_serving.md), or run the substitute, --model=smollm2-135m-instruct.")
