"""A first TensorRT run is sized from this machine (harness/first_run.py): which tests run on their configured
figure and which are refused with the commands that measure, on generated checks and config classes, and through
the plan of run_harness --dry_run with the shipped H100 config."""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from code.common.constants import Scenario, TestMode
from code.common.harness.first_run import OTHER_BACKEND, OWN, SHIPPED, TYPED, FirstRunCheck, origin_of, refusal
from code.main import main

SHIPPED_OFFLINE = FirstRunCheck("resnet50", Scenario.Offline, "tensorrt", TestMode.PerformanceOnly, False,
                                "offline_expected_qps", 90000.0, SHIPPED)
SHIPPED_SERVER = replace(SHIPPED_OFFLINE, scenario=Scenario.Server, field="server_target_qps", value=77000.0)


@pytest.mark.parametrize("change", [
    {"backend": "onnxruntime"},                                   # CPU configs are per core of this machine
    {"test_run": True},                                           # the warm-up probe itself
    {"test_mode": TestMode.AccuracyOnly},                         # one pass over the data set
    {"scenario": Scenario.SingleStream, "field": None, "value": None},
    {"origin": TYPED},                                            # --offline_expected_qps given knowingly
    {"origin": OWN},                                              # find_peak's or the user's custom.py value
    {"origin": "embedded default"},
    {"origin": OTHER_BACKEND},
])
def test_what_runs_on_its_configured_figure(change: dict) -> None:
    assert refusal(replace(SHIPPED_OFFLINE, **change)) is None
    if "scenario" not in change:
        assert refusal(replace(SHIPPED_SERVER, **change)) is None


def test_a_shipped_figure_without_a_measurement_is_refused_with_the_commands_that_measure() -> None:
    said = refusal(SHIPPED_OFFLINE)
    assert said is not None and said.startswith("resnet50 Offline on TensorRT: offline_expected_qps=90000 is the "
                                                "shipped config's figure")
    assert 'make run_harness RUN_ARGS="--benchmarks=resnet50 --scenarios=offline --test_mode=PerformanceOnly ' \
           '--test_run"' in said
    assert 'make find_peak RUN_ARGS="--benchmarks=resnet50 --scenarios=offline"' in said
    assert said.endswith("--offline_expected_qps=90000.")
    server = refusal(SHIPPED_SERVER)
    assert server is not None and "end INVALID" in server
    assert 'make find_peak RUN_ARGS="--benchmarks=resnet50 --scenarios=server"' in server


def test_a_measurement_on_this_system_gives_the_figure_to_use() -> None:
    said = refusal(replace(SHIPPED_OFFLINE, measured=14817.4, measured_where="build/logs/x/Offline"))
    assert said is not None and "measured 14817 samples/s (build/logs/x/Offline)" in said
    assert "run with --offline_expected_qps=14817" in said and "find_peak" in said
    server = refusal(replace(SHIPPED_SERVER, measured=14817.4, measured_where="build/logs/x/Offline"))
    assert server is not None and "only a Server search measures" in server
    assert "--server_target_qps=77000" in server


def _module(path: Path, text: str):
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(f"first_run_{path.parent.name}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_where_a_value_comes_from(tmp_path: Path) -> None:
    from code.common.config_registry import CONFIG_CLASS, FIELD_DEFAULT

    shipped = _module(tmp_path / "shipped.py", "class Base:\n    backend = 'tensorrt'\n"
                                               "    offline_expected_qps = 90000.0\n\n\n"
                                               "class Cpu:\n    backend = 'onnxruntime'\n"
                                               "    offline_expected_qps = 240.0\n")
    sys.modules["first_run_shipped_base"] = shipped
    custom = _module(tmp_path / "custom.py", "from first_run_shipped_base import Base\n\n\n"
                                             "class Measured(Base):\n    offline_expected_qps = 14800.0\n\n\n"
                                             "class Stub(Base):\n    pass\n")
    assert origin_of(custom.Measured, "offline_expected_qps", CONFIG_CLASS) == OWN
    assert origin_of(custom.Stub, "offline_expected_qps", CONFIG_CLASS) == SHIPPED     # inherited: still NVIDIA's
    assert origin_of(shipped.Base, "offline_expected_qps", CONFIG_CLASS) == SHIPPED
    assert origin_of(custom.Stub, "offline_expected_qps", "command line") == TYPED
    assert origin_of(custom.Stub, "offline_expected_qps", FIELD_DEFAULT) == FIELD_DEFAULT
    assert origin_of(shipped.Cpu, "offline_expected_qps", CONFIG_CLASS) == OTHER_BACKEND   # not NVIDIA's figure


@pytest.mark.parametrize("extra, refused", [
    ([], True),
    (["--test_run"], False),
    (["--offline_expected_qps=20000"], False),
    (["--backend=onnxruntime"], False),
])
def test_the_plan_of_run_harness_refuses_the_unmeasured_shipped_figure(
        tmp_path: Path, extra: list[str], refused: bool, capsys: pytest.CaptureFixture) -> None:
    lines: list[str] = []
    args = ["--action=run_harness", "--benchmarks=resnet50", "--scenarios=offline",
            "--system_name=H100_SXM_80GBx1", "--test_mode=PerformanceOnly", "--dry_run",
            f"--scratch_path={tmp_path / 'scratch'}",
            f"--log_dir={tmp_path / 'logs'}", *extra]
    status = main(args, log=lines.append)
    said = "\n".join(lines) + capsys.readouterr().err
    if refused:
        assert status == 2 and "offline_expected_qps=90000 is the shipped config's figure" in said
    else:
        assert status == 0 and "shipped config's figure" not in said and "Plan" in said, said[-2000:]


def test_the_plan_names_make_tune_where_the_layout_was_tuned_nowhere(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture) -> None:
    def plan(*extra: str) -> str:
        lines: list[str] = []
        status = main(["--action=run_harness", "--benchmarks=resnet50", "--scenarios=offline,server",
                       "--model=mobilenet_v2", "--test_mode=PerformanceOnly", "--dry_run",
                       f"--scratch_path={tmp_path / 'scratch'}", f"--log_dir={tmp_path / 'logs'}", *extra],
                      log=lines.append)
        assert status == 0
        return "\n".join(lines) + capsys.readouterr().err

    said = plan()
    # The configured layout, or where the checkout's build/ keeps a sweep of the engine, the layout it chose.
    assert ("resnet50 Offline runs the configured layout (batch_size=32" in said
            or "resnet50 Offline runs batch_size=" in said and "chosen where no layout is tuned" in said), said
    # the make tune line tunes this very engine: the model typed is repeated
    assert 'make tune RUN_ARGS="--benchmarks=resnet50 --scenarios=server --model=mobilenet_v2"' in said
    assert "make tune" not in plan("--batch_size=8", "--instances=1", "--intra_op_threads=2")   # typed
    assert "runs the configured layout" not in plan("--test_run")


def test_a_layout_set_in_custom_py_counts_as_tuned(tmp_path: Path) -> None:
    from code.common.harness.first_run import untuned_layout_note

    shipped = _module(tmp_path / "shipped.py", "class Cpu:\n    backend = 'onnxruntime'\n    batch_size = 32\n")
    sys.modules["first_run_layout_shipped"] = shipped
    custom = _module(tmp_path / "custom.py", "from first_run_layout_shipped import Cpu\n\n\n"
                                             "class Tuned(Cpu):\n    batch_size = 8\n\n\n"
                                             "class Stub(Cpu):\n    pass\n")
    sources = {"batch_size": "config class", "instances": "default"}
    args = ("resnet50", Scenario.Offline, "onnxruntime", TestMode.PerformanceOnly, False)
    assert untuned_layout_note(*args, custom.Tuned, sources, {"batch_size": 8}) is None
    assert "make tune" in untuned_layout_note(*args, custom.Stub, sources, {"batch_size": 32})
    assert untuned_layout_note("resnet50", Scenario.Offline, "onnxruntime", TestMode.AccuracyOnly, False,
                               custom.Stub, sources, {}) is None
