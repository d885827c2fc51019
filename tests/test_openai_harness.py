"""The openai harness end to end: the toolkit's own commands, real LoadGen in a child process per test, the real
preprocessed CNN/DailyMail prompts of the substitute model, and the toolkit's streaming test servers as the serving
engines (separate processes on the loopback, so that one can be killed in the middle of a run). What the real vLLM
engine adds is tested where its environment is (test_vllm_server.py)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from code.common.paths import Paths

from .conftest import REPO
from .test_llm_e2e import llm_scratch, records, repo_copy, toolkit  # noqa: F401,F811  (fixtures)

SERVED = "HuggingFaceTB/SmolLM2-135M-Instruct"
SUBSTITUTE = ["--benchmarks=llama3.1-8b", "--harness_type=openai", "--model=smollm2-135m-instruct",
              "--dataset=cnndm_sample", "--total_sample_count=12", "--max_output_tokens=16"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def streaming_servers(count: int, *flags: str, model: str = SERVED):
    """`count` streaming test servers, each a process of its own; their URLs."""
    processes, urls = [], []
    try:
        for _ in range(count):
            port = free_port()
            process = subprocess.Popen([sys.executable, "-m", "code.common.serving.fake_server", f"--port={port}",
                                        f"--model={model}", "--eos_every=5", *flags], cwd=REPO,
                                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            processes.append(process)
            line = process.stdout.readline()
            assert line.startswith("listening on"), line
            urls.append(line.split()[-1])
        yield processes, urls
    finally:
        for process in processes:
            process.kill()
            process.wait()


def own_answers(scratch: Path, entries: list) -> list[bool]:
    """Whether each of the accuracy log's `entries` begins with the fake server's answer to its own sample's
    prompt (the answers depend on the whole prompt: a log with two samples' answers swapped fails). Answers the
    server ends on EOS (its eos_every) are left out: they may say nothing of their prompt."""
    import numpy as np

    from code.common.benchmark_api import get_benchmark
    from code.common.serving.fake_server import FIRST_ID, prompt_key

    samples = get_benchmark("llama3.1-8b").preprocessed("smollm2-135m-instruct", "cnndm_sample",
                                                        Paths.create(scratch=scratch))
    own = []
    for entry in entries:
        key = prompt_key(np.asarray(samples.load(entry["qsl_idx"])).tolist())
        if key % 5:
            own.append(int(np.frombuffer(bytes.fromhex(entry["data"]), dtype=np.int32)[0]) == FIRST_ID + key % 1000)
    return own


def accuracy_entries(log_dir: Path) -> list:
    record = records(log_dir)[("Offline", "AccuracyOnly")]
    entries = json.loads((Path(record.log_dir) / "mlperf_log_accuracy.json").read_text())
    return sorted((e["qsl_idx"], e["data"]) for e in entries)


def test_runs_spread_over_servers_are_recorded_and_give_the_one_server_accuracy_log(llm_scratch, repo_copy):
    with streaming_servers(2) as (_, urls):
        two = repo_copy / "build" / "logs" / "two"
        done = toolkit(repo_copy, llm_scratch, "--action=run_harness", *SUBSTITUTE, "--scenarios=offline,server",
                       f"--endpoints={','.join(urls)}", "--test_run", "--offline_expected_qps=40",
                       "--server_target_qps=20", f"--log_dir={two}")
        assert done.returncode == 0, done.stdout + done.stderr
        done = toolkit(repo_copy, llm_scratch, "--action=run_harness", *SUBSTITUTE, "--scenarios=offline",
                       "--test_mode=AccuracyOnly", f"--endpoints={','.join(urls)}", f"--log_dir={two}")
        assert done.returncode == 0, done.stdout + done.stderr
        one = repo_copy / "build" / "logs" / "one"
        done = toolkit(repo_copy, llm_scratch, "--action=run_harness", *SUBSTITUTE, "--scenarios=offline",
                       "--test_mode=AccuracyOnly", f"--endpoints={urls[0]}", f"--log_dir={one}")
        assert done.returncode == 0, done.stdout + done.stderr
        audit = toolkit(repo_copy, llm_scratch, "--action=run_audit_harness", *SUBSTITUTE, "--scenarios=offline",
                        f"--endpoints={','.join(urls)}", "--offline_expected_qps=40", f"--log_dir={two}")
        assert audit.returncode == 0 and "TEST06 llama3.1-8b Offline: PASS" in audit.stdout, audit.stdout + audit.stderr
    found = records(two)
    offline, server, accuracy = (found[("Offline", "PerformanceOnly")], found[("Server", "PerformanceOnly")],
                                 found[("Offline", "AccuracyOnly")])
    assert offline.completed and offline.metric.unit == "tokens/s" and offline.engine.path == ""
    assert offline.config.workload_setting == "openai_k_99_MaxP"
    for record in (offline, accuracy):
        assert [f"http://{e.address}" for e in record.endpoints] == urls and record.nodes == 1
        assert all(e.requests > 0 and e.model == SERVED and e.extras["token_ids"] == "server"
                   and e.extras["serving_engine"] == "toolkit-test-server" for e in record.endpoints)
    assert sum(e.requests for e in accuracy.endpoints) == 12
    assert set(server.token_latencies) >= {"ttft_p99_ms", "tpot_p99_ms"}
    assert accuracy_entries(two) == accuracy_entries(one)


def test_a_server_killed_in_the_middle_of_a_run_fails_it_naming_the_endpoint(llm_scratch, repo_copy):
    log_dir = repo_copy / "build" / "logs" / "killed"
    with streaming_servers(1) as (_, good), streaming_servers(1, "--chunk_delay_s=0.05") as (victims, slow):
        longer = [flag for flag in SUBSTITUTE if not flag.startswith("--max_output_tokens")]
        run = subprocess.Popen([sys.executable, "-m", "code.main", "--action=run_harness", *longer,
                                "--scenarios=offline", "--test_mode=AccuracyOnly", "--max_output_tokens=64",
                                f"--endpoints={good[0]},{slow[0]}", f"--scratch_path={llm_scratch}",
                                f"--log_dir={log_dir}"], cwd=repo_copy, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        while not list(log_dir.rglob("mlperf_log_detail.txt")) and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1.0)
        os.kill(victims[0].pid, signal.SIGKILL)
        output, _ = run.communicate(timeout=300)
    assert run.returncode == 1, output
    record = records(log_dir)[("Offline", "AccuracyOnly")]
    assert record.status == "failed" and slow[0] in record.error and "did it die?" in record.error


def test_a_server_of_another_model_is_refused_before_the_test(llm_scratch, repo_copy):
    log_dir = repo_copy / "build" / "logs" / "other-model"
    with streaming_servers(1, model="Qwen/Qwen2.5-0.5B-Instruct") as (_, urls):
        done = toolkit(repo_copy, llm_scratch, "--action=run_harness", *SUBSTITUTE, "--scenarios=offline",
                       "--test_mode=AccuracyOnly", f"--endpoints={urls[0]}", f"--log_dir={log_dir}")
    assert done.returncode == 1
    assert f"serves Qwen/Qwen2.5-0.5B-Instruct, not {SERVED}" in done.stdout + done.stderr
    assert not list(log_dir.rglob("mlperf_log_accuracy.json"))


def test_endpoints_without_the_serving_harness_are_refused(llm_scratch, repo_copy):
    done = toolkit(repo_copy, llm_scratch, "--action=run_harness", "--benchmarks=llama3.1-8b",
                   "--endpoints=http://node1:8000")
    assert done.returncode == 2 and "--harness_type=openai" in done.stderr + done.stdout
    done = toolkit(repo_copy, llm_scratch, "--action=run_harness", "--benchmarks=llama3.1-8b",
                   "--harness_type=openai", "--endpoints=http://node1:8000", "--triton_endpoints=http://node2:8000")
    assert done.returncode == 2, done.stdout + done.stderr



@pytest.mark.slow      # seven runs of the toolkit: about two minutes on two shared cores
def test_whole_answers_and_worker_processes_give_the_one_loop_accuracy_log_and_pass_test06(llm_scratch, repo_copy):
    logs = {}
    with streaming_servers(2) as (_, urls):
        for answers, workers in (("streamed", 1), ("whole", 1), ("streamed", 2), ("whole", 2)):
            logs[answers, workers] = repo_copy / "build" / "logs" / f"{answers}-{workers}"
            done = toolkit(repo_copy, llm_scratch, "--action=run_harness", *SUBSTITUTE, "--scenarios=offline",
                           "--test_mode=AccuracyOnly", f"--openai_offline_answers={answers}",
                           f"--openai_workers={workers}", f"--endpoints={','.join(urls)}",
                           f"--log_dir={logs[answers, workers]}")
            assert done.returncode == 0, done.stdout + done.stderr
        audited = logs["whole", 2]
        done = toolkit(repo_copy, llm_scratch, "--action=run_harness", *SUBSTITUTE, "--scenarios=offline",
                       "--openai_workers=2", f"--endpoints={','.join(urls)}", "--test_run",
                       "--offline_expected_qps=40", f"--log_dir={audited}")
        assert done.returncode == 0, done.stdout + done.stderr
        audit = toolkit(repo_copy, llm_scratch, "--action=run_audit_harness", *SUBSTITUTE, "--scenarios=offline",
                        "--openai_workers=2", f"--endpoints={','.join(urls)}", "--offline_expected_qps=40",
                        f"--log_dir={audited}")
        assert audit.returncode == 0 and "TEST06 llama3.1-8b Offline: PASS" in audit.stdout, audit.stdout + audit.stderr
    for (answers, workers), log_dir in logs.items():
        record = records(log_dir)[("Offline", "AccuracyOnly")]
        assert {e.transport for e in record.endpoints} == {"HTTP, streamed /v1/completions" if answers == "streamed"
                                                            else "HTTP, whole answers /v1/completions"}
        assert {e.extras["workers"] for e in record.endpoints} == {workers}
    baseline = sorted(json.loads((Path(records(logs["streamed", 1])[("Offline", "AccuracyOnly")].log_dir)
                                  / "mlperf_log_accuracy.json").read_text()), key=lambda e: e["qsl_idx"])
    own = own_answers(llm_scratch, baseline)
    assert all(own) and len(own) >= len(baseline) // 2      # each sample its own answer, most of them telling
    for log_dir in logs.values():
        log = Path(records(log_dir)[("Offline", "AccuracyOnly")].log_dir) / "mlperf_log_accuracy.json"
        assert sorted(json.loads(log.read_text()), key=lambda e: e["qsl_idx"]) == baseline


def test_a_worker_killed_in_the_middle_of_a_run_fails_it_naming_the_worker_and_leaves_no_process(llm_scratch,
                                                                                                  repo_copy):
    log_dir = repo_copy / "build" / "logs" / "worker-killed"
    with streaming_servers(1, "--chunk_delay_s=0.05") as (_, slow):
        longer = [flag for flag in SUBSTITUTE if not flag.startswith("--max_output_tokens")]
        run = subprocess.Popen([sys.executable, "-m", "code.main", "--action=run_harness", *longer,
                                "--scenarios=offline", "--test_mode=AccuracyOnly", "--max_output_tokens=64",
                                "--openai_workers=2", "--openai_offline_answers=streamed", f"--endpoints={slow[0]}",
                                f"--scratch_path={llm_scratch}", f"--log_dir={log_dir}"], cwd=repo_copy,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 120
        workers: list[int] = []
        while not workers and time.monotonic() < deadline:
            time.sleep(0.2)
            found = subprocess.run(["pgrep", "-f", "code.common.serving.worker_process"], capture_output=True,
                                   text=True)
            workers = [int(pid) for pid in found.stdout.split() if _descends_from(int(pid), run.pid)]
        assert workers, "no worker process started"
        time.sleep(1.0)
        os.kill(workers[0], signal.SIGKILL)
        output, _ = run.communicate(timeout=300)
    assert run.returncode == 1, output
    record = records(log_dir)[("Offline", "AccuracyOnly")]
    assert record.status == "failed" and f"(pid {workers[0]})" in record.error
    assert "killed by SIGKILL" in record.error, record.error
    assert not [pid for pid in workers if Path(f"/proc/{pid}").exists()
                and (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z")]


def _descends_from(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            return False
    return False
