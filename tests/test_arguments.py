import pytest

from code.actions import ACTIONS
from code.common.arguments import parse_run_args
from code.common.constants import AccuracyTarget, PowerSetting, Scenario, TestMode, WorkloadSetting
from code.common.errors import UserError

BENCHMARKS = ["resnet50"]


def parse(*argv: str):
    return parse_run_args(["--action=run_harness", *argv], list(ACTIONS), BENCHMARKS, ["resnet50", "bert"])


def test_defaults():
    args = parse()
    assert args.benchmarks == ("resnet50",)
    assert args.scenarios == tuple(Scenario)
    assert args.workload == WorkloadSetting()
    assert args.test_mode is TestMode.PerformanceOnly and not args.test_run
    assert dict(args.overrides) == {}


def test_comma_lists_are_case_insensitive_and_deduplicated():
    args = parse("--benchmarks=ResNet", "--scenarios=offline,SINGLESTREAM,Offline,multi_stream")
    assert args.benchmarks == ("resnet50",)
    assert args.scenarios == (Scenario.Offline, Scenario.SingleStream, Scenario.MultiStream)


def test_workload_from_config_ver_and_explicit_flags():
    assert parse("--config_ver=high_accuracy").workload.accuracy_target is AccuracyTarget.k_99_9
    assert parse("--config_ver=maxq").workload.power_setting is PowerSetting.MaxQ
    assert parse("--config_ver=lwis_k_99_9_MaxQ").workload.name == "lwis_k_99_9_MaxQ"
    args = parse("--config_ver=maxq", "--accuracy_target=99.9")
    assert args.workload.name == "lwis_k_99_9_MaxQ"


def test_test_mode_and_test_run_alias():
    args = parse("--test_mode=accuracyonly", "--fast")
    assert args.test_mode is TestMode.AccuracyOnly and args.test_run
    assert parse("--test_run=false").test_run is False


def test_field_overrides_are_typed_and_aliases_work():
    args = parse("--gpu_batch_size=64", "--offline_expected_qps=12.5", "--backend=onnxruntime")
    assert dict(args.overrides) == {"batch_size": 64, "offline_expected_qps": 12.5, "backend": "onnxruntime"}


def test_nvidia_names_map_to_what_they_mean():
    """NVIDIA's gpu_inference_streams are concurrent engine contexts: our instances. Its gpu_copy_streams are CUDA
    copy streams, which nothing here has: refused with an explanation rather than taken for instances."""
    assert dict(parse("--gpu_inference_streams=3").overrides) == {"instances": 3}
    with pytest.raises(UserError, match=r"--gpu_copy_streams is .*host-to-device copies.*--instances"):
        parse("--gpu_copy_streams=4")


@pytest.mark.parametrize("argv, message", [
    (["--foo=1"], "unrecognized arguments: --foo=1. Valid flags: --accuracy_target"),
    (["--scenarios=offlin"], "Unknown scenario 'offlin'. Valid choices: Offline, Server, SingleStream, MultiStream"),
    (["--benchmarks=resnet5"], "Unknown benchmark 'resnet5'. Did you mean 'resnet50'? Valid choices: resnet50"),
    (["--benchmarks=bert"], "part of the rules round but this toolkit has no configs for it yet"),
    (["--batch_size=abc"], "--batch_size/--gpu_batch_size=abc: expected an integer"),
    (["--batch_size=0"], "must be at least 1"),
    (["--precision=int4"], "Valid choices: fp32, fp16, int8"),
    (["--test_mode=fast"], "Unknown test_mode 'fast'. Valid choices: PerformanceOnly, AccuracyOnly"),
    (["--config_ver=turbo"], "Unknown config_ver 'turbo'. Valid choices: default, high_accuracy"),
    (["--power_setting=MaxZ"], "Valid choices: MaxP, MaxQ"),
    (["--scenarios="], "--scenarios is empty"),
    (["--bench=resnet50"], "unrecognized arguments"),  # no abbreviations
])
def test_bad_input_names_the_valid_choices(argv, message):
    with pytest.raises(UserError, match=None) as error:
        parse(*argv)
    assert message in str(error.value)
    assert error.value.exit_code == 2


def test_unknown_action():
    with pytest.raises(UserError, match="Unknown action 'run_harnes'. Did you mean 'run_harness'"):
        parse_run_args(["--action=run_harnes"], list(ACTIONS), BENCHMARKS)


@pytest.mark.parametrize("argv, message", [
    (("--batch_size=8", "--gpu_batch_size=16"), "--batch_size=8 and --gpu_batch_size=16 both set batch_size"),
    (("--gpu_inference_streams=2", "--instances=4"), "--gpu_inference_streams=2 and --instances=4 both set instances"),
    (("--scenarios=offline", "--scenarios=server"), "--scenarios=offline and --scenarios=server both set scenarios"),
    (("--test_run", "--fast=false"), "--test_run=true and --fast=false both set test_run"),
    (("--log_dir=/a", "--log_dir=/b"), "--log_dir=/a and --log_dir=/b both set log_dir"),
])
def test_one_setting_given_two_values_is_refused_naming_both(argv, message):
    with pytest.raises(UserError, match="give it once") as refused:
        parse(*argv)
    assert message in str(refused.value) and refused.value.exit_code == 2


def test_one_setting_given_the_same_value_twice_is_taken():
    args = parse("--batch_size=8", "--gpu_batch_size=08", "--test_run", "--fast=true", "--scenarios=offline",
                 "--scenarios=offline")
    assert args.overrides["batch_size"] == 8 and args.test_run and args.scenarios == (Scenario.Offline,)


def test_a_make_variable_and_run_args_naming_one_setting_twice_name_the_variable():
    with pytest.raises(UserError, match="BENCHMARKS=resnet50 and --benchmarks=bert in RUN_ARGS both set"):
        parse("--benchmarks=resnet50", "--run_args=--benchmarks=bert --scenarios=offline")
    args = parse("--benchmarks=resnet50", "--run_args=--benchmarks=resnet50 --scenarios='offline,server'")
    assert args.scenarios == (Scenario.Offline, Scenario.Server)
    assert args.argv[1:] == ("--benchmarks=resnet50", "--benchmarks=resnet50", "--scenarios=offline,server")
