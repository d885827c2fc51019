"""Fault injection, bad input: each bad value a user can type stops `python -m code.main` with exit status 2 and
one line naming the value and what is allowed, before anything starts (no traceback, nothing written)."""
from __future__ import annotations

import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from code.actions import ACTIONS
from code.common.arguments import parse_run_args
from code.common.config_registry import BenchmarkConfig, PerCore, validate_class
from code.common.constants import Scenario
from code.common.errors import UserError
from code.common.fields import FIELDS
from code.common.paths import REPO_ROOT


def toolkit(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "code.main", *args], cwd=cwd, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=120, check=False)


def assert_refused(done: subprocess.CompletedProcess, *phrases: str) -> str:
    """Exit status 2, one line on stderr beginning `error:` that holds each phrase, nothing else printed."""
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert done.stdout == ""
    for phrase in phrases:
        assert phrase in lines[0], lines[0]
    return lines[0]


def contents(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def where(tmp_path: Path) -> list[str]:
    """LOG_DIR and MLPERF_SCRATCH_PATH inside tmp_path (not created): a refused command must leave them absent."""
    return [f"--log_dir={tmp_path / 'logs'}", f"--scratch_path={tmp_path / 'scratch'}"]


# -- SUBMITTER becomes a folder name ---------------------------------------------------------------------------
@pytest.mark.parametrize("submitter", ["../../evil", "a/b", "..", ".hidden", "My Org", "evil\\x", "x" * 101])
def test_unsafe_submitter_is_refused(submitter, where, tmp_path):
    done = toolkit("--action=stage_results", f"--submitter={submitter}", *where)
    assert_refused(done, f"SUBMITTER={submitter!r} is not a valid organisation name", "letters, digits")
    assert contents(tmp_path) == []
    staging = REPO_ROOT / "build" / "submission-staging" / "open"
    assert not any((base / "evil").exists() for base in (staging.parent, staging.parents[1], staging.parents[2]))


def test_safe_submitter_is_accepted():
    args = parse_run_args(["--action=stage_results", "--submitter=My_Org-2.0+x"], list(ACTIONS), ["resnet50"])
    assert args.submitter == "My_Org-2.0+x"


# -- numbers: finite, in their documented range ---------------------------------------------------------------
@pytest.mark.parametrize("flag, value, phrase", [
    ("--offline_expected_qps", "nan", "offline_expected_qps=nan is not a finite number"),
    ("--offline_expected_qps", "inf", "offline_expected_qps=inf is not a finite number"),
    ("--offline_expected_qps", "-inf", "is not a finite number"),
    ("--offline_expected_qps", "1e999", "is not a finite number"),
    ("--offline_expected_qps", "-5", "must be at least 0.001"),
    ("--server_target_qps", "0", "must be at least 0.001"),
    ("--audit_server_qps_scale", "1.5", "at most 1"),
    ("--gpu_batch_size", "99999999999999999999", "batch_size=99999999999999999999 must be at least 1 and at most"),
    ("--batch_size", "-1", "must be at least 1"),
    ("--min_duration", "-600000", "must be at least 1"),
    ("--single_stream_expected_latency_ns", "99999999999999999999999", "at most"),
    ("--model", "../../evil", "is not a valid name"),
])
def test_bad_field_value_is_refused(flag, value, phrase, where, tmp_path):
    done = toolkit("--action=run_harness", f"{flag}={value}", *where)
    assert_refused(done, phrase, flag)
    assert contents(tmp_path) == []


@pytest.fixture(scope="module")
def help_text() -> str:
    return " ".join(toolkit("--help").stdout.split())


def test_every_numeric_field_documents_its_range(help_text):
    for spec in FIELDS.values():
        if spec.type not in (int, float):
            continue
        assert spec.minimum is not None and spec.maximum is not None, spec.name
        assert spec.minimum < spec.maximum and math.isfinite(spec.maximum), spec.name
        assert f"({spec.range_text})" in help_text, spec.name
        for bound in (spec.minimum, spec.maximum):
            assert spec.parse(str(spec.type(bound))) == spec.type(bound)
        over = spec.maximum + 1 if spec.type is int else spec.maximum * 2
        with pytest.raises(UserError, match=re.escape(spec.range_text)) as error:
            spec.parse(str(spec.type(over)))
        assert error.value.exit_code == 2


# -- folders the action writes into -----------------------------------------------------------------------------
def test_log_dir_below_a_file_is_refused(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    done = toolkit("--action=run_harness", f"--log_dir={blocker / 'logs'}", f"--scratch_path={tmp_path / 's'}")
    assert_refused(done, f"LOG_DIR={blocker / 'logs'}", "which is a file", "set LOG_DIR to a folder you can write to")
    assert contents(tmp_path) == ["a_file"]


@pytest.mark.parametrize("action, flag, variable", [("run_harness", "--log_dir", "LOG_DIR"),
                                                     ("download_model", "--scratch_path", "MLPERF_SCRATCH_PATH"),
                                                     ("run", "--scratch_path", "MLPERF_SCRATCH_PATH")])
def test_unwritable_folder_is_refused(action, flag, variable, tmp_path):
    # /proc takes no new files, whoever runs the test (root included).
    other = "--scratch_path" if flag == "--log_dir" else "--log_dir"
    done = toolkit(f"--action={action}", f"{flag}=/proc/toolkit-test/{variable}", f"{other}={tmp_path / 'x'}")
    assert_refused(done, f"{variable}=/proc/toolkit-test/{variable} ({flag}) cannot be written",
                   f"set {variable} to a folder you can write to")
    assert not Path("/proc/toolkit-test").exists() and contents(tmp_path) == []


def test_a_read_only_scratch_is_fine_for_actions_that_only_read_it():
    args = parse_run_args(["--action=run_harness", "--scratch_path=/proc/toolkit-test"], list(ACTIONS), ["resnet50"])
    assert args.scratch_path == "/proc/toolkit-test"


# -- the passphrase file ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind, phrase", [("missing", "it does not exist"), ("folder", "it is a folder"),
                                          ("empty", "is empty"), ("binary", "it is not text")])
def test_bad_passphrase_file_is_refused(kind, phrase, tmp_path):
    path = tmp_path / "passphrase"
    if kind == "folder":
        path.mkdir()
    elif kind == "empty":
        path.write_text("  \n")
    elif kind == "binary":
        path.write_bytes(b"\xff\xfe\x00\x81")
    before = contents(tmp_path)
    done = toolkit("--action=pack_submission", "--submitter=Org", f"--passphrase_file={path}",
                   f"--log_dir={tmp_path / 'logs'}")
    assert_refused(done, str(path), phrase, "--passphrase_file")
    assert contents(tmp_path) == before


# -- --audit_test ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, phrases", [
    (["--action=run_audit_harness", "--audit_test=TEST01", "--test_mode=AccuracyOnly"],
     ["--test_mode=AccuracyOnly does not apply to make run_audit_harness"]),
    (["--action=run_harness", "--audit_test=TEST01"], ["--audit_test=TEST01 applies only to make run_audit_harness"]),
    (["--action=stage_results", "--audit_test=TEST04"], ["applies only to make run_audit_harness"]),
    (["--action=run_audit_harness", "--audit_test=TEST99"], ["Unknown audit test 'TEST99'", "TEST01, TEST04"]),
])
def test_audit_test_out_of_place_is_refused(args, phrases, where, tmp_path):
    assert_refused(toolkit(*args, *where), *phrases)
    assert contents(tmp_path) == []


# -- --system_name -----------------------------------------------------------------------------------------
def test_unknown_system_name_lists_the_known_ones_before_anything_runs(where, tmp_path):
    done = toolkit("--action=run_harness", "--system_name=Unknown", "--scenarios=offline", *where)
    line = assert_refused(done, "--system_name=Unknown names no known system", "generic_cpu", "H100_SXM_80GBx1",
                          "make add_custom_system")
    assert "this machine's own id" in line
    assert contents(tmp_path) == []


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    for name in ("code", "configs"):
        shutil.copytree(REPO_ROOT / name, tmp_path / "repo" / name, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path / "repo"


def test_the_system_name_hint_works(repo_copy):
    refused = toolkit("--action=show_config", "--system_name=MyBox", "--scenarios=offline", cwd=repo_copy)
    line = assert_refused(refused, "--system_name=MyBox")
    hinted = re.search(r'make add_custom_system SYSTEM_NAME= RUN_ARGS="([^"]+)"', line)
    assert hinted, line
    added = toolkit("--action=add_custom_system", *hinted.group(1).split(), cwd=repo_copy)
    assert added.returncode == 0, added.stderr
    shown = toolkit("--action=show_config", "--system_name=MyBox", "--scenarios=offline", cwd=repo_copy)
    assert shown.returncode == 0, shown.stderr
    assert "System: MyBox" in shown.stdout


# -- the same limits hold in config classes -----------------------------------------------------------------
class _Offline(BenchmarkConfig):
    benchmark = "resnet50"
    scenario = Scenario.Offline
    model = "mobilenet_v2"
    dataset = "foolbox20"
    offline_expected_qps = 100.0


@pytest.mark.parametrize("name, value, phrase", [
    ("offline_expected_qps", float("nan"), "is not a finite number"),
    ("offline_expected_qps", float("inf"), "is not a finite number"),
    ("batch_size", 10**20, "at most 65_536"),
    ("offline_expected_qps", PerCore(float("nan")), "PerCore takes a positive, finite number"),
    ("batch_size", PerCore(-2.0), "PerCore takes a positive, finite number"),
    ("dataset", "../imagenet", "is not a valid name"),
])
def test_a_config_class_with_a_bad_value_is_refused(name, value, phrase):
    bad = type("Bad", (_Offline,), {name: value})
    with pytest.raises(UserError, match=re.escape(phrase)) as error:
        validate_class(bad)
    assert "class Bad" in str(error.value) and error.value.exit_code == 2
