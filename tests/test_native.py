"""The native harness core (native/, code/common/native/build.py): LoadGen built from its pinned sdist together with
the toolkit's C++ SUT, exercised through real LoadGen runs in processes of their own (tests/native_probe.py).

The build needs cmake, a C++ compiler and the package registry (for the sdist) once; where one is missing the
tests skip, saying which.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.native.build import LOADGEN_SDIST_SHA256, NativeUnavailable, fetch_sdist

from .conftest import REPO


def probe(lib: Path | str, kind: str, scenario: str, outdir: Path, target: float = 2000.0) -> dict:
    done = subprocess.run([sys.executable, "-m", "tests.native_probe", str(lib), kind, scenario, str(outdir),
                           str(target)], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_sdist_is_checked_against_its_pinned_sha256(tmp_path):
    fake = tmp_path / "mlcommons_loadgen-6.0.17.tar.gz"
    fake.write_bytes(b"not the sdist")
    with pytest.raises(NativeUnavailable, match=LOADGEN_SDIST_SHA256):
        fetch_sdist(tmp_path)
    assert not fake.exists()


def test_the_native_build_logs_the_wheels_loadgen_version_and_git_fields(native_lib, tmp_path):
    native = probe(native_lib, "reference", "Offline", tmp_path / "native")
    wheel = probe("wheel", "wheel-python", "Offline", tmp_path / "wheel")
    assert Path(native["module"]).parent == native_lib and Path(wheel["module"]).parent != native_lib
    for key in ("loadgen_version", "loadgen_git_commit_date", "loadgen_git_status_message", "loadgen_file_sha1"):
        assert native[key] == wheel[key], key
    # The wheel's log message lists one commit more than the sdist's generated file; the checkers read neither it nor
    # the build dates (their constants map loadgen_version, git commit date and hash only).
    assert wheel["loadgen_git_log_message"].startswith(native["loadgen_git_log_message"])


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_the_native_sut_completes_every_sample_in_batches(native_lib, tmp_path, scenario):
    result = probe(native_lib, "native", scenario, tmp_path)
    assert result["error"] == "" and result["issued"] == result["completed"] > 0
    assert result["batches"] < result["issued"]       # several samples per backend call
    assert result["result_validity"] in ("VALID", "INVALID")


def test_a_python_backend_answers_each_sample_from_its_gathered_input(native_lib, tmp_path):
    result = probe(native_lib, "python", "Offline", tmp_path)
    assert result["error"] == "" and result["completed"] == 64
    assert {entry["qsl_idx"]: entry["data"] for entry in result["accuracy"]} == {i: f"{i:02X}" for i in range(64)}


@pytest.mark.parametrize("scenario", ["SingleStream", "Server"])
def test_a_query_on_one_instance_runs_on_loadgens_issuing_thread_and_answers_each_sample(native_lib, tmp_path,
                                                                                          scenario):
    result = probe(native_lib, "inline", scenario, tmp_path)
    assert result["error"] == "" and result["completed"] == 64 and result["batch_sizes"] == [1] * 64
    assert {entry["qsl_idx"]: entry["data"] for entry in result["accuracy"]} == {i: f"{i:02X}" for i in range(64)}
    # no batcher thread: every query ran on the thread LoadGen issues from (the one that started the test)
    assert result["threads_started"] == 0 and result["callers"] == 1 and result["main_thread_called"]
    assert "exactly one backend instance" in result["two_instances"]
    failing = probe(native_lib, "inline-failing", scenario, tmp_path / "failing")
    assert "the backend broke on its third batch" in failing["error"]
    assert failing["issued"] == failing["completed"] > 3     # LoadGen ended: nothing left outstanding


def test_a_failing_backend_fails_the_run_and_completes_every_sample(native_lib, tmp_path):
    result = probe(native_lib, "failing", "Offline", tmp_path)
    assert "the backend broke on its third batch" in result["error"]
    assert result["issued"] == result["completed"] > 0      # LoadGen ended: nothing left outstanding


BACKENDS_SCRIPT = """
import json, sys
sys.path.insert(0, sys.argv[1])
import toolkit_native as tn
from code.common.harness.native_sut import native_backends

result = {"built": tn.backend_names(), "python": hasattr(tn, "PythonBackend")}
for name, options in (("tensorrt", {}), ("null", {}), ("null", {"response_bytes": "four"})):
    try:
        tn.create_backend(name, options)
    except ValueError as error:
        result[f"{name} {options}"] = str(error)
try:
    native_backends("tensorrt", [{}])
except RuntimeError as error:
    result["native_backends"] = str(error)
print(json.dumps(result))
"""


def test_cpp_backends_are_made_by_name_and_a_missing_one_names_those_built(native_lib):
    done = subprocess.run([sys.executable, "-c", BACKENDS_SCRIPT, str(native_lib)], cwd=REPO, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["built"] == ["null"] and result["python"] is True
    assert result["tensorrt {}"] == "the native core has no C++ backend named tensorrt (built here: null)"
    assert result["null {}"] == "the null backend needs the option response_bytes"
    assert result["null {'response_bytes': 'four'}"] == "the null backend's option response_bytes must be a count, " \
                                                         "not 'four'"
    assert result["native_backends"].startswith("the native core here was built without its C++ backend 'tensorrt' "
                                                "(built: null)")


@pytest.mark.parametrize("scenario", ["Offline", "Server"])
def test_the_core_gathers_named_inputs_padded_as_the_python_library_does(native_lib, tmp_path, scenario):
    result = probe(native_lib, "padded", scenario, tmp_path)
    assert result["error"] == "" and result["completed"] == 64
    assert result["batches"] > 0 and result["mismatches"] == 0


def test_the_core_reads_adjacent_samples_where_they_lie_and_copies_the_others(native_lib, tmp_path):
    # Offline: LoadGen issues the loaded set in its order, which is the order the core holds it in: every batch is
    # read where it lies.
    offline = probe(native_lib, "in-place", "Offline", tmp_path / "offline")
    assert offline["error"] == ""
    for mode in ("AccuracyOnly", "PerformanceOnly"):
        assert offline[mode]["in_place"] > 0 and "copied" not in offline[mode]
    # Server: samples drawn at random, batched up to 4 within a window: copied, but for those alone in a batch.
    server = probe(native_lib, "in-place", "Server", tmp_path / "server", target=2000)
    assert server["error"] == "" and server["PerformanceOnly"]["copied"] > 0
    for mode in ("AccuracyOnly", "PerformanceOnly"):
        assert offline[mode]["wrong"] == server[mode]["wrong"] == 0


@pytest.mark.parametrize("member, link", [("top/../../outside.txt", None), ("top/link", "../../etc/passwd"),
                                          ("/abs.txt", None)])
def test_without_extraction_filters_an_escaping_member_is_refused_as_the_data_filter_would(tmp_path, monkeypatch,
                                                                                          member, link):
    """Python 3.11.0-3.11.3 (Debian bookworm's python3) has no tarfile filters: the sdist is checked by hand."""
    import io
    import tarfile

    from code.common.native import build

    sdist = tmp_path / "sdist.tar.gz"
    with tarfile.open(sdist, "w:gz") as archive:
        for name, target in (("top/ok.txt", None), (member, link)):
            info = tarfile.TarInfo(name)
            if target is None:
                info.size = 2
                archive.addfile(info, io.BytesIO(b"ok"))
            else:
                info.type, info.linkname = tarfile.SYMTYPE, target
                archive.addfile(info)
    monkeypatch.delattr(tarfile, "data_filter", raising=False)
    with pytest.raises(NativeUnavailable, match="which would land outside"):
        build._unpack(sdist, tmp_path / "unpacked")
    assert not (tmp_path / "outside.txt").exists()
    safe = tmp_path / "safe.tar.gz"
    with tarfile.open(safe, "w:gz") as archive:
        info = tarfile.TarInfo("top/ok.txt")
        info.size = 2
        archive.addfile(info, io.BytesIO(b"ok"))
    assert (build._unpack(safe, tmp_path / "unpacked") / "ok.txt").read_text() == "ok"
