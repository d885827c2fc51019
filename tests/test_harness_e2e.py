"""The harness end to end: real MobileNetV2, real images, real LoadGen, one child process per test.

A session scratch holds the model and the preprocessed foolbox20 set (and imagenet_sample when ../shared is
there); each test writes its logs to its own LOG_DIR. Engines go to build/engines like a user's.
"""
from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from code.common.fileio import model_sha256
from code.common.records.loadgen_log import read_detail
from code.common.records.metadata import RunRecord, find_metadata, read_metadata
from code.common.harness.runner import run_test
from code.common.harness.spec import RunSpec
from code.common.preprocessed_store import set_identity
from code.main import main

from .conftest import EMBEDDED, REPO, SHARED



def toolkit(scratch: Path, log_dir: Path, *args: str) -> int:
    return main([*args, f"--scratch_path={scratch}", f"--log_dir={log_dir}"], log=print)


def records(log_dir: Path) -> dict[tuple[str, str], RunRecord]:
    return {(r.scenario, r.test_mode): r for r in map(read_metadata, find_metadata(log_dir))}


def test_four_scenarios_short_runs_write_parsed_metadata(scratch, tmp_path, capsys):
    args = ["--scenarios=offline,server,singlestream,multistream", *EMBEDDED, "--test_run", "--min_duration=2000",
            "--offline_expected_qps=2"]
    assert toolkit(scratch, tmp_path, "--action=generate_engines", *args) == 0
    assert toolkit(scratch, tmp_path, "--action=run_harness", *args) == 0
    found = records(tmp_path)
    assert set(found) == {(s, "PerformanceOnly") for s in ("Offline", "Server", "SingleStream", "MultiStream")}
    for (scenario, _), record in found.items():
        assert record.status == "completed", record
        assert record.division == "open" and record.model == "mobilenet_v2"
        assert record.metric.value > 0, scenario
        assert record.loadgen.version.startswith("6.0.17")
        assert record.loadgen.seeds["qsl_rng_seed"] == 2085463073848966840
        assert record.loadgen.effective["min_duration_ms"] == 2000
        assert record.config.fields["min_duration"] == 2000
        assert record.engine.manifest["model"] == "mobilenet_v2" and record.engine.manifest_sha256
        assert record.engine.manifest["engine_sha256"] == model_sha256(Path(record.engine.path))
        data = set_identity(Path(record.data.directory))                   # the preprocessed set it read
        assert record.data.manifest_sha256 == data["manifest_sha256"] and "foolbox20" in record.data.directory
        assert record.submittable is False
        run_dir = Path(record.log_dir)
        assert (run_dir / "mlperf_log_detail.txt").exists() and (run_dir / "user.conf").exists()
        assert not (run_dir / "audit.config").exists()
    offline = found[("Offline", "PerformanceOnly")]
    assert offline.valid is False   # 2 samples/s asked for: 4 samples, done long before min_duration however busy
    assert "raise offline_expected_qps to about" in offline.reasons[0]
    assert found[("MultiStream", "PerformanceOnly")].loadgen.effective["samples_per_query"] == 8
    out = capsys.readouterr().out
    assert "Summary:" in out and "raise offline_expected_qps" in out


def test_a_test_run_much_faster_than_its_config_expects_does_not_run_out_of_queries(scratch, tmp_path):
    # A config that expects 1 s a query (written for a slower model or machine): LoadGen would generate queries for
    # 2 x 3 s at 1 s (then min_query_count's 64), which MobileNetV2 answers long before min_duration, and end the run
    # INVALID with "Ran out of generated queries", whatever the machine's load.
    args = ["--scenarios=singlestream", *EMBEDDED, "--test_run", "--min_duration=3000",
            "--single_stream_expected_latency_ns=1000000000"]
    assert toolkit(scratch, tmp_path, "--action=generate_engines", *args) == 0
    assert toolkit(scratch, tmp_path, "--action=run_harness", *args) == 0
    record = records(tmp_path)[("SingleStream", "PerformanceOnly")]
    log = read_detail(Path(record.log_dir))
    assert not any("Ran out of generated queries" in error for error in log.errors), log.errors
    assert log.get("result_min_duration_met") is True and log.get("generated_query_count") >= 100_000
    assert record.valid is True, record.reasons
    assert record.config.fields["single_stream_expected_latency_ns"] == 1_000_000_000   # the config, as given


def test_accuracy_mode_on_foolbox_and_results_are_never_overwritten(scratch, tmp_path, capsys):
    args = ["--action=run_harness", "--scenarios=offline", *EMBEDDED, "--test_mode=AccuracyOnly"]
    assert toolkit(scratch, tmp_path, "--action=generate_engines", *args[1:]) == 0
    assert toolkit(scratch, tmp_path, *args) == 0
    record = records(tmp_path)[("Offline", "AccuracyOnly")]
    assert record.accuracy.text == "accuracy=90.000%, good=18, total=20"
    assert (Path(record.log_dir) / "accuracy.txt").read_text() == "accuracy=90.000%, good=18, total=20\n"
    assert record.accuracy.threshold is None   # open division: reported, not gated
    assert toolkit(scratch, tmp_path, *args) == 2
    assert "already holds a result; results are never overwritten" in capsys.readouterr().err


def test_missing_prerequisites_name_the_make_target(scratch, tmp_path, capsys):
    empty = tmp_path / "empty-scratch"
    assert toolkit(empty, tmp_path, "--action=run_harness", "--scenarios=offline", *EMBEDDED) == 1
    assert 'make preprocess_data RUN_ARGS="--benchmarks=resnet50 --model=mobilenet_v2 --dataset=foolbox20"' \
        in capsys.readouterr().err
    assert toolkit(scratch, tmp_path, "--action=run_harness", "--scenarios=offline", *EMBEDDED,
                   "--precision=int8", "--calibration_images=13", "--test_run") == 1   # an engine nobody builds
    assert "make generate_engines" in capsys.readouterr().err
    assert not list(tmp_path.rglob("metadata.json"))


def test_backend_failure_marks_the_run_failed_and_keeps_the_logs(scratch, tmp_path):
    args = ["--scenarios=offline", *EMBEDDED, "--test_run", "--min_duration=1000", "--batch_size=4"]
    assert toolkit(scratch, tmp_path / "ok", "--action=generate_engines", *args) == 0
    assert toolkit(scratch, tmp_path / "ok", "--action=run_harness", *args) == 0
    spec_path = next((tmp_path / "ok").rglob("run_spec.json"))
    spec = RunSpec.load(spec_path)
    spec = RunSpec(**{**spec.__dict__, "log_dir": str(tmp_path / "faulty")})
    record = run_test(spec, REPO, child_module="tests.fault_child")
    assert record.status == "failed"
    assert "injected device failure" in record.error
    faulty = tmp_path / "faulty"
    assert "injected device failure" in (faulty / "harness_error.txt").read_text()
    assert (faulty / "mlperf_log_detail.txt").exists()   # LoadGen's logs are kept for diagnosis


def stop_once_started(command: list[str], log_dir: Path, signum: int) -> tuple[int, str]:
    """Run the toolkit `command`, send it `signum` a second after its first LoadGen test has started logging into
    `log_dir`: (exit status, stderr). The signal is left at its default, so SIGINT acts as a terminal's Ctrl-C even
    where this test runs as a background job (which ignores SIGINT)."""
    parent = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signum, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while not list(log_dir.rglob("mlperf_log_detail.txt")) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.0)
    parent.send_signal(signum)
    _, err = parent.communicate(timeout=60)
    return parent.returncode, err


def test_ctrl_c_stops_cleanly_and_records_an_interrupted_run(scratch, tmp_path):
    command = [sys.executable, "-m", "code.main", "--action=run_harness", "--scenarios=offline", *EMBEDDED,
               "--min_duration=120000", f"--scratch_path={scratch}", f"--log_dir={tmp_path}"]
    assert toolkit(scratch, tmp_path, "--action=generate_engines", *command[4:-2]) == 0
    returncode, err = stop_once_started(command, tmp_path, signal.SIGINT)
    assert returncode == 130, err
    [record] = map(read_metadata, find_metadata(tmp_path))
    assert record.status == "interrupted"
    assert not list(tmp_path.rglob("audit.config")) and not (REPO / "audit.config").exists()
    spec_path = next(tmp_path.rglob("run_spec.json"))
    leftover = subprocess.run(["pgrep", "-f", str(spec_path)], capture_output=True, text=True).stdout.split()
    assert leftover == []   # the child LoadGen process is gone too


@pytest.fixture(scope="session")
def imagenet_sample(scratch) -> Path:
    if not (SHARED / "data" / "imagenet_sample").exists():
        pytest.skip(f"{SHARED / 'data' / 'imagenet_sample'} is absent")
    args = ["--benchmarks=resnet50", "--model=mobilenet_v2", "--dataset=imagenet_sample", "--scenarios=offline"]
    for action in ("download_data", "preprocess_data"):
        assert main([f"--action={action}", f"--scratch_path={scratch}", *args], log=lambda _: None) == 0
    return scratch


def test_imagenet_sample_accuracy_through_loadgen_fp32_and_int8(imagenet_sample, tmp_path):
    base = ["--scenarios=offline", "--benchmarks=resnet50", "--model=mobilenet_v2", "--dataset=imagenet_sample",
            "--test_mode=AccuracyOnly"]
    top1 = {}
    for precision in ("fp32", "int8"):
        args = [*base, f"--precision={precision}", "--calibration_images=100"]
        assert toolkit(imagenet_sample, tmp_path / precision, "--action=generate_engines", *args) == 0
        assert toolkit(imagenet_sample, tmp_path / precision, "--action=run_harness", *args) == 0
        record = records(tmp_path / precision)[("Offline", "AccuracyOnly")]
        assert record.accuracy.samples == 1000
        top1[precision] = record.accuracy.value
    assert top1["fp32"] == pytest.approx(83.8, abs=0.5)
    assert top1["fp32"] - top1["int8"] <= 1.5, top1


def test_a_selection_of_no_test_is_refused_as_bad_input(scratch, capsys):
    """A scenario no selected benchmark has a config for: exit 2 naming those it has, as make tune says, not a
    failure of a run."""
    assert main(["--action=run_harness", "--scenarios=interactive", *EMBEDDED, f"--scratch_path={scratch}"],
                log=lambda _: None) == 2
    out = capsys.readouterr().err
    assert "resnet50 has configs for Offline, Server, SingleStream, MultiStream" in out
    assert "choose --scenarios among those" in out
