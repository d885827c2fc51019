"""The LLM benchmark end to end: the real SmolLM2-135M-Instruct (from its PyPI wheel), real CNN/DailyMail articles,
real LoadGen with token latencies, one child process per test, in a copy of the repository (engines, logs and
compliance logs stay there).

Runs are capped hard (4 articles, prompts of at most 128 tokens, 8 output tokens) so that the whole file takes
about a minute on 2 cores; what is asserted is what the toolkit writes and reads, never a speed.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from code.common.records.metadata import find_metadata, read_metadata
from code.common.paths import Paths
from code.common.rules import get_round
from code.llm.substitute import gguf_path
from code.llm.tokenizer import TextTokenizer
from code.main import main

from .conftest import REPO, SHARED, SMOLLM2, seed_downloads
from .official_tools import evaluation_function, inference_dir, nltk_with_punkt_tab

SUBSTITUTE = ["--model=smollm2-135m-instruct", "--dataset=cnndm_sample"]
CAPS = ["--total_sample_count=4", "--max_output_tokens=8", "--max_input_tokens=128"]


@pytest.fixture(scope="module")
def llm_scratch(tmp_path_factory) -> Path:
    if not (SHARED / "data" / "cnndm_sample").is_dir():
        pytest.skip(f"{SHARED / 'data' / 'cnndm_sample'} is absent: the LLM end-to-end tests need its articles")
    root = tmp_path_factory.mktemp("llm")
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    seed_downloads(paths, SMOLLM2)
    for action in ("download_model", "download_data", "preprocess_data"):
        assert main([f"--action={action}", f"--scratch_path={paths.scratch}", "--benchmarks=llama3.1-8b",
                     "--scenarios=offline", *SUBSTITUTE], log=lambda _: None) == 0, action
    return paths.scratch


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("llm-repo") / "repo"
    for name in ("code", "configs", "scripts", "requirements"):
        shutil.copytree(REPO / name, root / name, ignore=shutil.ignore_patterns("__pycache__"))
    (root.parent / "shared").symlink_to(SHARED)   # the development data beside the repository, as in a checkout
    return root


def toolkit(repo: Path, scratch: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "code.main", *args, f"--scratch_path={scratch}"], cwd=repo,
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=600, check=False)


def records(log_dir: Path) -> dict:
    return {(r.scenario.value, r.test_mode.value): r for r in map(read_metadata, find_metadata(log_dir))}


def test_make_run_then_test06(llm_scratch, repo_copy, tmp_path):
    """make run's path for llama3.1-8b (Offline performance then accuracy, the substitute), then TEST06 on it."""
    log_dir = repo_copy / "build" / "logs" / "llm-run"
    done = toolkit(repo_copy, llm_scratch, "--action=run", "--benchmarks=llama3.1-8b", *CAPS, f"--log_dir={log_dir}")
    assert done.returncode == 0, done.stdout + done.stderr
    found = records(log_dir)
    performance, accuracy = found[("Offline", "PerformanceOnly")], found[("Offline", "AccuracyOnly")]
    assert performance.completed and performance.metric.unit == "tokens/s" and performance.metric.value > 0
    assert performance.config.fields["max_output_tokens"] == 8 and performance.config.fields["total_sample_count"] == 4
    user_conf = (Path(performance.log_dir) / "user.conf").read_text()
    assert "# generation caps of this run: max_input_tokens = 128, max_output_tokens = 8, total_sample_count = 4" \
        in user_conf and "llama3_1-8b.Offline.target_qps" in user_conf
    assert accuracy.completed and accuracy.accuracy.samples == 4
    assert set(accuracy.accuracy.metrics) >= {"ROUGE1", "ROUGE2", "ROUGEL", "ROUGELSUM", "GEN_LEN"}
    text = (Path(accuracy.log_dir) / "accuracy.txt").read_text()
    for metric in get_round().benchmark("llama3.1-8b").accuracy_metrics:   # the checkers read every figure
        assert any(re.match(metric.pattern, line) for line in text.splitlines()), metric.name
    entries = json.loads((Path(accuracy.log_dir) / "mlperf_log_accuracy.json").read_text())
    assert sorted(e["qsl_idx"] for e in entries) == [0, 1, 2, 3]
    assert all(0 < int(e["token_count"]) <= 8 and len(e["data"]) == 8 * int(e["token_count"]) for e in entries)
    assert "ROUGE1" in done.stdout and "tokens/s" in done.stdout
    checkout = inference_dir()
    if checkout is not None:   # evaluation.py's own postprocessing of what the model generated: the same GEN_LEN
        tokenizer = TextTokenizer.from_gguf(gguf_path(Paths.create(scratch=llm_scratch), "llama3.1-8b"))
        predictions = [tokenizer.decode(np.frombuffer(bytes.fromhex(e["data"]), np.int32)) for e in entries]
        with nltk_with_punkt_tab(tmp_path / "nltk_data") as nltk:
            preds, _ = evaluation_function(checkout, "postprocess_text", nltk=nltk)(predictions, predictions)
        assert accuracy.accuracy.metrics["GEN_LEN"] == sum(len(text) for text in preds)

    audit = toolkit(repo_copy, llm_scratch, "--action=run_audit_harness", "--benchmarks=llama3.1-8b", *CAPS,
                    f"--log_dir={log_dir}")
    assert audit.returncode == 0, audit.stdout + audit.stderr
    folder = next((repo_copy / "build" / "compliance_logs").glob("TEST06/*/llama3.1-8b/Offline"))
    verdict = (folder / "verify_accuracy.txt").read_text()
    assert verdict.splitlines() == ["First token check pass: Skipped", "EOS check pass: True",
                                    "Sample length check pass: True", "TEST06 verification complete"]
    assert not list(repo_copy.rglob("audit.config"))


def test_server_and_interactive_report_token_latencies_against_their_bounds(llm_scratch, repo_copy):
    log_dir = repo_copy / "build" / "logs" / "llm-server"
    args = ["--benchmarks=llama3.1-8b", "--scenarios=server,interactive", *SUBSTITUTE, *CAPS, "--test_run",
            "--server_target_qps=2", "--min_duration=1000", f"--log_dir={log_dir}"]
    assert toolkit(repo_copy, llm_scratch, "--action=generate_engines", *args).returncode == 0
    done = toolkit(repo_copy, llm_scratch, "--action=run_harness", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    found = records(log_dir)
    bounds = {"Server": (2000, 100), "Interactive": (500, 30)}   # mlperf.conf's llama3_1-8b(-interactive) bounds
    for scenario, (ttft, tpot) in bounds.items():
        record = found[(scenario, "PerformanceOnly")]
        assert record.completed and record.metric.unit == "tokens/s"
        latencies = record.token_latencies
        assert (latencies["ttft_bound_ms"], latencies["tpot_bound_ms"]) == (ttft, tpot)
        assert latencies["ttft_p99_ms"] > 0 and latencies["tpot_p99_ms"] > 0
        assert record.valid is False   # 4 queries: early stopping needs at least 459, and the verdict says so
        assert any(reason.startswith("Early stopping could not bound") for reason in record.reasons)
    interactive = (Path(found[("Interactive", "PerformanceOnly")].log_dir) / "user.conf").read_text()
    assert "llama3_1-8b-interactive.Server.target_qps = 2" in interactive
    assert "TTFT p99" in done.stdout and "(bound 500 ms)" in done.stdout
