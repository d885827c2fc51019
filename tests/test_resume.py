"""--resume and --retries: a test with a VALID record in LOG_DIR is skipped, an INVALID, failed, interrupted or
record-less one runs again into a retry folder beside the first, a completed one made with other settings (config
fields, harness, --endpoints, --test_run) stops the plan, nothing is overwritten, and staging still chooses the
right run among the attempts. The harness runs use a fake child process (tests/resume_child.py: a first attempt
ends INVALID, a retry VALID), so no LoadGen test runs."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.actions.harness import RunHarness
from code.common.arguments import parse_run_args
from code.common.constants import Scenario, TestMode
from code.common.paths import RUN_RECORD
from code.common.errors import UserError
from code.common.records.metadata import read_metadata, write_metadata
from code.common.records.record import EndpointRecord
from code.common.harness.plan import FROM_CONFIG
from code.common.harness.planned import PlannedTest, Speed, earlier_runs
from code.common.tuning.layouts import OFFLINE_BATCHES
from code.common.harness.resume import AskedFor, find_attempts, refuse_other_settings, resume_paths, resume_test
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.records.runs import choose_runs, load_records
from code.common.systems import SystemDetector
from code.main import available_benchmarks, main
from tests.conftest import EMBEDDED, flags_over
from tests.resume_child import FIRST_ATTEMPT_REASON
from tests.run_records import FIELDS, make_record

ROUND = get_round()


# -- folder names -----------------------------------------------------------------------------------------------
def test_retry_folders_lie_beside_the_first_attempt_and_sort_by_number(tmp_path):
    first = tmp_path / "sys/resnet50/Offline/PerformanceOnly"
    assert Paths.retry_run_dir(first, 1) == tmp_path / "sys/resnet50/Offline/PerformanceOnly-retry1"
    for number in (10, 2, 1):
        Paths.retry_run_dir(first, number).mkdir(parents=True)
    (first.parent / "PerformanceOnly-retryx").mkdir()
    (first.parent / "PerformanceOnly-retry3").write_text("a file, not a folder")
    assert [p.name[len("PerformanceOnly-"):] for p in Paths.retry_run_dirs(first)] == ["retry1", "retry2", "retry10"]
    with pytest.raises(ValueError):
        Paths.retry_run_dir(first, 0)


def test_resume_takes_the_log_dir_given_or_else_the_newest_under_build_logs(tmp_path):
    lines: list[str] = []
    default = Paths.create(repo=tmp_path)
    assert resume_paths(default, lines.append) == default and "Nothing to resume" in lines[-1]
    for name in ("2026.01.02-03.04.05", "2026.01.02-03.04.05-2", "2026.01.02-03.04.05-10", "2025.12.31-23.59.59",
                 "not-a-log-dir", "2027.01.01-00.00.00.bak"):
        (default.logs_root / name).mkdir(parents=True)
    resumed = resume_paths(default, lines.append)
    assert resumed.log_dir == default.logs_root / "2026.01.02-03.04.05-10" and not resumed.log_dir_is_default
    assert resumed.claimed_log_dir == resumed.log_dir      # reused, not a new folder
    assert "the newest LOG_DIR under" in lines[-1] and "2026.01.02-03.04.05-10" in lines[-1]
    given = Paths.create(repo=tmp_path, log_dir=tmp_path / "mine")
    assert resume_paths(given, lines.append) == given and "(as given; nothing there yet" in lines[-1]


# -- which attempts count -----------------------------------------------------------------------------------------
def _planned() -> PlannedTest:
    return PlannedTest("resnet50", Scenario.Offline, TestMode.PerformanceOnly, None, 1, 10, 1.0, 0, 100,
                       Speed(10.0, FROM_CONFIG, "offline_expected_qps=10"))


def _record(folder: Path, **changes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    write_metadata(folder, make_record(log_dir=str(folder), **changes))
    return folder


def _find(first: Path, test_run: bool = True, endpoints: tuple[str, ...] = (), **fields):
    unreadable: dict[Path, str] = {}
    runs = earlier_runs([first.parent], lambda path, reason: unreadable.__setitem__(Path(path).parent.resolve(),
                                                                                   reason))
    asked = AskedFor.of({**FIELDS, **fields}, test_run, "lwis_k_99_MaxP", endpoints)
    return find_attempts(first, runs, unreadable, asked)


def _attempts(first: Path, retries: int = 1, test_run: bool = True) -> PlannedTest:
    attempts = _find(first, test_run)
    assert attempts.other_settings is None, attempts.other_settings
    return resume_test(_planned(), attempts, retries)


def test_a_valid_record_of_the_same_computation_is_skipped(tmp_path):
    first = _record(tmp_path / "PerformanceOnly", valid=True)
    test = _attempts(first)
    assert test.skip == f"VALID already in {first}"
    assert "SKIPPED, VALID already" in test.lines()[0]
    retried = _record(tmp_path / "PerformanceOnly-retry1", valid=True)
    _record(first, valid=False)     # the first attempt was INVALID, its retry VALID
    assert _attempts(first).skip == f"VALID already in {retried}"


@pytest.mark.parametrize("earlier, why", [
    ({"valid": False}, "INVALID"),
    ({"status": "interrupted"}, "interrupted"),
    ({"status": "failed"}, "failed"),
    ({"status": "failed", "model": "resnet50_v1.5"},
     "failed, made with other settings (model: resnet50_v1.5 then, mobilenet_v2 now)"),
])
def test_invalid_failed_interrupted_or_other_runs_run_again_into_a_retry_folder(tmp_path, earlier, why):
    first = _record(tmp_path / "PerformanceOnly", **earlier)
    test = _attempts(first)
    assert test.skip is None and test.folder == tmp_path / "PerformanceOnly-retry1"
    assert (test.retry, test.retries_left) == (1, 0)
    assert test.note == f"runs again after: {first}: {why}"


def test_a_folder_without_a_usable_record_is_an_attempt_that_did_not_count(tmp_path):
    first = tmp_path / "PerformanceOnly"
    first.mkdir()
    retry = _record(tmp_path / "PerformanceOnly-retry1", valid=False)
    (tmp_path / "PerformanceOnly-retry2").mkdir()
    (tmp_path / "PerformanceOnly-retry2" / RUN_RECORD).write_text("{ truncated")
    test = _attempts(first, retries=3)
    assert test.folder == tmp_path / "PerformanceOnly-retry3" and (test.retry, test.retries_left) == (3, 2)
    assert "no metadata.json (stopped without a record, or still running)" in test.note
    assert f"{retry}: INVALID" in test.note and "unreadable metadata.json" in test.note


def test_a_test_never_started_runs_in_its_own_folder_and_retries_0_runs_no_failed_test_again(tmp_path):
    first = tmp_path / "PerformanceOnly"
    test = _attempts(first, retries=2)
    assert (test.folder, test.retry, test.retries_left, test.skip) == (first, 0, 2, None)
    _record(first, valid=False)
    assert _attempts(first, retries=0).skip == f"not VALID ({first}: INVALID) and --retries=0 runs it no more"


def _endpoint(host: str, port: int, local: bool = False) -> EndpointRecord:
    return EndpointRecord(host=host, port=port, protocol="http", local=local)


@pytest.mark.parametrize("earlier, now, what", [
    ({"valid": True, "batch_size": 8}, {}, "batch_size: 8 then, 4 now"),
    ({"valid": True, "model": "resnet50_v1.5"}, {}, "model: resnet50_v1.5 then, mobilenet_v2 now"),
    ({"valid": False}, {"test_run": False}, "--test_run: yes then, no now"),
    ({"valid": True, "endpoints": [("node1", 8000)]}, {"endpoints": ("http://node2:8000",)},
     "--endpoints: node1:8000 then, node2:8000 now"),
    ({"valid": True, "endpoints": [("node1", 8000), ("node2", 8000)]}, {"endpoints": ("http://node1:8000",)},
     "--endpoints: node1:8000,node2:8000 then, node1:8000 now"),
    ({"valid": True, "endpoints": [("127.0.0.1", 8000, True)]}, {"endpoints": ("http://node1:8000",)},
     "--endpoints: none (servers the test starts itself) then, node1:8000 now"),
])
def test_a_finished_test_made_otherwise_is_neither_reused_nor_run_beside(tmp_path, other_nodes, earlier, now, what):
    servers = earlier.pop("endpoints", [])
    first = tmp_path / "PerformanceOnly"
    first.mkdir()
    record = make_record(log_dir=str(first), **earlier)
    write_metadata(first, record.replace(endpoints=tuple(_endpoint(*server) for server in servers)))
    attempts = _find(first, **now)
    assert attempts.done is None and attempts.other_settings == f"{first}: {what}"
    with pytest.raises(UserError) as refused:
        refuse_other_settings(tmp_path, [f"resnet50 Offline PerformanceOnly in {attempts.other_settings}"])
    message = str(refused.value)
    assert refused.value.exit_code == 2 and what in message and str(first) in message
    assert "another LOG_DIR=..." in message and "drop --resume" in message


def test_the_same_servers_by_other_names_are_reused(tmp_path, other_nodes):
    first = tmp_path / "PerformanceOnly"
    first.mkdir()
    servers = (_endpoint("node1", 8000), _endpoint("localhost", 8001), _endpoint("127.0.0.1", 9000, local=True))
    write_metadata(first, make_record(log_dir=str(first)).replace(endpoints=servers))
    attempts = _find(first, endpoints=("http://node1-ib:8000", "http://127.0.0.1:8001"))
    assert attempts.other_settings is None and attempts.done is not None


# -- --retries --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv, message", [
    (["--resume", "--retries=-1"], "--retries=-1: expected a whole number from 0 to 10"),
    (["--resume", "--retries=11"], "--retries=11: expected a whole number from 0 to 10"),
    (["--resume", "--retries=two"], "--retries=two: expected a whole number from 0 to 10"),
    (["--resume", "--retries="], "--retries=: expected a whole number from 0 to 10"),
    (["--retries=2"], "--retries=2 applies only with --resume"),
])
def test_bad_retries_are_refused_with_a_clear_message(argv, message, capsys):
    assert main(["--action=run_harness", *EMBEDDED, *argv]) == 2
    assert message in capsys.readouterr().err


def test_retries_is_not_a_flag_of_other_commands(capsys):
    assert main(["--action=run_audit_harness", "--resume", "--retries=2"]) == 2
    assert "up to audit_retries times (e.g. --audit_retries=2)" in capsys.readouterr().err
    assert main(["--action=stage_results", "--retries=2"]) == 2
    assert "--retries applies only to make run_harness, run with --resume" in capsys.readouterr().err


def test_good_retries_are_taken():
    args = parse_run_args(["--action=run", "--resume", "--retries=0"], list(ACTIONS), ["resnet50"])
    assert (args.resume, args.retries) == (True, 0)
    assert parse_run_args(["--action=run"], list(ACTIONS), ["resnet50"]).retries == 1


# -- run_harness --resume, end to end with a fake child ------------------------------------------------------------
class FakeChildHarness(RunHarness):
    child_module = "tests.resume_child"


HARNESS_FLAGS = [*EMBEDDED, "--scenarios=offline,singlestream,multistream", "--test_run"]


def _run_harness(scratch: Path, log_dir: Path, lines: list[str], *flags: str) -> int:
    paths = Paths.create(scratch=scratch, log_dir=log_dir)
    argv = ["--action=run_harness", *flags_over(HARNESS_FLAGS, *flags), f"--scratch_path={scratch}",
            f"--log_dir={log_dir}"]
    args = parse_run_args(argv, list(ACTIONS), available_benchmarks(paths, ROUND), list(ROUND.benchmarks))
    ctx = Context(args=args, paths=paths, rules=ROUND, detect=functools.cache(SystemDetector().detect),
                  log=lines.append)
    return FakeChildHarness(ctx).run()


def test_resume_skips_done_tests_and_reruns_the_others_into_retry_folders(scratch, tmp_path):
    assert main(["--action=generate_engines", *HARNESS_FLAGS, f"--scratch_path={scratch}"], log=lambda _: None) == 0
    system_id = _system_id(scratch, tmp_path)
    base = tmp_path / "logs" / system_id / "resnet50"
    done = _record(base / "Offline/PerformanceOnly", valid=True, system_id=system_id,
                   config=_config(scratch, tmp_path, Scenario.Offline))
    stopped = _record(base / "SingleStream/PerformanceOnly", status="interrupted", scenario="SingleStream",
                      system_id=system_id, config=_config(scratch, tmp_path, Scenario.SingleStream))
    kept = {folder: (folder / RUN_RECORD).read_bytes() for folder in (done, stopped)}

    lines: list[str] = []
    assert _run_harness(scratch, tmp_path / "logs", lines, "--resume") == 0
    out = "\n".join(lines)
    assert f"Resuming in LOG_DIR={tmp_path / 'logs'} (as given)" in out
    assert f"resnet50 Offline PerformanceOnly: SKIPPED, VALID already in {done}" in out
    assert f"runs again after: {stopped}: interrupted" in out
    assert f"resnet50 Offline PerformanceOnly: skipped, VALID already in {done}" in out     # in the summary too
    # nothing overwritten; the interrupted test ran again beside its first attempt
    assert {folder: (folder / RUN_RECORD).read_bytes() for folder in kept} == kept
    assert sorted(p.name for p in (base / "Offline").iterdir()) == ["PerformanceOnly"]
    assert read_metadata(base / "SingleStream/PerformanceOnly-retry1" / RUN_RECORD).valid is True
    # never started: its first attempt (INVALID, says the fake child) and, --retries=1, one retry that is VALID
    multistream = base / "MultiStream"
    assert sorted(p.name for p in multistream.iterdir()) == ["PerformanceOnly", "PerformanceOnly-retry1"]
    assert read_metadata(multistream / "PerformanceOnly" / RUN_RECORD).reasons == (FIRST_ATTEMPT_REASON,)
    assert read_metadata(multistream / "PerformanceOnly-retry1" / RUN_RECORD).valid is True
    assert f"running it again into {multistream / 'PerformanceOnly-retry1'}" in out

    # staging takes the VALID retry; every record names its own folder; the interrupted run is never chosen
    records = load_records([tmp_path / "logs"], lambda line: pytest.fail(line))
    assert sorted(Path(r.log_dir) for r in records) == sorted(Path(r.path).parent for r in records)
    choices = choose_runs(records, allow_test_runs=True, system_id=system_id)
    assert Path(choices[(system_id, "resnet50", Scenario.MultiStream)].performance.log_dir) == \
        multistream / "PerformanceOnly-retry1"
    assert Path(choices[(system_id, "resnet50", Scenario.SingleStream)].performance.log_dir) == \
        base / "SingleStream/PerformanceOnly-retry1"

    # resumed again: every test is done, nothing runs
    lines.clear()
    before = sorted(p for p in (tmp_path / "logs").rglob("*"))
    assert _run_harness(scratch, tmp_path / "logs", lines, "--resume", "--retries=3") == 0
    assert "Total: 0 to run, 3 skipped" in "\n".join(lines)
    assert sorted(p for p in (tmp_path / "logs").rglob("*")) == before

    # resumed with other settings: stopped before anything runs, naming the test and the setting, nothing written.
    # A batch size no layout sweep chooses (OFFLINE_BATCHES): the Offline record holds the sweep's choice, which
    # depends on the machine's speed at the time, and a typed value equal to it would be no other setting.
    lines.clear()
    assert 3 not in OFFLINE_BATCHES
    with pytest.raises(UserError) as refused:
        _run_harness(scratch, tmp_path / "logs", lines, "--resume", "--batch_size=3")
    message = str(refused.value)
    assert refused.value.exit_code == 2 and f"resnet50 Offline PerformanceOnly in {done}" in message
    assert "batch_size: " in message and " then, 3 now" in message and "another LOG_DIR" in message
    assert sorted(p for p in (tmp_path / "logs").rglob("*")) == before


def _context(scratch: Path, tmp_path: Path) -> Context:
    paths = Paths.create(scratch=scratch, log_dir=tmp_path / "logs")
    args = parse_run_args(["--action=run_harness", *HARNESS_FLAGS], list(ACTIONS),
                          available_benchmarks(paths, ROUND), list(ROUND.benchmarks))
    return Context(args=args, paths=paths, rules=ROUND, detect=SystemDetector().detect)


def _system_id(scratch: Path, tmp_path: Path) -> str:
    return _context(scratch, tmp_path).system.system_id


def _config(scratch: Path, tmp_path: Path, scenario: Scenario):
    """The resolved config the harness would run the test with now (what a reused record must have been made with)."""
    return _context(scratch, tmp_path).resolve("resnet50", scenario)


def test_without_resume_a_failed_test_is_not_run_again(scratch, tmp_path):
    assert main(["--action=generate_engines", *HARNESS_FLAGS, f"--scratch_path={scratch}"], log=lambda _: None) == 0
    lines: list[str] = []
    assert _run_harness(scratch, tmp_path / "logs", lines, "--scenarios=offline") == 0
    [record] = [read_metadata(p) for p in (tmp_path / "logs").rglob(RUN_RECORD)]
    assert record.valid is False and not list((tmp_path / "logs").rglob("*-retry*"))


# -- run_audit_harness --resume -------------------------------------------------------------------------------------
def test_audit_resume_skips_a_test_whose_verdict_passed_against_the_runs_it_is_compared_with(tmp_path):
    import json

    from code.actions.audit import RunAuditHarness
    from code.common.audit.references import Reference
    from code.common.fileio import sha256_file
    from tests.official_corpus import perf_values, write_run
    from tests.run_records import resolved_config

    paths = Paths.create(repo=tmp_path, log_dir=tmp_path / "logs")
    args = parse_run_args(["--action=run_audit_harness", *EMBEDDED, "--scenarios=offline", "--resume"],
                          list(ACTIONS), ["resnet50"])
    handler = RunAuditHarness(Context(args=args, paths=paths, rules=ROUND, detect=lambda: None, log=print))
    performance = tmp_path / "logs/box/resnet50/Offline/PerformanceOnly"
    write_run(performance, perf_values("Offline", result_samples_per_second=100.0))
    reference = Reference(performance=make_record(log_dir=str(performance)), accuracy=None)
    folder = paths.compliance_log_dir("TEST04", "box", "resnet50", Scenario.Offline)
    write_run(folder / "performance/run_1", perf_values("Offline", result_samples_per_second=101.0))
    (folder / "verify_performance.txt").write_text("Verifying performance.\nTEST PASS\n")
    against = {"performance_log_dir": str(performance),
               "performance_detail_sha256": sha256_file(performance / "mlperf_log_detail.txt")}
    (folder / "verified_against.json").write_text(json.dumps(against))
    config = resolved_config()

    assert handler._passed_already("TEST04", config, reference, folder) == \
        f"PASS already against {performance} (verdict in {folder})"
    (folder / "verify_performance.txt").write_text("Verifying performance.\nTEST FAIL\n")
    assert handler._passed_already("TEST04", config, reference, folder) is None
    (folder / "verify_performance.txt").write_text("Verifying performance.\nTEST PASS\n")
    write_run(performance, perf_values("Offline", result_samples_per_second=90.0))   # the reference changed
    assert handler._passed_already("TEST04", config, reference, folder) is None
    assert handler._passed_already("TEST01", config, reference, folder) is None      # never verified


def test_without_resume_a_log_dir_that_holds_results_stops_make_run_before_its_downloads(tmp_path, capsys):
    system_id = _system_id(tmp_path / "scratch", tmp_path)
    _record(tmp_path / "logs" / system_id / "resnet50/Offline/PerformanceOnly", valid=True, system_id=system_id)
    assert main(["--action=run", f"--log_dir={tmp_path / 'logs'}", f"--scratch_path={tmp_path / 'scratch'}"]) == 2
    assert "already holds a result; results are never overwritten" in capsys.readouterr().err
    assert not (tmp_path / "scratch").exists()     # stopped at the plan: nothing downloaded


def test_a_layout_a_sweep_chose_then_and_now_is_no_other_setting(tmp_path):
    """A batch size chosen by a sweep of the engine, then and now (measured again since, on a quieter machine, and
    choosing otherwise): neither was asked for, so the VALID record is reused; typed now, it is another setting."""
    import dataclasses

    folder = tmp_path / "PerformanceOnly"
    folder.mkdir()
    record = make_record(log_dir=str(folder), valid=True, batch_size=8)
    swept = {"fields": {"batch_size": 8}, "why": "batch 8 from a 6 s sweep of this engine"}
    write_metadata(folder, dataclasses.replace(record, config=dataclasses.replace(record.config,
                                                                                    measured_layout=swept)))
    runs = earlier_runs([tmp_path], lambda path, reason: pytest.fail(reason))
    assert runs[0].untuned == {"batch_size"}

    def asked(untuned):
        return AskedFor.of({**FIELDS, "batch_size": 4}, True, "lwis_k_99_MaxP", (), untuned=untuned)

    reused = find_attempts(folder, runs, {}, asked(("batch_size",)))
    assert reused.other_settings is None and reused.done is not None and reused.done.folder == folder
    typed = find_attempts(folder, runs, {}, asked(()))
    assert typed.done is None and typed.other_settings == f"{folder}: batch_size: 8 then, 4 now"
