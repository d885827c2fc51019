"""The openai harness (`--harness_type=openai`): LoadGen here, the LLM in OpenAI-compatible serving engines (vLLM,
SGLang, TensorRT-LLM's trtllm-serve) on this node or others, their completions streamed over HTTP
(code/common/serving/client.py) into the token-streaming system under test (harness/llm_sut.py).

With `--endpoints=http://node1:8000,http://node2:8000` the servers run already (one or more per node, started with
`make serve_llm` or by the user's own launcher); without, each test starts a local vLLM server (CPU build, from its
own environment .venv-vllm, which `make build` and `make run` make) for the benchmark's model and stops it after
the test. No engine file: the servers load the model.
"""
from __future__ import annotations

from ...fields import Field
from ...serving.read_hold import DEFAULT_WINDOW_US
from ..registry import HarnessFlag, HarnessPlugin, HarnessRun, parse_port

OPENAI = "openai"
SERVE_LLM = "serve_llm"     # the action that starts a serving engine for this harness


class OpenAIHarness(HarnessPlugin):
    name = OPENAI
    harness_type = OPENAI
    implementation = "python"
    generates_tokens = True
    needs_engine = False
    description = ("OpenAI-compatible LLM serving engines (vLLM, SGLang, TensorRT-LLM) over HTTP: a local vLLM per "
                   "test, or running servers on any number of nodes (--endpoints)")
    bench_figures = "code.actions.bench_serving:serving_bench"
    fields = (
        Field("openai_in_flight", int, 256, "openai harness: requests in flight per endpoint at most; the rest wait "
              "in the client and go to the first endpoint with room (keep it at or under the server's maximum "
              "number of sequences, so that the server does not queue them itself).", generative=True, minimum=1,
              maximum=100_000),
        Field("openai_scheduler", str, "fewest_requests", "openai harness: which endpoint a request goes to: "
              "round_robin, fewest_requests (in flight) or fewest_input_tokens (prompt tokens in flight).",
              generative=True, choices=("round_robin", "fewest_requests", "fewest_input_tokens")),
        Field("openai_request_timeout_s", float, 600.0, "openai harness: longest silence of a server within one "
              "request (its first token included); a server silent for longer fails the run.", generative=True,
              minimum=0.1, maximum=86_400.0),
        Field("openai_metrics_interval_s", float, 2.0, "openai harness: how often each server's /metrics is read "
              "during a test (0: never); a server that stops answering it fails the run.", generative=True,
              minimum=0.0, maximum=3600.0),
        Field("openai_warmup_requests", int, 4, "openai harness: short generations each endpoint answers before "
              "the test, after its health check.", generative=True, minimum=0, maximum=10_000),
        Field("openai_token_ids", str, "auto", "openai harness: where the output's token ids come from: server "
              "(vLLM's return_token_ids), text (the streamed text tokenized with the benchmark's tokenizer), or "
              "auto (the server's where it returns them).", generative=True, choices=("auto", "server", "text")),
        Field("openai_offline_answers", str, "whole", "openai harness: how Offline's answers come: whole (one "
              "JSON answer per request, token ids included: Offline measures no first-token time, and one answer "
              "costs the client far less than a stream) or streamed, as Server and Interactive always are.",
              generative=True, choices=("whole", "streamed")),
        Field("openai_workers", int, 0, "openai harness: processes that stream the requests, each with its own "
              "event loop and connections, reporting to LoadGen's process (1: one event loop in LoadGen's process; "
              "0: one per core beyond two, at most four per endpoint).", generative=True, minimum=0, maximum=1024),
        Field("openai_stream_interval", int, 0, "openai harness: tokens per streamed chunk asked of the servers "
              "(vLLM's stream_interval; the first token still comes alone, at once); 0: the server's own.",
              generative=True, minimum=0, maximum=100_000),
        Field("openai_worker_read_hold_us", int, DEFAULT_WINDOW_US, "openai harness: microseconds each worker "
              "process's event loop waits after a turn that read answers before it polls again, so that the events "
              "a server writes together (one per sequence at the end of a decode step) are read in one wake-up "
              "where the workers share cores: the longest an event waits for its read; a busy loop never waits, "
              "and an event that arrives while it is idle is read at once. 0: no wait.", generative=True,
              minimum=0, maximum=100_000),
    )

    flags = (
        HarnessFlag("endpoints", "comma list of http://host:port of running OpenAI-compatible LLM servers (make "
                    "serve_llm starts one), one or more per node. Default: a local server started for each test"),
        HarnessFlag("engine", "the LLM serving engine, vllm (started here, its CPU build), sglang or trtllm (their "
                    "command lines for GPU nodes are printed); default vllm", actions=(SERVE_LLM,)),
        HarnessFlag("port", "the HTTP port to serve on (default 8000)", actions=(SERVE_LLM,)),
    )

    def parse_flag(self, name: str, text: str):
        if name == "endpoints":
            from ...serving.endpoints import parse_endpoints

            items = [item.strip() for item in text.split(",") if item.strip()]
            return tuple(endpoint.url for endpoint in parse_endpoints(items))
        if name == "engine":
            from ...serving.engines import check_engine

            return check_engine(text)
        return parse_port(text, name)

    def why_not(self, selection) -> str | None:
        """Prompts that no serving API carries (serving/payloads.py) are refused before any test starts."""
        from ...benchmark_api import get_benchmark
        from ...serving.payloads import payload_for
        from .llm import prompt_parts

        parts = prompt_parts(selection)
        if not parts:
            return None
        try:
            payload_for(frozenset(parts), get_benchmark(selection.benchmark).models[selection.model].serving_api)
        except ValueError as error:
            return f"{selection.model}'s prompts cannot be sent: {error}"
        return None

    def preflight(self, fields, args, paths) -> None:
        if not args.endpoints:
            from ...serving.local_server import check_local_server

            check_local_server(paths, _benchmark_of(fields["model"], args.benchmarks))

    def needs_environment(self, args, for_run: bool) -> bool:
        """A local server runs from the vLLM environment (or a benchmark's own server from its own): make build
        makes it for the openai harness, make run where no --endpoints name running servers."""
        return args.workload.harness_type.value == OPENAI and not (for_run and args.endpoints)

    def make_environment(self, ctx) -> None:
        make_server_environments(ctx)

    def capabilities(self, ctx) -> list[tuple[str, str, str]]:
        from ...serving.environment import vllm_capabilities

        return vllm_capabilities(ctx)

    def run_options(self, args, paths) -> dict:
        return {"endpoints": list(args.endpoints)}

    def layout_tunable(self, args) -> str | None:
        return ("its model runs in the serving engines, which never see the toolkit's engine layout; the servers are "
                "tuned with their own settings (vLLM's --max-num-seqs), the client with --openai_in_flight and "
                "--openai_workers")

    def prepare_model(self, config, paths, log) -> str:
        """The model's Hugging Face folder, which a local server (and make serve_llm) loads; the model files of a
        benchmark that serves itself (GenerativeBenchmark.own_server)."""
        return prepare_served_model(config, paths, log)

    def interrupted(self) -> None:
        stop_local_servers()

    def create(self, run: HarnessRun):
        from ..serving_system import serving_system

        return serving_system(run)


def _benchmark_of(model: str, benchmarks) -> object | None:
    """The selected benchmark whose model `model` is (None where none is)."""
    from ...benchmark_api import generates_tokens, get_benchmark

    for name in benchmarks or ():
        if generates_tokens(name) and model in get_benchmark(name).models:
            return get_benchmark(name)
    return None


def make_server_environments(ctx) -> None:
    """The environments local servers run from: a benchmark's own server's (GenerativeBenchmark.make_environment),
    vLLM's for the rest."""
    from ...benchmark_api import generates_tokens, generative, get_benchmark
    from ...serving.environment import make_vllm_environment

    own = [get_benchmark(name) for name in ctx.args.benchmarks
           if generates_tokens(name) and generative(get_benchmark(name)).own_server]
    for benchmark in own:
        generative(benchmark).make_environment(ctx.paths, ctx.log)
    if not ctx.args.benchmarks or len(own) < len(ctx.args.benchmarks):
        make_vllm_environment(ctx)


def prepare_served_model(config, paths, log) -> str:
    """make generate_engines for a harness whose servers load the model: its Hugging Face folder, which a local
    server loads; the model files of a benchmark that serves itself (GenerativeBenchmark.own_server)."""
    from ...benchmark_api import generative, get_benchmark
    from ...model_files import ensure_serving_folder

    benchmark = get_benchmark(config.benchmark)
    if generative(benchmark).own_server:
        folder = benchmark.download_model(config["model"], paths, log)
        return f"no engine (its {benchmark.own_server} server loads the model): {folder}"
    served = ensure_serving_folder(benchmark, config["model"], paths, log)
    return f"no engine (the servers load the model); the folder a local server serves: {served.folder}"


def stop_local_servers() -> None:
    """Stop the test's local servers, from a signal handler: nothing imported, no waiting."""
    import sys

    servers = sys.modules.get("code.common.serving.local_server")
    if servers is not None:
        servers.stop_all()
