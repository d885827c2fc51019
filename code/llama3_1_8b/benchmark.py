"""Benchmarks llama3.1-8b (datacenter) and llama3.1-8b-edge behind `code.common.benchmark_api.Benchmark`:
CNN/DailyMail summarization, generated token by token, scored by ROUGE as the reference's evaluation.py scores it.

Models: `llama3.1-8b-instruct` (closed division, the user's checkpoint, converted into the in-process decoder graph
or served) and `smollm2-135m-instruct` (open division, fetched from the package registry: what `make run` runs on
any machine). Data sets: `cnn_eval` (MLCommons' 13368 validation samples, datacenter), `cnn_eval_5000` (its
5000-sample edge subset) and `cnndm_sample` (250 test articles kept beside the repository, for development and CI).
Prompts, models, data and the reading of the accuracy log are the task benchmarks' (code/llm_tasks); what is its
own is the reference's prompt template, its data files and its scorer. Each sample's response in the accuracy log
is its generated token ids as int32, as the reference SUT writes them and evaluation.py / TEST06 read them
(`--dtype int32`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.benchmark_api import AccuracyResult
from ..common.config_registry import PerCore
from ..llm_tasks.benchmark import TaskBenchmark
from ..llm_tasks.items import TaskItem
from ..llm_tasks.models import SUBSTITUTE, ClosedModel
from ..llm_tasks.responses import Outputs
from . import accuracy as _accuracy
from . import datasets as _datasets

# The reference's sampling parameters (SUT_VLLM.py, every run): temperature 0 (greedy; top_k 1, top_p 1), seed 42,
# max_tokens 128, min_tokens 1, ending at the model's EOS.
REFERENCE_MAX_NEW_TOKENS, REFERENCE_MIN_NEW_TOKENS, REFERENCE_SEED = 128, 1, 42

LLAMA = ClosedModel(
    name="llama3.1-8b-instruct", hf_id="meta-llama/Llama-3.1-8B-Instruct",
    description="Meta Llama-3.1-8B-Instruct, the MLPerf reference model (the user's checkpoint)",
    checkpoint_dir="Llama-3.1-8B-Instruct",
    how_to_get="Llama-3.1-8B-Instruct is Meta's gated model: accept its licence on Hugging Face "
               "(https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct), then download it (`huggingface-cli "
               "download meta-llama/Llama-3.1-8B-Instruct --local-dir <folder>`), or get it from MLCommons (members: "
               "the R2 downloader of language/llama3.1-8b/README.md in mlcommons/inference).",
    # The reference's prompts (up to about 2k tokens of article and template) and 128 output tokens, rounded up.
    max_model_len=4096,
    dtype="bfloat16",            # served in bfloat16, as the reference does
    weight_transformations="bf16 weights widened to fp32; converted to an ONNX decoder graph",
    weights_format="Hugging Face safetensors",
    conversion="fp32, about 32 GB on disk")


class LlamaBenchmark(TaskBenchmark):
    package = "code.llama3_1_8b"
    name = "llama3.1-8b"
    closed = LLAMA
    task_datasets = _datasets.DATASETS
    reference_max_new_tokens = REFERENCE_MAX_NEW_TOKENS
    reference_min_new_tokens = REFERENCE_MIN_NEW_TOKENS
    seed = REFERENCE_SEED
    prompt_template = _datasets.PROMPT_TEMPLATE
    # What `make run RUN_ARGS=--benchmarks=llama3.1-8b` runs: the substitute on 24 sample articles, prompts capped
    # at 512 tokens and outputs at 64, so that a performance and an accuracy run end in minutes on 2 cores. The
    # caps are recorded in user.conf and metadata.json; an uncapped run is `--max_input_tokens=0
    # --max_output_tokens=128` without --total_sample_count.
    # Speed hints of the substitute under those caps (measured on a 2-core Xeon: about 0.85 samples/s Offline at
    # batch 8, a summary in about 2.5 s alone); Server and Interactive at a fraction of the Offline rate.
    embedded_default: Mapping[str, Any] = {"model": SUBSTITUTE, "dataset": "cnndm_sample",
                                           "max_input_tokens": 512, "max_output_tokens": 64,
                                           "total_sample_count": 24, "offline_expected_qps": PerCore(0.4),
                                           "server_target_qps": PerCore(0.1),
                                           "single_stream_expected_latency_ns": 2_500_000_000}

    def closed_prompt(self, item: TaskItem) -> str:
        """The reference's prompt, plain (no chat template), for a file without `tok_input` (the development
        sample): the MLCommons files' tok_input is this text tokenized."""
        return _datasets.prompt_text(item)

    def score_outputs(self, items: Sequence[TaskItem], outputs: Outputs, folder: Path | None = None) \
            -> AccuracyResult:
        """ROUGE and GEN_LEN as the reference evaluation.py computes them, against the data set's references."""
        return _accuracy.result(items, outputs)


class LlamaEdgeBenchmark(LlamaBenchmark):
    """The edge variant: the same model and harness, 5000 samples, SingleStream and Offline."""

    name = "llama3.1-8b-edge"


BENCHMARK = LlamaBenchmark()
EDGE_BENCHMARK = LlamaEdgeBenchmark()
