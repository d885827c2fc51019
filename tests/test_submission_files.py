"""Truncation, export and systems JSON of the submission tree (fast, no GPU, no network); packing is in
test_submission_pack.py."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from code.common.errors import UserError
from code.common.rules import get_round
from code.common.submission.export import export_tree
from code.common.submission.system_json import (describe_system, detect_storage, empty_fields, load_overrides,
                                                require_complete, write_overrides_template, write_system_json)
from code.common.submission.truncate import truncate_tree
from code.common.systems.info import CPUInfo, GPUInfo, SystemInfo

RULES = get_round("v6.1")
RESULT = Path("closed/ACME/results/sys1/resnet/Offline")


class Log(list):
    def __call__(self, line: str) -> None:
        self.append(line)


def _accuracy_json(chars: int) -> str:
    entries = ",\n".join('{"seq_id": %d, "qsl_idx": %d, "data": "0A000000"}' % (i, i) for i in range(chars // 40))
    return ("[\n" + entries)[:chars - 2] + "\n]"


def _staging(root: Path) -> list[Path]:
    folders = [root / RESULT / "accuracy", root / RESULT / "TEST01" / "accuracy",
               root / "open/ACME/results/sys1/resnet/SingleStream/accuracy"]
    for folder in folders:
        folder.mkdir(parents=True)
        (folder / "mlperf_log_accuracy.json").write_text(_accuracy_json(20_000))
        (folder / "accuracy.txt").write_text("accuracy=76.456%, good=38228, total=50000")
    return folders


# -- truncation ----------------------------------------------------------------------------------
def test_truncate_hash_sizes_backup_and_second_run(tmp_path: Path) -> None:
    root, backup = tmp_path / "staging", tmp_path / "full_results"
    folders = _staging(root)
    originals = {f: (f / "mlperf_log_accuracy.json").read_bytes() for f in folders}
    assert all(len(b) == 20_000 for b in originals.values())
    log = Log()
    report = truncate_tree(root, backup, RULES, log)
    assert sorted(report.truncated) == sorted(folders) and report.already == []
    keep = RULES.accuracy_log_keep_chars
    for folder, original in originals.items():
        cut = (folder / "mlperf_log_accuracy.json").read_text()
        text = original.decode()
        assert cut == text[:keep] + "\n\n...\n\n" + text[-keep:] and len(cut) == 2 * keep + 7
        assert len(cut.encode()) <= RULES.accuracy_log_max_bytes
        lines = (folder / "accuracy.txt").read_text().splitlines()
        assert lines == ["accuracy=76.456%, good=38228, total=50000", f"hash={hashlib.sha256(original).hexdigest()}"]
        kept = backup / folder.relative_to(root)
        assert (kept / "mlperf_log_accuracy.json").read_bytes() == original
        assert (kept / "accuracy.txt").read_text() == "accuracy=76.456%, good=38228, total=50000"
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    log2 = Log()
    again = truncate_tree(root, backup, RULES, log2)
    assert again.truncated == [] and sorted(again.already) == sorted(folders) and not again.changed
    assert any("already truncated" in line for line in log2)
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_truncate_refuses_to_overwrite_a_different_backup(tmp_path: Path) -> None:
    root, backup = tmp_path / "staging", tmp_path / "full_results"
    folder = _staging(root)[0]
    stale = backup / folder.relative_to(root) / "mlperf_log_accuracy.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("[]")
    with pytest.raises(UserError, match="already exists and differs"):
        truncate_tree(root, backup, RULES, Log())
    assert stale.read_text() == "[]"
    assert "hash=" not in (folder / "accuracy.txt").read_text()


def test_truncate_finishes_an_interrupted_run(tmp_path: Path) -> None:
    root, backup = tmp_path / "staging", tmp_path / "full_results"
    folder = _staging(root)[0]
    digest = hashlib.sha256((folder / "mlperf_log_accuracy.json").read_bytes()).hexdigest()
    (folder / "accuracy.txt").write_text(f"accuracy=76.456%\nhash={digest}\n")  # crash before the cut
    report = truncate_tree(root, backup, RULES, Log())
    assert folder in report.truncated
    assert len((folder / "mlperf_log_accuracy.json").read_text()) == 2 * RULES.accuracy_log_keep_chars + 7


# -- export --------------------------------------------------------------------------------------
def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for name in ("code/pkg/mod.py", "code/pkg/mod.pyc", "code/pkg/__pycache__/mod.cpython-311.pyc", "code/.hidden",
                 "code/build/engine.bin", "configs/resnet.py", "Makefile"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("content\n")
    (repo / "shared.txt").write_text("linked content\n")
    os.symlink(repo / "shared.txt", repo / "code" / "link.txt")
    return repo


def test_export_copies_tree_drops_hidden_caches_and_resolves_links(tmp_path: Path) -> None:
    repo, staging = _repo(tmp_path), tmp_path / "staging"
    _staging(staging)
    sub = staging / "closed/ACME"
    for name in ("systems/sys1.json", "documentation/calibration.md", "documentation/.DS_Store", ".git/HEAD"):
        (sub / name).parent.mkdir(parents=True, exist_ok=True)
        (sub / name).write_text("{}")
    os.symlink(repo / "shared.txt", sub / "results" / "notes.txt")
    dest = tmp_path / "submission"
    (dest / "stale").mkdir(parents=True)
    log = Log()
    assert export_tree(staging, dest, [Path("code"), Path("configs"), repo / "Makefile"], repo, log) == dest
    assert not (dest / "stale").exists() and any("removing the previous export" in line for line in log)
    files = {p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file()}
    assert "closed/ACME/systems/sys1.json" in files and "closed/ACME/documentation/calibration.md" in files
    assert f"{RESULT.as_posix()}/TEST01/accuracy/mlperf_log_accuracy.json" in files
    assert {"closed/ACME/src/code/pkg/mod.py", "closed/ACME/src/configs/resnet.py", "closed/ACME/src/Makefile",
            "closed/ACME/src/code/link.txt", "open/ACME/src/Makefile"} <= files
    for path in dest.rglob("*"):
        assert not path.is_symlink() and not path.name.startswith(".")
        assert path.name not in ("__pycache__", "build") and path.suffix != ".pyc"
    assert (dest / "closed/ACME/results/notes.txt").read_text() == "linked content\n"


def test_export_rejects_a_dangling_link(tmp_path: Path) -> None:
    repo, staging = _repo(tmp_path), tmp_path / "staging"
    _staging(staging)
    os.symlink(tmp_path / "gone", repo / "code" / "dangling")
    dest = tmp_path / "submission"
    with pytest.raises(UserError, match="does not exist"):
        export_tree(staging, dest, [Path("code")], repo, Log())
    assert not dest.exists() and not list(tmp_path.glob(".submission*"))


# -- systems JSON --------------------------------------------------------------------------------
CPU = CPUInfo(model="Intel(R) Xeon(R) Platinum 8480C", vendor="GenuineIntel", architecture="x86_64",
              sockets=2, cores_per_socket=56, threads_per_core=2, max_mhz=3800.0,
              caches=("L1d cache: 5.3 MiB (112 instances)", "L2 cache: 224 MiB (112 instances)"))
SOFTWARE = {"Python": "3.11.9", "ONNX Runtime": "1.31.1", "LoadGen": "6.0.17"}


def _describe(info: SystemInfo, overrides: dict | None = None) -> dict:
    return describe_system(info, "sys1", "closed", "ACME", "edge", "ONNX Runtime", overrides or {}, RULES,
                           software=SOFTWARE, storage=("512 GB", "NVMe SSD"))


def test_system_json_cpu_only(tmp_path: Path) -> None:
    info = SystemInfo(cpu=CPU, memory_gib=23.6, os_name="Debian GNU/Linux 12 (bookworm)", kernel="6.1.0")
    data = _describe(info)
    assert set(RULES.system_json_fields) <= set(data)
    assert data["accelerators_per_node"] == "0" and data["accelerator_model_name"] == "N/A"
    assert data["host_processors_per_node"] == "2" and data["host_processor_core_count"] == "56"
    assert data["host_memory_capacity"] == "24 GB" and data["number_of_nodes"] == "1"
    assert data["host_processor_frequency"] == "3800 MHz"
    assert data["host_processor_caches"] == "L1d cache: 5.3 MiB (112 instances), L2 cache: 224 MiB (112 instances)"
    assert data["other_software_stack"] == "Python 3.11.9, ONNX Runtime 1.31.1, LoadGen 6.0.17"
    assert all(isinstance(data[f], str) for f in RULES.system_json_fields)
    empty = empty_fields(data, RULES)
    assert "status" in empty and "cooling" in empty and "accelerators_per_node" not in empty
    overrides_path = tmp_path / "systems" / "sys1.overrides.json"
    with pytest.raises(UserError) as caught:
        require_complete(data, RULES, overrides_path)
    assert str(overrides_path) in str(caught.value) and "status" in str(caught.value)
    assert caught.value.exit_code == 1
    assert write_overrides_template(overrides_path, empty)
    assert json.loads(overrides_path.read_text()) == dict.fromkeys(empty, "")
    overrides_path.write_text(json.dumps(dict.fromkeys(empty, "x") | {"status": "available", "cooling": "air"}))
    assert not write_overrides_template(overrides_path, empty)  # never overwrites the user's file
    complete = _describe(info, load_overrides(overrides_path))
    require_complete(complete, RULES, overrides_path)
    out = write_system_json(tmp_path / "systems" / "sys1.json", complete)
    assert json.loads(out.read_text()) == complete and list(json.loads(out.read_text())) == sorted(complete)


def test_system_json_gpu_and_overrides_win() -> None:
    info = SystemInfo(cpu=CPU, memory_gib=2015.6, os_name="Ubuntu 22.04.4 LTS", kernel="5.15",
                      gpus=(GPUInfo("NVIDIA H100 80GB HBM3", 81559, "550.54.15"),) * 8)
    data = _describe(info, {"host_memory_capacity": "2 TB", "accelerators_per_node": 4, "cooling": ""})
    assert data["accelerators_per_node"] == "4" and data["host_memory_capacity"] == "2 TB"
    assert data["accelerator_model_name"] == "NVIDIA H100 80GB HBM3" and data["accelerator_memory_capacity"] == "80 GB"
    assert data["accelerator_frequency"] == "" and data["cooling"] == ""
    assert data["other_software_stack"].endswith("NVIDIA driver 550.54.15")


def test_overrides_file_errors_and_storage(tmp_path: Path) -> None:
    assert load_overrides(tmp_path / "missing.json") == {}
    bad = tmp_path / "bad.overrides.json"
    bad.write_text('{\n  "status": "available",\n  "cooling": \n}\n')
    with pytest.raises(UserError, match=r"bad\.overrides\.json.*line 4"):
        load_overrides(bad)
    sys_block = tmp_path / "block"
    for name, rotational in (("nvme0n1", "0"), ("loop0", "1")):
        (sys_block / name / "queue").mkdir(parents=True)
        (sys_block / name / "queue" / "rotational").write_text(rotational + "\n")
    capacity, kind = detect_storage(tmp_path, sys_block)
    assert kind == "NVMe SSD" and capacity.endswith(("GB", "TB"))


# -- the official checker ------------------------------------------------------------------------
# A stand-in for a checkout of the MLCommons inference repository: the same entry points and the same relative
# imports as upstream, recording how it was called; it fails for the submitter "Bad".
_CHECKER_MAIN = '''
import json, os, sys
from .verdict import exit_status
args = sys.argv[1:]
open(args[args.index("--csv") + 1], "w").write("Submitter\\n")
print(json.dumps({"argv": args, "cwd": os.getcwd()}))
print("SUMMARY: submission has errors" if exit_status(args) else "SUMMARY: submission looks OK")
sys.exit(exit_status(args))
'''


def _checkout(tmp_path: Path, layout: str) -> Path:
    """`package`: main.py and submission_checker_old.py (the current layout); `script`: submission_checker.py."""
    root = tmp_path / "inference"
    (root / "tools/submission").mkdir(parents=True)
    script = _CHECKER_MAIN.replace("from .verdict import exit_status", "exit_status = lambda a: int('Bad' in a)")
    if layout == "package":
        package = root / "tools/submission/submission_checker"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "verdict.py").write_text("def exit_status(args):\n    return int('Bad' in args)\n")
        (package / "main.py").write_text(_CHECKER_MAIN)
        (root / "tools/submission/submission_checker_old.py").write_text(script)
    else:
        (root / "tools/submission/submission_checker.py").write_text(script)
    return root


@pytest.mark.parametrize("layout, checkers", [("package", ["main.py", "submission_checker_old.py"]),
                                              ("script", ["submission_checker.py"])])
def test_official_checkers_run_per_submitter_and_keep_their_output(tmp_path: Path, layout: str,
                                                                   checkers: list[str]) -> None:
    from code.common.submission.official import run_official_checker

    tree = tmp_path / "submission"
    for submitter in ("ACME", "Bad"):
        (tree / "closed" / submitter / "results").mkdir(parents=True)
    log = Log()
    results = run_official_checker(_checkout(tmp_path, layout), tree, "v6.1", tmp_path / "out", log)
    assert [(r.submitter, r.checker, r.passed) for r in results] == [
        *(("ACME", c, True) for c in checkers), *(("Bad", c, False) for c in checkers)]
    for checker in checkers:
        output = (tmp_path / "out" / f"closed-ACME-{checker}.log").read_text()
        called = json.loads(output.splitlines()[1])
        assert called["argv"][:6] == ["--input", str(tree), "--version", "v6.1", "--submitter", "ACME"]
        assert Path(called["argv"][7]).parent == tmp_path / "out" and Path(called["argv"][7]).is_file()
        assert Path(called["cwd"]).name == "submission" and "looks OK" in output
        assert "has errors" in (tmp_path / "out" / f"closed-Bad-{checker}.log").read_text()
    assert "passed" in log[0] and "FAILED (exit status 1)" in log[-1]
    assert not list((tree / "closed/ACME/results").iterdir())  # neither log nor CSV in the tree


def test_official_checker_needs_a_checkout(tmp_path: Path) -> None:
    from code.common.submission.official import run_official_checker

    (tmp_path / "submission/open/ACME/results").mkdir(parents=True)
    with pytest.raises(UserError, match="not a checkout of the MLCommons inference repository"):
        run_official_checker(tmp_path, tmp_path / "submission", "v6.1", tmp_path / "out", Log())


@pytest.mark.parametrize("size", [100, 4096, 6000, 20_000])
def test_truncation_is_byte_for_byte_the_official_scripts(tmp_path: Path, size: int) -> None:
    """Against tools/submission/truncate_accuracy_log.py's truncate_file, when MLPERF_INFERENCE_DIR is a checkout."""
    from code.common.submission.truncate import truncated_text
    from tests.official_tools import inference_dir, load_official_module

    checkout = inference_dir()
    if checkout is None:
        pytest.skip("set MLPERF_INFERENCE_DIR to an MLCommons inference checkout to compare with its truncation")
    official = load_official_module(checkout / "tools" / "submission" / "truncate_accuracy_log.py",
                                    "official_truncate")
    text = "".join(f'{{ "seq_id" : {i}, "qsl_idx" : {i % 50}, "data" : "{i:016X}" }},\n' for i in range(size))[:size]
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(text)
    official.truncate_file(str(log))
    assert truncated_text(text, RULES.accuracy_log_keep_chars) == log.read_text()
