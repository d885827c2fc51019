"""The data sets of deepseek-r1.

The MLCommons file is `mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl` (language/deepseek-r1/README.md): a pandas
DataFrame of 4388 rows whose `text_input` is the prompt (the official prompt template of its sub-data set already
applied), `tok_input` its DeepSeek-R1 token ids with the chat template (what the reference feeds the model),
`ground_truth` (or `gt_output`) the answer and `dataset` the sub-data set (aime1983, math500, mmlu_pro, gpqa,
livecodebench). `deepseek_r1_sample` is 43 real items of those sub-data sets (no GPQA, whose terms forbid posting
it) with `text_input` built by the official templates, kept beside the repository for development and CI.
"""
from __future__ import annotations

from pathlib import Path

from ..common.benchmark_api import DatasetSpec
from ..llm_tasks.datasets import ALL, TaskDataset
from ..llm_tasks.items import TaskItem, read_rows, require_columns, token_ids

EVAL_FILE = "mlperf_deepseek_r1_dataset_4388_fp8_eval.pkl"
EVAL_COUNT = 4388
SAMPLE_FILE = "deepseek_r1_sample.jsonl"

_R2 = "bash <(curl -s https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh)"
HOW_TO_GET = (
    f"The data set is MLCommons' DeepSeek-R1 evaluation set, {EVAL_FILE} (4388 prompts with DeepSeek-R1 token ids), "
    "from the deepseek-r1 reference (language/deepseek-r1/README.md, 'Dataset Download'). Download it with "
    f"MLCommons' downloader, `{_R2} -d <folder> https://inference.mlcommons-storage.org/metadata/"
    "deepseek-r1-datasets-fp8-eval.uri`, or with MLCFlow (`pip install mlc-scripts`, then `mlcr get,preprocessed,"
    "dataset,deepseek-r1,_validation,_mlc,_r2-downloader --outdirname=<folder> -j`), then move or link the file into "
    "the data set folder.")


def read_deepseek(path: Path) -> list[TaskItem]:
    """Rows as items: `text_input` as the user turn for the substitute, `tok_input` for the closed model, the
    ground truth (`gt_output` where present, as eval_accuracy.py prefers it) as the reference."""
    rows = read_rows(path)
    require_columns(rows, ("text_input", "dataset"), path, "a DeepSeek-R1 data file of the reference")
    items = []
    for index, row in enumerate(rows):
        truth = row.get("gt_output", row.get("ground_truth"))
        if truth is None:
            require_columns([row], ("ground_truth",), path, "a DeepSeek-R1 accuracy file (ground truth per row)")
        items.append(TaskItem(user=str(row["text_input"]), reference=str(truth), subset=str(row["dataset"]),
                              tok_input=token_ids(row.get("tok_input")), row=row))
    return items


DATASETS = {
    "deepseek_r1_eval": TaskDataset(
        spec=DatasetSpec(name="deepseek_r1_eval", sample_count=EVAL_COUNT, how_to_get=HOW_TO_GET,
                         description="AIME 1983-2024, MATH-500, MMLU-Pro, GPQA diamond and LiveCodeBench prompts, "
                                     "4388 samples: the MLPerf deepseek-r1 data set"),
        files={ALL: EVAL_FILE}, read=read_deepseek, part_counts={ALL: EVAL_COUNT}),
    "deepseek_r1_sample": TaskDataset(
        spec=DatasetSpec(name="deepseek_r1_sample", sample_count=43,
                         description="43 real items (AIME 12, MATH-500 15, MMLU-Pro 15, LiveCodeBench 1) in the "
                                     "official prompt templates, for development and CI (not a submission data set)",
                         how_to_get="Kept beside the repository in ../shared/data/deepseek_r1_sample; `make "
                                    "download_data` links it into the scratch data folder."),
        files={ALL: SAMPLE_FILE}, read=read_deepseek, shared=f"deepseek_r1_sample/{SAMPLE_FILE}"),
}
