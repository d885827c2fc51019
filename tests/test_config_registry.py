import dataclasses

import pytest

from code.common.config_registry import (BenchmarkConfig, ConfigRegistry, PerCore, Registration, ResolvedConfig,
                                         register, validate_class)
from code.common.constants import AccuracyTarget, PowerSetting, Scenario, WorkloadSetting
from code.common.errors import UserError
from code.common.systems import GENERIC_CPU


class Base(BenchmarkConfig):
    benchmark = "resnet50"
    scenario = Scenario.Offline
    model = "mobilenet_v2"
    dataset = "foolbox20"
    offline_expected_qps = 100.0


def registry_with(*classes) -> ConfigRegistry:
    registry = ConfigRegistry()
    for cls in classes:
        for system_id, workload in cls._toolkit_registrations:
            registry.add(cls, system_id, workload)
    return registry


def test_real_configs_load_and_validate():
    registry = ConfigRegistry.load(["resnet50"])
    for scenario in (Scenario.Offline, Scenario.Server, Scenario.SingleStream, Scenario.MultiStream):
        assert GENERIC_CPU in registry.systems_for("resnet50", scenario)
        assert "H100_SXM_80GBx1" in registry.systems_for("resnet50", scenario)
    maxq = Registration(power_setting=PowerSetting.MaxQ, harness="lwis")     # NVIDIA's in-process figures
    assert maxq in registry.registrations_for("resnet50", Scenario.Offline, "H100_SXM_80GBx1")
    assert Registration() in registry.registrations_for("resnet50", Scenario.Offline, GENERIC_CPU)


def test_precedence_command_line_over_class_over_default():
    @register("box")
    class Box(Base):
        batch_size = 16

    config = registry_with(Box).resolve("resnet50", Scenario.Offline, ["box"], WorkloadSetting(),
                                        overrides={"batch_size": 64, "server_target_qps": 5.0})
    assert config["batch_size"] == 64 and config.sources["batch_size"] == "command line"
    assert config["model"] == "mobilenet_v2" and config.sources["model"] == "config class"
    assert config["precision"] == "fp32" and config.sources["precision"] == "default"
    assert "server_target_qps" not in config.values  # a Server field does not apply to Offline
    assert config.match == "exact"


def test_resolved_config_is_immutable():
    @register("box")
    class Box(Base):
        pass

    config = registry_with(Box).resolve("resnet50", Scenario.Offline, ["box"], WorkloadSetting())
    assert isinstance(config, ResolvedConfig)
    with pytest.raises(TypeError):
        config.values["batch_size"] = 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.match = "x"


def test_per_core_values_are_derived_from_the_machine():
    @register(GENERIC_CPU)
    class Generic(Base):
        offline_expected_qps = PerCore(80.0)

    config = registry_with(Generic).resolve("resnet50", Scenario.Offline, ["unknown_box", GENERIC_CPU],
                                            WorkloadSetting(), cpu_cores=6)
    assert config["offline_expected_qps"] == 480.0
    assert "80 per core x 6 cores" in config.sources["offline_expected_qps"]
    assert config.match == f"nearest known system {GENERIC_CPU}"


def test_unknown_field_names_file_and_class():
    class Typo(Base):
        batch_sise = 4

    with pytest.raises(UserError, match=r"test_config_registry.py: class Typo sets unknown field 'batch_sise'. "
                                        r"Did you mean 'batch_size'\?"):
        validate_class(Typo)


def test_an_nvidia_name_without_counterpart_is_explained():
    class Copied(Base):
        gpu_copy_streams = 4

    with pytest.raises(UserError, match=r"class Copied sets 'gpu_copy_streams': that is in NVIDIA's harness the "
                                        r"number of CUDA streams"):
        validate_class(Copied)


def test_field_of_another_scenario_is_rejected():
    class Wrong(Base):
        server_target_qps = 10.0

    with pytest.raises(UserError, match="class Wrong sets 'server_target_qps', which does not apply to the Offline"):
        validate_class(Wrong)


def test_badly_typed_value_is_rejected():
    class Bad(Base):
        batch_size = "32"

    with pytest.raises(UserError, match="class Bad: batch_size must be an integer"):
        validate_class(Bad)


def test_missing_required_field_names_file_and_class():
    class NoQps(BenchmarkConfig):
        benchmark = "resnet50"
        scenario = Scenario.Offline
        model = "mobilenet_v2"
        dataset = "foolbox20"

    with pytest.raises(UserError, match=r"class NoQps is missing required field\(s\): offline_expected_qps"):
        validate_class(NoQps)


def test_duplicate_key_names_both_classes():
    @register("box")
    class First(Base):
        pass

    @register("box")
    class Second(Base):
        pass

    with pytest.raises(UserError, match=r"Duplicate config for \(resnet50, Offline, box, "
                                        r"k_99_MaxP \(every harness\)\): "
                                        r".*class First and .*class Second"):
        registry_with(First, Second)


def test_missing_workload_lists_the_registered_ones():
    @register("box")
    class Box(Base):
        pass

    maxq = WorkloadSetting(power_setting=PowerSetting.MaxQ)
    with pytest.raises(UserError, match=r"no 'lwis_k_99_MaxQ' config for system box. Registered workload "
                                        r"settings: k_99_MaxP \(every harness\)"):
        registry_with(Box).resolve("resnet50", Scenario.Offline, ["box"], maxq)


def test_no_config_at_all_says_how_to_add_one():
    with pytest.raises(UserError, match="make add_custom_system"):
        ConfigRegistry().resolve("resnet50", Scenario.Offline, ["box"], WorkloadSetting())


def test_llm_configs_load_from_their_module_names_with_the_generation_knobs():
    """llama3.1-8b's configs live in configs/llama3_1_8b (a module name holds no '.' or '-'); the generation
    knobs apply to the generating benchmarks only."""
    from code.common.fields import FIELDS

    registry = ConfigRegistry.load(["llama3.1-8b", "llama3.1-8b-edge"])
    for scenario in (Scenario.Offline, Scenario.Server, Scenario.Interactive):
        assert GENERIC_CPU in registry.systems_for("llama3.1-8b", scenario)
    assert registry.systems_for("llama3.1-8b", Scenario.SingleStream) == []
    assert GENERIC_CPU in registry.systems_for("llama3.1-8b-edge", Scenario.SingleStream)
    config = registry.resolve("llama3.1-8b", Scenario.Interactive, [GENERIC_CPU], WorkloadSetting(), cpu_cores=2,
                              benchmark_defaults={"max_output_tokens": 128})
    assert config["max_output_tokens"] == 128 and config["max_input_tokens"] == 0
    assert config.sources["max_output_tokens"] == "benchmark default"
    # without the benchmark's defaults, the catalogue's: no cap of its own
    bare = registry.resolve("llama3.1-8b", Scenario.Interactive, [GENERIC_CPU], WorkloadSetting(), cpu_cores=2)
    assert bare["max_output_tokens"] is None and bare.sources["max_output_tokens"] == "default"
    assert config["server_target_qps"] > 0      # the Server knobs apply to Interactive
    resnet = ConfigRegistry.load(["resnet50"])
    resolved = resnet.resolve("resnet50", Scenario.Offline, [GENERIC_CPU], WorkloadSetting(), cpu_cores=2)
    assert "max_output_tokens" not in resolved.values and "total_sample_count" in resolved.values
    assert not FIELDS["max_output_tokens"].applies_to(Scenario.Offline, benchmark="resnet50")



# -- harness types: a class for every harness, and the ones a system tunes for one harness ----------------------------
def workload(name: str) -> WorkloadSetting:
    return WorkloadSetting.from_name(name)


def test_a_class_registered_without_a_harness_applies_to_every_harness_type_even_a_new_one():
    @register("box")
    class Box(Base):
        batch_size = 16

    registry = registry_with(Box)
    for name in ("lwis_k_99_MaxP", "triton_k_99_MaxP", "echo-new_k_99_MaxP"):
        config = registry.resolve("resnet50", Scenario.Offline, ["box"], workload(name))
        assert config["batch_size"] == 16 and config.match == "exact" and "class Box" in config.source_class
        assert config.workload.name == name and config.as_dict()["workload_setting"] == name   # NVIDIA's name


def test_a_class_registered_for_one_harness_overrides_the_shared_one_for_that_harness_alone():
    @register("box")
    class Box(Base):
        batch_size = 16

    @register("box", harness="triton")
    class BoxServed(Box):
        triton_in_flight = 8

    registry = registry_with(Box, BoxServed)
    served = registry.resolve("resnet50", Scenario.Offline, ["box"], workload("triton_k_99_MaxP"))
    assert served["triton_in_flight"] == 8 and "class BoxServed" in served.source_class
    for name in ("lwis_k_99_MaxP", "openai_k_99_MaxP"):
        config = registry.resolve("resnet50", Scenario.Offline, ["box"], workload(name))
        assert "class Box" in config.source_class and config.sources["triton_in_flight"] == "default"


def test_the_nearest_system_decides_before_the_harness():
    """Each candidate system in turn: its class for the harness, else its class for every harness. A class tuned
    for one harness on the machine's own system does not serve another harness: the nearest system's shared one
    does (NVIDIA's GPU figures, registered for lwis, leave triton on an H100 to generic_cpu's config)."""
    @register("own", harness="lwis")
    class Own(Base):
        batch_size = 2

    @register("near")
    class Near(Base):
        batch_size = 4

    @register("far", harness="triton")
    class Far(Base):
        batch_size = 8

    registry, candidates = registry_with(Own, Near, Far), ["own", "near", "far"]
    assert registry.resolve("resnet50", Scenario.Offline, candidates, workload("lwis_k_99_MaxP"))["batch_size"] == 2
    triton = registry.resolve("resnet50", Scenario.Offline, candidates, workload("triton_k_99_MaxP"))
    assert triton["batch_size"] == 4 and triton.match == "nearest known system near"


def test_register_takes_the_accuracy_target_and_power_setting_by_name_and_nvidias_workload_setting():
    @register("box", accuracy_target="99.9", power_setting="maxq")
    class Named(Base):
        pass

    @register("box", WorkloadSetting(power_setting=PowerSetting.MaxQ))      # NVIDIA's form: its harness alone
    class Nvidia(Base):
        pass

    assert Named._toolkit_registrations == (("box", Registration(AccuracyTarget.k_99_9, PowerSetting.MaxQ)),)
    registry = registry_with(Named, Nvidia)
    assert "class Nvidia" in registry.resolve("resnet50", Scenario.Offline, ["box"],
                                              workload("lwis_k_99_MaxQ")).source_class
    with pytest.raises(UserError, match="no 'triton_k_99_MaxQ' config for system box"):
        registry.resolve("resnet50", Scenario.Offline, ["box"], workload("triton_k_99_MaxQ"))
    assert "class Named" in registry.resolve("resnet50", Scenario.Offline, ["box"],
                                             workload("triton_k_99_9_MaxQ")).source_class


@pytest.mark.parametrize("arguments, message", [
    ({"harness": "Open AI"}, "is not a harness type"),
    ({"harness": "open_ai"}, "is not a harness type"),
    ({"accuracy_target": "98"}, "Unknown accuracy_target '98'"),
    ({"power_setting": "MaxZ"}, "Unknown power_setting 'MaxZ'"),
])
def test_a_bad_registration_is_refused(arguments, message):
    with pytest.raises(UserError, match=message) as refused:
        register("box", **arguments)
    assert refused.value.exit_code == 2


def test_the_llm_scenario_configs_share_their_base_and_are_named_in_their_benchmarks_files():
    """configs/_llm holds what the LLM scenario configs share; each benchmark's classes still come from its own
    file (show_config, the config writers), and the served class keeps batch_size requests in flight."""
    benchmarks = ("llama3.1-8b", "llama3.1-8b-edge", "llama2-70b-99.9", "deepseek-r1", "gpt-oss-120b")
    registry = ConfigRegistry.load(benchmarks)
    for benchmark in benchmarks:
        target = "k_99_9" if benchmark == "llama2-70b-99.9" else "k_99"
        for scenario in Scenario:
            if not registry.systems_for(benchmark, scenario):
                continue
            every = registry.resolve(benchmark, scenario, [GENERIC_CPU], workload(f"lwis_{target}_MaxP"))
            served = registry.resolve(benchmark, scenario, [GENERIC_CPU], workload(f"openai_{target}_MaxP"))
            folder = f"configs/{benchmark.replace('.', '_').replace('-', '_')}/{scenario.value}/__init__.py"
            assert every.source_class == f"{folder}: class GenericCPU"
            assert served.source_class == f"{folder}: class GenericCPUServing"
            assert served["openai_in_flight"] == served["batch_size"] == every["batch_size"]
            assert {k: v for k, v in served.values.items() if k != "openai_in_flight"} == \
                {k: v for k, v in every.values.items() if k != "openai_in_flight"}
    edge = registry.resolve("llama3.1-8b-edge", Scenario.SingleStream, [GENERIC_CPU], workload("openai_k_99_MaxP"))
    assert edge["openai_in_flight"] == edge["batch_size"] == 1
