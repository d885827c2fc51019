"""The lwis harness on the native core (--harness_impl): which implementation a test gets, batching through the
bindings, and real runs of MobileNetV2 on foolbox20 through both implementations (the same accuracy log), their
failure and interruption paths."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.config_registry import ConfigRegistry
from code.common.constants import Scenario, WorkloadSetting
from code.common.errors import UserError
from code.common.harness.selection import settle
from code.common.records.metadata import find_metadata, read_metadata
from code.common.native.build import LOADGEN_SDIST_SHA256, not_ready
from code.common.paths import Paths
from code.common.systems.known import GENERIC_CPU

from .conftest import EMBEDDED, REPO
from .test_harness_e2e import records, stop_once_started, toolkit
from .test_native import probe


def resolved(benchmark: str = "resnet50", **overrides):
    registry = ConfigRegistry.load([benchmark])
    return registry.resolve(benchmark, Scenario.Offline, [GENERIC_CPU], WorkloadSetting(), overrides=overrides)


# -- which implementation runs ------------------------------------------------------------------------------------
def test_the_default_falls_back_to_python_where_the_core_is_not_built(tmp_path):
    assert not_ready(tmp_path) == "the native core is not built (`make build` builds it)"
    config = settle(resolved(), "lwis", tmp_path)
    assert config["harness_impl"] == "python"
    assert config.sources["harness_impl"] == \
        "default (python fallback: the native core is not built (`make build` builds it))"
    assert config.given() == {}      # still the default: a command that repeats the run does not ask for python


def test_native_asked_for_where_it_cannot_serve_stops_the_plan(tmp_path):
    with pytest.raises(UserError, match=r"--harness_impl=native cannot run resnet50 Offline: the native core is "
                                        r"not built \(`make build` builds it\)\. Leave --harness_impl out"):
        settle(resolved(harness_impl="native"), "lwis", tmp_path)
    with pytest.raises(UserError, match="the triton harness has one implementation, in Python"):
        settle(resolved(harness_impl="native"), "triton", tmp_path)


def test_the_llm_harness_and_python_asked_for_stay_python(native_lib):
    build_root = native_lib.parent.parent
    llm = settle(resolved("llama3.1-8b"), "lwis", build_root)
    assert llm["harness_impl"] == "python" and "streams tokens through the LLM harness" in llm.sources["harness_impl"]
    python = resolved(harness_impl="python")
    assert settle(python, "lwis", build_root) is python
    native = resolved()
    assert settle(native, "lwis", build_root) is native     # built: the default stands


# -- batching through the bindings --------------------------------------------------------------------------------
def test_server_batches_fill_within_the_window_and_never_exceed_the_batch_size(native_lib, tmp_path):
    result = probe(native_lib, "python-window", "Server", tmp_path)
    sizes = result["batch_sizes"]
    assert result["error"] == "" and result["issued"] == result["completed"] == sum(sizes)
    assert max(sizes) == 8 and sizes.count(8) > len(sizes) // 2     # 100 ms holds a batch until it is full


def test_offline_batches_are_full_but_the_last_of_each_instance(native_lib, tmp_path):
    result = probe(native_lib, "python", "Offline", tmp_path)
    sizes = result["batch_sizes"]
    assert sum(sizes) == result["completed"] == 64
    assert max(sizes) == 8 and len([s for s in sizes if s < 8]) <= 2


# -- real runs, both implementations ------------------------------------------------------------------------------
def accuracy_entries(run_dir: Path) -> list[dict]:
    """The accuracy log's entries in sample order: samples complete in any order across instances."""
    entries = json.loads((run_dir / "mlperf_log_accuracy.json").read_text())
    return sorted(entries, key=lambda e: (e["qsl_idx"], e["seq_id"]))


def test_both_implementations_log_the_same_accuracy_and_say_which_ran(scratch, native_lib, tmp_path):
    args = ["--scenarios=offline,server", *EMBEDDED, "--test_mode=AccuracyOnly", "--server_target_qps=50"]
    assert toolkit(scratch, tmp_path / "engines", "--action=generate_engines", *args) == 0
    found = {}
    for name in ("python", "native"):
        assert toolkit(scratch, tmp_path / name, "--action=run_harness", *args, f"--harness_impl={name}") == 0
        found[name] = records(tmp_path / name)
    for key in (("Offline", "AccuracyOnly"), ("Server", "AccuracyOnly")):
        python, native = found["python"][key], found["native"][key]
        assert python.accuracy.text == native.accuracy.text == "accuracy=90.000%, good=18, total=20"
        assert len(accuracy_entries(Path(native.log_dir))) == 20
        assert accuracy_entries(Path(python.log_dir)) == accuracy_entries(Path(native.log_dir))
        assert (python.config.fields["harness_impl"], native.config.fields["harness_impl"]) == ("python", "native")
        assert python.loadgen.build.startswith("wheel: mlcommons-loadgen 6.0.17")
        assert native.loadgen.build.startswith(f"native core: mlcommons_loadgen-6.0.17.tar.gz (sha256 "
                                               f"{LOADGEN_SDIST_SHA256})")
        assert python.loadgen.version == native.loadgen.version == "6.0.17 @ d6147c7eb7"


def test_sigterm_stops_a_native_server_run_and_records_it_interrupted(scratch, native_lib, tmp_path):
    args = ["--scenarios=server", *EMBEDDED, "--harness_impl=native", "--min_duration=120000",
            "--server_target_qps=20"]
    assert toolkit(scratch, tmp_path, "--action=generate_engines", *args) == 0
    command = [sys.executable, "-m", "code.main", "--action=run_harness", *args, f"--scratch_path={scratch}",
               f"--log_dir={tmp_path}"]
    returncode, err = stop_once_started(command, tmp_path, signal.SIGTERM)
    assert returncode == 143, err
    [record] = map(read_metadata, find_metadata(tmp_path))
    assert record.status == "interrupted" and "SIGTERM" in record.error
    assert record.config.fields["harness_impl"] == "native"
    spec_path = next(tmp_path.rglob("run_spec.json"))
    leftover = subprocess.run(["pgrep", "-f", str(spec_path)], capture_output=True, text=True).stdout.split()
    assert leftover == []   # the child, its batcher threads with it, is gone


def test_a_failing_backend_fails_a_native_run_naming_the_error(scratch, native_lib, tmp_path):
    from code.common.harness.runner import run_test
    from code.common.harness.spec import RunSpec

    args = ["--scenarios=offline", *EMBEDDED, "--test_run", "--min_duration=1000", "--batch_size=4",
            "--harness_impl=native"]
    assert toolkit(scratch, tmp_path / "ok", "--action=generate_engines", *args) == 0
    assert toolkit(scratch, tmp_path / "ok", "--action=run_harness", *args) == 0
    spec = RunSpec.load(next((tmp_path / "ok").rglob("run_spec.json")))
    assert spec.harness == "native" and spec.harness_options == {"native_lib": str(native_lib)}
    spec = RunSpec(**{**spec.__dict__, "log_dir": str(tmp_path / "faulty")})
    record = run_test(spec, REPO, child_module="tests.fault_child")
    assert record.status == "failed"
    assert record.error == ("RuntimeError: the inference failed during the run: RuntimeError: injected device "
                            "failure")
    assert Paths.create().build in native_lib.parents
