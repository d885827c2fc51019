"""What `make bench` measures of the serving client itself, each measurement in a process of its own so that the
CPU time it reads is the client's: the harness's client (client.ServingClient, one loop or worker processes) or the
bare single-loop client (baseline.py), streaming `/v1/completions` from a test server in processes of its own.

- CPU per token: the client's CPU seconds (its process and its workers', from /proc) over the window from the
  first request to the last completion, divided by the tokens streamed; the harness's client reports every request
  to a token stream that counts, as the system under test's does, less LoadGen's own calls (two per request). Its
  process's and each worker's seconds are kept apart (CPU per token per process).
- tokens per read: the tokens over the reads of the answers in the same window, counted (the harness's reader
  counts its reads, in worker processes too, the bare client's socket transports are counted).
- wake-ups: the times the client's processes went to sleep and woke (their voluntary context switches, from /proc)
  in the same window: an event loop sleeps in the kernel between reads, so tokens per wake-up say how many reads one
  turn of a loop serves.
- tokens/s: the same window's wall clock.
- first-token latency: with `rate`, one request at a time at random gaps of mean 1/rate (a fixed seed), from the
  request's submission to its first chunk.

`python -m code.common.serving.client_bench --url URL --model NAME --prompts FILE ...` prints one JSON line.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Sequence

TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class ClientRun:
    tokens: int = 0
    requests: int = 0
    seconds: float = 0.0
    cpu_s: float = 0.0
    first_token_s: list[float] = field(default_factory=list)
    reads: int = 0                       # 0: not counted
    wakeups: int = 0                     # 0: not counted
    process_cpu_s: list[float] = field(default_factory=list)   # this process's, then each worker's

    @property
    def tokens_per_read(self) -> float:
        return self.tokens / self.reads if self.reads else float("nan")

    @property
    def tokens_per_wakeup(self) -> float:
        return self.tokens / self.wakeups if self.wakeups else float("nan")

    @property
    def us_per_token(self) -> float:
        return self.cpu_s / self.tokens * 1e6 if self.tokens else float("nan")

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


def process_cpu_s(pid: int) -> float:
    """User and system CPU seconds of process `pid` so far (0 once it is gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS


def wakeups(pid: int | str = "self") -> int:
    """The voluntary context switches of every thread of process `pid` so far (0 once it is gone)."""
    total = 0
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for thread in threads:
        try:
            with open(f"/proc/{pid}/task/{thread}/status") as file:
                total += next(int(line.split()[1]) for line in file if line.startswith("voluntary_ctxt_switches"))
        except (OSError, StopIteration):
            pass
    return total


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class _Counter:
    """A token stream that counts tokens and times each request's first chunk."""

    def __init__(self, expected: int) -> None:
        self.expected, self.finished, self.tokens = expected, 0, 0
        self.sent: dict[int, float] = {}
        self.first_token_s: list[float] = []
        self.error: BaseException | None = None
        self.done = threading.Event()
        self.one = threading.Event()

    def chunk(self, request_id, tokens, final) -> None:
        if request_id in self.sent:
            self.first_token_s.append(time.perf_counter() - self.sent.pop(request_id))
        self.tokens += len(tokens)
        if final:
            self.finished += 1
            self.one.set()
            if self.finished == self.expected:
                self.done.set()

    def failed(self, error) -> None:
        self.error = error
        self.done.set()
        self.one.set()


def harness_run(url: str, model: str, prompts: Sequence[Sequence[int]], max_tokens: int, in_flight: int,
                workers: int = 1, answers: str = "streamed", rate: float = 0.0,
                read_hold_us: int | None = None) -> ClientRun:
    import numpy as np

    from ..generation import GenerationSettings, Request
    from .client import ClientSettings, ServingClient
    from .endpoints import parse_endpoints

    generation = GenerationSettings(max_new_tokens=max_tokens, eos_token_ids=(), min_new_tokens=max_tokens)
    hold = {} if read_hold_us is None else {"worker_read_hold_us": read_hold_us}
    client = ServingClient(parse_endpoints([url]), ClientSettings(
        model=model, in_flight=in_flight, metrics_interval_s=0, warmup_requests=2, answers=answers, workers=workers,
        **hold), generation, np.asarray(prompts[0], dtype=np.int64))
    requests = [Request(i, np.asarray(p, dtype=np.int64), generation) for i, p in enumerate(prompts)]
    stream = _Counter(len(requests))
    client.open(stream)
    try:
        pids = client.worker_pids()
        cpu = [own_cpu_s(), *(process_cpu_s(pid) for pid in pids)]
        woke = sum(wakeups(pid) for pid in ("self", *pids))
        reads = client.reads()
        start = time.perf_counter()
        if rate > 0:
            gaps = random.Random(0)
            for request in requests:
                stream.one.clear()
                stream.sent[request.id] = time.perf_counter()
                client.submit([request])
                stream.one.wait(600)
                if stream.error is not None:
                    break
                time.sleep(gaps.expovariate(rate))
        else:
            client.submit(requests)
        stream.done.wait(3600)
        seconds = time.perf_counter() - start
        cpu = [end - begin for begin, end in zip(cpu, [own_cpu_s(), *(process_cpu_s(pid) for pid in pids)])]
        woke = sum(wakeups(pid) for pid in ("self", *pids)) - woke
        reads = client.reads() - reads
    finally:
        client.close()
    if stream.error is not None:
        raise stream.error
    return ClientRun(stream.tokens, stream.finished, seconds, sum(cpu), stream.first_token_s, reads, woke, cpu)


def bare_run(url: str, model: str, prompts: Sequence[Sequence[int]], max_tokens: int, in_flight: int) -> ClientRun:
    from .baseline import bare_run as run

    cpu, woke = own_cpu_s(), wakeups()
    result = run(url, model, prompts, max_tokens, in_flight)
    cpu, woke = own_cpu_s() - cpu, wakeups() - woke
    return ClientRun(result.tokens, result.requests, result.seconds, cpu, result.first_token_s, result.reads, woke,
                     [cpu])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m code.common.serving.client_bench")
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--prompts", required=True, help="a JSON file: a list of token id lists")
    parser.add_argument("--max_tokens", type=int, default=128)
    parser.add_argument("--in_flight", type=int, default=64)
    parser.add_argument("--client", choices=("harness", "bare"), default="harness")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--answers", choices=("streamed", "whole"), default="streamed")
    parser.add_argument("--rate", type=float, default=0.0)
    parser.add_argument("--requests", type=int, default=0, help="the first so many prompts (0: all)")
    parser.add_argument("--read_hold_us", type=int, default=None, help="each worker's read hold (default: the client's)")
    ns = parser.parse_args(argv)
    with open(ns.prompts) as file:
        prompts = json.load(file)
    if ns.requests:
        prompts = prompts[:ns.requests]
    if ns.client == "bare":
        run = bare_run(ns.url, ns.model, prompts, ns.max_tokens, ns.in_flight)
    else:
        run = harness_run(ns.url, ns.model, prompts, ns.max_tokens, ns.in_flight, ns.workers, ns.answers, ns.rate,
                          ns.read_hold_us)
    print(json.dumps({**asdict(run), "us_per_token": run.us_per_token, "tokens_per_read": run.tokens_per_read,
                      "tokens_per_wakeup": run.tokens_per_wakeup,
                      "tokens_per_second": run.tokens_per_second}), flush=True)


if __name__ == "__main__":
    main()
