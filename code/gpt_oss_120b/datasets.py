"""The data sets of gpt-oss-120b.

MLCommons distributes one download (language/gpt-oss-120b/README.md) with a file per kind of run, each a Parquet
file (or a pickle) of prompts already rendered in OpenAI's Harmony format and tokenized (`input_tokens`, or
`tok_input` before v4.0), which the reference feeds the model:

- `perf/perf_eval_ref.parquet`: 6396 prompts at low reasoning effort, read by performance runs and TEST09;
- `acc/acc_eval_inputs.parquet`: 4395 prompts at high reasoning effort (AIME 2025 x 8, GPQA diamond x 5,
  LiveCodeBench v6 x 3) with `dataset` and `ground_truth`, read by accuracy runs;
- `acc/acc_eval_compliance_gpqa.parquet`: 990 GPQA prompts with their answers, read by TEST07: the data set
  `gpt_oss_compliance_gpqa`, kept in gpt_oss_eval's folder.

`gpt_oss_sample` is 31 real items (the 30 AIME 2025 problems and one LiveCodeBench v6 problem; no GPQA, whose terms
forbid posting it) as raw questions, kept beside the repository for development and CI: every kind of run reads it.
"""
from __future__ import annotations

from pathlib import Path

from ..common.benchmark_api import DatasetSpec
from ..common.errors import EXIT_FAILURE, UserError
from ..llm_tasks.datasets import ACCURACY, ALL, PERFORMANCE, TaskDataset
from ..llm_tasks.items import TaskItem, read_rows, require_columns, token_ids

PERF_FILE = "perf/perf_eval_ref.parquet"
ACC_FILE = "acc/acc_eval_inputs.parquet"
TEST07_FILE = "acc/acc_eval_compliance_gpqa.parquet"
COUNTS = {PERFORMANCE: 6396, ACCURACY: 4395}
TEST07_COUNT = 990
SAMPLE_FILE = "gpt_oss_120b_acc_sample.jsonl"

# The reference's developer instructions per sub-data set (language/gpt-oss-120b/preprocess/harmonize_inputs.py,
# mlcommons/inference 34a8c74a), which the substitute gets as its system message, after Harmony's reasoning-effort
# line. Keys: the first contained in the lower-cased sub-data set name.
BREVITY = ("Do not repeat steps and output the final answer immediately once you have it. Once you have a candidate "
           "answer, do not spend more than ~100 tokens to verify it - instead, do a quick check and answer "
           "immediately. Avoid thinking for a long time. It is important to answer in as few tokens as possible.")
INSTRUCTIONS = {
    "aime": "You are a math expert that solves problems step-by-step. " + BREVITY + " The final line of your "
            "response should contain the final answer as an integer enclosed in \\boxed{answer}.",
    "gpqa": "You are an expert in Biology, Physics and Chemistry who answers scientific questions accurately. "
            + BREVITY + " After your reasoning, provide your final answer on a new line in the format: 'Answer: X' "
            "where X is the letter choice.",
    "livecodebench": "You are a python coding expert that solves problems step-by-step. You must provide the "
                     "reasoning to arriving at your solution and the code to solve the problem." + BREVITY +
                     " The code should be enclosed within ```python delimiters.",
}
# Harmony's system message of the accuracy prompts; the substitute reads it as plain text.
REASONING = "Reasoning: high"

_R2 = "bash <(curl -s https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh)"
HOW_TO_GET = (
    "The data set is MLCommons' gpt-oss-120b download (language/gpt-oss-120b/README.md, 'Datasets'): "
    f"{PERF_FILE} (6396 prompts), {ACC_FILE} (4395) and {TEST07_FILE} (990), Harmony-rendered and tokenized. "
    f"Download it with MLCommons' downloader, `{_R2} -d <folder> https://inference.mlcommons-storage.org/metadata/"
    "gpt-oss-120b-dataset.uri`, or with MLCFlow (`pip install mlc-scripts`, then `mlcr get-dataset-mlperf-inference-"
    "gpt-oss,_mlc,_r2-downloader --outdirname=<folder> -j`), and put its acc/ and perf/ folders into the data set "
    "folder.")


def instructions(subset: str) -> str:
    name = subset.lower()
    return next((text for key, text in INSTRUCTIONS.items() if key in name), "")


def read_gpt_oss(path: Path) -> list[TaskItem]:
    """Rows as items: the file's Harmony token ids (`input_tokens`, else `tok_input`) for the closed model, the raw
    `question` (where the file has it) with the reference's instructions for the substitute; `ground_truth` where
    the file has answers (the accuracy and TEST07 files)."""
    rows = read_rows(path)
    require_columns(rows, ("dataset",), path, "a gpt-oss-120b data file of the reference")
    items = []
    for index, row in enumerate(rows):
        ids = token_ids(row.get("input_tokens", row.get("tok_input")))
        question = row.get("question")
        if ids is None and question is None:
            raise UserError(f"{path}: row {index} has neither prompt token ids (input_tokens, tok_input) nor a "
                            f"question.", exit_code=EXIT_FAILURE)
        subset = str(row["dataset"])
        items.append(TaskItem(user=str(question or ""), system=f"{REASONING}\n\n{instructions(subset)}".strip(),
                              reference=str(row.get("ground_truth", "")), subset=subset, tok_input=ids, row=row))
    return items


DATASETS = {
    "gpt_oss_eval": TaskDataset(
        spec=DatasetSpec(name="gpt_oss_eval", sample_count=COUNTS[PERFORMANCE], how_to_get=HOW_TO_GET,
                         description="gpt-oss-120b's MLPerf data: 6396 performance prompts, 4395 accuracy prompts "
                                     "(AIME 2025, GPQA diamond, LiveCodeBench v6) and 990 TEST07 GPQA prompts"),
        files={PERFORMANCE: PERF_FILE, ACCURACY: ACC_FILE}, read=read_gpt_oss, part_counts=COUNTS),
    # TEST07's own data set, from the same download (and folder) as gpt_oss_eval.
    "gpt_oss_compliance_gpqa": TaskDataset(
        spec=DatasetSpec(name="gpt_oss_compliance_gpqa", sample_count=TEST07_COUNT, how_to_get=HOW_TO_GET,
                         description="990 GPQA diamond prompts with their answers: gpt-oss-120b's TEST07 data set"),
        files={ALL: TEST07_FILE}, read=read_gpt_oss, part_counts={ALL: TEST07_COUNT}, folder="gpt_oss_eval"),
    "gpt_oss_sample": TaskDataset(
        spec=DatasetSpec(name="gpt_oss_sample", sample_count=31,
                         description="31 real items (AIME 2025 30, LiveCodeBench v6 1) as raw questions, for "
                                     "development and CI (not a submission data set)",
                         how_to_get="Kept beside the repository in ../shared/data/gpt_oss_120b_sample; `make "
                                    "download_data` links it into the scratch data folder."),
        files={ALL: SAMPLE_FILE}, read=read_gpt_oss, shared=f"gpt_oss_120b_sample/{SAMPLE_FILE}"),
}
