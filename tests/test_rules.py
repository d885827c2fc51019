import re

import pytest

from code.common.constants import AccuracyTarget, Scenario, SystemType
from code.common.errors import UserError
from code.common.rules import get_round, known_rounds


def test_round_identity_and_seeds():
    rules = get_round()
    assert rules.version == "v6.1" and rules.loadgen_version == "6.0.17"
    assert (rules.seeds.qsl_rng_seed, rules.seeds.sample_index_rng_seed, rules.seeds.schedule_rng_seed) == (
        2085463073848966840, 2747215439041700203, 16159082839903944936)
    assert rules.min_duration_ms == 600000
    assert "v6.1" in known_rounds()
    with pytest.raises(UserError, match="Known rounds: v6.1"):
        get_round("v4.0")


def test_resnet_constants():
    resnet = get_round().benchmark("resnet50")
    assert resnet.submission_name(AccuracyTarget.k_99) == "resnet"
    assert resnet.loadgen_model == "resnet50"
    assert resnet.accuracy_threshold(AccuracyTarget.k_99) == pytest.approx(75.6954)
    assert (resnet.performance_sample_count, resnet.dataset_size, resnet.offline_min_samples) == (1024, 50000, 24576)
    assert resnet.server_latency_ms == 15.0
    assert resnet.required_scenarios[SystemType.edge] == (Scenario.SingleStream, Scenario.MultiStream,
                                                           Scenario.Offline)
    assert Scenario.Server in resnet.required_scenarios[SystemType.datacenter_edge]
    assert resnet.compliance_tests == ("TEST01", "TEST04")
    assert re.match(resnet.accuracy_pattern, "accuracy=76.456%, good=38228, total=50000").group(1) == "76.456"


def test_other_benchmarks():
    rules = get_round()
    assert rules.benchmark("bert").submission_name(AccuracyTarget.k_99_9) == "bert-99.9"
    assert rules.benchmark("bert").performance_sample_count == 10833
    assert rules.benchmark("3d-unet").performance_sample_count == 43
    yolo = rules.benchmark("yolo")
    assert yolo.accuracy_threshold(AccuracyTarget.k_95) == pytest.approx(50.73)
    assert (yolo.performance_sample_count, yolo.dataset_size) == (64, 1525)
    for name, bench in rules.benchmarks.items():
        assert bench.required_scenarios and all(bench.required_scenarios.values()), name
        assert set(bench.submission_names.values()) <= set(rules.all_models), name
        # Every benchmark has compliance tests but qwen3-vl-235b-a22b and qwen3.6-27b, of which the round asks none
        # (no models_TEST* list of the checkers names them).
        assert bench.compliance_tests or name in ("qwen3-vl-235b-a22b", "qwen3.6-27b"), name
        if "TEST01" in bench.compliance_tests:
            assert bench.test01_sampling_target, name


def test_compliance_tables():
    tests = get_round().compliance_tests
    assert "*.*.accuracy_log_rng_seed = 720381539243781796" in tests["TEST01"].audit_config
    assert "*.*.performance_issue_same_index = 3" in tests["TEST04"].audit_config
    assert tests["TEST01"].performance_tolerance == 0.10 and tests["TEST01"].fast_tolerance == 0.20
    assert "TEST05" not in tests


def test_system_json_fields_cover_the_round():
    fields = get_round().system_json_fields
    assert len(fields) == len(set(fields)) == 35
    assert {"division", "submitter", "accelerator_on-chip_memories", "system_type_detail"} <= set(fields)


def test_wan_constants():
    """wan-2.2-t2v-a14b as the v6.1 checkers and mlperf.conf hold it: datacenter only, Offline and SingleStream both
    required, vbench_score at 99 % of 70.48, 248 prompts (mlperf.conf's performance sample count and Offline
    min_query_count), TEST04 alone."""
    wan = get_round().benchmark("wan-2.2-t2v-a14b")
    assert wan.submission_name(AccuracyTarget.k_99) == wan.loadgen_model == "wan-2.2-t2v-a14b"
    assert wan.required_scenarios == {SystemType.datacenter: (Scenario.Offline, Scenario.SingleStream),
                                      SystemType.datacenter_edge: (Scenario.Offline, Scenario.SingleStream)}
    assert not wan.allows(SystemType.edge)
    assert wan.accuracy_threshold(AccuracyTarget.k_99) == pytest.approx(69.7752)
    line = "{'vbench_score': 70.4812, 'subject_consistency': 95.1}"
    assert re.match(wan.accuracy_pattern, line).group(1) == "70.4812"
    assert (wan.performance_sample_count, wan.dataset_size, wan.accuracy_samples, wan.offline_min_samples) == \
        (248, 248, 248, 248)
    assert wan.compliance_tests == ("TEST04",) and wan.server_latency_ms is None
