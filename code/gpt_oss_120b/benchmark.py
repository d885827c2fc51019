"""Benchmark gpt-oss-120b behind `code.common.benchmark_api.Benchmark`: OpenAI's gpt-oss-120b (closed division,
served by an OpenAI-compatible serving engine) or the embedded substitute SmolLM2-135M-Instruct (open division)
answering AIME 2025, GPQA diamond and LiveCodeBench v6, scored by exact match as the reference's
eval_mlperf_accuracy.py scores it.

The reference samples (language/gpt-oss-120b/README.md, 'Generation Configuration'): temperature 1, top_p 1, no
top-k, no min_tokens, streamed, special tokens kept (Harmony's channels are how the scorer finds the final answer);
up to 32768 new tokens in accuracy runs and 10240 in every other run (performance runs, TEST07 and TEST09: "perf
config"). Both caps are the benchmark's defaults of max_output_tokens, each applied to its kind of run.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.benchmark_api import AccuracyResult
from ..common.config_registry import ByTestMode, PerCore
from ..llm_tasks.benchmark import TaskBenchmark
from ..llm_tasks.items import TaskItem
from ..llm_tasks.models import SUBSTITUTE, ClosedModel
from ..llm_tasks.responses import Outputs
from . import datasets as _datasets

PERFORMANCE_MAX_NEW_TOKENS, ACCURACY_MAX_NEW_TOKENS = 10240, 32768

GPT_OSS = ClosedModel(
    name="gpt-oss-120b", hf_id="openai/gpt-oss-120b",
    description="OpenAI gpt-oss-120b (117B mixture of experts, MXFP4), the MLPerf reference model (the user's "
                "checkpoint, served)",
    checkpoint_dir="gpt-oss-120b",
    how_to_get="gpt-oss-120b is on Hugging Face (Apache-2.0) at commit b5c939de8f754692c1647ca79fbf85e8c1e70f8a, the "
               "one the reference uses: `huggingface-cli download openai/gpt-oss-120b --revision "
               "b5c939de8f754692c1647ca79fbf85e8c1e70f8a --local-dir <folder>`.",
    # Harmony prompts of a few thousand tokens and the accuracy runs' 32768 output tokens.
    max_model_len=40960)


class GptOssBenchmark(TaskBenchmark):
    package = "code.gpt_oss_120b"
    name = "gpt-oss-120b"
    closed = GPT_OSS
    task_datasets = _datasets.DATASETS
    reference_max_new_tokens = ByTestMode(performance=PERFORMANCE_MAX_NEW_TOKENS, accuracy=ACCURACY_MAX_NEW_TOKENS)
    reference_min_new_tokens = 0
    temperature, top_p, top_k = 1.0, 1.0, -1
    skip_special_tokens = False
    first_entry_only = False
    closed_needs_ids = ("its prompts are OpenAI Harmony conversations, which the MLCommons files hold rendered and "
                        "tokenized (input_tokens); bring those files (make download_data says how).")
    # What `make run RUN_ARGS=--benchmarks=gpt-oss-120b` runs: the substitute on 16 sample problems, answers capped
    # at 64 tokens (recorded in user.conf and metadata.json).
    embedded_default: Mapping[str, Any] = {"model": SUBSTITUTE, "dataset": "gpt_oss_sample",
                                           "max_output_tokens": 64, "total_sample_count": 16,
                                           "offline_expected_qps": PerCore(0.2), "server_target_qps": PerCore(0.05)}

    def compliance_dataset(self, test: str, dataset: str) -> str | None:
        """TEST07 scores a performance-mode run over a data set of its own: the GPQA compliance file for the MLCommons
        data. The development sample has no GPQA (its terms forbid posting it): its TEST07 runs over the sample
        itself, so the test runs end to end, judged against the round's threshold all the same."""
        if test != "TEST07":
            return None
        return {"gpt_oss_eval": "gpt_oss_compliance_gpqa", "gpt_oss_sample": "gpt_oss_sample"}.get(dataset)

    def score_outputs(self, items: Sequence[TaskItem], outputs: Outputs, folder: Path | None = None) \
            -> AccuracyResult:
        from ..reasoning_eval.tasks import score_task

        return score_task(self.name, items, outputs, folder)


BENCHMARK = GptOssBenchmark()
