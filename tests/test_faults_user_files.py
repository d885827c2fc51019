"""Fault injection, files people edit: systems/*.overrides.json, code/common/systems/custom_list.py, the configs'
custom.py (and any config module), a system description. Damaged (not UTF-8, not JSON or not Python, a value of
the wrong type), each stops the command with exit status 1 and one sentence naming the file and how to repair it:
never `internal error`, never a traceback."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.submission.staging import stage_system_files
from code.common.submission.system_json import load_overrides

from .conftest import REPO

NOT_UTF8 = b"\xff\xfe not text"


@pytest.mark.parametrize("content, why", [
    (b'{"cooling": "air", "hw_notes": "caf\xe9"}', "is not UTF-8 text (byte 35 is 0xe9)"),
    (b'{"cooling": "air",', "is not valid JSON (line 1, column 19"),
    (b'["cooling", "air"]', "must hold one JSON object (field -> value), not list"),
    (b'{"status": 5}', "status is 5 in"),
], ids=["not-utf8", "cut", "a-list", "wrong-type"])
def test_a_damaged_overrides_file_is_named(tmp_path, content, why):
    path = tmp_path / "systems" / "box.overrides.json"
    path.parent.mkdir()
    path.write_bytes(content)
    with pytest.raises(UserError) as refused:
        load_overrides(path, get_round(), shown="systems/box.overrides.json")
    assert refused.value.exit_code == 1
    assert str(refused.value).startswith("systems/box.overrides.json ") or "in systems/box.overrides.json" in \
        str(refused.value)
    assert why in str(refused.value)
    if why.startswith("is not"):
        assert "run make generate_conf_files again" in str(refused.value)


@pytest.mark.parametrize("content", [NOT_UTF8, b"[1, 2]"], ids=["not-utf8", "a-list"])
def test_a_damaged_system_description_stops_staging_naming_it(tmp_path, content):
    paths = Paths.create(repo=tmp_path, scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    paths.system_json("box").parent.mkdir(parents=True)
    paths.system_json("box").write_bytes(content)
    with pytest.raises(UserError) as refused:
        stage_system_files(paths, "open", "Org", "box", log=lambda _: None)
    assert refused.value.exit_code == 1
    assert str(paths.system_json("box")) in str(refused.value) and "make generate_conf_files" in str(refused.value)
    assert not paths.staging.exists()


# -- Python files the toolkit loads, through the command line ------------------------------------------------
@pytest.fixture
def repo(tmp_path) -> Path:
    for name in ("code", "configs"):
        shutil.copytree(REPO / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "custom.py"))
    return tmp_path


def show_config(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "code.main", "--action=show_config", "--benchmarks=resnet50",
                           "--scenarios=offline"], cwd=repo, capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, check=False)


def one_line(done: subprocess.CompletedProcess) -> str:
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr, done.stderr
    [line] = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    return line


DAMAGES = {"not-utf8": (NOT_UTF8, "it is not UTF-8 text (line 1)"),
           "binary": (b"\x00\x01\x02", "it is not text (it holds NUL bytes)"),
           "syntax": (b"x = (\n", "line 1 is not valid Python: '(' was never closed"),
           "raises": (b"import no_such_module_here\n", "loading it raised ModuleNotFoundError")}


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_custom_list_is_named_with_its_repair(repo, damage):
    content, why = DAMAGES[damage]
    path = repo / "code/common/systems/custom_list.py"
    path.write_bytes(content)
    line = one_line(show_config(repo))
    assert line.startswith(f"error: {path} cannot be loaded: {why}")
    assert "git checkout code/common/systems/custom_list.py" in line and "make add_custom_system" in line


def test_custom_list_of_the_wrong_shape_is_named(repo):
    path = repo / "code/common/systems/custom_list.py"
    path.write_text(path.read_text() + "\nCUSTOM_SYSTEMS = ['box']\n")
    line = one_line(show_config(repo))
    assert line.startswith(f"error: {path}: CUSTOM_SYSTEMS must be a tuple of KnownSystem(...) entries")


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_custom_config_is_named_with_its_repair(repo, damage):
    content, why = DAMAGES[damage]
    path = repo / "configs/resnet50/Offline/custom.py"
    path.write_bytes(content)
    line = one_line(show_config(repo))
    assert line.startswith(f"error: {path} cannot be loaded: {why}")
    assert "make add_custom_system" in line


def test_a_damaged_project_config_package_is_named(repo):
    path = repo / "configs/resnet50/__init__.py"
    path.write_bytes(path.read_bytes() + b"\n\xff\n")
    line = one_line(show_config(repo))
    assert line.startswith(f"error: {path} cannot be loaded: it is not UTF-8 text") and "git checkout" in line


def test_the_undamaged_copy_loads(repo):
    """The copy loads as the repository does: the damage, not the copy, made the errors above."""
    done = show_config(repo)
    assert done.returncode == 0 and "offline_expected_qps" in done.stdout, done.stderr
