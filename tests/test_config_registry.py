import dataclasses

import pytest

from code.common.config_registry import (BenchmarkConfig, ConfigRegistry, PerCore, ResolvedConfig, register,
                                         validate_class)
from code.common.constants import PowerSetting, Scenario, WorkloadSetting
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
    maxq = WorkloadSetting(power_setting=PowerSetting.MaxQ)
    assert maxq in registry.workloads_for("resnet50", Scenario.Offline, "H100_SXM_80GBx1")


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

    with pytest.raises(UserError, match=r"Duplicate config for \(resnet50, Offline, box, lwis_k_99_MaxP\): "
                                        r".*class First and .*class Second"):
        registry_with(First, Second)


def test_missing_workload_lists_the_registered_ones():
    @register("box")
    class Box(Base):
        pass

    maxq = WorkloadSetting(power_setting=PowerSetting.MaxQ)
    with pytest.raises(UserError, match="no 'lwis_k_99_MaxQ' config for system box. Registered workload "
                                        "settings: lwis_k_99_MaxP"):
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

