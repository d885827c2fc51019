"""make report on run folders written by the tests (no run): scope, the HTML page, the PNG plots, the table."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.actions.report import Report
from code.common.arguments import parse_run_args
from code.common.errors import UserError
from code.common.records.metadata import RunRecord, write_metadata
from code.common.paths import Paths
from code.common.report.collect import read_rows, target
from code.common.rules import get_round
from tests.official_corpus import perf_values, write_run
from tests.run_records import write_record

REPO = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OLD, NEW = "2026.01.01-10.00.00", "2026.01.02-10.00.00"
HOSTILE = "<script>alert('x')</script> & \"quoted\""
PERCENTILES = {f"result_{p}_percentile_latency_ns": ns for p, ns in
               (("50.00", 3_000_000), ("90.00", 3_500_000), ("95.00", 3_700_000), ("97.00", 3_900_000),
                ("99.00", 4_500_000), ("99.90", 6_000_000))}
TARGET_FIELDS = {"Offline": {"offline_expected_qps": 200.0}, "Server": {"server_target_qps": 100.0},
                 "SingleStream": {"single_stream_expected_latency_ns": 8_000_000},
                 "MultiStream": {"multi_stream_expected_latency_ns": 50_000_000}}


def run_folder(logs: Path, log_dir: str, scenario: str, mode: str = "PerformanceOnly", *, value: float = 240.0,
               valid: bool = True, status: str = "completed", started: str = "2026-01-02T10:00:00+00:00",
               reasons: tuple[str, ...] = (), error: str | None = None, system: str = "box",
               audit_test: str | None = None) -> Path:
    """A run folder as the harness leaves it: LoadGen logs with every latency percentile, user.conf, metadata.json
    (a compliance run's folder is `logs/log_dir` itself)."""
    folder = logs / log_dir if audit_test else logs / log_dir / system / "resnet50" / scenario / mode
    if status == "completed":
        write_run(folder, perf_values(scenario, **PERCENTILES, result_validity="VALID" if valid else "INVALID"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "user.conf").write_text(f"*.{scenario}.min_duration = 6000\n")
    fields = {"model": "mobilenet_v2", "dataset": "foolbox20", "backend": "onnxruntime", "precision": "fp32",
              "batch_size": 4, **TARGET_FIELDS[scenario]}
    record: dict[str, Any] = {
        "schema_version": 1, "benchmark": "resnet50", "model": "mobilenet_v2", "dataset": "foolbox20",
        "division": "open", "scenario": scenario, "test_mode": mode, "purpose": "audit" if audit_test else "submission", "audit_test": audit_test,
        "system": {"id": system}, "test_run": True, "log_dir": str(folder), "status": status, "started": started,
        "finished": started,
        "config": {"fields": fields, "sources": {n: "config class" for n in fields} | {"model": "command line"},
                   "workload_setting": "lwis_k_99_MaxP", "config_class": "configs/resnet50: class Box"},
        "engine": {"path": f"build/engines/box/resnet50/{scenario}/e.onnx",
                   "manifest": {"precision": "fp32", "runtime_version": "onnxruntime 1.31.1", "device": "cpu"}},
    }
    if status != "completed":
        record["error"] = error
    elif mode == "AccuracyOnly":
        record |= {"accuracy": {"metric": "top-1 accuracy (%)", "value": value, "good": 18, "total": 20,
                                "text": "accuracy=90.000%, good=18, total=20", "threshold": None,
                                "meets_target": None}, "valid": True, "reasons": []}
    else:
        unit = "samples/s" if scenario in ("Offline", "Server") else "ms"
        record |= {"metric": {"name": "samples per second" if unit == "samples/s" else "90th percentile latency",
                              "value": value, "unit": unit, "higher_is_better": unit == "samples/s"},
                   "valid": valid, "submittable": False, "reasons": list(reasons)}
    write_metadata(folder, RunRecord.from_dict(record))
    return folder


@pytest.fixture
def paths(tmp_path: Path) -> Paths:
    """build/logs with an older LOG_DIR (one Offline run) and a newer one: VALID Offline, accuracy, INVALID
    SingleStream, failed and interrupted Server, and a damaged MultiStream record; one compliance run."""
    paths = Paths.create(scratch=tmp_path / "scratch", repo=tmp_path)
    logs = paths.logs_root
    run_folder(logs, OLD, "Offline", value=180.0, started="2026-01-01T10:00:00+00:00")
    run_folder(logs, NEW, "Offline", value=240.0)
    run_folder(logs, NEW, "Offline", "AccuracyOnly", value=90.0, started="2026-01-02T10:01:00+00:00")
    run_folder(logs, NEW, "SingleStream", value=3.5, valid=False, started="2026-01-02T10:02:00+00:00",
               reasons=(f"SingleStream ran out of queries; {HOSTILE}",))
    run_folder(logs, NEW, "Server", status="failed", error=f"RuntimeError: backend {HOSTILE}",
               started="2026-01-02T10:03:00+00:00")
    run_folder(logs, NEW, "Server", "AccuracyOnly", status="interrupted", error="interrupted by SIGTERM",
               started="2026-01-02T10:03:30+00:00")
    damaged = run_folder(logs, NEW, "MultiStream", started="2026-01-02T10:04:00+00:00")
    (damaged / "metadata.json").write_text('{"schema_version": 1, "status": "compl')
    run_folder(paths.compliance_logs_root, "TEST04/box/resnet50/Offline/runs/1", "Offline", value=999.0,
               audit_test="TEST04", started="2026-01-02T11:00:00+00:00")
    return paths


def report(paths: Paths, *run_args: str, log_dir: Path | None = None) -> tuple[int, list[str]]:
    argv = ["--action=report", *run_args] + ([f"--log_dir={log_dir}"] if log_dir else [])
    args = parse_run_args(argv, list(ACTIONS), ["resnet50"])
    if log_dir:
        paths = Paths.create(scratch=paths.scratch, log_dir=log_dir, repo=paths.repo)
    lines: list[str] = []
    ctx = Context(args=args, paths=paths, rules=get_round(), detect=lambda: pytest.fail("no detection needed"),
                  log=lines.append)
    return Report(ctx).run(), lines


def external_links(page: str) -> list[str]:
    """Every src= or href= value that is neither a data: URI nor a link inside the page."""
    return [v for v in re.findall(r'(?:src|href)\s*=\s*["\']?([^"\'\s>]*)', page, re.IGNORECASE)
            if not v.startswith(("data:", "#"))]


def test_default_report_covers_the_newest_log_dir(paths: Paths):
    code, lines = report(paths)
    assert code == 0
    out = "\n".join(lines)
    page_path = paths.report_html(NEW)
    assert f"Report: build/reports/{NEW}/report.html" in out
    page = page_path.read_text()
    assert external_links(page) == []
    assert "<script" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; &quot;quoted&quot;" in page
    # figures against targets, verdicts, the reason of the INVALID run and the error of the failed one
    assert "240.0 samples/s" in page and "200.0 samples/s (expected QPS)" in page and "120% of the expected QPS" in page
    assert "3.50 ms" in page and "8.00 ms (expected latency)" in page
    assert "90.000 top-1 accuracy (%)" in page
    assert "SingleStream ran out of queries" in page and "Why INVALID" in page
    assert "RuntimeError: backend" in page and "Error (failed)" in page
    assert "interrupted by SIGTERM" in page and "Error (interrupted)" in page
    assert 'class="verdict FAILED"' in page and 'class="verdict INVALID"' in page
    # latency percentiles from the detail log, the config with its sources, the engine
    assert "p99.9" in page and "6.00" in page
    assert "offline_expected_qps" in page and "config class" in page and "command line" in page
    assert "e.onnx" in page and "onnxruntime 1.31.1" in page
    # history of Offline uses every run under build/logs, the older LOG_DIR's too
    assert "3 completed runs of box resnet50 Offline" in page
    # the damaged record is left out, said on the console and in the page, never a crash
    assert any(line.startswith("skipped ") and "MultiStream" in line for line in lines)
    assert "Records left out" in page
    assert page.count('src="data:image/png;base64,') == len(list(paths.report_dir(NEW).glob("*.png")))


def test_plots_are_png_files_and_embedded(paths: Paths):
    assert report(paths)[0] == 0
    plots = sorted(paths.report_dir(NEW).glob("*.png"))
    names = [p.name for p in plots]
    # latency curves of the two performance runs that completed; history of Offline and SingleStream
    assert len([n for n in names if n.startswith("latency-")]) == 2
    assert {n for n in names if n.startswith("history-")} == {"history-box-resnet50-Offline.png",
                                                              "history-box-resnet50-SingleStream.png"}
    assert all(p.read_bytes().startswith(PNG_MAGIC) and p.stat().st_size > 1000 for p in plots)


def test_console_table_has_one_row_per_test(paths: Paths):
    _, lines = report(paths)
    table = next(line for line in lines if "run folder" in line)
    for column in ("system", "benchmark", "scenario", "mode", "figure", "target", "verdict"):
        assert column in table
    rows = [line for line in table.splitlines() if "resnet50" in line]
    assert len(rows) == 5
    assert "INVALID" in next(r for r in rows if "SingleStream" in r)
    assert {"FAILED", "INTERRUPTED"} <= {word for r in rows if "Server" in r for word in r.split()}
    assert sum("VALID (test run)" in r and "INVALID" not in r for r in rows) == 2
    assert f"build/logs/{NEW}/box" in table


def test_all_reports_every_run_and_log_dir_selects_one(paths: Paths):
    code, lines = report(paths, "--all")
    assert code == 0
    table = next(line for line in lines if "run folder" in line)
    assert "7 tests" in table and f"build/logs/{OLD}/box" in table
    assert "PerformanceOnly TEST04" in table and "build/compliance_logs/TEST04" in table
    page = paths.report_html("all").read_text()
    assert "999.0 samples/s" in page
    assert "3 completed runs of box resnet50 Offline" in page   # a compliance run is no point of the history

    code, lines = report(paths, log_dir=paths.logs_root / OLD)
    assert code == 0
    table = next(line for line in lines if "run folder" in line)
    assert "1 test." in table and f"build/logs/{NEW}" not in table
    assert not any(line.startswith("skipped ") for line in lines)   # the damaged record is in the other LOG_DIR
    assert "180.0 samples/s" in paths.report_html(OLD).read_text()


def test_benchmarks_and_scenarios_narrow_the_report(paths: Paths):
    _, lines = report(paths, "--scenarios=singlestream")
    table = next(line for line in lines if "run folder" in line)
    assert "1 test." in table and "SingleStream" in table and "Offline" not in table


def test_no_runs_says_where_it_looked_and_what_to_type(tmp_path: Path):
    paths = Paths.create(scratch=tmp_path / "scratch", repo=tmp_path)
    with pytest.raises(UserError) as error:
        report(paths)
    assert error.value.exit_code == 1
    assert str(paths.logs_root) in str(error.value) and "make run_harness" in str(error.value)


def test_only_damaged_records_is_no_runs_not_a_crash(tmp_path: Path):
    paths = Paths.create(scratch=tmp_path / "scratch", repo=tmp_path)
    folder = run_folder(paths.logs_root, NEW, "Offline")
    (folder / "metadata.json").write_bytes(b"\xff\xfe not json")
    lines: list[str] = []
    args = parse_run_args(["--action=report"], list(ACTIONS), ["resnet50"])
    ctx = Context(args=args, paths=paths, rules=get_round(), detect=lambda: None, log=lines.append)
    with pytest.raises(UserError, match="No runs to report") as error:
        Report(ctx).run()
    assert error.value.exit_code == 1


def test_missing_log_dir_is_bad_input(paths: Paths):
    with pytest.raises(UserError, match="does not exist") as error:
        report(paths, log_dir=paths.logs_root / "nope")
    assert error.value.exit_code == 2


def test_all_belongs_to_report_only():
    with pytest.raises(UserError, match="--all applies only to make report"):
        parse_run_args(["--action=stage_results", "--all"], list(ACTIONS), ["resnet50"])
    assert parse_run_args(["--action=report", "--all"], list(ACTIONS), ["resnet50"]).all_runs


def test_targets_come_from_the_config(paths: Paths):
    rows = {(r.scenario, r.test_mode): r for r in read_rows([paths.logs_root / NEW], lambda *_: None)}
    assert target(rows["Offline", "PerformanceOnly"]).value == 200.0
    assert target(rows["Server", "PerformanceOnly"]).label == "target QPS"
    assert target(rows["SingleStream", "PerformanceOnly"]).value == pytest.approx(8.0)
    assert target(rows["Offline", "AccuracyOnly"]) is None   # open division: reported, not gated


def test_importing_the_report_costs_nothing():
    probe = ("import sys, code.actions.report, code.common.report, code.common.report.html;"
             "print(sorted({'matplotlib', 'rich', 'numpy'} & set(sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_make_target_and_action_are_declared():
    assert ACTIONS["report"].handler == "report:Report"
    assert re.search(r"^report: .*## ", (REPO / "Makefile").read_text(), re.MULTILINE)


# -- faults: logs changed since the run, a reports folder that refuses files -----------------------------------
def _recorded_runs(paths: Paths) -> tuple[Path, Path]:
    """A performance and an accuracy run of the newest LOG_DIR as the harness records them: metadata.json holds
    the sha256 of each LoadGen log and the accuracy.txt line."""
    run = paths.logs_root / NEW / "box" / "resnet50" / "Offline"
    performance = write_record(run / "PerformanceOnly", 240.0, finished="2026-01-02T10:00:00+00:00")
    accuracy = write_record(run / "AccuracyOnly", 90.0, mode="AccuracyOnly", finished="2026-01-02T10:01:00+00:00")
    return performance, accuracy


def _rows(table: str) -> dict[str, str]:
    """The console table's row of each test mode, its wrapped lines joined."""
    rows: dict[str, str] = {}
    mode = ""
    for line in table.splitlines():
        mode = next((m for m in ("PerformanceOnly", "AccuracyOnly") if m in line), mode)
        if mode:
            rows[mode] = rows.get(mode, "") + " " + " ".join(cell.strip() for cell in line.split("│"))
    return rows


def test_runs_whose_logs_changed_since_the_run_are_marked(tmp_path: Path):
    """A detail log cut and another overwritten, then an accuracy.txt removed: the report still shows both runs
    VALID as recorded, and marks each, in the console table and on the page, as "logs changed since the run",
    naming the file and the command that runs the test again."""
    paths = Paths.create(scratch=tmp_path / "scratch", repo=tmp_path)
    performance, accuracy = _recorded_runs(paths)
    code, lines = report(paths)
    assert code == 0 and "changed since the run" not in "\n".join(lines)
    assert "changed since the run" not in paths.report_html(NEW).read_text()

    detail = performance / "mlperf_log_detail.txt"
    detail.write_bytes(detail.read_bytes()[: detail.stat().st_size // 2])
    damaged = accuracy / "mlperf_log_detail.txt"
    damaged.write_bytes(bytes(b ^ 0x20 if b in b"0123456789" else b for b in damaged.read_bytes()))
    code, lines = report(paths)
    assert code == 0
    rows = _rows(next(line for line in lines if "run folder" in line))
    for mode in ("PerformanceOnly", "AccuracyOnly"):
        assert "VALID (test run, logs changed since the run: mlperf_log_detail.txt)" in rows[mode], rows[mode]
        note = f"note: build/logs/{NEW}/box/resnet50/Offline/{mode}: logs changed since the run: mlperf_log_detail.txt"
        assert any(line.startswith(f"{note} (they no longer match") for line in lines), lines
    page = paths.report_html(NEW).read_text()
    assert page.count("<h4>Logs changed since the run</h4>") == 2
    assert page.count('class="verdict VALID CHANGED"') == 6     # each test's in the summary, heading and facts
    assert "2 with logs changed since the run" in page
    assert 'make run_harness RUN_ARGS=&quot;--benchmarks=resnet50 --scenarios=Offline' in page

    (accuracy / "accuracy.txt").unlink()
    _, lines = report(paths)
    rows = _rows(next(line for line in lines if "run folder" in line))
    assert all(word in rows["AccuracyOnly"] for word in ("mlperf_log_detail.txt,", "accuracy.txt", "(missing)"))
    assert "<li><code>accuracy.txt (missing)</code></li>" in paths.report_html(NEW).read_text()


def _refusing(tmp_path: Path) -> list[str]:
    """How to run a command so that a folder without write permission refuses it: as a user, as it is; as root,
    without the capability that overrides permissions (setpriv, util-linux)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: no way to make a folder refuse writes")
    return ["setpriv", "--bounding-set=-dac_override"]


@pytest.mark.parametrize("read_only", ["reports", f"reports/{NEW}"])
def test_a_read_only_reports_folder_is_named_not_an_internal_error(tmp_path: Path, read_only: str):
    from tests.test_faults_choosing_runs import _repo_copy

    repo = _repo_copy(tmp_path)
    _recorded_runs(Paths.create(scratch=repo / "scratch", repo=repo))
    folder = repo / "build" / read_only
    folder.mkdir(parents=True)
    folder.chmod(0o555)
    try:
        done = subprocess.run([*_refusing(tmp_path), sys.executable, "-m", "code.main", "--action=report",
                               f"--scratch_path={repo / 'scratch'}"], cwd=repo, capture_output=True, text=True,
                              stdin=subprocess.DEVNULL, timeout=300, check=False)
    finally:
        folder.chmod(0o755)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "internal error" not in out and "Traceback" not in out
    assert f"The report cannot be written in {folder} (Permission denied)" in done.stderr, out
    assert "make that folder writable" in done.stderr


def test_two_log_dirs_of_one_name_get_a_report_each(paths: Paths, tmp_path: Path):
    """/tmp/a/run1 and /tmp/b/run1: the second report is written beside the first, never over it."""
    first, second = tmp_path / "a" / "run1", tmp_path / "b" / "run1"
    run_folder(first.parent, first.name, "Offline", value=111.0)
    run_folder(second.parent, second.name, "Offline", value=222.0)
    assert report(paths, log_dir=first)[0] == 0 and report(paths, log_dir=second)[0] == 0
    names = {paths.report_name(first), paths.report_name(second)}
    assert len(names) == 2 and all(name.startswith("run1-") for name in names), names
    assert "111.0 samples/s" in paths.report_html(paths.report_name(first)).read_text()
    assert "222.0 samples/s" in paths.report_html(paths.report_name(second)).read_text()
    assert paths.report_name(tmp_path / "a" / ".." / "a" / "run1") == paths.report_name(first)   # one folder, one name
    assert paths.report_name(paths.logs_root / NEW) == NEW                 # build/logs/<timestamp> keeps its name


def test_a_log_dir_named_all_does_not_take_the_all_report(paths: Paths):
    run_folder(paths.logs_root, "all", "Offline", value=333.0)
    assert report(paths, "--all")[0] == 0
    assert report(paths, log_dir=paths.logs_root / "all")[0] == 0
    assert paths.report_name(paths.logs_root / "all") != "all"
    assert "999.0 samples/s" in paths.report_html("all").read_text()      # the --all page is still every run's


def test_a_report_folder_of_other_runs_is_never_replaced(paths: Paths, tmp_path: Path):
    """A report folder records the folders it reports; one that names others stops the report (exit 1), the
    page and plots as they were."""
    assert report(paths)[0] == 0
    page = paths.report_html(NEW)
    paths.report_source(NEW).write_text(f"{tmp_path / 'elsewhere'}\n")
    before = page.read_bytes()
    with pytest.raises(UserError) as error:
        report(paths)
    assert error.value.exit_code == 1
    assert str(tmp_path / "elsewhere") in str(error.value) and str(paths.report_dir(NEW)) in str(error.value)
    assert page.read_bytes() == before
