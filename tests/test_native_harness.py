"""The lwis harness on the native core (--harness_impl): which implementation a test gets, batching through the
bindings, and real runs of MobileNetV2 on foolbox20 through both implementations (the same accuracy log), their
failure and interruption paths."""
from __future__ import annotations

import json
import shutil
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
def test_one_instance_runs_singlestream_and_unbatched_server_on_loadgens_thread_and_the_rest_on_batchers():
    from code.common.harness.native_sut import runs_inline

    assert runs_inline(Scenario.SingleStream, 1, 1) and runs_inline(Scenario.Server, 1, 1)
    # a Server batch that can hold more waits in the batcher's window; several instances each have a batcher
    assert not runs_inline(Scenario.Server, 1, 4) and not runs_inline(Scenario.Server, 2, 1)
    assert not runs_inline(Scenario.SingleStream, 2, 1) and not runs_inline(Scenario.Offline, 1, 1)
    assert not runs_inline(Scenario.MultiStream, 1, 8)


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


# -- the core wanted but not there: said on the console, built by make run ------------------------------------------
def _context(tmp_path: Path, action: str, *flags: str):
    """An invocation whose build folder (tmp_path/build) holds no native core."""
    from code.actions import ACTIONS
    from code.actions.base import Context
    from code.common.arguments import parse_run_args
    from code.common.rules import get_round
    from code.main import available_benchmarks
    from .conftest import recorded_detector

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path)
    args = parse_run_args([f"--action={action}", *flags], list(ACTIONS),
                          available_benchmarks(Paths.create(), get_round()))
    system = recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()
    lines: list[str] = []
    return Context(args=args, paths=paths, rules=get_round(), detect=lambda: system, log=lines.append), lines


def test_a_default_that_falls_back_from_a_missing_core_says_so_on_the_console(tmp_path):
    from code.actions.harness import RunHarness

    ctx, lines = _context(tmp_path, "run_harness", *EMBEDDED, "--scenarios=offline", "--test_run", "--dry_run")
    assert RunHarness(ctx).run() == 0
    [note] = [line for line in lines if line.startswith("Note:")]
    assert note.startswith("Note: resnet50 Offline runs the Python harness, not the native core (the default "
                           "--harness_impl): the native core is not built; run make build"), note
    assert lines.index(note) < next(i for i, line in enumerate(lines) if line.startswith("Plan:"))


def test_a_default_that_falls_back_from_a_damaged_core_names_the_file(native_lib, tmp_path):
    from code.actions.harness import RunHarness
    from code.common.native.build import lib_dir

    ctx, lines = _context(tmp_path, "run_harness", *EMBEDDED, "--scenarios=offline", "--test_run", "--dry_run")
    shutil.copytree(native_lib, lib_dir(ctx.paths.build))
    victim = next(lib_dir(ctx.paths.build).glob("toolkit_native*.so"))
    victim.write_bytes(victim.read_bytes()[:1000])
    assert RunHarness(ctx).run() == 0
    [note] = [line for line in lines if line.startswith("Note:")]
    assert f"the native core's {victim} is 1000 bytes" in note and "run make build" in note, note
    assert ctx.resolve("resnet50", Scenario.Offline)["harness_impl"] == "python"


def test_make_run_plans_the_core_it_will_build_where_run_harness_asks_for_make_build(tmp_path):
    from code.actions.harness import Run, RunHarness

    ctx, lines = _context(tmp_path, "run", "--harness_impl=native", "--dry_run")
    assert Run(ctx).run() == 0
    assert "Note: the native core is not built: make run builds it before the first test (resnet50 Offline runs " \
           "on it)." in lines
    ctx, _ = _context(tmp_path, "run_harness", *EMBEDDED, "--scenarios=offline", "--harness_impl=native",
                      "--dry_run")
    with pytest.raises(UserError, match=r"not built \(`make build` builds it\)") as error:
        RunHarness(ctx).run()
    assert error.value.exit_code == 2


@pytest.mark.parametrize("asked", [True, False])
def test_make_run_builds_the_core_and_says_what_runs_where_it_cannot(tmp_path, monkeypatch, native_lib, asked):
    """make run's environment step builds the core for the tests that run on it (here a copy of this checkout's
    build stands for the compile). Where the build fails: asked for, exit 1 with the reason; the default, one
    console line and the tests run the Python harness."""
    import code.common.native.build as native_build
    from code.common.harness.registry import HARNESSES
    from code.common.native.build import NativeBuild, NativeUnavailable, lib_dir

    flags = [*EMBEDDED, "--scenarios=offline", *(["--harness_impl=native"] if asked else [])]
    ctx, lines = _context(tmp_path, "run", *flags)
    ctx.environment_made = True
    native = HARNESSES.get("native")

    def copy_of_the_build(build_root, cache, log=print, jobs=2):
        shutil.copytree(native_lib, lib_dir(build_root))
        return NativeBuild(lib_dir(build_root), built_now=True)

    monkeypatch.setattr(native_build, "build_native", copy_of_the_build)
    native.make_environment(ctx)
    assert not_ready(ctx.paths.build) is None and ctx.resolve("resnet50", Scenario.Offline)["harness_impl"] == "native"

    shutil.rmtree(lib_dir(ctx.paths.build))

    def no_compiler(build_root, cache, log=print, jobs=2):
        raise NativeUnavailable("c++ not found")

    monkeypatch.setattr(native_build, "build_native", no_compiler)
    if asked:
        with pytest.raises(UserError, match=r"--harness_impl=native: the native harness core cannot be built here "
                                            r"\(c\+\+ not found\)") as error:
            native.make_environment(ctx)
        assert error.value.exit_code == 1
        return
    native.make_environment(ctx)
    assert lines[-1].startswith("Note: resnet50 Offline runs the Python harness, not the native core (the default "
                                "--harness_impl): it could not be built here (c++ not found)"), lines[-1]
    ctx.environment_made = False
    assert ctx.resolve("resnet50", Scenario.Offline)["harness_impl"] == "python"
