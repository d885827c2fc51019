"""The whole chain on the embedded default, in a copy of the repository: short runs of the three edge
scenarios in both test modes, an audit, then generate_conf_files ... pack_submission as a dry run."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from .conftest import REPO
from .official_tools import inference_dir

# What the official checkers say of short runs on the 20-image sample (the only findings a dry run may have).
SHORT_RUN_FINDINGS = ("performance_sample_count, found 20", "Test duration less than 600s",
                      "does not cover all dataset", "accuracy_sample_count, found 20",
                      "Required minimum samples per query not met", "Checks failed for", "has issues", "NoResults",
                      "SUMMARY: submission has errors")

# 6 s runs on one ONNX Runtime thread vary by about +-2 % on a shared 2-core machine; two threads, or shorter
# runs, vary by more than the +-10 % a compliance test allows.
RUN = ["--benchmarks=resnet50", "--model=mobilenet_v2", "--dataset=foolbox20", "--test_run", "--min_duration=6000",
       "--intra_op_threads=1"]


@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    for name in ("code", "configs", "scripts", "docker", "requirements", "Makefile", "pyproject.toml", "README.md"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, tmp_path / "repo" / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tmp_path / "repo" / name)
    return tmp_path / "repo"


def toolkit(repo: Path, scratch: Path, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "code.main", *args, f"--scratch_path={scratch}",
                           "--submitter=TestOrg"], cwd=repo, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=600, check=False)
    return done


def test_dry_run_submission_chain(scratch, repo_copy, tmp_path, monkeypatch):
    edge = "--scenarios=offline,singlestream,multistream"
    for args in (["--action=generate_engines", edge], ["--action=run_harness", edge],
                 ["--action=run_harness", edge, "--test_mode=AccuracyOnly"]):
        done = toolkit(repo_copy, scratch, *args, *RUN)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    # The audit's performance verdict depends on how busy the machine is: the chain must work either way.
    audit = toolkit(repo_copy, scratch, "--action=run_audit_harness", "--scenarios=offline", "--audit_test=TEST01",
                    *RUN)
    assert audit.returncode in (0, 1) and "TEST01 resnet50 Offline: " in audit.stdout, audit.stderr
    audited = audit.returncode == 0

    # Without --allow_test_runs nothing qualifies: every run was a test run.
    refused = toolkit(repo_copy, scratch, "--action=stage_results")
    assert refused.returncode == 1 and "test runs need --allow_test_runs" in refused.stderr

    # The first generate_conf_files names what detection cannot know; the submitter fills it in.
    first = toolkit(repo_copy, scratch, "--action=generate_conf_files", "--allow_test_runs")
    assert first.returncode == 1 and "The system description is incomplete" in first.stderr
    overrides_path = next((repo_copy / "systems").glob("*.overrides.json"))
    assert f"Set them in systems/{overrides_path.name}" in first.stderr
    overrides = json.loads(overrides_path.read_text())
    overrides_path.write_text(json.dumps({**{k: "N/A" for k in overrides}, "status": "available",
                                          "host_network_card_count": "1", "cooling": "air"}))
    outputs = {}
    for action in ("generate_conf_files", "stage_results", "stage_compliance", "truncate_results"):
        done = toolkit(repo_copy, scratch, f"--action={action}", "--allow_test_runs")
        assert done.returncode == 0, (action, done.stdout[-3000:], done.stderr)
        outputs[action] = done.stdout
    assert "TEST04: no compliance run (optional in the open division); run make run_audit_harness" in \
        outputs["stage_compliance"]
    assert ("Offline TEST01: staged from" in outputs["stage_compliance"]) == audited
    again = toolkit(repo_copy, scratch, "--action=truncate_results")
    assert "already truncated" in again.stdout

    staged = repo_copy / "build/submission-staging/open/TestOrg"
    system = json.loads(next((staged / "systems").glob("*.json")).read_text())
    assert system["division"] == "open" and system["submitter"] == "TestOrg"
    assert system["accelerators_per_node"] == "0"
    results = next((staged / "results").glob("*/resnet"))
    assert sorted(p.name for p in results.iterdir()) == ["MultiStream", "Offline", "SingleStream"]
    offline = results / "Offline"
    assert (offline / "TEST01/verify_accuracy.txt").exists() == audited   # TEST04 was not run: open does not need it
    assert "hash=" in (offline / "accuracy/accuracy.txt").read_text()
    assert json.loads((offline / "measurements.json").read_text())["weight_data_types"] == "fp32"

    for action in ("export_submission", "check_submission"):
        done = toolkit(repo_copy, scratch, f"--action={action}", "--allow_test_runs")
        assert done.returncode == 0, (action, done.stdout[-4000:], done.stderr)
    report = (repo_copy / "build/submission/open/TestOrg/results/submission_checker_log.txt").read_text()
    lines = [line for line in report.splitlines()[:-1] if line.strip()]
    assert lines and all(line.startswith("WARNING") for line in lines), report
    # An Offline query sized for 6 s at the config's rate ends sooner on a faster machine: INVALID by its length,
    # which a dry run only warns of (the checker warns of nothing else INVALID).
    toolkit_kinds = ("a short run", "effective_performance_sample_count is 20", "not the whole data set",
                     "below the Offline minimum", "result_validity is INVALID")
    assert all(any(kind in line for kind in toolkit_kinds) for line in lines), report
    assert "0 errors" in report.splitlines()[-1]
    assert (repo_copy / "build/submission/open/TestOrg/src/code/main.py").exists()

    # With a checkout of the inference repository, the real official checkers: their only findings are what short
    # runs on a 20-image data set bring (the toolkit's warnings say the same), and the dry run is not failed.
    if inference_dir() is not None:
        monkeypatch.setenv("MLPERF_INFERENCE_DIR", str(inference_dir()))
        official = toolkit(repo_copy, scratch, "--action=check_submission", "--allow_test_runs")
        assert official.returncode == 0, official.stdout[-3000:] + official.stderr
        for log in (repo_copy / "build/official_checker").glob("*.log"):
            errors = [line for line in log.read_text().splitlines() if " ERROR]" in line]
            unexpected = [line for line in errors if not any(kind in line for kind in SHORT_RUN_FINDINGS)]
            assert errors and not unexpected, "\n".join(unexpected)
        monkeypatch.delenv("MLPERF_INFERENCE_DIR")

    # An official checker that rejects the tree (as the real one rejects short runs): reported, and in a dry
    # run not held against it.
    checkout = tmp_path / "inference"
    (checkout / "tools/submission").mkdir(parents=True)
    (checkout / "tools/submission/submission_checker.py").write_text("import sys\nprint('too short')\nsys.exit(1)\n")
    monkeypatch.setenv("MLPERF_INFERENCE_DIR", str(checkout))
    official = toolkit(repo_copy, scratch, "--action=check_submission", "--allow_test_runs")
    assert official.returncode == 0 and "FAILED (exit status 1)" in official.stdout, official.stdout[-2000:]
    official_log = repo_copy / "build/official_checker/open-TestOrg-submission_checker.py.log"
    assert "too short" in official_log.read_text()
    monkeypatch.delenv("MLPERF_INFERENCE_DIR")   # pack_submission below runs without it

    # The last check passed as a dry run only (the official checker's failure was waived): so is the pack.
    refused = toolkit(repo_copy, scratch, "--action=pack_submission")
    assert refused.returncode == 1 and 'RUN_ARGS="--allow_test_runs"' in refused.stderr, refused.stderr
    packed = toolkit(repo_copy, scratch, "--action=pack_submission", "--allow_test_runs")
    assert packed.returncode == 0, packed.stderr
    tarball = repo_copy / "build/mlperf-inference-TestOrg-submission.tar.gz"
    assert (tarball.parent / (tarball.name + ".sha1")).exists()
    with tarfile.open(tarball) as archive:
        assert archive.getnames()[0] == "open"
