"""The endpoints client's environment: the interpreter finder on fake interpreters, the checkout checks, and an
environment made from a fake checkout (tests/fake_endpoints_client.py) with the toolkit's uv, on a real Python
>= 3.12 where this machine has one."""
from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from code.common.endpoints_client.environment import (CHECKOUT_VARIABLE, STAMP, ensure_environment, environment_row,
                                                      find_checkout, read_stamp)
from code.common.endpoints_client.interpreter import OVERRIDE, find_interpreter
from code.common.errors import UserError
from tests.fake_endpoints_client import git, make_checkout


def fake_python(path: Path, version: str | None) -> Path:
    """An executable that answers the finder's probe as a Python of `version`, or fails as pyenv's shim does."""
    path.parent.mkdir(parents=True, exist_ok=True)
    body = f'echo "{path}"; echo "{version}"' if version else 'echo "pyenv: python3.12: command not found" >&2; exit 127'
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def test_pyenv_versions_come_first_oldest_first_and_only_those_that_run(tmp_path):
    root = tmp_path / "pyenv"
    fake_python(root / "versions" / "3.13.0" / "bin" / "python3.13", "3.13.0")
    fake_python(root / "versions" / "3.12.1" / "bin" / "python3.12", None)          # broken: skipped
    fake_python(root / "versions" / "3.11.7" / "bin" / "python3.11", "3.11.7")     # too old: never tried
    fake_python(tmp_path / "bin" / "python3.12", "3.12.4")
    found = find_interpreter({"PYENV_ROOT": str(root), "PATH": str(tmp_path / "bin")})
    assert (found.version, found.found_by) == ("3.13.0", "pyenv")


def test_a_name_on_path_counts_only_where_it_runs_and_is_new_enough(tmp_path):
    fake_python(tmp_path / "bin" / "python3.12", None)              # the shim that fails
    fake_python(tmp_path / "bin" / "python3.13", "3.11.2")          # lies about its name
    with pytest.raises(UserError) as error:
        find_interpreter({"PYENV_ROOT": str(tmp_path / "none"), "PATH": str(tmp_path / "bin")})
    assert error.value.exit_code == 2
    assert "needs Python >= 3.12 and none runs here" in str(error.value)
    assert "pyenv install 3.12" in str(error.value) and OVERRIDE in str(error.value)
    fake_python(tmp_path / "bin" / "python3.14", "3.14.0")
    found = find_interpreter({"PYENV_ROOT": str(tmp_path / "none"), "PATH": str(tmp_path / "bin")})
    assert (found.version, found.found_by) == ("3.14.0", "PATH")


def test_the_users_interpreter_wins_and_a_bad_one_is_named(tmp_path):
    good = fake_python(tmp_path / "mine", "3.12.7")
    fake_python(tmp_path / "pyenv" / "versions" / "3.13.0" / "bin" / "python3.13", "3.13.0")
    env = {"PYENV_ROOT": str(tmp_path / "pyenv"), "PATH": "", OVERRIDE: str(good)}
    assert find_interpreter(env).found_by == OVERRIDE
    with pytest.raises(UserError, match=f"{OVERRIDE}=.*old is not a Python >= 3.12") as error:
        find_interpreter({**env, OVERRIDE: str(fake_python(tmp_path / "old", "3.11.7"))})
    assert error.value.exit_code == 2


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> tuple[Path, str]:
    folder = tmp_path_factory.mktemp("endpoints")
    return folder, make_checkout(folder)


def test_the_checkout_is_asked_for_by_name_when_missing_or_not_the_client(tmp_path, checkout):
    with pytest.raises(UserError, match=f"{CHECKOUT_VARIABLE} is not set: git clone "
                                        "https://github.com/mlcommons/endpoints") as error:
        find_checkout({})
    assert error.value.exit_code == 2
    with pytest.raises(UserError, match="is not a checkout of https://github.com/mlcommons/endpoints") as error:
        find_checkout({CHECKOUT_VARIABLE: str(tmp_path)})
    assert error.value.exit_code == 2
    folder, commit = checkout
    with pytest.raises(UserError, match=f"is at {commit[:8]}, a commit this toolkit does not drive; check out one "
                                        f"it does: git -C {folder} checkout ea332753") as error:
        find_checkout({CHECKOUT_VARIABLE: str(folder)})
    assert error.value.exit_code == 2
    found = find_checkout({CHECKOUT_VARIABLE: str(folder)}, commits={commit: "test"})
    assert (found.commit, found.modified) == (commit, False)


def test_a_commit_of_the_round_that_cannot_run_a_test_is_refused_with_its_reason(checkout, monkeypatch):
    from code.common.endpoints_client import environment
    assert "381d13bbd27d6d52306813a51dc4e44295222d7e" in environment.REFUSED_COMMITS     # the qwen3-vl pin
    assert not set(environment.REFUSED_COMMITS) & set(environment.CLIENT_COMMITS)
    folder, commit = checkout
    monkeypatch.setitem(environment.REFUSED_COMMITS, commit, "its schema forbids keys the YAML needs")
    with pytest.raises(UserError, match=f"is at {commit[:8]}, its schema forbids keys the YAML needs: "
                                        f"git -C {folder} checkout ea332753") as error:
        find_checkout({CHECKOUT_VARIABLE: str(folder)}, commits={commit: "test"})
    assert error.value.exit_code == 2


def test_an_edited_checkout_is_recorded_as_modified(tmp_path):
    commit = make_checkout(tmp_path)
    (tmp_path / "src" / "inference_endpoint" / "main.py").write_text("def run():\n    pass\n")
    assert find_checkout({CHECKOUT_VARIABLE: str(tmp_path)}, commits={commit: "test"}).modified


def real_interpreter_env() -> dict[str, str]:
    try:
        find_interpreter()
    except UserError as error:
        pytest.skip(f"no Python >= 3.12 runs here to make the client's environment on ({error})")
    return dict(os.environ)


def test_the_environment_is_made_from_the_checkouts_lock_recorded_and_kept(tmp_path, checkout):
    folder, commit = checkout
    env = {**real_interpreter_env(), CHECKOUT_VARIABLE: str(folder)}
    venv = tmp_path / "venv"
    lines: list[str] = []
    record = ensure_environment(venv, ("bfcl",), env=env, log=lines.append, commits={commit: "test"})
    assert lines and "installing the MLCommons endpoints client" in lines[0]
    assert (record.commit, record.client_version, record.extras, record.modified) == (commit, "0.1.0", ("bfcl",),
                                                                                      False)
    assert tuple(int(p) for p in record.python_version.split(".")[:2]) >= (3, 12)
    assert Path(record.interpreter).is_file() and record.interpreter_found_by in ("pyenv", "PATH", "uv", OVERRIDE)
    assert read_stamp(venv) == record
    assert json.loads((venv / STAMP).read_text())["commit"] == commit
    assert environment_row(venv)[1] == f"inference-endpoint 0.1.0 ({commit[:8]})"
    calls = tmp_path / "calls.jsonl"
    done = subprocess.run([*record.command, "info"], env={**env, "FAKE_ENDPOINTS_CALLS": str(calls)}, check=False)
    assert done.returncode == 0 and json.loads(calls.read_text())["argv"] == ["info"]

    lines.clear()                                       # the same checkout, lock and extras: nothing installed
    assert ensure_environment(venv, (), env=env, log=lines.append, commits={commit: "test"}) == record
    assert lines == []

    (folder / "README.md").write_text("next\n")         # another commit: installed again, the new commit recorded
    git(folder, "add", "README.md")
    git(folder, "commit", "-q", "-m", "next")
    newer = git(folder, "rev-parse", "HEAD")
    again = ensure_environment(venv, (), env=env, log=lines.append, commits={newer: "test"})
    assert again.commit == newer and again.extras == ("bfcl",) and lines


def test_no_stamp_no_environment(tmp_path):
    assert read_stamp(tmp_path) is None
    assert environment_row(tmp_path)[1] == "not installed"


def test_the_endpoints_harness_makes_the_clients_environment_for_build_and_run(tmp_path, monkeypatch, checkout):
    from types import SimpleNamespace

    from code.common.endpoints_client import environment
    from code.common.harness.registry import HARNESSES

    plugin = HARNESSES.get("endpoints")
    args = SimpleNamespace(workload=SimpleNamespace(harness_type=SimpleNamespace(value="endpoints")),
                           endpoints=("http://127.0.0.1:8000",))     # running servers: no local vLLM to make
    assert plugin.needs_environment(args, for_run=False) and plugin.needs_environment(args, for_run=True)
    assert plugin.parse_flag("endpoints", "127.0.0.1:8000, http://localhost:8001/v1") == ("http://127.0.0.1:8000",
                                                                                        "http://localhost:8001")
    lines: list[str] = []
    ctx = SimpleNamespace(paths=SimpleNamespace(endpoints_venv=tmp_path / "venv"), log=lines.append, args=args)
    with pytest.raises(UserError, match='make build RUN_ARGS="--harness_type=endpoints"') as error:
        plugin.preflight({}, args, ctx.paths)        # before its environment is made
    assert error.value.exit_code == 2
    assert plugin.capabilities(ctx)[0][1] == "not installed"
    monkeypatch.delenv(CHECKOUT_VARIABLE, raising=False)
    with pytest.raises(UserError, match=f"{CHECKOUT_VARIABLE} is not set") as error:
        plugin.make_environment(ctx)
    assert error.value.exit_code == 2
    folder, commit = checkout[0], git(checkout[0], "rev-parse", "HEAD")
    real_interpreter_env()
    monkeypatch.setenv(CHECKOUT_VARIABLE, str(folder))
    monkeypatch.setitem(environment.CLIENT_COMMITS, commit, "test")
    plugin.make_environment(ctx)
    assert lines[-1].startswith(f"MLCommons endpoints client 0.1.0 at {commit[:8]}, on Python 3.")
    assert plugin.capabilities(ctx)[0][1] == f"inference-endpoint 0.1.0 ({commit[:8]})"
    assert read_stamp(tmp_path / "venv").extras == ("bfcl",)
    plugin.preflight({}, args, ctx.paths)
