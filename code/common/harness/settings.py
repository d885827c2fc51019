"""user.conf from a resolved config, and LoadGen TestSettings built from it.

LoadGen applies its built-in mlperf.conf (the round's seeds and minimums) on the first FromConfig of a
process, then user.conf; each test therefore runs in a process of its own.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from ..constants import Scenario, TestMode
from ..fileio import write_atomically
from ..rules import BenchmarkRules
from ..records.computation import GENERATION_CAPS
from ..records.early_stopping import scenario_min_queries

TEST_RUN_MIN_DURATION_MS = 10_000
# A test run that keeps a time limit (--test_run with --min_duration or --min_query_count): LoadGen pre-generates
# its SingleStream/MultiStream queries for 2 x min_duration at the expected latency, so a system more than twice as
# fast as its config expects (another model, an idle machine) runs out of them before min_duration and the run is
# INVALID ("Ran out of generated queries"). Such a test run has LoadGen generate at least this many queries instead
# (about 35 MB of LoadGen's memory; a query never issued costs nothing else): it runs out only where queries take
# less than min_duration / this count on average (60 us in a 6 s run). Not a compliance run whose accuracy log
# LoadGen samples (TEST01): it logs a response with probability sampling target / the queries it expects, which
# the lower latency would thin out to none.
TEST_RUN_GENERATED_QUERIES = 100_000


STREAM_LATENCY_FIELDS = {Scenario.SingleStream: "single_stream_expected_latency_ns",
                         Scenario.MultiStream: "multi_stream_expected_latency_ns"}


def test_run_min_query_count(scenario: Scenario) -> int:
    """min_query_count of a --test_run. SingleStream and MultiStream: the fewest queries LoadGen's early
    stopping accepts for the scenario's percentile (64 for the 90th, 662 for the 99th), so a healthy system's
    test run is VALID; LoadGen issues queries until both this count and min_duration are reached, and early
    stopping needs exactly that many, so no margin is added. Offline and Server: 1 (min_duration rules)."""
    return scenario_min_queries(scenario) or 1


test_run_min_query_count.__test__ = False  # not a pytest test


def _test_run_count(scenario: Scenario, fields: Mapping[str, Any]) -> int | None:
    """The query count a test run ends on, or None for a Server test run (which keeps a time limit).

    LoadGen sizes a run from the expected performance: SingleStream/MultiStream pre-generate queries for
    2 x min_duration / target_latency, Offline issues 1.1 x target_qps x min_duration samples. A system faster
    than expected then runs out of work before a time limit and the run is INVALID. So a test run ends on a
    count instead (min_duration 0): about TEST_RUN_MIN_DURATION_MS of work at the expected performance, and for
    SingleStream/MultiStream at least what early stopping needs (64 queries at p90, 662 at p99). Offline's
    min_query_count is its samples per query.
    """
    seconds = TEST_RUN_MIN_DURATION_MS / 1000
    if scenario is Scenario.Offline:
        return max(1, math.ceil(fields["offline_expected_qps"] * seconds))
    if scenario in (Scenario.SingleStream, Scenario.MultiStream):
        latency_s = fields[STREAM_LATENCY_FIELDS[scenario]] / 1e9
        return max(test_run_min_query_count(scenario), math.ceil(seconds / latency_s))
    return None


def user_conf_lines(model: str, scenario: Scenario, fields: Mapping[str, Any], rules: BenchmarkRules,
                    dataset_size: int, test_run: bool, qps_scale: float = 1.0, samples_responses: bool = False) \
        -> list[str]:
    """The lines of user.conf for one test. `qps_scale` lowers the Server target (compliance runs);
    `samples_responses`: a compliance run whose accuracy log LoadGen samples (see TEST_RUN_GENERATED_QUERIES)."""
    key = f"{model}.{scenario.loadgen.value}"
    lines: list[str] = generation_caps(fields)
    count = _test_run_count(scenario, fields) if test_run and not fields.get("min_duration") \
        and not fields.get("min_query_count") else None
    min_duration = fields.get("min_duration") or (TEST_RUN_MIN_DURATION_MS if test_run else None)
    if scenario is Scenario.Offline:
        lines.append(f"{key}.target_qps = {fields['offline_expected_qps']:g}")
    elif scenario.server_like:
        lines.append(f"{key}.target_qps = {fields['server_target_qps'] * qps_scale:g}")
        if scenario is Scenario.Interactive and rules.interactive_latency_ms is not None:
            # mlperf.conf has no Interactive entry for this model: its bound goes here, as the round asks.
            lines.append(f"{key}.target_latency = {rules.interactive_latency_ms:g}")
    elif scenario in (Scenario.SingleStream, Scenario.MultiStream):
        expected_ms = fields[STREAM_LATENCY_FIELDS[scenario]] / 1e6
        generation_ms = expected_ms
        if test_run and count is None and min_duration and not samples_responses:
            generation_ms = min(expected_ms, 2 * min_duration / TEST_RUN_GENERATED_QUERIES)
        if generation_ms < expected_ms:
            lines.append(f"# test run: target_latency {generation_ms:g} ms instead of the expected {expected_ms:g} ms: "
                         f"LoadGen generates {TEST_RUN_GENERATED_QUERIES} queries, enough for min_duration down to "
                         f"{generation_ms / 2:g} ms a query")
        lines.append(f"{key}.target_latency = {generation_ms:g}")
        if scenario is Scenario.MultiStream:
            lines.append(f"{key}.samples_per_query = {fields['multi_stream_samples_per_query']}")
    else:
        raise ValueError(f"unknown scenario {scenario}")

    # The performance sample set must fit the data set (small development sets hold fewer samples).
    dataset_size = effective_dataset_size(fields, dataset_size)
    sample_count = fields.get("performance_sample_count_override") or min(rules.performance_sample_count,
                                                                            dataset_size)
    if sample_count != rules.performance_sample_count:
        lines.append(f"{key}.performance_sample_count_override = {sample_count}")
    # mlperf.conf's accuracy_sample_count_override (gpt-oss-120b: 4395) is logged as the accuracy run's sample count
    # whatever the data set holds; LoadGen issues only the samples there are. A smaller data set says so.
    if rules.accuracy_sample_count is not None and dataset_size < rules.accuracy_sample_count:
        lines.append(f"{key}.accuracy_sample_count_override = {dataset_size}")

    if count is not None:
        return [*lines, f"{key}.min_duration = 0", f"{key}.min_query_count = {count}"]
    if min_duration:
        lines.append(f"{key}.min_duration = {min_duration}")
    min_queries = fields.get("min_query_count") or (test_run_min_query_count(scenario) if test_run else None)
    if min_queries:
        lines.append(f"{key}.min_query_count = {min_queries}")
    return lines


def samples_responses(rules_round, rules: BenchmarkRules, audit_test: str | None) -> bool:
    """Whether LoadGen samples the responses of this test into its accuracy log (a compliance test that does)."""
    return audit_test is not None and rules_round.compliance_tests[audit_test].sampling_target(rules) is not None


def performance_sample_count(fields: Mapping[str, Any], rules: BenchmarkRules, dataset_size: int) -> int:
    return int(fields.get("performance_sample_count_override") or min(rules.performance_sample_count,
                                                                        effective_dataset_size(fields, dataset_size)))


def effective_dataset_size(fields: Mapping[str, Any], dataset_size: int) -> int:
    """The samples LoadGen is given: the data set's, or fewer where total_sample_count caps them."""
    cap = fields.get("total_sample_count")
    return min(dataset_size, int(cap)) if cap else dataset_size


def generation_caps(fields: Mapping[str, Any]) -> list[str]:
    """Comment lines naming the generation caps of an LLM test (none for other benchmarks): LoadGen skips lines
    that start with '#', so the caps travel with the logs that were made under them."""
    if "max_output_tokens" not in fields:
        return []
    caps = ", ".join(f"{name} = {fields.get(name) or 'none'}" for name in GENERATION_CAPS)
    return [f"# generation caps of this run: {caps}"]


def write_user_conf(path: Path, lines: list[str]) -> Path:
    return write_atomically(path, "\n".join(lines) + "\n")


def test_settings(user_conf: Path, model: str, scenario: Scenario, mode: TestMode):
    """TestSettings: built-in mlperf.conf, then user.conf; scenario and mode set explicitly."""
    import mlperf_loadgen as lg

    settings = lg.TestSettings()
    if settings.FromConfig(str(user_conf), model, scenario.loadgen.value, 1) != 0:
        raise RuntimeError(f"LoadGen could not read {user_conf} for {model} {scenario.loadgen.value}")
    settings.scenario = getattr(lg.TestScenario, scenario.loadgen.value)
    settings.mode = getattr(lg.TestMode, mode.value)
    return settings


test_settings.__test__ = False  # a LoadGen factory, not a pytest test
