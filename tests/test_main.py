"""The entry point as a user meets it: exit codes, messages without tracebacks, injected systems."""
import subprocess
import sys

import pytest

from code.common.paths import REPO_ROOT
from code.main import main

from .conftest import recorded_detector


def run_main(capsys, *argv, system=None):
    detect = (system or recorded_detector("kvm_epyc_2core_lscpu.txt", None)).detect
    lines: list[str] = []
    code = main(list(argv), detect=detect, log=lines.append)
    captured = capsys.readouterr()
    return code, "\n".join(lines) + captured.out, captured.err


def test_bad_flag_exits_2_with_one_message_and_no_traceback(capsys):
    code, _, err = run_main(capsys, "--action=run_harness", "--scenario=offline")
    assert code == 2
    assert "unrecognized arguments: --scenario=offline" in err and "--scenarios" in err
    assert "Traceback" not in err


def test_verbose_shows_the_traceback(capsys):
    code, _, err = run_main(capsys, "--action=run_harness", "--scenarios=nope", "--verbose")
    assert code == 2 and "Traceback" in err
    code, _, err = run_main(capsys, "--action=run_harness", "--run_args=--scenarios=nope --verbose")   # via make
    assert code == 2 and "Traceback" in err


def test_unimplemented_action_says_what_brings_it(capsys, monkeypatch):
    import code.actions as actions

    planned = actions.Action("stage_results", "later", planned_in="the submission pipeline")
    monkeypatch.setitem(actions.ACTIONS, "stage_results", planned)
    code, _, err = run_main(capsys, "--action=stage_results")
    assert code == 3
    assert "not implemented yet" in err and "submission pipeline" in err


def test_unknown_audit_test(capsys):
    code, _, err = run_main(capsys, "--action=show_config", "--audit_test=TEST05")
    assert code == 2 and "Valid choices for v6.1: TEST01, TEST04" in err


def test_show_config_on_a_known_gpu_system(capsys):
    system = recorded_detector("dgx_h100_lscpu.txt", "dgx_h100_nvidia_smi.csv")
    code, out, _ = run_main(capsys, "--action=show_config", "--scenarios=offline", "--gpu_batch_size=1024",
                            system=system)
    assert code == 0
    assert "System: H100_SXM_80GBx8 (8x NVIDIA H100 SXM 80GB (DGX H100))" in out
    assert "class H100_SXM_80GBx8 (exact)" in out
    assert "batch_size" in out and "1024" in out and "(command line)" in out
    assert "offline_expected_qps" in out and "720000.0" in out


def test_show_config_on_an_unknown_machine_uses_nearest_defaults(capsys):
    code, out, _ = run_main(capsys, "--action=show_config", "--scenarios=singlestream,offline")
    assert code == 0
    assert "AMD_EPYC_2C (not a registered system" in out
    assert "make add_custom_system" in out
    assert "nearest known system generic_cpu" in out
    assert "240.0" in out  # 120 samples/s per core x 2 cores


def test_help_is_fast_and_imports_nothing_heavy():
    probe = ("import sys, code.main, code.actions.environment, code.actions.custom_system;"
             "heavy = {'onnxruntime', 'mlperf_loadgen', 'onnx', 'rich', 'pynvml', 'tensorrt'} & set(sys.modules);"
             "print(sorted(heavy))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
    done = subprocess.run([sys.executable, "-m", "code.main", "--help"], cwd=REPO_ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0 and "--benchmarks" in done.stdout and "--gpu_batch_size" in done.stdout


def test_make_help_lists_every_target():
    done = subprocess.run(["make", "-s", "help"], cwd=REPO_ROOT, capture_output=True, text=True, check=True)
    for target in ("prebuild", "build", "link_dirs", "download_model", "download_data", "preprocess_data",
                   "generate_engines", "calibrate", "run_harness", "run", "run_audit_harness",
                   "generate_conf_files", "stage_results", "stage_compliance", "truncate_results",
                   "export_submission", "check_submission", "pack_submission", "add_custom_system", "clean",
                   "test", "help"):
        assert f"\n  {target} " in done.stdout, target


@pytest.mark.parametrize("run_args", ["--scenarios=offlin", "--benchmarks=resnet5", "--gpu_batch_size=x"])
def test_make_with_bad_run_args_exits_2(run_args):
    done = subprocess.run(["make", "-s", "show_config", f"RUN_ARGS={run_args}"], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2, done.stderr
    assert "error:" in done.stderr and "Valid" in done.stderr or "expected an integer" in done.stderr


@pytest.mark.parametrize("old, current", [("update_results", "stage_results"),
                                          ("update_compliance", "stage_compliance"),
                                          ("copy_results_artifacts", "export_submission")])
def test_an_old_target_name_runs_the_current_step_and_says_its_name_once(capsys, tmp_path, old, current):
    arguments = (f"--log_dir={tmp_path / 'logs'}", f"--scratch_path={tmp_path / 'scratch'}")
    now = run_main(capsys, f"--action={current}", *arguments)
    before = run_main(capsys, f"--action={old}", *arguments)
    sentence = f"`make {old}` is now called `make {current}`: running {current}."
    assert before[1].count(sentence) == 1 and sentence not in now[1]
    assert (before[0], before[1].replace(sentence, "", 1).removeprefix("\n"), before[2]) == now   # the same step
    assert f"\n{old}: $(VENV_STAMP) ## Old name of {current}\n\t@$(MAIN)\n" in (REPO_ROOT / "Makefile").read_text()
