"""The LLM benchmarks in the rules tables, LoadGen-log reading of token-latency runs and the plain-words verdict.

Every number asserted here is a fact of the round's official files (the mirror of mlcommons/inference):
loadgen/mlperf.conf, tools/submission/submission_checker/constants.py ("constants") and
tools/submission/submission_checker_old.py ("old"), compliance/TEST06/. With MLPERF_INFERENCE_DIR pointing at a
checkout, the last tests read those files again and compare them with the tables.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from code.common.constants import AccuracyTarget, Scenario, SystemType
from code.common.records.loadgen_log import read_detail
from code.common.records.verdict import explain
from code.common.rules import get_round
from tests.official_tools import NOT_AT_HAND, inference_dir, load_official_module
from tests.synthetic_logs import llm_server_detail, write_detail

RULES = get_round("v6.1")
LLAMA, EDGE = RULES.benchmark("llama3.1-8b"), RULES.benchmark("llama3.1-8b-edge")
# The round's other LLM benchmarks, whose tables are checked against the same official files.
TASKS = tuple(RULES.benchmark(name) for name in ("llama2-70b-99.9", "deepseek-r1", "gpt-oss-120b"))
K99 = AccuracyTarget.k_99
needs_checkout = pytest.mark.skipif(inference_dir() is None,
                                    reason=f"{NOT_AT_HAND}: the official files were not read again")


# -- the tables ---------------------------------------------------------------------------------------------
def test_names_and_loadgen_models():
    # constants: "models" and model_mapping (llama3_1-8b -> llama3.1-8b); mlperf.conf: llama3_1-8b,
    # llama3_1-8b-interactive, llama3_1-8b-edge.
    assert LLAMA.submission_name(K99) == "llama3.1-8b" and EDGE.submission_name(K99) == "llama3.1-8b-edge"
    assert {"llama3.1-8b", "llama3.1-8b-edge"} <= set(RULES.all_models)
    assert LLAMA.loadgen_model_for(Scenario.Offline) == LLAMA.loadgen_model_for(Scenario.Server) == "llama3_1-8b"
    assert LLAMA.loadgen_model_for(Scenario.Interactive) == "llama3_1-8b-interactive"
    assert EDGE.loadgen_model_for(Scenario.SingleStream) == "llama3_1-8b-edge"
    with pytest.raises(ValueError, match="no Interactive"):
        EDGE.loadgen_model_for(Scenario.Interactive)
    assert RULES.benchmark("resnet50").loadgen_model_for(Scenario.Server) == "resnet50"


def test_scenarios_per_system_type():
    # constants v6.1: required-scenarios-datacenter / -edge / -datacenter-edge and optional-scenarios-*; the
    # "one of Interactive or Server" rule of Loader.check_scenarios and of the old checker's last check.
    assert LLAMA.required_scenarios == {SystemType.datacenter: (Scenario.Offline,),
                                        SystemType.datacenter_edge: (Scenario.Offline,)}
    assert not LLAMA.allows(SystemType.edge)
    for system_type in (SystemType.datacenter, SystemType.datacenter_edge):
        assert set(LLAMA.optional_scenarios[system_type]) == {Scenario.Interactive, Scenario.Server}
        assert set(LLAMA.required_one_of[system_type]) == {Scenario.Interactive, Scenario.Server}
    assert EDGE.required_scenarios == {SystemType.edge: (Scenario.SingleStream, Scenario.Offline),
                                       SystemType.datacenter_edge: (Scenario.SingleStream, Scenario.Offline)}
    assert not EDGE.allows(SystemType.datacenter) and not EDGE.optional_scenarios and not EDGE.required_one_of


def test_sample_counts_and_equal_issue():
    # constants: performance-sample-count, dataset-size, OFFLINE_MIN_SPQ_SINCE_V4; mlperf.conf:
    # *.performance_sample_count_override, Offline.min_query_count, sample_concatenate_permutation = 1 (which the
    # old checker's requires_equal_issue asks of both).
    assert (LLAMA.performance_sample_count, LLAMA.dataset_size, LLAMA.offline_min_samples) == (13368, 13368, 13368)
    assert (EDGE.performance_sample_count, EDGE.dataset_size, EDGE.offline_min_samples) == (5000, 5000, 5000)
    assert LLAMA.equal_issue and EDGE.equal_issue


def test_token_latency_bounds():
    # mlperf.conf: llama3_1-8b.Server.ttft_latency = 2000, tpot_latency = 100; llama3_1-8b-interactive: 500, 30;
    # constants LLM_LATENCY_LIMITS["llama3.1-8b"] the same in ns; latency-constraint {"Server": 20000000000}.
    assert LLAMA.uses_token_latencies and EDGE.uses_token_latencies
    server, interactive = LLAMA.token_limits(Scenario.Server), LLAMA.token_limits(Scenario.Interactive)
    assert (server.ttft_ns, server.tpot_ns) == (2000 * 1000000, 100 * 1000000)
    assert (interactive.ttft_ns, interactive.tpot_ns) == (500 * 1000000, 30 * 1000000)
    assert LLAMA.token_limits(Scenario.Offline) is None and EDGE.token_limits(Scenario.SingleStream) is None
    assert LLAMA.server_latency_ms * 1e6 == 20000000000 and EDGE.server_latency_ms is None
    assert not RULES.benchmark("resnet50").uses_token_latencies


def test_accuracy_targets_and_upper_limit():
    # constants accuracy-target: ROUGE1 38.7792*0.99, ROUGE2 15.9075*0.99, ROUGEL 24.4957*0.99, ROUGELSUM
    # 35.793*0.99, GEN_LEN 8167644*0.9; accuracy-upper-limit: GEN_LEN 8167644*1.1. Edge: 39.06, 16.1147, 24.6375,
    # 36.124, 3051113.
    bounds = {b.name: b for b in LLAMA.accuracy_bounds(K99)}
    assert list(bounds) == ["ROUGE1", "ROUGE2", "ROUGEL", "ROUGELSUM", "GEN_LEN"]
    assert bounds["ROUGE1"].minimum == 38.7792 * 0.99 and bounds["ROUGE2"].minimum == 15.9075 * 0.99
    assert bounds["ROUGEL"].minimum == 24.4957 * 0.99 and bounds["ROUGELSUM"].minimum == 35.793 * 0.99
    assert bounds["GEN_LEN"].minimum == 8167644 * 0.9 and bounds["GEN_LEN"].maximum == 8167644 * 1.1
    assert all(b.maximum is None for name, b in bounds.items() if name != "GEN_LEN")
    edge = {b.name: b for b in EDGE.accuracy_bounds(K99)}
    assert edge["ROUGE1"].minimum == 39.06 * 0.99 and edge["GEN_LEN"].maximum == 3051113 * 1.1
    assert LLAMA.accuracy_threshold(K99) == 38.7792 * 0.99
    # language/llama3.1-8b/evaluation.py prints one dict; the checkers' ACC_PATTERN reads each metric from it.
    line = "{'rouge1': '38.8638', 'rouge2': '16.2134', 'rougeL': '24.5295', 'rougeLsum': '35.8712', " \
           "'gen_len': 8167000, 'gen_num': 13368}"
    read = {b.name: float(re.match(b.pattern, line).group(1)) for b in bounds.values()}
    assert read == {"ROUGE1": 38.8638, "ROUGE2": 16.2134, "ROUGEL": 24.5295, "ROUGELSUM": 35.8712,
                    "GEN_LEN": 8167000.0}
    assert all(b.within(read[b.name]) for b in bounds.values())
    assert not bounds["GEN_LEN"].within(9000000) and not bounds["ROUGE2"].within(15.0)


def test_single_metric_benchmarks_keep_their_one_bound():
    resnet = RULES.benchmark("resnet50")
    (bound,) = resnet.accuracy_bounds(K99)
    assert bound.pattern == resnet.accuracy_pattern and bound.minimum == resnet.accuracy_threshold(K99)
    assert bound.maximum is None and resnet.checked_compliance_tests == resnet.compliance_tests


def test_test06_table():
    # compliance/TEST06/audit.config line for line; README: three token criteria, no performance one; the
    # checkers' models_TEST06 (main.py) and check_compliance_dir (old) name llama3.1-8b, not llama3.1-8b-edge.
    test = RULES.compliance_tests["TEST06"]
    assert test.audit_config == ("*.*.mode = 2", "*.*.accuracy_log_rng_seed = 720381539243781796",
                                 "*.*.accuracy_log_sampling_target = 100", "*.*.min_query_count = 100",
                                 "*.*.min_duration = 0", "*.*.sample_concatenate_permutation = 0")
    assert not test.compares_performance and test.checks_output_tokens and not test.samples_accuracy
    assert test.sampling_target(LLAMA) == 100
    assert RULES.compliance_tests["TEST01"].sampling_target(RULES.benchmark("resnet50")) == 4096
    assert RULES.compliance_tests["TEST04"].sampling_target(RULES.benchmark("resnet50")) is None
    assert LLAMA.compliance_tests == LLAMA.checked_compliance_tests == ("TEST06",)
    assert EDGE.compliance_tests == ("TEST06",) and EDGE.checked_compliance_tests == ()


# -- LoadGen logs of token-latency runs -----------------------------------------------------------------------
def test_metric_of_token_runs(tmp_path: Path):
    # main.py's RESULT_FIELD_BENCHMARK_OVERWRITE v6.1: Offline result_tokens_per_second, Server
    # result_completed_tokens_per_second, llama3.1-8b-edge SingleStream result_90.00_percentile_latency_ns.
    offline = read_detail(write_detail(tmp_path / "o", {
        "effective_scenario": "Offline", "requested_use_token_latencies": True, "result_samples_per_second": 20.5,
        "result_tokens_per_second": 2500.25}))
    metric = offline.metric()
    assert (metric.value, metric.unit, metric.higher_is_better) == (2500.25, "tokens/s", True)
    assert offline.token_latencies() is None
    server = read_detail(llm_server_detail(tmp_path / "s", ttft_ms=400, tpot_ms=25, bounds_ms=(500, 30)))
    assert server.metric().value == 1523.2 and server.metric().unit == "tokens/s"
    tokens = server.token_latencies()
    assert (tokens.ttft_p99_ns, tokens.tpot_p99_ns, tokens.ttft_bound_ns, tokens.tpot_bound_ns) == (
        400e6, 25e6, 500e6, 30e6)
    single = read_detail(write_detail(tmp_path / "ss", {
        "effective_scenario": "SingleStream", "requested_use_token_latencies": True,
        "result_90.00_percentile_latency_ns": 1_250_000_000, "early_stopping_latency_ss": 1_300_000_000}))
    assert single.metric().value == 1250.0 and single.metric().unit == "ms"
    plain = read_detail(write_detail(tmp_path / "p", {"effective_scenario": "Offline",
                                                      "result_samples_per_second": 20.5}))
    assert plain.metric().unit == "samples/s" and not plain.uses_token_latencies


# -- why a run is INVALID ---------------------------------------------------------------------------------------
def test_ttft_over_the_bound_says_what_to_lower(tmp_path: Path):
    log = read_detail(llm_server_detail(tmp_path, ttft_ms=2600, tpot_ms=80))
    verdict = explain(log, {"server_target_qps": 12.0}, test_run=False, token_limits=LLAMA.token_limits(
        Scenario.Server))
    assert not verdict.valid and not verdict.submittable
    (reason,) = verdict.reasons
    assert "99th percentile time to first token 2600.00 ms is over the 2000 ms bound LoadGen judged it by" in reason
    assert "lower server_target_qps to about 9.15" in reason   # 11.9 completed x 2000 / 2600


def test_tpot_over_the_interactive_bound_names_the_batch(tmp_path: Path):
    log = read_detail(llm_server_detail(tmp_path, ttft_ms=300, tpot_ms=41, bounds_ms=(500, 30)))
    verdict = explain(log, {}, test_run=False, token_limits=LLAMA.token_limits(Scenario.Interactive),
                      run_scenario=Scenario.Interactive)
    (reason,) = verdict.reasons
    assert reason.startswith("Interactive 99th percentile time per output token 41.00 ms is over the 30 ms bound")
    assert "lower batch_size" in reason and "prefill_batch" in reason and "prefill_chunk_tokens" in reason


def test_a_bound_loosened_in_user_conf_is_not_submittable(tmp_path: Path):
    # LoadGen judged by 3000 ms (a user.conf override) and calls the run VALID; the checkers want < 2000 ms.
    log = read_detail(llm_server_detail(tmp_path, ttft_ms=2100, tpot_ms=80, bounds_ms=(3000, 100)))
    verdict = explain(log, {}, test_run=False, token_limits=LLAMA.token_limits(Scenario.Server))
    assert verdict.valid and not verdict.submittable
    assert "the rules' 2000 ms bound (the submission checkers want it strictly below" in verdict.reasons[0]
    assert explain(log, {}, test_run=False).submittable   # without the rules' bounds only LoadGen's count


def test_a_run_within_both_bounds_has_nothing_to_say(tmp_path: Path):
    log = read_detail(llm_server_detail(tmp_path, ttft_ms=1500, tpot_ms=80))
    verdict = explain(log, {}, test_run=False, token_limits=LLAMA.token_limits(Scenario.Server))
    assert verdict.valid and verdict.submittable and verdict.reasons == ()


def test_token_early_stopping_is_read_from_both_results(tmp_path: Path):
    log = read_detail(llm_server_detail(
        tmp_path, ttft_ms=1500, tpot_ms=80, valid=False, early_stopping_met=False,
        early_stopping_ttft_result=" * Only processed 90 queries. Need to process at least 100 total queries.",
        early_stopping_tpot_result=" * Run successful."))
    (reason,) = explain(log, {}, test_run=False).reasons
    assert "(7200 ran, LoadGen asks for at least 100)" in reason


# -- the official files themselves, when a checkout is at hand ------------------------------------------------
def _constants(checkout: Path):
    """tools/submission/submission_checker/constants.py of the checkout, imported on its own."""
    path = checkout / "tools" / "submission" / "submission_checker" / "constants.py"
    return load_official_module(path, "official_checker_constants")


@needs_checkout
def test_tables_match_the_checker_constants():
    official = _constants(inference_dir())
    config = official.MODEL_CONFIG["v6.1"]
    types = {SystemType.datacenter: "datacenter", SystemType.edge: "edge", SystemType.datacenter_edge:
             "datacenter-edge"}
    for bench in (LLAMA, EDGE, *TASKS):
        target_of = bench.accuracy_targets[0]
        name = bench.submission_name(target_of)
        for system_type, key in types.items():
            assert list(bench.required_scenarios.get(system_type, ())) == \
                [Scenario(s) for s in config[f"required-scenarios-{key}"].get(name, [])], (name, key)
            assert set(bench.optional_scenarios.get(system_type, ())) == \
                {Scenario(s) for s in config[f"optional-scenarios-{key}"].get(name, [])}, (name, key)
        target = config["accuracy-target"][name]
        bounds = bench.accuracy_bounds(target_of)
        assert [(b.name, b.minimum) for b in bounds if b.minimum] == list(zip(target[::2], target[1::2]))
        limit = config["accuracy-upper-limit"][name]
        assert [(b.name, b.maximum) for b in bounds if b.maximum is not None] == list(zip(limit[::2], limit[1::2]))
        assert all(b.pattern == official.ACC_PATTERN[b.name] for b in bounds)
        assert bench.performance_sample_count == config["performance-sample-count"][name]
        assert bench.dataset_size == config["dataset-size"][name]
        assert bench.accuracy_samples == config["accuracy-sample-count"].get(name, bench.dataset_size)
        assert bench.offline_min_samples == official.OFFLINE_MIN_SPQ_SINCE_V4[name]
        # LoadGen's model name is the submission name, through the checkers' mapping, less an accuracy suffix.
        mapped = config["model_mapping"].get(bench.loadgen_model, bench.loadgen_model)
        assert mapped == name or name == f"{mapped}-{target_of.percent_label}", (mapped, name)
        if bench.server_latency_ms is not None:
            assert int(bench.server_latency_ms * 1e6) == config["latency-constraint"][name]["Server"]
        for test in ("TEST06", "TEST07", "TEST09"):
            assert (name in config[f"models_{test}"]) == (test in bench.checked_compliance_tests), (name, test)
        for scenario, limits in bench.token_latency_limits.items():
            assert official.LLM_LATENCY_LIMITS[name][scenario.value] == {"ttft": limits.ttft_ns,
                                                                         "tpot": limits.tpot_ns}, (name, scenario)
    for scenario, limits in LLAMA.token_latency_limits.items():
        assert official.LLM_LATENCY_LIMITS["llama3.1-8b"][scenario.value] == {"ttft": limits.ttft_ns,
                                                                              "tpot": limits.tpot_ns}
    assert config["latency-constraint"]["llama3.1-8b"] == {"Server": int(LLAMA.server_latency_ms * 1e6)}


@needs_checkout
def test_tables_match_mlperf_conf_and_the_test06_audit_config():
    conf = (inference_dir() / "loadgen" / "mlperf.conf").read_text()

    def value(model: str, scenario: str, key: str) -> int:
        return int(re.search(rf"^{re.escape(model)}\.{scenario}\.{key}\s*=\s*(\d+)", conf, re.M).group(1))

    assert value("llama3_1-8b", "Server", "ttft_latency") == LLAMA.token_limits(Scenario.Server).ttft_ms
    assert value("llama3_1-8b", "Server", "tpot_latency") == LLAMA.token_limits(Scenario.Server).tpot_ms
    assert value("llama3_1-8b-interactive", "Server", "ttft_latency") == \
        LLAMA.token_limits(Scenario.Interactive).ttft_ms
    assert value("llama3_1-8b-interactive", "Server", "tpot_latency") == \
        LLAMA.token_limits(Scenario.Interactive).tpot_ms
    for bench in (LLAMA, EDGE, *TASKS):
        for model in filter(None, (bench.loadgen_model, bench.interactive_loadgen_model)):
            assert value(model, r"\*", "performance_sample_count_override") == bench.performance_sample_count
            assert value(model, r"\*", "use_token_latencies") == 1
            assert value(model, r"\*", "sample_concatenate_permutation") == 1
            if bench.accuracy_sample_count is not None:
                assert value(model, r"\*", "accuracy_sample_count_override") == bench.accuracy_sample_count
        if re.search(rf"^{re.escape(bench.loadgen_model)}\.Offline\.min_query_count", conf, re.M):
            assert value(bench.loadgen_model, "Offline", "min_query_count") == bench.offline_min_samples
        for scenario, model in ((Scenario.Server, bench.loadgen_model),
                                (Scenario.Interactive, bench.interactive_loadgen_model)):
            limits = bench.token_limits(scenario)
            if limits is not None:
                assert (value(model, "Server", "ttft_latency"), value(model, "Server", "tpot_latency")) == \
                    (limits.ttft_ms, limits.tpot_ms), model
    audit = (inference_dir() / "compliance" / "TEST06" / "audit.config").read_text()
    lines = tuple(line.strip() for line in audit.splitlines() if line.strip() and not line.startswith("#"))
    assert lines == RULES.compliance_tests["TEST06"].audit_config


def test_the_gen_len_pattern_reads_a_plain_number_only():
    # ACC_PATTERN["GEN_LEN"] = r".*'gen_len':\s([\d.]+).*": evaluation.py's print of a numpy sum under numpy 2 writes
    # np.int64(...), which the checkers cannot read; accuracy.txt must hold the plain number.
    (gen_len,) = [b for b in LLAMA.accuracy_bounds(K99) if b.name == "GEN_LEN"]
    assert re.match(gen_len.pattern, "{'rouge1': '38.8', 'gen_len': 8167000, 'gen_num': 13368}").group(1) == "8167000"
    assert re.match(gen_len.pattern, "{'rouge1': '38.8', 'gen_len': np.int64(8167000), 'gen_num': 13368}") is None
