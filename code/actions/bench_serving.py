"""bench for the openai harness (`make bench RUN_ARGS="--benchmarks=llama3.1-8b --harness_type=openai"`), each figure
against a baseline measured in the same run, on the benchmark's own prompts:

(n) the harness's ceiling: Offline tokens/s and requests/s through LoadGen, the system under test and its client,
    with the toolkit's streaming test server answering as fast as it can (one token per chunk), against the bare
    client (serving/baseline.py: one asyncio loop, same requests, same requests in flight, no LoadGen);
(o) the first-token latency the harness adds: LoadGen's Server TTFT at p50 and p99, at a load that keeps one
    request in flight at a time, against the bare client's time to the first token of one request at a time; the
    figure is bare / harness, and the added milliseconds are printed beside it (goal: under 1 ms at p50);
(m) where the vLLM environment is made (make build RUN_ARGS=--harness_type=openai): Offline tokens/s through the
    harness against vLLM's own benchmark client (`vllm bench serve`) on one local vLLM server, same prompts and
    requests in flight (bench_vllm.py).

The client's own figures (serving/client_bench.py: each measurement a process of its own, 128 output tokens per
request, the test server in processes of its own, either coalesced (an answer's chunks in one write: many per read)
or paced (one event per sequence at decode steps 20 ms apart that every sequence shares, as a real engine's: one
chunk per read)); every CPU
figure says the tokens per read it was measured at, as counted by the client, not as assumed:
(p) the client's CPU microseconds per streamed token, the harness's client against the bare single-loop client,
    both ways, the best of runs in turns (bare, harness, harness, bare), and against the goals (8 coalesced,
    10 at one chunk per read); at one chunk per read also against vLLM's own benchmark client (`vllm bench serve`,
    measured the same way: bench_vllm_client.py), where vLLM's environment is made;
(q) at one chunk per read, the CPU per token of N worker processes (theirs and the LoadGen process's) against one
    loop's (goal: within 10 %), each process carrying one loop's load (N x the requests in flight: workers are
    there to take what one loop cannot), the best of runs in turns (one loop, workers, one loop, workers), per
    process, with tokens per read and per wake-up, and as tokens/s per busy core; the same N workers at one loop's
    load in all (each at 1/N of its rate) are logged beside it: on a busy machine a process that reads fewer events
    per second pays more for each (its caches are cold when it wakes), which is no cost of the workers (one loop at
    1/N of its load pays the same). Streamed tokens/s of N workers against one loop on the coalesced server only
    where N + the server's processes' cores are free (goal 0.8 x N);
(r) the first-token latency that worker processes add at p50 and p99, one request at a time as (o), against one
    loop measured in the same run (goals: under 1 ms at p50, under 3 ms at p99);
and the CPU microseconds per token of Offline's whole (non-streamed) answers (goal 2). From the CPU per token at one
chunk per read (Server and streamed runs) and of whole answers (Offline), the cores the client needs for 120 k, 1 M
and 2.1 M tokens/s are printed.
"""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from ..common.constants import Scenario
from ..common.errors import EXIT_FAILURE, UserError
from ..common.records.loadgen_log import read_detail
from ..common.tuning.ratios import Figure, in_turns
from ..common.tuning.search import round_sig
from .serving_prompts import prompts_of, served_name

GOALS = {"m": 0.97, "n": 0.8, "o_p50_added_ms": 1.0, "p_coalesced_us": 8.0, "p_one_per_read_us": 10.0,
         "q_per_worker": 0.8, "q_cpu_added": 0.1, "r_p50_added_ms": 1.0, "r_p99_added_ms": 3.0,
         "whole_us": 2.0}
CLIENT_FIELDS = {"max_input_tokens": 512, "max_output_tokens": 128, "total_sample_count": 250}
CLIENT_REQUESTS = 600          # per measurement: 76,800 streamed tokens
CLIENT_IN_FLIGHT = 64
# The client measurements' test servers: (words, flags, requests). Coalesced: as fast as the server writes, an
# answer's chunks in one write (many per read). Paced: one event per sequence per decode step, steps 20 ms apart
# and shared by every sequence (a real engine emits each running sequence's token at the end of the step that made
# it, so that its events arrive together, one per connection), so that each read carries one chunk (64 in flight:
# 3,200 tokens/s, which a busy 2-core machine keeps pace with); fewer requests, as it runs at the pace's speed (300:
# 38,400 tokens in about 12 s).
PACED = "one chunk per read (paced, decode steps 20 ms apart)"
PACED_REQUESTS = 300
CLIENT_SERVERS = (("coalesced", ("--writes=answer",), CLIENT_REQUESTS),
                  (PACED, ("--writes=chunk", "--chunk_delay_s=0.02", "--steps"), PACED_REQUESTS))
ONE_PER_READ_AT_MOST = 1.2     # tokens per read that still count as one chunk per read
SLOWER_PACE = 0.8              # (q): workers' tokens/s each under this share of one loop's did not get its load
CLIENT_ROUNDS = 2              # (p): runs of each client in turns (ratios.in_turns); (q): of each
CLIENT_TTFT_REQUESTS = 200
SERVER_PROCESSES = 2           # of each test server of the client figures
RATES = (120_000, 1_000_000, 2_100_000)   # tokens/s: one 8-GPU node, a 72-GPU cluster, the largest Offline result
CEILING_FIELDS = {"max_input_tokens": 512, "max_output_tokens": 128, "total_sample_count": 250}
CEILING_SECONDS = 15
TTFT_FIELDS = {"max_input_tokens": 512, "max_output_tokens": 4}
TTFT_QUERIES = 300
TTFT_QPS = 20.0


def serving_bench(bench, ctx, benchmark_name: str) -> list[Figure]:
    """The openai harness's figures (harness/plugins/openai.py names this function)."""
    from .harness import DownloadData, DownloadModel, PreprocessData

    for step in (DownloadModel, DownloadData, PreprocessData):
        step(ctx).run()
    figures = []
    with fake_server(ctx, benchmark_name) as url:
        served = dataclasses.replace(ctx, args=dataclasses.replace(ctx.args, endpoints=(url,)), _registry=None)
        figures += ceiling(bench, served, benchmark_name, url)
        figures += first_token(bench, served, benchmark_name, url)
    figures += client_figures(ctx, benchmark_name)
    from .bench_vllm import vllm_figures

    return figures + vllm_figures(bench, ctx, benchmark_name)


@contextmanager
def fake_server(ctx, benchmark_name: str, *flags: str):
    """The toolkit's fake streaming server (serving/fake_server.py) in processes of its own (a group: all end
    together), serving the benchmark's model name."""
    from ..common.processes import free_port, start_in_group, stop_group

    served = served_name(ctx, benchmark_name)
    log = ctx.paths.bench_dir / f"test-server-{free_port()}.log"
    process = start_in_group([sys.executable, "-m", "code.common.serving.fake_server", f"--port={free_port()}",
                              f"--model={served}", *flags], cwd=ctx.paths.repo, log_path=log)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None and "listening on" not in _read(log):
            time.sleep(0.1)
        text = _read(log)
        if "listening on" not in text:
            raise UserError(f"The streaming test server did not start: {text[-500:]}", exit_code=EXIT_FAILURE)
        yield text.split("listening on", 1)[1].split()[0]
    finally:
        stop_group(process, grace_s=5)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def ceiling(bench, ctx, benchmark_name: str, url: str) -> list[Figure]:
    """(n): streamed tokens/s and requests/s, harness / bare client."""
    from ..common.serving.baseline import bare_run

    prompts, settings, served = prompts_of(ctx, benchmark_name, CEILING_FIELDS)
    in_flight = int(ctx.resolve(benchmark_name, Scenario.Offline)["openai_in_flight"])
    bare = bare_run(url, served, prompts, settings.max_new_tokens, in_flight, settings.eos_token_ids)
    ctx.log(f"{benchmark_name}: bare client {bare.tokens_per_second:,.0f} tokens/s, {bare.requests_per_second:,.1f} "
            f"requests/s ({bare.requests} requests, {in_flight} in flight)")
    folder = ctx.paths.bench_dir / f"{benchmark_name}-openai-ceiling"
    outcome = bench._short(ctx, benchmark_name, Scenario.Offline, folder,
                           offline_expected_qps=round_sig(bare.requests_per_second),
                           openai_offline_answers="streamed",    # as the bare client: the figure is streaming's
                           min_duration=CEILING_SECONDS * 1000, **CEILING_FIELDS)
    values = read_detail(Path(outcome.run_dir)).values
    tokens, samples = float(values.get("result_tokens_per_second") or 0), float(
        values.get("result_samples_per_second") or 0)
    if not tokens:
        raise UserError(f"The Offline run in {outcome.run_dir} reported no tokens per second: {outcome.reason}",
                        exit_code=EXIT_FAILURE)
    return [Figure("(n) openai harness ceiling, Offline on the streaming test server: harness vs bare client",
                   tokens, bare.tokens_per_second, "tokens/s", GOALS["n"]),
            Figure("(n) the same, requests", samples, bare.requests_per_second, "requests/s", GOALS["n"])]


def first_token(bench, ctx, benchmark_name: str, url: str) -> list[Figure]:
    """(o): time to first token at p50 and p99, bare client (one request at a time) / harness (Server, light)."""
    import numpy as np

    from ..common.serving.baseline import bare_run

    prompts, settings, served = prompts_of(ctx, benchmark_name, {**TTFT_FIELDS, "total_sample_count": 250})
    bare = bare_run(url, served, (prompts * 2)[:TTFT_QUERIES], settings.max_new_tokens, 1, settings.eos_token_ids,
                    rate=TTFT_QPS)
    bare_ms = {p: float(np.percentile(bare.first_token_s, p)) * 1000 for p in (50, 99)}
    outcome = bench._short(ctx, benchmark_name, Scenario.Server, ctx.paths.bench_dir / f"{benchmark_name}-openai-ttft",
                           server_target_qps=TTFT_QPS, min_query_count=TTFT_QUERIES, min_duration=1000,
                           **TTFT_FIELDS)
    values = read_detail(Path(outcome.run_dir)).values
    figures = []
    for percentile in (50, 99):
        key = f"result_first_token_{percentile:.2f}_percentile_latency_ns"
        harness_ms = float(values.get(key) or 0) / 1e6
        if not harness_ms:
            raise UserError(f"The Server run in {outcome.run_dir} logged no {key}: {outcome.reason}",
                            exit_code=EXIT_FAILURE)
        added = harness_ms - bare_ms[percentile]
        ctx.log(f"{benchmark_name}: first token p{percentile}: harness {harness_ms:.3f} ms, bare client "
                f"{bare_ms[percentile]:.3f} ms: {added:+.3f} ms added")
        goal = (bare_ms[50] / (bare_ms[50] + GOALS["o_p50_added_ms"])) if percentile == 50 else None
        figures.append(Figure(f"(o) first token p{percentile} at {TTFT_QPS:g} QPS: bare client / harness "
                              f"({added:+.3f} ms added)", harness_ms, bare_ms[percentile], "ms", goal,
                              higher_is_better=False))
    return figures


def client_figures(ctx, benchmark_name: str) -> list[Figure]:
    """(p), (q), (r) and whole answers' CPU per token (see the module's docstring)."""
    import numpy as np

    from ..common.serving.workers import default_workers

    prompts, _, _ = prompts_of(ctx, benchmark_name, CLIENT_FIELDS)
    folder = ctx.paths.bench_dir / f"{benchmark_name}-openai-client"
    folder.mkdir(parents=True, exist_ok=True)
    prompt_file = folder / "prompts.json"
    workers = max(2, default_workers(1))
    count = max(CLIENT_REQUESTS, PACED_REQUESTS * workers)      # (q)'s workers take N x one loop's requests
    repeated = [np.asarray(p).tolist() for p in (prompts * (count // len(prompts) + 1))[:count]]
    prompt_file.write_text(json.dumps(repeated))
    from .bench_vllm_client import vllm_client

    vllm = vllm_client(ctx, benchmark_name, repeated[:PACED_REQUESTS])     # None where vLLM's environment is not
    figures, per_token = [], {}
    for words, flags, requests in CLIENT_SERVERS:
        with fake_server(ctx, benchmark_name, *flags, f"--processes={SERVER_PROCESSES}") as url:
            measure = lambda *flags: client_run(ctx, benchmark_name, url, prompt_file,  # noqa: E731
                                                f"--requests={requests}", *flags)
            bare, harness = best_in_turns(measure)
            per_token[words] = harness
            ctx.log(f"{benchmark_name}: client CPU per streamed token, {words}, the best of runs in turns: harness "
                    f"{harness['us_per_token']:.2f} us at {_per_read(harness)} "
                    f"({harness['tokens_per_second']:,.0f} tokens/s; all runs {_all(harness)}), bare client "
                    f"{bare['us_per_token']:.2f} us at {_per_read(bare)} ({bare['tokens_per_second']:,.0f} tokens/s; "
                    f"all runs {_all(bare)})")
            paced = words == PACED
            if paced and not harness["tokens_per_read"] <= ONE_PER_READ_AT_MOST:
                ctx.log(f"{benchmark_name}: the paced server's answers came at {_per_read(harness)}, not one chunk "
                        f"per read: the machine was too busy to keep its pace; the figure is not the one-chunk one")
            goal = GOALS["p_one_per_read_us" if paced else "p_coalesced_us"]
            figures += [Figure(f"(p) client CPU per streamed token, {words}: harness ({_per_read(harness)}) vs bare "
                               f"client ({_per_read(bare)})", harness["us_per_token"], bare["us_per_token"],
                               "us/token", None, higher_is_better=False),
                        Figure(f"(p) the same against the goal of {goal:g} us", harness["us_per_token"], goal,
                               "us/token", 1.0, higher_is_better=False)]
            if paced and vllm is not None:
                figures += vllm_client_figures(ctx, benchmark_name, harness, vllm(url, requests, CLIENT_IN_FLIGHT,
                                                                                  CLIENT_FIELDS["max_output_tokens"]))
            if paced:
                one, many = workers_in_turns(measure, workers, requests)
                figures += workers_figures(ctx, benchmark_name, one, many,
                                           measure("--client=harness", f"--workers={workers}"), workers)
                figures += first_token_of_workers(ctx, benchmark_name, url, prompt_file, workers)
            else:
                figures += scaling_figure(ctx, harness, measure("--client=harness", f"--workers={workers}"), workers)
                whole = measure("--client=harness", "--answers=whole")
                per_token["whole answers"] = whole
                tokens = CLIENT_FIELDS["max_output_tokens"]
                figures.append(Figure(f"Offline whole answers: client CPU per token at {tokens} output tokens "
                                      f"against the goal of {GOALS['whole_us']:g} us",
                                      whole["us_per_token"], GOALS["whole_us"], "us/token", 1.0,
                                      higher_is_better=False))
    # Server and streamed runs read what real engines send, one chunk per read; Offline may take whole answers.
    cores = [f"{name} {per_token[key]['us_per_token']:.2f} us/token: " + ", ".join(
        f"{rate / 1000:,.0f} k tokens/s {rate * per_token[key]['us_per_token'] / 1e6:.1f} cores" for rate in RATES)
        for name, key in ((f"Server and streamed runs ({PACED}, {_per_read(per_token[PACED])})", PACED),
                          ("Offline with whole answers", "whole answers"))]
    ctx.log(f"{benchmark_name}: cores the client needs at the CPU per token measured here ({_cores()} cores, "
            f"shared): " + "; ".join(cores))
    return figures


def vllm_client_figures(ctx, benchmark_name: str, harness: dict, vllm: dict) -> list[Figure]:
    """(p) at one chunk per read: the harness's client against vLLM's own benchmark client (bench_vllm_client.py),
    both on the paced test server with the same prompts and requests in flight."""
    ctx.log(f"{benchmark_name}: vLLM's client (vllm bench serve), {PACED}: {vllm['us_per_token']:.2f} us/token at "
            f"{_per_read(vllm)} ({vllm['tokens']:,} tokens, {vllm['tokens_per_second']:,.0f} tokens/s)")
    return [Figure(f"(p) client CPU per streamed token, {PACED}: harness ({_per_read(harness)}) vs vLLM's client "
                   f"({_per_read(vllm)})", harness["us_per_token"], vllm["us_per_token"], "us/token", None,
                   higher_is_better=False)]


def workers_in_turns(measure, workers: int, requests: int) -> tuple[dict, dict]:
    """(one loop, N workers each carrying one loop's load): the runs of least CPU per token of each, in turns."""
    flags = {"one": ("--client=harness",),
             "many": ("--client=harness", f"--workers={workers}", f"--in_flight={CLIENT_IN_FLIGHT * workers}",
                      f"--requests={requests * workers}")}
    runs: dict[str, list[dict]] = {"one": [], "many": []}

    def one(side: str) -> float:
        runs[side].append(measure(*flags[side]))
        return runs[side][-1]["us_per_token"]

    for _ in range(CLIENT_ROUNDS):
        one("one")
        one("many")
    return tuple({**min(runs[side], key=lambda run: run["us_per_token"]),
                  "runs": [run["us_per_token"] for run in runs[side]]} for side in ("one", "many"))


def best_in_turns(measure) -> tuple[dict, dict]:
    """(bare, harness): the runs of least CPU per token of each, measured in turns (bare, harness, harness, bare: a
    shared machine's speed moves in phases, and each side gets its runs in each), each with every run's figure
    under "runs"."""
    runs: dict[str, list[dict]] = {"bare": [], "harness": []}

    def one(client: str) -> float:
        runs[client].append(measure(f"--client={client}"))
        return runs[client][-1]["us_per_token"]

    in_turns(lambda: one("bare"), lambda: one("harness"), CLIENT_ROUNDS, higher_is_better=False)
    return tuple({**min(runs[client], key=lambda run: run["us_per_token"]),
                  "runs": [run["us_per_token"] for run in runs[client]]} for client in ("bare", "harness"))


def _all(run: dict) -> str:
    return ", ".join(f"{us:.2f}" for us in run.get("runs", ()))


def _per_read(run: dict) -> str:
    """A run's tokens per read as counted, in words."""
    value = run.get("tokens_per_read")
    return f"{value:.2f} tokens/read" if isinstance(value, (int, float)) and value == value else "reads not counted"


def _per_wakeup(run: dict) -> str:
    """A run's tokens per wake-up of its processes (voluntary context switches), in words."""
    value = run.get("tokens_per_wakeup")
    counted = isinstance(value, (int, float)) and value == value
    return f"{value:.2f} tokens/wake-up" if counted else "wake-ups not counted"


def workers_figures(ctx, benchmark_name: str, one: dict, many: dict, shared: dict, workers: int) -> list[Figure]:
    """(q) at one chunk per read: CPU per token of N worker processes (all of them and the LoadGen process's), each
    carrying one loop's load (`many`), vs one loop (`one`), and per process; tokens/s per busy core (tokens/s over
    the CPU seconds per second), which means the same on 2 cores as on 200. `shared`: the same N workers at one
    loop's load in all, logged."""
    def busy(run: dict) -> float:
        return run["tokens_per_second"] / (run["cpu_s"] / run["seconds"]) if run["cpu_s"] else float("nan")

    def described(run: dict) -> str:
        shares = ", ".join(f"{cpu / run['tokens'] * 1e6:.2f}" for cpu in run.get("process_cpu_s", [])[1:])
        return (f"{run['us_per_token']:.2f} us/token" + (f" in all (the LoadGen process "
                f"{run['process_cpu_s'][0] / run['tokens'] * 1e6:.2f}, each worker {shares})" if shares else "")
                + f" at {_per_read(run)}, {_per_wakeup(run)}, {run['tokens_per_second']:,.0f} tokens/s, "
                f"{busy(run):,.0f} tokens/s per busy core" + (f" (all runs {_all(run)})" if run.get("runs") else ""))

    ctx.log(f"{benchmark_name}: {PACED}: one loop at {CLIENT_IN_FLIGHT} in flight {described(one)}; {workers} worker "
            f"processes at {CLIENT_IN_FLIGHT * workers} in flight (one loop's load each) {described(many)}; the "
            f"same {workers} workers at {CLIENT_IN_FLIGHT} in flight (1/{workers} of the load each) "
            f"{described(shared)}")
    each = many["tokens_per_second"] / workers
    if each < SLOWER_PACE * one["tokens_per_second"]:
        ctx.log(f"{benchmark_name}: (q) the test server kept {each:,.0f} tokens/s per worker, against one loop's "
                f"{one['tokens_per_second']:,.0f}: the machine was too busy for its pace, so each worker read fewer "
                f"events per second than one loop, which costs more per token on a busy machine whatever reads them")
    return [Figure(f"(q) client CPU per streamed token, {workers} worker processes in all, one loop's load each "
                   f"({_per_read(many)}) vs one loop ({_per_read(one)}), {PACED}",
                   many["us_per_token"], one["us_per_token"], "us/token", 1 / (1 + GOALS["q_cpu_added"]),
                   higher_is_better=False),
            Figure(f"(q) the same, tokens/s per busy core", busy(many), busy(one), "tokens/s/core", None)]


def scaling_figure(ctx, one: dict, many: dict, workers: int) -> list[Figure]:
    """(q) wall-clock scaling on the coalesced server (as fast as the client reads), only where the machine has
    a core free for each worker and for the server's processes; else it says why not."""
    import os

    free = _cores() - os.getloadavg()[0]
    if free < workers + SERVER_PROCESSES:
        ctx.log(f"(q) wall-clock scaling of {workers} worker processes not measured: about {max(free, 0):.1f} of "
                f"{_cores()} cores were free, {workers + SERVER_PROCESSES} are needed (workers and server)")
        return []
    return [Figure(f"(q) streamed tokens/s, {workers} worker processes vs one loop (coalesced, {free:.0f} cores "
                   f"free)", many["tokens_per_second"], one["tokens_per_second"], "tokens/s",
                   GOALS["q_per_worker"] * workers)]


def first_token_of_workers(ctx, benchmark_name: str, url: str, prompt_file: Path, workers: int) -> list[Figure]:
    """(r): first-token latency at p50 and p99, one request at a time: one loop / worker processes."""
    import numpy as np

    flags = ("--client=harness", f"--rate={TTFT_QPS}", "--max_tokens=4", f"--requests={CLIENT_TTFT_REQUESTS}")
    one = client_run(ctx, benchmark_name, url, prompt_file, *flags)
    many = client_run(ctx, benchmark_name, url, prompt_file, *flags, f"--workers={workers}")
    figures = []
    for percentile in (50, 99):
        one_ms, many_ms = (float(np.percentile(run["first_token_s"], percentile)) * 1000 for run in (one, many))
        added = many_ms - one_ms
        ctx.log(f"{benchmark_name}: first token p{percentile}, one request at a time: {workers} workers "
                f"{many_ms:.3f} ms, one loop {one_ms:.3f} ms: {added:+.3f} ms added")
        goal = one_ms / (one_ms + GOALS[f"r_p{percentile}_added_ms"])
        figures.append(Figure(f"(r) first token p{percentile}: one loop / {workers} workers ({added:+.3f} ms added)",
                              many_ms, one_ms, "ms", goal, higher_is_better=False))
    return figures


def client_run(ctx, benchmark_name: str, url: str, prompt_file: Path, *flags: str) -> dict:
    """One client_bench measurement in a process of its own: its JSON line."""
    command = [sys.executable, "-m", "code.common.serving.client_bench", f"--url={url}",
               f"--model={served_name(ctx, benchmark_name)}", f"--prompts={prompt_file}",
               f"--max_tokens={CLIENT_FIELDS['max_output_tokens']}", f"--in_flight={CLIENT_IN_FLIGHT}", *flags]
    done = subprocess.run(command, cwd=ctx.paths.repo, capture_output=True, text=True, timeout=900)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise UserError(f"The client measurement {' '.join(flags)} failed (exit status {done.returncode}): "
                        f"{(done.stderr or done.stdout)[-800:]}", exit_code=EXIT_FAILURE)
    return json.loads(lines[-1])


def _cores() -> int:
    import os

    return len(os.sched_getaffinity(0))
