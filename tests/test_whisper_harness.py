"""Which harness runs whisper: the benchmark's own in-process engines (the engine harness), never the LLM decoder
harness, which keeps the benchmarks whose prompts are token ids."""
from __future__ import annotations

from pathlib import Path

from code.common.config_registry import ConfigRegistry
from code.common.constants import Scenario, WorkloadSetting
from code.common.harness.selection import choose, settle
from code.common.systems.known import GENERIC_CPU


def _chosen(benchmark: str, tmp_path: Path) -> str:
    config = ConfigRegistry.load([benchmark]).resolve(benchmark, Scenario.Offline, [GENERIC_CPU],
                                                      WorkloadSetting.from_name("lwis_k_99_MaxP"), cpu_cores=2)
    settled = settle(config, "lwis", tmp_path)
    return choose(settled, "lwis", tmp_path).name


def test_whisper_runs_on_its_own_engines(tmp_path: Path) -> None:
    assert _chosen("whisper", tmp_path) == "engine"


def test_an_llm_keeps_the_decoder_harness(tmp_path: Path) -> None:
    assert _chosen("llama3.1-8b", tmp_path) == "llm"


def test_harness_impl_python_typed_for_whisper_names_its_engines(tmp_path: Path) -> None:
    """Two python implementations of the lwis type serve benchmarks that generate tokens (the decoder harness and a
    benchmark's own engines): --harness_impl=python is the one of them that can run the test, not a refusal."""
    import dataclasses
    from types import MappingProxyType

    from code.common.config_registry import COMMAND_LINE
    from code.common.harness.registry import IMPL_FIELD

    config = ConfigRegistry.load(["whisper"]).resolve("whisper", Scenario.Offline, [GENERIC_CPU],
                                                      WorkloadSetting.from_name("lwis_k_99_MaxP"), cpu_cores=2)
    typed = dataclasses.replace(config, values=MappingProxyType({**config.values, IMPL_FIELD: "python"}),
                                sources=MappingProxyType({**config.sources, IMPL_FIELD: COMMAND_LINE}))
    settled = settle(typed, "lwis", tmp_path)
    assert settled[IMPL_FIELD] == "python" and choose(settled, "lwis", tmp_path).name == "engine"
