"""vLLM's own benchmark client (`vllm bench serve`) measured as `make bench` measures the harness's client
(serving/client_bench.py): its CPU per streamed token over the window from its first timed request to its last
completion, with its reads of answers counted, on the same test server with the same prompts and requests in
flight, in the same run. Where vLLM's environment is made (make build RUN_ARGS=--harness_type=openai).

How it is measured: vLLM's client runs in vLLM's environment as bench_vllm.LAUNCHER runs it, with two things added
around its own code, which is left as it is: its request functions are wrapped so that the window opens when its
first request starts (it sends no other: no ready check, no warm-ups) and closes at the last completion,
reading the process's CPU time (getrusage) and summing the output tokens each request counted (the server's usage
chunk); and aiohttp's stream reader counts the reads that fed it (a Python call more per read, which makes vLLM's
figure a little higher than its own, about 0.1 us a token). Its start (torch's import, the tokenizer, the dataset's
sampling) and its metrics afterwards are outside the window, as the harness's setup is.

The prompts go as text (vLLM's client sends text): each prompt's ids decoded with the model's tokenizer
(bench_vllm.write_dataset, ShareGPT's format, in order), which the test server keys on whole (every prompt its own
answer); the output length is the harness's (`--sharegpt-output-len`), every token streamed (no stop ids).
"""
from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import Sequence

from ..common.errors import EXIT_FAILURE, UserError

WINDOW_MARK = "CLIENT_WINDOW "
TIMEOUT_S = 900.0
MEASURED_LAUNCHER = (
    "import json, resource, sys, time\n"
    "import aiohttp.streams\n"
    "from vllm.benchmarks.lib import endpoint_request_func as funcs\n"
    "from vllm.benchmarks.serve import add_cli_args, main\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "window = {'tokens': 0, 'requests': 0, 'reads': 0, 'start': None, 'end': None}\n"
    "def now():\n"
    "    usage = resource.getrusage(resource.RUSAGE_SELF)\n"
    "    return [usage.ru_utime + usage.ru_stime, time.perf_counter(), window['reads']]\n"
    "def timed(request):\n"
    "    async def run(*args, **kwargs):\n"
    "        if window['start'] is None:\n"
    "            window['start'] = now()\n"
    "        output = await request(*args, **kwargs)\n"
    "        window['tokens'] += output.output_tokens or 0\n"
    "        window['requests'] += bool(output.success)\n"
    "        window['end'] = now()\n"
    "        return output\n"
    "    return run\n"
    "for name in list(funcs.ASYNC_REQUEST_FUNCS):\n"
    "    funcs.ASYNC_REQUEST_FUNCS[name] = timed(funcs.ASYNC_REQUEST_FUNCS[name])\n"
    "feed = aiohttp.streams.StreamReader.feed_data\n"
    "def counted(self, data, *args):\n"
    "    window['reads'] += bool(data)\n"
    "    return feed(self, data, *args)\n"
    "aiohttp.streams.StreamReader.feed_data = counted\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "add_cli_args(parser)\n"
    "main(parser.parse_args(sys.argv[1:]))\n"
    "print(" + repr(WINDOW_MARK) + " + json.dumps(window), flush=True)\n")


def client_args(*, url: str, served_name: str, tokenizer: str, dataset: Path, prompts: int, in_flight: int,
                max_tokens: int) -> list[str]:
    """`vllm bench serve`'s arguments: every prompt of `dataset` once, in order, `in_flight` at a time, each
    streaming `max_tokens` tokens."""
    return ["--backend", "openai", "--base-url", url, "--endpoint", "/v1/completions", "--model", served_name,
            "--tokenizer", tokenizer, "--dataset-name", "sharegpt", "--dataset-path", str(dataset),
            "--disable-shuffle", "--no-oversample", "--num-prompts", str(int(prompts)),
            "--sharegpt-output-len", str(int(max_tokens)), "--max-concurrency", str(int(in_flight)),
            "--request-rate", "inf", "--temperature", "0", "--seed", "0", "--disable-tqdm",
            "--ready-check-timeout-sec", "0", "--num-warmups", "0"]     # no request but the timed ones


def read_window(log_text: str, log_path: Path, expected_requests: int) -> dict:
    """The measurement (client_bench's fields) from the line the launcher printed; UserError where it is missing
    or shows requests that did not complete."""
    lines = [line for line in log_text.splitlines() if line.startswith(WINDOW_MARK)]
    try:
        window = json.loads(lines[-1][len(WINDOW_MARK):])
        (cpu_start, start_s, reads_start), (cpu_end, end_s, reads_end) = window["start"], window["end"]
        tokens, requests = int(window["tokens"]), int(window["requests"])
    except (IndexError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"vllm bench serve printed no measurement ({error}); its log: {log_path}",
                        exit_code=EXIT_FAILURE)
    if requests != expected_requests or tokens <= 0:
        raise UserError(f"vllm bench serve completed {requests} of {expected_requests} requests ({tokens} tokens "
                        f"counted); its log: {log_path}", exit_code=EXIT_FAILURE)
    cpu_s, seconds, reads = cpu_end - cpu_start, end_s - start_s, reads_end - reads_start
    return {"tokens": tokens, "requests": requests, "seconds": seconds, "cpu_s": cpu_s, "reads": reads,
            "process_cpu_s": [cpu_s], "us_per_token": cpu_s / tokens * 1e6,
            "tokens_per_read": tokens / reads if reads else math.nan,
            "tokens_per_second": tokens / seconds if seconds else 0.0}


def vllm_client_run(python: Path, env: dict[str, str], args: Sequence[str], log_path: Path,
                    expected_requests: int, timeout_s: float = TIMEOUT_S) -> dict:
    """Run vLLM's client once, measured (its output into `log_path`)."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    try:
        done = subprocess.run([str(python), "-c", MEASURED_LAUNCHER, *args], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout_s, text=True,
                              cwd=str(log_path.parent))
    except subprocess.TimeoutExpired:
        raise UserError(f"vllm bench serve ran past {timeout_s:.0f} s", exit_code=EXIT_FAILURE)
    log_path.write_text(done.stdout)
    if done.returncode != 0:
        tail = "\n".join(done.stdout.splitlines()[-20:])
        raise UserError(f"vllm bench serve exited with status {done.returncode}; the end of its log ({log_path}):"
                        f"\n{tail}", exit_code=EXIT_FAILURE)
    return read_window(done.stdout, log_path, expected_requests)


def vllm_client(ctx, benchmark_name: str, prompts: Sequence[Sequence[int]]):
    """A function measuring vLLM's client on a test server (url, prompts, requests in flight, output tokens) ->
    client_bench's fields; None (with a line saying how to make it) where vLLM's environment is not made."""
    from ..common.benchmark_api import get_benchmark
    from ..common.constants import Scenario
    from ..common.model_files import ensure_serving_folder
    from ..common.serving.local_server import BUILD_HINT, server_environment, vllm_python
    from .bench_vllm import write_dataset
    from .serving_prompts import served_name

    try:
        python = vllm_python(ctx.paths.vllm_venv)
    except UserError:
        ctx.log(f"{benchmark_name}: vLLM's client is not measured: it needs vLLM's environment, made by "
                f"`{BUILD_HINT}`")
        return None
    from tokenizers import Tokenizer

    model = ctx.resolve(benchmark_name, Scenario.Offline)["model"]
    folder = ensure_serving_folder(get_benchmark(benchmark_name), model, ctx.paths, ctx.log).folder
    tokenizer = Tokenizer.from_file(str(Path(folder) / "tokenizer.json"))
    work = ctx.paths.bench_dir / f"{benchmark_name}-openai-client" / "vllm-client"
    dataset = work / "prompts-text.json"
    exact = write_dataset(dataset, prompts, lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
                          lambda text: tokenizer.encode(text, add_special_tokens=False).ids)
    ctx.log(f"{benchmark_name}: vLLM's client sends the client measurements' {len(prompts)} prompts as text "
            f"({exact} of them tokenize back to their ids exactly)")
    env = server_environment(ctx.paths.vllm_venv)
    runs = 0

    def measure(url: str, requests: int, in_flight: int, max_tokens: int) -> dict:
        nonlocal runs
        runs += 1
        args = client_args(url=url, served_name=served_name(ctx, benchmark_name), tokenizer=str(folder),
                           dataset=dataset, prompts=requests, in_flight=in_flight, max_tokens=max_tokens)
        return vllm_client_run(python, env, args, work / f"vllm-bench-serve-{runs}.log", requests)

    return measure
