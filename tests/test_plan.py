"""The plan of a multi-test command: LoadGen's test lengths, speeds from the config or from earlier runs, the disk
the logs take, --dry_run (prints, writes nothing, exit 0) and the free-space check (stops before anything starts).
Nothing here runs a test."""
from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.actions.harness import RunHarness
from code.common.arguments import parse_run_args
from code.common.constants import Scenario, TestMode
from code.common.errors import UserError
from code.common.records.metadata import write_metadata
from code.common.harness.plan import (ACCURACY_LOG_FRAME_BYTES, FROM_CONFIG, MEASURED, SMALL_LOGS_BYTES, Plan,
                                      accuracy_log_bytes, check_free_space, config_speed, estimate, find_measurement,
                                      loadgen_settings, plan_entry)
from code.common.harness.planned import EarlierRun, PlannedTest, Speed, earlier_runs
from code.common.harness.plan import STREAM_GENERATED
from code.common.harness.settings import TEST_RUN_GENERATED_QUERIES, user_conf_lines
from code.common import paths as paths_module
from code.common.paths import Paths
from code.common.rules import get_round
from code.main import available_benchmarks, main
from tests.conftest import EMBEDDED, SHARED, flags_over, recorded_detector
from tests.run_records import make_record

ROUND = get_round()
RESNET = ROUND.benchmark("resnet50")
FOOLBOX_SIZE = 20


def _settings(scenario: Scenario, test_run: bool = False, dataset_size: int = 50_000, **fields):
    return loadgen_settings(scenario, user_conf_lines("resnet50", scenario, fields, RESNET, dataset_size, test_run),
                            ROUND, RESNET)


def _estimate(scenario: Scenario, mode=TestMode.PerformanceOnly, speed: float | None = None, test_run=False,
              sampling_target=None, dataset_size=50_000, **fields):
    settings = _settings(scenario, test_run, dataset_size, **fields)
    rate = speed or config_speed(scenario, fields, settings).samples_per_s
    return estimate(scenario, mode, settings, Speed(rate, MEASURED if speed else FROM_CONFIG, ""), dataset_size,
                    response_bytes=4, sampling_target=sampling_target)


# -- LoadGen's test lengths ------------------------------------------------------------------------------------
def test_offline_issues_the_larger_of_min_query_count_and_1_1_x_min_duration_x_target_qps():
    # LoadGen 6.0.17 test_settings_internal.cc: max(min_query_count, kSlack(1.1) * min_duration * target_qps)
    queries, samples, seconds, logged = _estimate(Scenario.Offline, offline_expected_qps=100.0)
    assert (queries, samples, logged) == (1, 66_000, 0)
    assert seconds == pytest.approx(660.0)
    _, samples, seconds, _ = _estimate(Scenario.Offline, offline_expected_qps=10.0)
    assert samples == RESNET.offline_min_samples == 24_576      # mlperf.conf's resnet50.Offline.min_query_count
    assert seconds == pytest.approx(2457.6)


def test_a_test_run_ends_on_its_count():
    _, samples, seconds, _ = _estimate(Scenario.Offline, test_run=True, offline_expected_qps=240.0)
    assert (samples, seconds) == (2400, pytest.approx(10.0))
    queries, samples, seconds, _ = _estimate(Scenario.MultiStream, test_run=True,
                                             multi_stream_expected_latency_ns=5_000_000,
                                             multi_stream_samples_per_query=8)
    assert (queries, samples) == (2000, 16_000)        # 10 s of 5 ms queries: more than early stopping's 662
    assert seconds == pytest.approx(10.0)


def test_stream_and_server_scenarios_end_at_min_duration_and_min_query_count():
    queries, samples, seconds, _ = _estimate(Scenario.SingleStream, single_stream_expected_latency_ns=10_000_000)
    assert (queries, samples, seconds) == (60_000, 60_000, pytest.approx(600.0))
    queries, _, seconds, _ = _estimate(Scenario.SingleStream, single_stream_expected_latency_ns=100_000_000,
                                       min_query_count=10_000)
    assert (queries, seconds) == (10_000, pytest.approx(1000.0))   # the count outlasts min_duration
    queries, _, seconds, _ = _estimate(Scenario.Server, server_target_qps=20.0)
    assert (queries, seconds) == (12_000, pytest.approx(600.0))
    # a system slower than the Server target falls behind the schedule: the same queries take longer
    _, _, seconds, _ = _estimate(Scenario.Server, speed=10.0, server_target_qps=20.0)
    assert seconds == pytest.approx(1200.0)


def test_a_stream_run_much_faster_than_its_config_ends_when_the_generated_queries_run_out():
    # LoadGen generates queries for 2 x min_duration at the expected latency; a 10x faster system uses them up
    queries, _, seconds, _ = _estimate(Scenario.SingleStream, speed=1000.0,
                                       single_stream_expected_latency_ns=10_000_000)
    assert queries == 120_000 and seconds == pytest.approx(120.0)


@pytest.mark.parametrize("scenario, field", [(Scenario.SingleStream, "single_stream_expected_latency_ns"),
                                             (Scenario.MultiStream, "multi_stream_expected_latency_ns")])
def test_a_time_limited_test_run_generates_queries_for_a_much_faster_system(scenario, field):
    # --test_run with --min_duration=6000: LoadGen would generate queries for 12 s at the expected 8 ms (1500), which
    # a system 2x faster uses up before 6 s; the test run has it generate TEST_RUN_GENERATED_QUERIES instead.
    fields = {field: 8_000_000, "multi_stream_samples_per_query": 8, "min_duration": 6000}
    lines = user_conf_lines("resnet50", scenario, fields, RESNET, 50_000, test_run=True)
    settings = loadgen_settings(scenario, lines, ROUND, RESNET)
    generated = max(settings.min_query_count, int(STREAM_GENERATED * settings.min_duration_s * settings.target_qps))
    assert generated == TEST_RUN_GENERATED_QUERIES
    assert any(line.startswith("# test run: target_latency 0.12 ms instead of the expected 8 ms") for line in lines)
    speed = config_speed(scenario, fields, settings)         # the plan still expects the config's 8 ms a query
    assert speed.samples_per_s == pytest.approx(settings.samples_per_query / 0.008)
    assert speed.basis.endswith(", 8 ms per query")
    # a query of minutes (a video) reads in seconds
    assert config_speed(scenario, {**fields, field: 200_000_000_000}, settings).basis.endswith(", 200 s per query")
    queries, _, seconds, _ = estimate(scenario, TestMode.PerformanceOnly, settings, speed, 50_000, response_bytes=4)
    assert seconds == pytest.approx(max(6.0, queries * 0.008))
    # a full run, and a test run that ends on a count, give LoadGen the config's latency as it is
    for test_run, given in ((False, {"min_duration": 6000}), (True, {})):
        lines = user_conf_lines("resnet50", scenario, {**fields, "min_duration": None, **given}, RESNET, 50_000,
                                test_run)
        assert f"resnet50.{scenario.loadgen.value}.target_latency = 8" in lines
        assert not any(line.startswith("#") for line in lines)
    # a TEST01 run logs a response with probability sampling target / the queries LoadGen expects: kept as it was
    lines = user_conf_lines("resnet50", scenario, fields, RESNET, 50_000, test_run=True, samples_responses=True)
    assert f"resnet50.{scenario.loadgen.value}.target_latency = 8" in lines


def test_accuracy_runs_issue_the_whole_data_set_once():
    queries, samples, seconds, logged = _estimate(Scenario.Offline, TestMode.AccuracyOnly,
                                                  dataset_size=FOOLBOX_SIZE, offline_expected_qps=10.0)
    assert (queries, samples, logged, seconds) == (1, 20, 20, pytest.approx(2.0))
    queries, samples, _, _ = _estimate(Scenario.MultiStream, TestMode.AccuracyOnly, dataset_size=1000,
                                       multi_stream_expected_latency_ns=50_000_000, multi_stream_samples_per_query=8)
    assert (queries, samples) == (125, 1000)


def test_test01_logs_a_sampled_share_of_a_performance_run():
    # LoadGen loadgen.cc: probability = sampling target / expected samples (target_qps x min_duration)
    # probability = sampling target / max(expected samples, the query's samples); Offline's query is the larger
    *_, logged = _estimate(Scenario.Offline, sampling_target=4096, offline_expected_qps=100.0)
    assert logged == 4096
    queries, _, _, logged = _estimate(Scenario.SingleStream, sampling_target=4096, speed=200.0,
                                      single_stream_expected_latency_ns=10_000_000)
    assert queries == 120_000 and logged == round(4096 * 120_000 / 60_000)   # twice as fast: twice the share
    *_, logged = _estimate(Scenario.Offline, test_run=True, sampling_target=4096, offline_expected_qps=240.0)
    assert logged == 2400          # fewer samples than the target: every response is logged


# -- disk -------------------------------------------------------------------------------------------------------
def _loadgen_accuracy_log(entries: int, dataset_size: int, response_bytes: int) -> str:
    """mlperf_log_accuracy.json as LoadGen 6.0.17 writes it (logging.cc AsyncLog::LogAccuracy)."""
    rng = random.Random(7)
    rows = [f'{{ "seq_id" : {i}, "qsl_idx" : {rng.randrange(dataset_size)}, "data" : '
            f'"{rng.randbytes(response_bytes).hex().upper()}" }}' for i in range(entries)]
    return "[\n" + ",\n".join(rows) + "\n]\n"


@pytest.mark.parametrize("entries, dataset_size", [(20, 20), (1000, 1000), (50_000, 50_000), (4506, 50_000)])
def test_the_accuracy_log_estimate_covers_what_loadgen_writes(entries, dataset_size):
    written = len(_loadgen_accuracy_log(entries, dataset_size, 4).encode())
    estimated = accuracy_log_bytes(entries, dataset_size, 4)
    assert written <= estimated <= written * 1.1


def test_accuracy_runs_take_disk_for_every_response_performance_runs_only_their_small_logs(tmp_path):
    ctx = _context(tmp_path, "--dataset=imagenet")
    accuracy = plan_entry(ctx, "resnet50", Scenario.Offline, TestMode.AccuracyOnly, [])
    performance = plan_entry(ctx, "resnet50", Scenario.Offline, TestMode.PerformanceOnly, [])
    assert performance.disk_bytes == SMALL_LOGS_BYTES + ACCURACY_LOG_FRAME_BYTES
    assert accuracy.logged_responses == 50_000    # the data set's declared size: known before it is downloaded
    assert accuracy.disk_bytes == SMALL_LOGS_BYTES + accuracy_log_bytes(50_000, 50_000, 4)   # one int32 a sample
    assert accuracy.disk_bytes > 3_000_000


# -- speed: from the config, or measured by earlier runs ----------------------------------------------------------
def _context(tmp_path: Path, *flags: str) -> Context:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    argv = ["--action=run_harness", *flags_over(EMBEDDED, *flags)]
    args = parse_run_args(argv, list(ACTIONS), available_benchmarks(paths, ROUND), list(ROUND.benchmarks))
    system = recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()
    return Context(args=args, paths=paths, rules=ROUND, detect=lambda: system, log=lambda _: None)


def _measured(ctx: Context, scenario: Scenario, metric: float, finished: str, **changes) -> EarlierRun:
    fields = {**ctx.resolve("resnet50", scenario).values, **changes}
    return EarlierRun(folder=Path(f"/logs/{finished}"), system_id=ctx.system.system_id, benchmark="resnet50",
                      scenario=scenario.value, test_mode="PerformanceOnly", audit_test=None, purpose="submission",
                      status="completed", valid=True, test_run=True, fields=fields, metric=metric, finished=finished)


def test_without_earlier_runs_the_speed_comes_from_the_config(tmp_path):
    ctx = _context(tmp_path)
    expected_qps = ctx.resolve("resnet50", Scenario.Offline)["offline_expected_qps"]
    test = plan_entry(ctx, "resnet50", Scenario.Offline, TestMode.PerformanceOnly, [])
    assert test.speed.source == FROM_CONFIG and "offline_expected_qps" in test.speed.basis
    assert test.samples == max(24_576, int(1.1 * 600 * expected_qps))
    assert test.duration_s == pytest.approx(test.samples / expected_qps)
    assert "from config" in "\n".join(test.lines())


def test_the_newest_earlier_run_of_the_same_computation_gives_the_measured_speed(tmp_path):
    ctx = _context(tmp_path)
    config_test = plan_entry(ctx, "resnet50", Scenario.Offline, TestMode.PerformanceOnly, [])
    # Another batch than the one the config resolves to (the configured one, or where an earlier run swept this
    # engine, the sweep's, which may be any): another computation, whose speed says nothing of this one.
    other_batch = 2 if ctx.resolve("resnet50", Scenario.Offline)["batch_size"] == 1 else 1
    runs = [_measured(ctx, Scenario.Offline, 100.0, "2026-01-01T00:00:01"),
            _measured(ctx, Scenario.Offline, 200.0, "2026-01-01T00:00:02"),
            _measured(ctx, Scenario.Offline, 999.0, "2026-01-01T00:00:03", batch_size=other_batch),
            _measured(ctx, Scenario.SingleStream, 999.0, "2026-01-01T00:00:04")]
    test = plan_entry(ctx, "resnet50", Scenario.Offline, TestMode.PerformanceOnly, runs)
    assert test.speed.source == MEASURED and "/logs/2026-01-01T00:00:02" in test.speed.basis
    assert test.samples == config_test.samples          # LoadGen sizes the query from the config ...
    assert test.duration_s == pytest.approx(test.samples / 200.0)   # ... the measured speed says how long it takes
    assert "measured: 200 samples/s" in "\n".join(test.lines())
    stream = plan_entry(ctx, "resnet50", Scenario.SingleStream, TestMode.AccuracyOnly,
                        [_measured(ctx, Scenario.SingleStream, 5.0, "2026-01-01T00:00:05")])   # 5 ms per query
    assert stream.duration_s == pytest.approx(FOOLBOX_SIZE * 0.005)


def test_records_on_disk_are_read_for_their_speed(tmp_path):
    ctx = _context(tmp_path)
    fields = ctx.resolve("resnet50", Scenario.Offline).values
    keep = {name: fields[name] for name in ("batch_size", "instances", "intra_op_threads", "harness_impl")}
    for name, value, status in (("done", 123.0, "completed"), ("stopped", 999.0, "interrupted")):
        folder = tmp_path / "logs" / name
        folder.mkdir(parents=True)
        write_metadata(folder, make_record(value, system_id=ctx.system.system_id, status=status,
                                           log_dir=str(folder), finished=f"2026-01-01T00:00:0{len(name)}", **keep))
    runs = earlier_runs([tmp_path / "logs"], lambda path, reason: pytest.fail(reason))
    measurement = find_measurement(runs, ctx.system.system_id, "resnet50", Scenario.Offline, fields)
    assert measurement is not None and measurement.metric == 123.0 and measurement.folder == tmp_path / "logs/done"


# -- the plan as a whole, the free-space check and --dry_run ------------------------------------------------------
def _planned(disk: int, skip: str | None = None) -> PlannedTest:
    return PlannedTest("resnet50", Scenario.Offline, TestMode.PerformanceOnly, None, 1, 10, 1.0, 0, disk,
                       Speed(10.0, FROM_CONFIG, "offline_expected_qps=10"), skip=skip)


def test_totals_leave_out_skipped_tests_and_the_check_names_need_free_and_where(tmp_path):
    plan = Plan((_planned(3000), _planned(5000), _planned(10**9, skip="VALID already")), tmp_path / "logs")
    assert plan.disk_bytes == 8000 and plan.duration_s == 2.0 and len(plan.to_run) == 2
    assert "Total: 2 to run, 1 skipped" in plan.lines(10**6)[-1]
    check_free_space(plan, free_bytes=8000)     # fits exactly
    with pytest.raises(UserError) as refused:
        check_free_space(plan, free_bytes=7999)
    message = str(refused.value)
    assert refused.value.exit_code == 1
    assert "7.8 KiB of logs" in message and "only 7.8 KiB free" in message and str(tmp_path) in message
    assert "nothing was run" in message


def test_a_full_disk_stops_run_harness_before_any_test_starts(tmp_path, capsys):
    class FullDisk(RunHarness):
        free_space = staticmethod(lambda where: 1000)
        child_module = "tests.no_such_child"       # never reached

    with pytest.raises(UserError, match="has only 1000 B free") as refused:
        FullDisk(_context(tmp_path, "--scenarios=offline", "--test_run")).run()
    assert refused.value.exit_code == 1
    assert not (tmp_path / "logs").exists()


def _tree(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*")) if root.exists() else []


def test_dry_run_prints_the_plan_writes_nothing_and_exits_0(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(paths_module, "create_unique_dir", lambda path: pytest.fail(f"a LOG_DIR was claimed: {path}"))
    for action, extra in (("run_harness", [*EMBEDDED, "--scenarios=offline,singlestream", "--test_run"]),
                          ("run", [])):
        assert main([f"--action={action}", *extra, "--dry_run", f"--scratch_path={tmp_path / 'scratch'}"]) == 0
        out = capsys.readouterr().out
        assert "Plan: 2 tests" in out and "Total: 2 to run" in out and "Dry run: nothing was run" in out
    assert main(["--action=run_harness", *EMBEDDED, "--scenarios=offline", "--dry_run",
                 f"--log_dir={tmp_path / 'logs'}"]) == 0
    assert f"-> {tmp_path / 'logs'}" in capsys.readouterr().out
    assert _tree(tmp_path) == []                  # no LOG_DIR, no scratch: nothing downloaded or written


def test_dry_run_and_resume_apply_to_multi_test_commands_only(capsys):
    for flag, actions in (("--dry_run", "run_harness, run, run_audit_harness and tune"),
                          ("--resume", "run_harness, run and run_audit_harness")):
        assert main(["--action=stage_results", flag]) == 2
        assert f"{flag} applies only to make {actions}" in capsys.readouterr().err
    assert main(["--action=tune", "--resume"]) == 2       # a tune resumes by itself, from its records


def test_the_plan_of_a_stream_test_says_its_query_count(tmp_path):
    ctx = _context(tmp_path, "--test_run")
    test = plan_entry(ctx, "resnet50", Scenario.MultiStream, TestMode.PerformanceOnly, [])
    latency_s = ctx.resolve("resnet50", Scenario.MultiStream)["multi_stream_expected_latency_ns"] / 1e9
    assert test.queries == max(662, math.ceil(10 / latency_s))
    assert test.samples == 8 * test.queries
    assert json.dumps(test.lines())   # plain text lines


# -- LLMs: tokens per second, and what an audit config forces -----------------------------------------------------
OFFICIAL_TEST06 = SHARED / "mlcommons-inference" / "compliance" / "TEST06" / "audit.config"


def _llm_context(tmp_path: Path, *flags: str) -> Context:
    """run_harness of llama3.1-8b on the real configs of this (recorded 2-core) machine: Llama-3.1-8B on cnn_eval."""
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    args = parse_run_args(["--action=run_harness", "--benchmarks=llama3.1-8b", *flags], list(ACTIONS),
                          available_benchmarks(paths, ROUND), list(ROUND.benchmarks))
    system = recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()
    return Context(args=args, paths=paths, rules=ROUND, detect=lambda: system, log=lambda _: None)


def _measured_llm(ctx: Context, scenario: Scenario, tokens_per_s: float) -> EarlierRun:
    """A completed run of the same config that LoadGen measured at `tokens_per_s` (an LLM's Offline and Server
    figure, as the record keeps it)."""
    return EarlierRun(folder=Path("/logs/llm"), system_id=ctx.system.system_id, benchmark="llama3.1-8b",
                      scenario=scenario.value, test_mode="PerformanceOnly", audit_test=None, purpose="submission",
                      status="completed", valid=True, test_run=False,
                      fields=ctx.resolve("llama3.1-8b", scenario).values, metric=tokens_per_s,
                      finished="2026-01-01T00:00:00", metric_unit="tokens/s")


def test_an_llm_measured_in_tokens_per_second_is_planned_in_samples(tmp_path):
    ctx = _llm_context(tmp_path, "--scenarios=offline")
    fields = ctx.resolve("llama3.1-8b", Scenario.Offline).values
    assert fields["max_output_tokens"] == 128 and fields["dataset"] == "cnn_eval"   # the reference's cap
    runs = [_measured_llm(ctx, Scenario.Offline, 25.6)]                             # 0.2 samples/s at 128 tokens
    accuracy = plan_entry(ctx, "llama3.1-8b", Scenario.Offline, TestMode.AccuracyOnly, runs)
    assert accuracy.samples == 13_368 and accuracy.speed.samples_per_s == pytest.approx(0.2)
    assert accuracy.duration_s == pytest.approx(13_368 / 0.2)                       # 18.6 h, not 13368 / 25.6 s
    assert "25.6 tokens/s" in accuracy.speed.basis and "128 output tokens" in accuracy.speed.basis
    performance = plan_entry(ctx, "llama3.1-8b", Scenario.Offline, TestMode.PerformanceOnly, runs)
    assert performance.samples == 13_368                                          # mlperf.conf's Offline minimum
    assert performance.duration_s == pytest.approx(13_368 / 0.2)


def test_a_development_cap_on_output_tokens_is_part_of_the_speed(tmp_path):
    ctx = _llm_context(tmp_path, "--scenarios=server", "--max_output_tokens=64", "--total_sample_count=24",
                       "--test_run")
    runs = [_measured_llm(ctx, Scenario.Server, 51.2)]
    test = plan_entry(ctx, "llama3.1-8b", Scenario.Server, TestMode.AccuracyOnly, runs)
    assert test.samples == 24 and test.speed.samples_per_s == pytest.approx(0.8)     # 51.2 / 64
    target = ctx.resolve("llama3.1-8b", Scenario.Server)["server_target_qps"]
    assert test.duration_s == pytest.approx(24 / min(0.8, target))
    # a run under another cap measured another speed: the config's is used, not that run's
    uncapped = _llm_context(tmp_path, "--scenarios=server", "--total_sample_count=24", "--test_run")
    other = plan_entry(uncapped, "llama3.1-8b", Scenario.Server, TestMode.AccuracyOnly, runs)
    assert other.speed.source == FROM_CONFIG


def _forced_by_test06() -> dict[str, float]:
    """What compliance/TEST06/audit.config forces: the official file where it is checked out beside the
    repository, else the rules' copy of it (tests/test_llm_rules.py holds the two to be equal)."""
    lines = OFFICIAL_TEST06.read_text().splitlines() if OFFICIAL_TEST06.is_file() else \
        ROUND.compliance_tests["TEST06"].audit_config
    return {key.strip().rsplit(".", 1)[-1]: float(value) for key, _, value in
            (line.partition("=") for line in lines if "=" in line and not line.lstrip().startswith("#"))}


@pytest.mark.parametrize("scenario", [Scenario.Offline, Scenario.Server])
def test_test06_runs_the_queries_its_audit_config_forces(tmp_path, scenario):
    forced = _forced_by_test06()
    assert forced["min_duration"] == 0 and forced["sample_concatenate_permutation"] == 0
    ctx = _llm_context(tmp_path, f"--scenarios={scenario.value}")
    runs = [_measured_llm(ctx, scenario, 25.6)]
    test = plan_entry(ctx, "llama3.1-8b", scenario, TestMode.PerformanceOnly, runs, audit_test="TEST06",
                      qps_scale=0.92 if scenario is Scenario.Server else 1.0)
    count = int(forced["min_query_count"])
    assert test.samples == count and test.queries == (1 if scenario is Scenario.Offline else count)
    rate = 25.6 / 128
    if scenario is Scenario.Server:     # LoadGen issues them at the target rate, or slower if the system is
        rate = min(rate, 0.92 * ctx.resolve("llama3.1-8b", scenario)["server_target_qps"])
    assert test.duration_s == pytest.approx(count / rate)
    assert test.logged_responses == min(count, int(forced["accuracy_log_sampling_target"]))


def test_a_test01_test_run_keeps_the_expected_latency_its_sampling_depends_on(tmp_path):
    # LoadGen logs each response with probability 4096 / the queries it expects (750 in 6 s at the config's 8 ms):
    # all of them. Generated for 100 000 queries, it would log 8 % of them (none on a slow model).
    ctx = _context(tmp_path, "--test_run", "--min_duration=6000")
    audit = plan_entry(ctx, "resnet50", Scenario.SingleStream, TestMode.PerformanceOnly, [], audit_test="TEST01")
    assert audit.logged_responses == audit.samples > 0
    plain = plan_entry(ctx, "resnet50", Scenario.SingleStream, TestMode.PerformanceOnly, [])
    assert plain.duration_s == pytest.approx(audit.duration_s)


def test_start_from_device_shows_the_gpu_memory_the_performance_set_takes(tmp_path):
    ctx = _context(tmp_path, "--backend=tensorrt", "--start_from_device=true")
    test = plan_entry(ctx, "resnet50", Scenario.Offline, TestMode.PerformanceOnly, [])
    from code.common.benchmark_api import get_benchmark

    [model_input] = get_benchmark("resnet50").models[ctx.resolve("resnet50", Scenario.Offline)["model"]].inputs
    import numpy as np

    sample_bytes = math.prod(model_input.shape) * np.dtype(model_input.dtype).itemsize   # as preprocessed
    assert test.device_set == (FOOLBOX_SIZE, FOOLBOX_SIZE * sample_bytes)
    assert any(line.strip().startswith(f"start_from_device: the performance set ({FOOLBOX_SIZE} samples) takes")
               for line in test.lines())
    plain = plan_entry(_context(tmp_path, "--backend=tensorrt"), "resnet50", Scenario.Offline,
                       TestMode.PerformanceOnly, [])
    assert plain.device_set is None and not any("start_from_device" in line for line in plain.lines())


def test_a_test_that_issues_each_sample_once_is_sized_by_the_data_set():
    """TEST07/TEST09's audit.config asks min_query_count 990 / 6396 with performance_issue_unique = 1: LoadGen issues
    each loaded sample once, so a 16-sample development set is 16 samples, not 990."""
    from code.common.constants import Scenario, TestMode
    from code.common.harness.plan import Speed, estimate, loadgen_settings
    from code.common.rules import get_round

    rules_round = get_round()
    rules = rules_round.benchmark("gpt-oss-120b")
    lines = ["gpt-oss-120b.Offline.target_qps = 1", *rules_round.compliance_tests["TEST07"].audit_config]
    settings = loadgen_settings(Scenario.Offline, lines, rules_round, rules)
    assert settings.issue_unique and settings.min_query_count == 990
    speed = Speed(2.0, "measured", "a test")
    assert estimate(Scenario.Offline, TestMode.PerformanceOnly, settings, speed, 16, 256)[:3] == (1, 16, 8.0)
    assert estimate(Scenario.Offline, TestMode.PerformanceOnly, settings, speed, 4000, 256)[1] == 990


def test_an_llm_test_run_is_planned_and_read_back_as_loadgen_issues_it(tmp_path):
    """make run's llama3.1-8b test run: 24 samples loaded (total_sample_count), a query of min_query_count 8
    asked. LoadGen pads the Offline query to the 24 of the performance set (equal issue) and logs
    generated_samples_per_query 24 beside the effective_samples_per_query 8 asked (a real run on 2 cores: 24
    samples at 0.10666/s, 225 s). The plan, the duration read back from the log and the test run's note say 24."""
    from code.common.harness.settings import user_conf_lines as conf
    from code.common.records.loadgen_log import read_detail
    from code.common.records.verdict import explain
    from tests.synthetic_logs import write_detail

    ctx = _llm_context(tmp_path, "--scenarios=offline", "--max_output_tokens=64", "--total_sample_count=24",
                       "--offline_expected_qps=0.8", "--test_run")
    test = plan_entry(ctx, "llama3.1-8b", Scenario.Offline, TestMode.PerformanceOnly, [])
    fields = ctx.resolve("llama3.1-8b", Scenario.Offline).values
    lines = conf("llama3_1-8b", Scenario.Offline, fields, ROUND.benchmark("llama3.1-8b"), 13_368, True)
    assert "llama3_1-8b.Offline.min_query_count = 8" in lines and test.samples == 24
    write_detail(tmp_path / "run", {"effective_scenario": "Offline", "result_validity": "VALID",
                                    "result_min_duration_met": True, "effective_samples_per_query": 8,
                                    "generated_samples_per_query": 24, "result_samples_per_second": 0.10666,
                                    "effective_min_duration_ms": 0})
    log = read_detail(tmp_path / "run")
    assert log.offline_query_samples == test.samples
    assert log.run_duration_s == pytest.approx(225, abs=1)            # not 8 / 0.10666 = 75 s
    assert "it ran one query of 24 samples" in explain(log, {}, test_run=True).reasons[-1]
