"""The serving client's worker processes on the toolkit's streaming test servers: the same outputs as one event
loop, the scheduler's limits kept, and the faults (an endpoint that breaks, a worker killed in the middle of the
run) failing the run with the endpoint or the worker named, never hanging, leaving no worker process."""
from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from code.common.serving.client import TEXT_IDS, ClientSettings
from code.common.serving.fake_server import ServerSettings, StreamingServer, output_ids
from code.common.serving.read_hold import DEFAULT_WINDOW_US
from code.common.serving.workers import default_workers

from .test_serving import EOS, WAIT_S, Recorder, expected, prompts, run_client


def worker_pids() -> list[int]:
    """This test process's worker processes still there (zombies aside)."""
    found = subprocess.run(["pgrep", "-f", "code.common.serving.worker_process"], capture_output=True, text=True)
    pids = []
    for pid in map(int, found.stdout.split()):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[0] != "Z" and int(fields[1]) == os.getpid():
            pids.append(pid)
    return pids


def test_workers_give_the_one_loop_outputs_within_the_limits_and_the_record_says_how():
    with StreamingServer(ServerSettings(model="m")) as a, StreamingServer(ServerSettings(model="m")) as b:
        requests = prompts(40)
        client, stream = run_client([a.url, b.url], requests,
                                    ClientSettings(model="m", in_flight=3, metrics_interval_s=0.2, workers=3))
    assert stream.error is None
    assert stream.outputs() == {r.id: expected(r) for r in requests}
    records = client.records()
    assert sum(r["requests"] for r in records) == 40 and all(r["extras"]["most_in_flight"] <= 3 for r in records)
    assert sum(r["extras"]["output_tokens"] for r in records) == sum(len(expected(r)) for r in requests)
    assert sum(r["extras"]["metrics"]["requests_succeeded"] for r in records) == 40   # workers' warm-ups before
    assert all(r["extras"]["workers"] == 3 and r["extras"]["worker_channel"].startswith("unix socket pair")
               and r["extras"]["worker_read_hold_us"] == DEFAULT_WINDOW_US > 0 for r in records)   # workers hold
    first_calls = {}
    for request_id, tokens, final in stream.calls:
        first_calls.setdefault(request_id, final)
    assert not any(first_calls.values())          # the first token before the completion, as with one loop
    assert worker_pids() == []


def test_servers_whose_text_is_tokenized_are_read_by_workers_with_the_tokenizer_or_on_one_loop_without():
    from code.common.serving.fake_server import encode_test_text

    with StreamingServer(ServerSettings(model="m", fault="no_token_ids", eos_every=2)) as server:
        requests = prompts(12)
        for encode, workers in ((encode_test_text, 2), (lambda text: encode_test_text(text), 1)):   # a closure
            client, stream = run_client([server.url], requests, ClientSettings(model="m", metrics_interval_s=0,
                                                                               workers=2), encode=encode)
            want = {r.id: output_ids(r.prompt.tolist(), 8, EOS, 2) for r in requests}
            assert stream.error is None and stream.outputs() == want
            record = client.records()[0]
            assert record["extras"]["workers"] == workers and record["extras"]["token_ids"] == TEXT_IDS
            assert record["extras"]["output_tokens"] == sum(len(v) for v in want.values())


def test_an_endpoint_that_breaks_under_a_worker_fails_the_run_naming_it():
    with StreamingServer(ServerSettings(model="m", fault="break", fault_after=3)) as server:
        requests = prompts(8)
        _, stream = run_client([server.url], requests, ClientSettings(model="m", metrics_interval_s=0, workers=2,
                                                                      warmup_requests=0))
    assert stream.error is not None and server.url in str(stream.error) and "did it die?" in str(stream.error)
    assert worker_pids() == []


def test_a_worker_killed_in_the_middle_of_the_run_fails_it_naming_the_worker():
    import numpy as np

    from code.common.serving.client import ServingClient
    from code.common.serving.endpoints import parse_endpoints

    from .test_serving import GENERATION

    with StreamingServer(ServerSettings(model="m", chunk_delay_s=0.2)) as server:
        client = ServingClient(parse_endpoints([server.url]), ClientSettings(model="m", metrics_interval_s=0,
                                                                             workers=2, warmup_requests=0),
                               GENERATION, np.arange(1, 6))
        requests = prompts(8)
        stream = Recorder(len(requests))
        client.open(stream)
        try:
            client.submit(requests)
            deadline = time.monotonic() + WAIT_S
            while not stream.calls and time.monotonic() < deadline:
                time.sleep(0.05)
            victim = client.worker_pids()[1]
            os.kill(victim, signal.SIGKILL)
            assert stream.done.wait(WAIT_S), "the client neither finished nor failed"
        finally:
            client.close()
    message = str(stream.error)
    assert f"openai client worker 1 (pid {victim})" in message and "killed by SIGKILL" in message, message
    assert worker_pids() == []


@pytest.mark.parametrize("cores, endpoints, workers", [(2, 1, 1), (3, 1, 1), (16, 1, 4), (16, 8, 14), (64, 8, 32)])
def test_the_default_number_of_workers_leaves_two_cores_and_takes_four_per_endpoint_at_most(cores, endpoints,
                                                                                            workers):
    assert default_workers(endpoints, cores) == workers


@pytest.mark.parametrize("workers, answers, rate", [(1, "streamed", 0.0), (2, "streamed", 0.0), (1, "whole", 0.0),
                                                    (2, "streamed", 50.0)])
def test_the_client_bench_counts_every_token_of_the_harness_client(workers, answers, rate):
    from code.common.serving.client_bench import harness_run

    prompts = [[i + 1] * 5 for i in range(12)]
    with StreamingServer(ServerSettings(model="m", writes="answer")) as server:
        run = harness_run(server.url, "m", prompts, 16, 4, workers=workers, answers=answers, rate=rate)
    assert run.tokens == 12 * 16 and run.requests == 12 and run.cpu_s >= 0 and run.seconds > 0
    assert len(run.first_token_s) == (12 if rate else 0)
    assert len(run.process_cpu_s) == (1 if workers == 1 else 1 + workers) and sum(run.process_cpu_s) == run.cpu_s
    assert 0 < run.reads <= 12 * 16 + 24           # counted by one loop and by workers (their frames say)
    assert run.wakeups > 0                          # the process waits for the answers: it sleeps and wakes
    assert worker_pids() == []


def test_the_bare_client_counts_its_reads():
    from code.common.serving.client_bench import bare_run

    with StreamingServer(ServerSettings(model="m", chunk_delay_s=0.01)) as server:    # one chunk per read, mostly
        run = bare_run(server.url, "m", [[i + 1] * 5 for i in range(4)], 8, 4)
    assert run.tokens == 4 * 8 and 4 * 4 <= run.reads <= 4 * (8 + 3) and run.process_cpu_s == [run.cpu_s]



def test_requests_cancelled_in_a_worker_free_their_slots_and_report_nothing_more():
    import numpy as np

    from code.common.serving.client import ServingClient
    from code.common.serving.endpoints import parse_endpoints

    from .test_serving import GENERATION

    with StreamingServer(ServerSettings(model="m", chunk_delay_s=0.1)) as server:
        client = ServingClient(parse_endpoints([server.url]), ClientSettings(model="m", metrics_interval_s=0,
                                                                             workers=2, warmup_requests=0),
                               GENERATION, np.arange(1, 6))
        requests = prompts(4)
        stream = Recorder(2)
        client.open(stream)
        try:
            client.submit(requests)
            client.cancel([0, 1])
            assert stream.done.wait(WAIT_S), "the client neither finished nor failed"
            time.sleep(0.3)
            loads = client.scheduler.requests_in_flight()
        finally:
            client.close()
    assert stream.error is None and loads == [0]
    assert {request_id for request_id, _, final in stream.calls if final} == {2, 3}
    assert stream.outputs()[2] == expected(requests[2]) and stream.outputs()[3] == expected(requests[3])
    assert worker_pids() == []


def test_workers_end_when_the_loadgen_process_is_killed():
    import sys

    from .conftest import REPO

    with StreamingServer(ServerSettings(model="m", chunk_delay_s=0.5)) as server:
        script = (
            "import sys, time, numpy as np\n"
            "from code.common.generation import GenerationSettings, Request\n"
            "from code.common.serving.client import ClientSettings, ServingClient\n"
            "from code.common.serving.endpoints import parse_endpoints\n"
            "class Quiet:\n"
            "    def chunk(self, *a): pass\n"
            "    def failed(self, e): pass\n"
            "g = GenerationSettings(max_new_tokens=64, eos_token_ids=())\n"
            f"c = ServingClient(parse_endpoints(['{server.url}']), ClientSettings(model='m', metrics_interval_s=0, "
            "workers=2, warmup_requests=0), g, np.arange(1, 6))\n"
            "c.open(Quiet())\n"
            "c.submit([Request(i, np.arange(1, 4), g) for i in range(4)])\n"
            "print(' '.join(str(w.process.pid) for w in c._workers), flush=True)\n"
            "time.sleep(600)\n")
        loadgen = subprocess.Popen([sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True)
        try:
            workers = [int(pid) for pid in loadgen.stdout.readline().split()]
            assert len(workers) == 2
            loadgen.kill()
            loadgen.wait(timeout=10)
            deadline = time.monotonic() + WAIT_S
            while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
                time.sleep(0.1)
            assert not any(_alive(pid) for pid in workers), "a worker outlived the process that started it"
        finally:
            if loadgen.poll() is None:
                loadgen.kill()
                loadgen.wait()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("cores, count, pinned", [(range(2), 1, []), (range(4), 2, [2, 3]), (range(4), 3, []),
                                                  (range(32), 30, list(range(2, 32)))])
def test_workers_are_pinned_past_the_first_two_cores_only_where_each_has_one(monkeypatch, cores, count, pinned):
    from code.common.serving import workers

    monkeypatch.setattr(workers.os, "sched_getaffinity", lambda pid: set(cores))
    assert workers.worker_cores(count) == pinned


def test_requests_reach_a_worker_whole_with_each_settings_sent_once():
    import dataclasses
    import pickle

    import numpy as np

    from code.common.generation import Request
    from code.common.serving.workers import pack_requests, unpack_requests

    from .test_serving import GENERATION

    longer = dataclasses.replace(GENERATION, max_new_tokens=GENERATION.max_new_tokens + 1)
    chat = {"messages": [{"role": "user", "content": "hi"}]}          # anything not token ids travels as it is
    first = [(0, Request(7, np.arange(5, dtype=np.int32), GENERATION)), (1, Request(8, chat, longer))]
    second = [(1, Request(9, np.array([3, 1, 4], dtype=np.int64), dataclasses.replace(GENERATION)))]
    sent: dict = {}
    kept: list = []
    frames = [pickle.loads(pickle.dumps(pack_requests(sent, items))) for items in (first, second)]
    assert [len(new) for _, new in frames] == [2, 0]        # an equal settings is not sent again
    got = [unpack_requests(kept, *frame) for frame in frames]
    for items, arrived in zip((first, second), got):
        for (number, request), (number_there, there) in zip(items, arrived):
            assert (number_there, there.id, there.settings) == (number, request.id, request.settings)
            if isinstance(request.prompt, np.ndarray):
                assert there.prompt.dtype == request.prompt.dtype and there.prompt.tolist() == request.prompt.tolist()
            else:
                assert there.prompt == request.prompt
