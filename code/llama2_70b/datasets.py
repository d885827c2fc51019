"""The OpenOrca data sets of llama2-70b-99.9.

The MLCommons file is `open_orca_gpt4_tokenized_llama.sampled_24576.pkl` (language/llama2-70b/processorca.py of
mlcommons/inference): a pandas DataFrame of 24576 rows with `system_prompt`, `question`, `output` (GPT-4's answer,
the ROUGE target), `input` (the Llama-2 chat prompt), `tok_input` (its Llama-2 token ids, which the reference feeds
the model) and `origin` (cot, flan, niv or t0). `openorca_sample` is 40 rows of MLCommons' calibration file with the
same columns, kept beside the repository for development and CI.
"""
from __future__ import annotations

from pathlib import Path

from ..common.benchmark_api import DatasetSpec
from ..llm_tasks.datasets import ALL, TaskDataset
from ..llm_tasks.items import TaskItem, read_rows, require_columns, token_ids

OPEN_ORCA_FILE = "open_orca_gpt4_tokenized_llama.sampled_24576.pkl"
OPEN_ORCA_COUNT = 24576
SAMPLE_FILE = "open_orca_llama2_40.jsonl"
COLUMNS = ("system_prompt", "question", "output", "tok_input")

_R2 = "bash <(curl -s https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/mlc-r2-downloader.sh)"
HOW_TO_GET = (
    "The data set is MLCommons' preprocessed OpenOrca validation set (24576 samples with Llama-2 token ids), "
    f"{OPEN_ORCA_FILE}, from the llama2-70b reference (language/llama2-70b/README.md, 'Get Dataset'). Download it "
    f"with MLCommons' downloader, `{_R2} -d <folder> https://inference.mlcommons-storage.org/metadata/"
    "llama-2-70b-open-orca-dataset.uri`, or with MLCFlow (`pip install mlc-scripts`, then `mlcr get,dataset,"
    "preprocessed,openorca,_validation,_r2-downloader,_mlc --outdirname=<folder> -j`), then move or link the file "
    "into the data set folder.")


def read_open_orca(path: Path) -> list[TaskItem]:
    """OpenOrca rows as items: the system prompt and question for the substitute's chat template, the file's
    Llama-2 token ids for the closed model, GPT-4's answer as the ROUGE target."""
    rows = read_rows(path)
    require_columns(rows, COLUMNS, path, "an OpenOrca file of the llama2-70b reference")
    return [TaskItem(user=str(row["question"]), system=str(row["system_prompt"] or ""), reference=str(row["output"]),
                     subset=str(row.get("origin") or str(row.get("id", "")).split(".")[0]),
                     tok_input=token_ids(row["tok_input"]))
            for row in rows]


DATASETS = {
    "open_orca": TaskDataset(
        spec=DatasetSpec(name="open_orca", sample_count=OPEN_ORCA_COUNT, how_to_get=HOW_TO_GET,
                         description="OpenOrca (GPT-4 answers to FLAN prompts), 24576 samples: the MLPerf "
                                     "llama2-70b data set"),
        files={ALL: OPEN_ORCA_FILE}, read=read_open_orca, part_counts={ALL: OPEN_ORCA_COUNT}),
    "openorca_sample": TaskDataset(
        spec=DatasetSpec(name="openorca_sample", sample_count=40,
                         description="40 rows of MLCommons' OpenOrca calibration file (10 each of cot, flan, niv, "
                                     "t0), for development and CI (not a submission data set)",
                         how_to_get="Kept beside the repository in ../shared/data/openorca_sample; `make "
                                    "download_data` links it into the scratch data folder."),
        files={ALL: SAMPLE_FILE}, read=read_open_orca, shared=f"openorca_sample/{SAMPLE_FILE}"),
}
