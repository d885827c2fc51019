"""Every default has one owner: a closed LLM run generates as its reference does without the user passing a flag.

The table below is the official references' generation settings, with the file each comes from; where
../shared/mlcommons-inference holds that file, the test reads the value from it as well. Every benchmark x scenario
x kind of run of the closed models is resolved as a run resolves it (Context.resolve, the path plan_test takes) and
its generation settings are compared with the table.
"""
from __future__ import annotations

import ast
import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.actions.harness import with_embedded_default
from code.common.arguments import parse_run_args
from code.common.benchmark_api import get_benchmark
from code.common.config_registry import BENCHMARK_DEFAULT, set_by_invocation
from code.common.constants import Scenario, TestMode
from code.common.paths import Paths
from code.common.records.computation import computation_differences
from code.common.records.record import ConfigRecord
from code.common.rules import get_round
from code.main import available_benchmarks
from tests.conftest import SHARED, recorded_detector
from tests.run_records import make_record

ROUND = get_round()
OFFICIAL = SHARED / "mlcommons-inference" / "language"


@dataclass(frozen=True)
class Reference:
    """One benchmark's generation as its reference implementation sets it."""

    model: str                 # the toolkit's name of the closed model
    where: str                 # the reference file that sets it
    max_performance: int       # max new tokens of performance runs (and of the compliance tests)
    max_accuracy: int          # max new tokens of accuracy runs
    min_new_tokens: int        # min_tokens / min_new_tokens; 0 where the reference leaves the engine's default
    temperature: float
    top_p: float
    top_k: int                 # -1: no top-k cut (greedy decoding makes any top-k the same)
    seed: int | None


REFERENCES = {
    # SUT_VLLM.py gen_kwargs: temperature 0, top_p 1, top_k 1, seed 42, max_tokens 128, min_tokens 1.
    "llama3.1-8b": Reference("llama3.1-8b-instruct", "llama3.1-8b/SUT_VLLM.py", 128, 128, 1, 0.0, 1.0, -1, 42),
    # SUT.py gen_kwargs: max_new_tokens 1024, min_new_tokens 1, num_beams 1, do_sample False (SUT_API.py the same).
    "llama2-70b-99.9": Reference("llama2-70b-chat", "llama2-70b/SUT.py", 1024, 1024, 1, 0.0, 1.0, -1, None),
    # utils/backend_registry.py: MAX_OSL 20000, temperature 0, top_p 1, seed 42 (vLLM and SGLang), no min_tokens.
    "deepseek-r1": Reference("deepseek-r1", "deepseek-r1/utils/backend_registry.py", 20_000, 20_000, 0, 0.0, 1.0,
                             -1, 42),
    # README.md 'Generation Configuration': max_output_len 32768 (accuracy) / 10240 (performance; TEST07 and TEST09
    # run the "perf config"), temperature 1, top_p 1, top_k disabled; backends/sglang_backend.py sets no min tokens.
    "gpt-oss-120b": Reference("gpt-oss-120b", "gpt-oss-120b/README.md", 10240, 32768, 0, 1.0, 1.0, -1, None),
}


class _Tokenizer:
    """The closed model's tokenizer as far as the generation settings read it: its EOS ids."""

    eos_token_ids = (128001, 128008, 128009)


def _context(tmp_path: Path, benchmark: str, *flags: str, action: str = "run_harness") -> Context:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    args = parse_run_args([f"--action={action}", f"--benchmarks={benchmark}", *flags], list(ACTIONS),
                          available_benchmarks(paths, ROUND), list(ROUND.benchmarks))
    args = args.with_only_accuracy_target({name: rules.accuracy_targets for name, rules in ROUND.benchmarks.items()})
    system = recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()
    return Context(args=args, paths=paths, rules=ROUND, detect=lambda: system, log=lambda _: None)


def _scenarios(ctx: Context, benchmark: str) -> list[Scenario]:
    return [s for s in Scenario if ctx.registry.systems_for(benchmark, s)]


@pytest.mark.parametrize("name", sorted(REFERENCES))
def test_closed_runs_generate_as_the_reference_in_every_scenario_and_kind_of_run(tmp_path, monkeypatch, name):
    reference = REFERENCES[name]
    benchmark = get_benchmark(name)
    monkeypatch.setattr(benchmark, "tokenizer", lambda model, paths: _Tokenizer())
    ctx = _context(tmp_path, name, f"--model={reference.model}")
    scenarios = _scenarios(ctx, name)
    assert Scenario.Offline in scenarios and len(scenarios) >= 2
    for scenario in scenarios:
        # a compliance test runs in performance mode: its config is the performance runs' (audit.py, plan_test)
        for mode, cap in ((TestMode.PerformanceOnly, reference.max_performance),
                          (TestMode.AccuracyOnly, reference.max_accuracy)):
            config = ctx.resolve(name, scenario, mode)
            where = f"{name} {scenario.value} {mode.value}"
            assert config["max_output_tokens"] == cap, where
            assert config.sources["max_output_tokens"].startswith(BENCHMARK_DEFAULT), where
            assert not set_by_invocation(config.sources["max_output_tokens"])   # nothing to repeat on a command line
            assert config.benchmark_defaults["max_output_tokens"] == cap
            settings = benchmark.generation(reference.model, config.values, ctx.paths)
            assert (settings.max_new_tokens, settings.min_new_tokens) == (cap, reference.min_new_tokens), where
            assert (settings.temperature, settings.top_p, settings.top_k, settings.seed) == \
                (reference.temperature, reference.top_p, reference.top_k, reference.seed), where
            assert settings.eos_token_ids == _Tokenizer.eos_token_ids     # the model's EOS ids, nothing else
            assert settings.greedy == (reference.temperature == 0.0)


def test_the_table_agrees_with_the_official_files_where_they_are_here():
    """llama3.1-8b's SUT_VLLM.py gen_kwargs and gpt-oss-120b's README table, read from the official tree."""
    sut, readme = OFFICIAL / "llama3.1-8b" / "SUT_VLLM.py", OFFICIAL / "gpt-oss-120b" / "README.md"
    if not sut.is_file() or not readme.is_file():
        pytest.skip(f"the official references are not here ({sut.parent.parent}): ../shared/mlcommons-inference "
                    "beside the checkout, or MLPERF_INFERENCE_DIR, provides them")
    gen_kwargs = next(ast.literal_eval(node.value) for node in ast.walk(ast.parse(sut.read_text()))
                      if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "gen_kwargs"
                                                              for t in node.targets))
    llama = REFERENCES["llama3.1-8b"]
    assert (gen_kwargs["max_tokens"], gen_kwargs["min_tokens"], gen_kwargs["temperature"], gen_kwargs["top_p"],
            gen_kwargs["seed"]) == (llama.max_performance, llama.min_new_tokens, llama.temperature, llama.top_p,
                                    llama.seed)
    text = readme.read_text()
    accuracy, performance = map(int, re.search(r"\|\s*max_output_len\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|", text).groups())
    gpt = REFERENCES["gpt-oss-120b"]
    assert (accuracy, performance) == (gpt.max_accuracy, gpt.max_performance)
    assert re.search(r"\|\s*temperature\s*\|\s*1\.0\s*\|", text) and re.search(r"\|\s*top_p\s*\|\s*1\.0\s*\|", text)
    assert "TEST07" in text and "perf config (max_output_len=10240)" in text


def test_show_config_names_both_caps_of_a_benchmark_that_sets_one_per_kind_of_run(tmp_path):
    ctx = _context(tmp_path, "gpt-oss-120b", "--model=gpt-oss-120b", action="show_config")
    config = ctx.resolve("gpt-oss-120b", Scenario.Offline)
    assert config["max_output_tokens"] == 10240
    assert config.sources["max_output_tokens"] == \
        "benchmark default, for performance runs; 32768 in accuracy runs"
    accuracy = ctx.resolve("gpt-oss-120b", Scenario.Offline, TestMode.AccuracyOnly)
    assert accuracy.sources["max_output_tokens"] == "benchmark default, for accuracy runs"


def test_the_command_line_and_the_embedded_default_win_over_the_benchmark_default(tmp_path):
    typed = _context(tmp_path, "gpt-oss-120b", "--model=gpt-oss-120b", "--max_output_tokens=4096")
    config = typed.resolve("gpt-oss-120b", Scenario.Offline, TestMode.AccuracyOnly)
    assert config["max_output_tokens"] == 4096 and config.sources["max_output_tokens"] == "command line"
    # make run: the substitute's development caps, recorded as filled in
    for name in REFERENCES:
        ctx = with_embedded_default(_context(tmp_path, name, action="run"))
        for mode in TestMode:
            config = ctx.resolve(name, Scenario.Offline, mode)
            assert config["max_output_tokens"] == get_benchmark(name).embedded_default["max_output_tokens"]
            assert set_by_invocation(config.sources["max_output_tokens"])


@pytest.mark.parametrize("flag", ["--model=gpt-oss-120b", "--dataset=gpt_oss_eval"])
def test_make_run_naming_a_closed_model_or_data_set_gets_the_benchmarks_own_caps(tmp_path, flag):
    """One rule: the substitute's development caps come with the embedded default's model and data set only; make
    run naming another (the closed model, the full data set) runs at the benchmark's reference caps, as
    run_harness would, and what it leaves out of the pair is still filled in."""
    ctx = with_embedded_default(_context(tmp_path, "gpt-oss-120b", flag, action="run"))
    default = get_benchmark("gpt-oss-120b").embedded_default
    for mode, cap in ((TestMode.PerformanceOnly, 10240), (TestMode.AccuracyOnly, 32768)):
        config = ctx.resolve("gpt-oss-120b", Scenario.Offline, mode)
        assert config["max_output_tokens"] == cap and config.sources["max_output_tokens"].startswith(BENCHMARK_DEFAULT)
        assert config["total_sample_count"] != default["total_sample_count"]
        named, left = ("model", "dataset") if flag.startswith("--model") else ("dataset", "model")
        assert config[named] == flag.split("=", 1)[1] and config[left] == default[left]
    # Naming the embedded default's own model is no other choice: its caps stay.
    own = with_embedded_default(_context(tmp_path, "gpt-oss-120b", f"--model={default['model']}", action="run"))
    assert own.resolve("gpt-oss-120b", Scenario.Offline)["max_output_tokens"] == default["max_output_tokens"]


def test_resnet50_has_no_generation_fields_and_no_defaults_of_its_own(tmp_path):
    ctx = _context(tmp_path, "resnet50")
    config = ctx.resolve("resnet50", Scenario.Offline, TestMode.AccuracyOnly)
    assert "max_output_tokens" not in config.values and not config.benchmark_defaults


def _gpt_oss_record(tmp_path: Path, mode: TestMode, *flags: str):
    ctx = _context(tmp_path, "gpt-oss-120b", "--model=gpt-oss-120b", "--dataset=gpt_oss_eval", *flags)
    config = ctx.resolve("gpt-oss-120b", Scenario.Offline, mode)
    record = make_record(mode=mode.value, config=config)
    return record.replace(config=ConfigRecord(workload_setting=config.workload.name, fields=dict(config.values),
                                              sources=dict(config.sources),
                                              benchmark_defaults=dict(config.benchmark_defaults)))


def test_a_performance_run_and_an_accuracy_run_each_at_its_reference_cap_compute_alike(tmp_path):
    """Staging and the compliance references pair gpt-oss-120b's performance run (10240) with its accuracy run
    (32768): both generate as the reference does for their kind of run."""
    performance = _gpt_oss_record(tmp_path, TestMode.PerformanceOnly)
    accuracy = _gpt_oss_record(tmp_path, TestMode.AccuracyOnly)
    assert (performance.config.fields["max_output_tokens"], accuracy.config.fields["max_output_tokens"]) == \
        (10240, 32768)
    assert computation_differences(performance, accuracy) == []
    # one capped by hand is another computation
    capped = _gpt_oss_record(tmp_path, TestMode.PerformanceOnly, "--max_output_tokens=4096")
    assert computation_differences(capped, accuracy) == ["max_output_tokens=4096, not 32768"]
    # a record written before the defaults were kept compares its values as they are
    old = accuracy.replace(config=ConfigRecord(workload_setting=accuracy.config.workload_setting,
                                               fields=dict(accuracy.config.fields),
                                               sources=dict(accuracy.config.sources)))
    assert computation_differences(performance, old) == ["max_output_tokens=10240, not 32768"]


def test_a_guided_run_and_an_unguided_one_are_other_computations(tmp_path):
    """use_guided_decoding constrains the answers: a guided accuracy run is never paired with an unguided
    performance run; a record written before the field was kept is an unguided one."""
    performance = _gpt_oss_record(tmp_path, TestMode.PerformanceOnly)
    accuracy = _gpt_oss_record(tmp_path, TestMode.AccuracyOnly)
    guided = accuracy.replace(config=dataclasses.replace(
        accuracy.config, fields={**accuracy.config.fields, "use_guided_decoding": True}))
    assert computation_differences(performance, guided) == ["use_guided_decoding=False, not True"]
    before = accuracy.replace(config=dataclasses.replace(
        accuracy.config, fields={k: v for k, v in accuracy.config.fields.items() if k != "use_guided_decoding"}))
    assert computation_differences(performance, before) == []


def test_a_closed_run_under_a_development_cap_says_why_it_cannot_be_submitted(tmp_path):
    from code.common.records.computation import development_caps

    reference = _context(tmp_path, "gpt-oss-120b", "--model=gpt-oss-120b")
    config = reference.resolve("gpt-oss-120b", Scenario.Offline, TestMode.AccuracyOnly)
    assert development_caps(config.values, config.benchmark_defaults) == []
    capped = _context(tmp_path, "gpt-oss-120b", "--model=gpt-oss-120b", "--max_output_tokens=10240",
                      "--max_input_tokens=512")
    config = capped.resolve("gpt-oss-120b", Scenario.Offline, TestMode.AccuracyOnly)
    reasons = development_caps(config.values, config.benchmark_defaults)
    assert len(reasons) == 2
    assert reasons[0].startswith("max_output_tokens=10240 where the reference generates up to 32768 tokens")
    assert reasons[1].startswith("max_input_tokens=512 cuts the prompts")
