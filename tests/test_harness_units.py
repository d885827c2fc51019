"""Harness pieces on their own: user.conf, detail-log parsing, INVALID explanations, and the SUT through
the real LoadGen on tiny generated samples (one process per LoadGen test, as in production)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.constants import Scenario
from code.common.records.loadgen_log import read_detail
from code.common.harness.settings import performance_sample_count, user_conf_lines
from code.common.records.verdict import explain
from code.common.paths import REPO_ROOT
from code.common.rules import get_round

from .synthetic_logs import write_detail

RESNET = get_round().benchmark("resnet50")


def test_user_conf_for_each_scenario():
    fields = {"offline_expected_qps": 160.0, "server_target_qps": 80.0, "single_stream_expected_latency_ns": 8_000_000,
              "multi_stream_expected_latency_ns": 50_000_000, "multi_stream_samples_per_query": 8}
    assert user_conf_lines("resnet50", Scenario.Offline, fields, RESNET, 50000, False) == \
        ["resnet50.Offline.target_qps = 160"]
    assert user_conf_lines("resnet50", Scenario.Server, fields, RESNET, 50000, False, qps_scale=0.92) == \
        ["resnet50.Server.target_qps = 73.6"]
    assert user_conf_lines("resnet50", Scenario.SingleStream, fields, RESNET, 50000, False) == \
        ["resnet50.SingleStream.target_latency = 8"]
    assert user_conf_lines("resnet50", Scenario.MultiStream, fields, RESNET, 20, True) == [
        "resnet50.MultiStream.target_latency = 50", "resnet50.MultiStream.samples_per_query = 8",
        "resnet50.MultiStream.performance_sample_count_override = 20",
        "resnet50.MultiStream.min_duration = 0", "resnet50.MultiStream.min_query_count = 662"]
    assert performance_sample_count(fields, RESNET, 20) == 20
    assert performance_sample_count(fields, RESNET, 50000) == 1024


def test_user_conf_test_run_issues_what_early_stopping_needs():
    """--test_run: SingleStream/MultiStream run at least as many queries as LoadGen's early stopping needs for
    their percentile (90th: 64, 99th: 662), so a healthy system's test run is VALID; Offline/Server keep 1; a
    min_query_count the user set wins; runs that are not test runs leave mlperf.conf's minimums alone."""
    fields = {"offline_expected_qps": 160.0, "server_target_qps": 80.0, "single_stream_expected_latency_ns": 8_000_000,
              "multi_stream_expected_latency_ns": 50_000_000, "multi_stream_samples_per_query": 8}

    def tail(scenario, test_run, **extra):
        return user_conf_lines("resnet50", scenario, {**fields, **extra}, RESNET, 50000, test_run)[-2:]

    # Stream test runs end on a count: early stopping's, or about 10 s at the expected latency (8 ms: 1250).
    assert tail(Scenario.SingleStream, True) == ["resnet50.SingleStream.min_duration = 0",
                                                 "resnet50.SingleStream.min_query_count = 1250"]
    assert tail(Scenario.SingleStream, True, single_stream_expected_latency_ns=500_000_000)[-1] == \
        "resnet50.SingleStream.min_query_count = 64"
    assert tail(Scenario.MultiStream, True) == ["resnet50.MultiStream.min_duration = 0",
                                                "resnet50.MultiStream.min_query_count = 662"]
    # Offline: its min_query_count is the samples of its one query, about 10 s at the expected samples/s.
    assert tail(Scenario.Offline, True) == ["resnet50.Offline.min_duration = 0",
                                            "resnet50.Offline.min_query_count = 1600"]
    assert tail(Scenario.Server, True) == ["resnet50.Server.min_duration = 10000",
                                           "resnet50.Server.min_query_count = 1"]
    assert tail(Scenario.MultiStream, True, min_query_count=300, min_duration=5000) == [
        "resnet50.MultiStream.min_duration = 5000", "resnet50.MultiStream.min_query_count = 300"]
    assert not any("min_query_count" in line or "min_duration" in line
                   for scenario in Scenario
                   for line in user_conf_lines("resnet50", scenario, fields, RESNET, 50000, False))


def test_progress_line_expects_the_end_the_run_is_waiting_for():
    import io

    from code.common.harness.progress import Progress

    def line(counts, elapsed, min_samples=None):
        now = [0.0]
        progress = Progress("resnet50 X", lambda: counts, 10.0, min_samples, stream=io.StringIO(),
                            clock=lambda: now[0])
        now[0] = elapsed
        return progress.line()

    # Offline: the rest of its one query at the rate so far.
    assert line((2000, 3000), 20).endswith("2000 samples done (100.0/s), expected end in ~10 s")
    # Server past min_duration but short of its minimum query count: not "~0 s".
    assert line((200, 201), 20, min_samples=500).endswith("expected end in ~30 s")
    # SingleStream before min_duration, with its query count already met.
    assert line((500, 500), 5, min_samples=100).endswith("expected end in ~5 s")


def test_offline_too_short_says_which_qps_to_set(tmp_path):
    write_detail(tmp_path, {"effective_scenario": "Offline", "result_validity": "INVALID",
                            "result_min_duration_met": False, "result_samples_per_second": 190.4,
                            "effective_samples_per_query": 7806, "effective_min_duration_ms": 600000,
                            "result_invalid_reason": "Increase expected QPS so the loadgen pre-generates more"})
    verdict = explain(read_detail(tmp_path), {"offline_expected_qps": 65.0}, test_run=False)
    assert not verdict.valid
    assert verdict.reasons[0].startswith("Offline run lasted 41 s < 600 s: raise offline_expected_qps to about 190")


def test_singlestream_ran_out_of_queries(tmp_path):
    write_detail(tmp_path, {"effective_scenario": "SingleStream", "result_validity": "INVALID",
                            "result_min_duration_met": False, "result_mean_latency_ns": 5_000_000,
                            "effective_target_latency_ns": 8_000_000, "result_query_count": 2500,
                            "result_qps_with_loadgen_overhead": 200.0, "effective_min_duration_ms": 600000},
                 errors={"error_runtime": "Ending early: Ran out of generated queries to issue"})
    verdict = explain(read_detail(tmp_path), {}, test_run=False)
    assert "lower single_stream_expected_latency_ns to about 4500000" in verdict.reasons[0]
    assert "5.00 ms on average but LoadGen planned for 8.00 ms" in verdict.reasons[0]
    assert len(verdict.reasons) == 1   # the known error is explained, not repeated


def test_server_latency_bound(tmp_path):
    write_detail(tmp_path, {"effective_scenario": "Server", "result_validity": "INVALID",
                            "effective_target_latency_ns": 15_000_000, "effective_target_latency_percentile": 0.99,
                            "result_99.00_percentile_latency_ns": 30_000_000, "effective_target_qps": 100.0,
                            "result_completed_samples_per_sec": 99.0, "effective_min_duration_ms": 600000,
                            "result_min_duration_met": True})
    verdict = explain(read_detail(tmp_path), {}, test_run=False)
    assert "99th percentile latency 30.00 ms exceeds the 15.00 ms bound at 100 QPS: lower server_target_qps " \
           "to about 50" in verdict.reasons[0]


def test_valid_test_run_is_not_submittable(tmp_path):
    write_detail(tmp_path, {"effective_scenario": "Offline", "result_validity": "VALID",
                            "result_min_duration_met": True, "result_samples_per_second": 170.0,
                            "effective_samples_per_query": 1870, "effective_min_duration_ms": 10000})
    log = read_detail(tmp_path)
    verdict = explain(log, {}, test_run=True)
    assert verdict.valid and not verdict.submittable
    assert "min_duration was 10 s instead of the rules' 600 s" in verdict.reasons[-1]
    assert log.metric().value == 170.0 and round(log.run_duration_s) == 11


def test_stream_test_run_that_ends_on_its_count(tmp_path):
    write_detail(tmp_path, {"effective_scenario": "SingleStream", "result_validity": "VALID",
                            "result_min_duration_met": True, "early_stopping_met": True, "result_query_count": 1250,
                            "effective_min_query_count": 1250, "effective_target_latency_percentile": 0.9,
                            "effective_min_duration_ms": 0})
    verdict = explain(read_detail(tmp_path), {}, test_run=True)
    assert verdict.valid and verdict.reasons == (
        "This was a test run (--test_run): it ran 1250 queries instead of the rules' 600 s (early stopping needs 64 "
        "for the 90th percentile), so the result is for a quick look only and cannot be submitted.",)


def test_valid_multistream_test_run_names_its_query_count(tmp_path):
    write_detail(tmp_path, {"effective_scenario": "MultiStream", "result_validity": "VALID",
                            "result_min_duration_met": True, "early_stopping_met": True, "result_query_count": 662,
                            "effective_min_query_count": 662, "effective_target_latency_percentile": 0.99,
                            "effective_min_duration_ms": 10000})
    verdict = explain(read_detail(tmp_path), {}, test_run=True)
    assert verdict.valid and not verdict.submittable
    assert verdict.reasons == ("This was a test run (--test_run): min_duration was 10 s instead of the rules' 600 s, "
                               "with min_query_count 662 (what LoadGen's early stopping needs for the 99th "
                               "percentile), so the result is for a quick look only and cannot be submitted.",)


def probe(scenario: str, outdir: Path, *extra: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.loadgen_probe", scenario, str(outdir), *extra],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("scenario", ["Offline", "Server", "SingleStream", "MultiStream"])
def test_sut_serves_every_scenario_through_loadgen(tmp_path, scenario):
    result = probe(scenario, tmp_path)
    assert result["error"] is None and result["num_errors"] == 0
    assert result["completed"] == result["issued"] > 0
    assert result["scenario"] == scenario and result["metric"] > 0
    if scenario == "Server":
        assert result["calls"] < result["completed"]   # dynamic batching formed batches of several samples
    if scenario == "MultiStream":
        assert result["completed"] == 8 * result["calls"]


def test_accuracy_mode_responses_are_the_backend_outputs(tmp_path):
    result = probe("Offline", tmp_path, "-1", "AccuracyOnly")
    entries = json.loads((tmp_path / "mlperf_log_accuracy.json").read_text())
    assert result["completed"] == len(entries) == 64
    for entry in entries:
        value = int.from_bytes(bytes.fromhex(entry["data"]), "little")
        assert value == 4 * entry["qsl_idx"] + 1


@pytest.mark.parametrize("scenario", ["Offline", "SingleStream", "Server"])
def test_variable_size_responses_reach_the_accuracy_log_whole(tmp_path, scenario):
    from tests.loadgen_probe import variable_response

    result = probe(scenario, tmp_path, "-1", "AccuracyOnly", "variable")
    entries = json.loads((tmp_path / "mlperf_log_accuracy.json").read_text())
    assert result["completed"] == len(entries) == 64 and result["error"] is None
    for entry in entries:
        assert bytes.fromhex(entry["data"]) == variable_response(entry["qsl_idx"]).tobytes()
    assert sum(entry["data"] == "" for entry in entries) == 22   # indices 0, 3, ..., 63: no record


def test_backend_failure_is_recorded_and_the_run_still_ends(tmp_path):
    result = probe("Offline", tmp_path, "2")
    assert "injected backend failure" in result["error"]
    assert result["completed"] == result["issued"]   # every sample completed (empty), so LoadGen could end


def test_early_stopping_says_how_many_queries_loadgen_wants(tmp_path):
    write_detail(tmp_path, {"effective_scenario": "MultiStream", "result_validity": "INVALID",
                            "result_min_duration_met": True, "early_stopping_met": False, "result_query_count": 202,
                            "early_stopping_result": " * Only processed 202 queries.  * Need to process at least "
                                                     "662 queries for early stopping.",
                            "effective_min_duration_ms": 10000})
    verdict = explain(read_detail(tmp_path), {}, test_run=False)
    assert verdict.reasons == ("Early stopping could not bound the latency percentile with this many queries "
                               "(202 ran, LoadGen asks for at least 662): run longer (a higher min_duration or "
                               "min_query_count).",)


def test_early_stopping_that_wants_more_queries_within_the_bound_says_the_load_is_too_high(tmp_path):
    """LoadGen's other wording (results.cc): enough queries ran, but too many were over the latency."""
    write_detail(tmp_path, {"effective_scenario": "Server", "result_validity": "INVALID",
                            "result_min_duration_met": True, "early_stopping_met": False, "result_query_count": 500,
                            "early_stopping_result": " * Run unsuccessful.  * Processed 500 queries.  * Would need "
                                                     "to run at least 338 more queries,  with the run being "
                                                     "successful if every additional  query were under latency.",
                            "effective_min_duration_ms": 15000})
    verdict = explain(read_detail(tmp_path), {}, test_run=False)
    assert verdict.reasons == ("Early stopping could not bound the latency percentile: too many of the 500 queries "
                               "were over the latency bound, and LoadGen would need 338 more, every one within it. "
                               "Lower the load (target QPS) or the latency, or run longer.",)


def test_server_early_stopping_with_too_few_queries_asks_for_a_longer_run_not_a_lower_load(tmp_path):
    """The same LoadGen wording when fewer queries ran than a p99 ever needs (459, every one within the bound): an
    LLM Server test run of 24 queries is short, not overloaded."""
    write_detail(tmp_path, {"effective_scenario": "Server", "result_validity": "INVALID",
                            "result_min_duration_met": True, "early_stopping_met": False, "result_query_count": 24,
                            "early_stopping_ttft_result": " * Run unsuccessful.  * Processed 24 queries.  * Would "
                                                          "need to run at least 435 more queries,  with the run "
                                                          "being successful if every additional  query were under "
                                                          "latency.",
                            "effective_min_duration_ms": 10000})
    verdict = explain(read_detail(tmp_path), {}, test_run=False)
    assert verdict.reasons == ("Early stopping could not bound the latency percentile: only 24 queries ran, and the "
                               "99th percentile needs at least 459 (LoadGen asks for 435 more, every one within the "
                               "bound). Run longer: a higher min_query_count or min_duration.",)


def test_offline_progress_moves_batch_by_batch_within_a_work_item():
    """An Offline work item holds several batches, completed to LoadGen together: the progress count (inferred)
    moves after each batch, so the line is not stuck at 0 for the first item."""
    import types

    import numpy as np

    from code.common.benchmark_api import Responses
    from code.common.harness.qsl import SampleLibrary
    from code.common.harness.sut import HarnessSUT
    from tests.loadgen_probe import TinySet

    seen: list[tuple[int, int]] = []
    sut = HarnessSUT(Scenario.Offline, SampleLibrary(TinySet(64), 64, TinySet.inputs), [], batch_size=8)
    completed: list[int] = []
    sut._lg = types.SimpleNamespace(QuerySampleResponse=lambda i, address, size: i,
                                    QuerySamplesComplete=lambda responses: completed.extend(responses))
    sut.qsl.load(list(range(64)))

    def infer(inputs, indices):
        seen.append((sut.counters.inferred, sut.counters.completed))
        return Responses.rows(np.zeros(len(indices), dtype=np.int32))

    sut._run_item(infer, np.arange(32, dtype=np.uint64), np.arange(32, dtype=np.int64))
    assert seen == [(0, 0), (8, 0), (16, 0), (24, 0)]
    assert sut.counters.inferred == sut.counters.completed == len(completed) == 32


@pytest.mark.parametrize("samples, batch_size, instances, expected", [
    (300, 1, 2, 38),       # a short batch-1 query: every instance gets several items
    (24576, 32, 2, 16),    # a long query: items of 512 samples
    (20, 32, 2, 1),        # fewer samples than one batch
    (5000, 1, 1, 512),
])
def test_offline_work_items_keep_every_instance_busy(samples, batch_size, instances, expected):
    from code.common.harness.qsl import SampleLibrary
    from code.common.harness.sut import HarnessSUT
    from tests.loadgen_probe import TinySet

    sut = HarnessSUT(Scenario.Offline, SampleLibrary(TinySet(8), 8, TinySet.inputs), [None] * instances,
                     batch_size=batch_size)
    assert sut._batches_per_item(samples) == expected
