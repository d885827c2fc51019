"""Benchmark deepseek-r1 behind `code.common.benchmark_api.Benchmark`: DeepSeek-R1 (closed division, served by an
OpenAI-compatible serving engine) or the embedded substitute SmolLM2-135M-Instruct (open division) answering the
mixed reasoning set, scored by exact match as the reference's eval_accuracy.py scores it.

The reference (language/deepseek-r1/utils/backend_registry.py) decodes greedily (temperature 0, top_p 1, seed 42 on
its vLLM and SGLang backends, no min_tokens) up to 20000 new tokens (MAX_OSL) in every run, after prompts of at most
3136 tokens plus 4 of chat template.
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
from . import datasets as _datasets

MAX_INPUT_TOKENS, MAX_OUTPUT_TOKENS, TEMPLATE_TOKENS = 3136, 20_000, 4
REFERENCE_SEED = 42

DEEPSEEK_R1 = ClosedModel(
    name="deepseek-r1", hf_id="deepseek-ai/DeepSeek-R1",
    description="DeepSeek-R1 (671B mixture of experts), the MLPerf reference model (the user's checkpoint, served)",
    checkpoint_dir="DeepSeek-R1",
    how_to_get="DeepSeek-R1 is on Hugging Face (MIT licence) at revision 56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad, "
               "the one the reference uses: `huggingface-cli download deepseek-ai/DeepSeek-R1 --revision "
               "56d4cbbb4d29f4355bab4b9a39ccb717a14ad5ad --local-dir <folder>`, or from MLCommons (`mlcr get,ml-model,"
               "deepseek-r1,_r2-downloader,_mlc --outdirname=<folder> -j`, language/deepseek-r1/README.md).",
    max_model_len=MAX_INPUT_TOKENS + MAX_OUTPUT_TOKENS + TEMPLATE_TOKENS)


class DeepSeekBenchmark(TaskBenchmark):
    package = "code.deepseek_r1"
    name = "deepseek-r1"
    closed = DEEPSEEK_R1
    task_datasets = _datasets.DATASETS
    reference_max_new_tokens = MAX_OUTPUT_TOKENS
    reference_min_new_tokens = 0
    seed = REFERENCE_SEED
    # What `make run RUN_ARGS=--benchmarks=deepseek-r1` runs: the substitute on 16 sample items, answers capped at 64
    # tokens (recorded in user.conf and metadata.json). Prompts are not capped: a cap cuts the end of the prompt's
    # text, where these prompts put the question after their few-shot examples.
    embedded_default: Mapping[str, Any] = {"model": SUBSTITUTE, "dataset": "deepseek_r1_sample",
                                           "max_output_tokens": 64, "total_sample_count": 16,
                                           "offline_expected_qps": PerCore(0.2), "server_target_qps": PerCore(0.05)}

    def closed_prompt(self, item: TaskItem) -> str:
        """The DeepSeek-R1 chat template for one user turn, as the reference's `templated_text_input` (the BOS,
        <｜begin▁of▁sentence｜>, is the tokenizer's own)."""
        return f"<｜User｜>{item.user}<｜Assistant｜><think>\n"

    def score_outputs(self, items: Sequence[TaskItem], outputs: Outputs, folder: Path | None = None) \
            -> AccuracyResult:
        from ..reasoning_eval.tasks import score_task

        return score_task(self.name, items, outputs, folder)


BENCHMARK = DeepSeekBenchmark()
