"""Make variables reach Python as data: through real `make` calls, no value of RUN_ARGS, SUBMITTER, LOG_DIR,
MLPERF_SCRATCH_PATH, BENCHMARKS or SYSTEM_NAME runs a command (shell `;`, `$(...)`, backquotes, quotes, make's own
`$(shell ...)`), a value the toolkit refuses is refused by Python (exit status 2, the value named as typed) and is
make's failure too, and RUN_ARGS still splits into flags as a shell splits words."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from .conftest import REPO, make_in

def make(*arguments: str) -> subprocess.CompletedProcess:
    return make_in(REPO, *arguments)


def hostile(folder: Path) -> str:
    """A value that runs commands if any shell or make reads it as syntax: each leaves a file in `folder`."""
    return (f"x;touch {folder}/semicolon $(touch {folder}/dollar) `touch {folder}/backquote` "
            f"';touch {folder}/quote' $(shell touch {folder}/make) $$(touch {folder}/double)")


def refused_by_python(done: subprocess.CompletedProcess) -> None:
    """Python refused the input (its one `error:` line, exit status 2), and make failed with it."""
    assert done.returncode != 0 and "Error 2" in done.stderr, done.stderr
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr, done.stderr


@pytest.fixture
def witness(tmp_path: Path) -> Path:
    folder = tmp_path / "witness"
    folder.mkdir()
    return folder


@pytest.mark.parametrize("variable, action, value", [
    ("SUBMITTER", "show_config", lambda w, f: hostile(w)),
    ("BENCHMARKS", "show_config", lambda w, f: hostile(w)),
    ("SYSTEM_NAME", "show_config", lambda w, f: hostile(w)),
    ("LOG_DIR", "run_harness", lambda w, f: f"{f}/{hostile(w)}"),              # below a file: refused, named
    ("MLPERF_SCRATCH_PATH", "run", lambda w, f: f"{f}/{hostile(w)}"),
])
def test_a_make_variable_is_data_never_shell_or_make_syntax(witness, tmp_path, variable, action, value):
    afile = tmp_path / "a-file"
    afile.write_text("")
    text = value(witness, afile)
    extra = ["RUN_ARGS=--dry_run --benchmarks=resnet50"] if action.startswith("run") else []
    done = make(action, f"{variable}={text}", *extra)
    refused_by_python(done)
    assert text in done.stderr or repr(text) in done.stderr, done.stderr   # it arrived as typed
    assert sorted(p.name for p in witness.iterdir()) == []


@pytest.mark.parametrize("run_args, message", [
    ("--benchmarks=resnet50;touch {w}/semicolon", "Unknown benchmark 'resnet50;touch'"),
    ("--benchmarks=resnet50 --submitter=$(touch {w}/dollar)", "SUBMITTER='$(touch' is not a valid"),
    ("--benchmarks=resnet50 '--submitter=`touch {w}/backquote`'", "SUBMITTER='`touch {w}/backquote`' is not"),
    ("--benchmarks='resnet50;touch {w}/quoted'", "Unknown benchmark 'resnet50;touch {w}/quoted'"),
    ("--benchmarks=\"$(shell touch {w}/make)\"", "Unknown benchmark '$(shell touch {w}/make)'"),
    ("--benchmarks=resnet50 ';touch {w}/open", "cannot be split into flags: no closing quotation"),
])
def test_run_args_cannot_reach_the_shell_and_a_failure_is_makes_failure(witness, run_args, message):
    done = make("run_harness", f"RUN_ARGS={run_args.format(w=witness)}")
    refused_by_python(done)
    assert message.format(w=witness) in done.stderr, done.stderr
    assert sorted(p.name for p in witness.iterdir()) == []


def test_unknown_benchmark_names_the_valid_choices(witness):
    done = make("run_harness", f"RUN_ARGS=--benchmarks=resnet50;touch {witness}/x")
    refused_by_python(done)
    assert "Valid choices: resnet50, yolo" in done.stderr and not (witness / "x").exists()
    assert not (REPO / "x").exists()


def test_run_args_split_as_a_shell_splits_words(tmp_path):
    done = make("show_config", "RUN_ARGS=--benchmarks=resnet50 --scenarios=offline,server")
    assert done.returncode == 0, done.stderr
    assert "resnet50 Offline" in done.stdout and "resnet50 Server" in done.stdout
    logs = tmp_path / "logs with spaces"
    done = make("run_harness", f"RUN_ARGS=--benchmarks=resnet50 --scenarios=offline --log_dir='{logs}' --dry_run "
                               "--test_run")
    assert done.returncode == 0, done.stderr
    assert f"-> {logs}/" in done.stdout and not logs.exists()
    done = make("run_harness", f"LOG_DIR={logs}", "RUN_ARGS=--benchmarks=resnet50 --scenarios=offline --dry_run")
    assert done.returncode == 0 and f"-> {logs}/" in done.stdout, done.stderr


def test_one_setting_given_two_values_through_make_is_refused():
    done = make("show_config", "RUN_ARGS=--benchmarks=resnet50 --batch_size=8 --gpu_batch_size=16")
    refused_by_python(done)
    assert "--batch_size=8 and --gpu_batch_size=16 both set batch_size" in done.stderr
    done = make("show_config", "BENCHMARKS=resnet50", "RUN_ARGS=--benchmarks=yolo")
    refused_by_python(done)
    assert "BENCHMARKS=resnet50 and --benchmarks=yolo in RUN_ARGS both set benchmarks" in done.stderr
    same = make("show_config", "BENCHMARKS=resnet50", "RUN_ARGS=--benchmarks=resnet50 --scenarios=offline "
                                                       "--batch_size=8 --gpu_batch_size=8")
    assert same.returncode == 0, same.stderr


def refused_by_make(done: subprocess.CompletedProcess, variable: str) -> None:
    """make refused the value while reading the Makefile: its one line naming the variable, status 2, no recipe."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and f"{variable} holds a line break" in lines[0], done.stderr
    assert f"give {variable} on one line" in lines[0] and done.stdout == "", done.stdout


@pytest.mark.parametrize("ignore_errors", [[], ["-i"]])
@pytest.mark.parametrize("variable, action", [
    ("RUN_ARGS", "run_harness"), ("SUBMITTER", "show_config"), ("LOG_DIR", "report"),
    ("MLPERF_SCRATCH_PATH", "run"), ("BENCHMARKS", "show_config"), ("SYSTEM_NAME", "show_config"),
    ("DOCKER_COMMAND", "launch_docker"), ("BASE_IMAGE", "build_docker"),
])
@pytest.mark.parametrize("line_break", ["\n", "\r"])
def test_a_line_break_in_a_make_variable_is_refused_before_any_shell_sees_it(witness, ignore_errors, variable,
                                                                                action, line_break):
    text = f"--benchmarks=resnet50{line_break}touch {witness}/second-line"
    done = make(*ignore_errors, action, f"{variable}={text}")
    refused_by_make(done, variable)
    assert sorted(p.name for p in witness.iterdir()) == []


def test_a_line_break_beside_make_and_shell_syntax_stays_text(witness):
    """The check reads the raw value: a `$(shell ...)` or backquotes in it run neither while make looks for the
    line break nor after."""
    text = f"$(shell touch {witness}/make)\n`touch {witness}/backquote` $$(touch {witness}/dollar)"
    for ignore_errors in ([], ["-i"]):
        done = make(*ignore_errors, "run_harness", f"RUN_ARGS={text}")
        refused_by_make(done, "RUN_ARGS")
    assert sorted(p.name for p in witness.iterdir()) == []
