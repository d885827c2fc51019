"""The CNN/DailyMail data sets of benchmark llama3.1-8b: where they come from, how they are read, the prompt.

The MLCommons files (`cnn_eval.json`, `sample_cnn_eval_5000.json`) are JSON lists of `{"instruction", "input",
"tok_input", "output"}`: the article, the Llama-3.1 token ids of the whole prompt, and the reference highlights.
The QSL order is the file's order, as the reference (language/llama3.1-8b/dataset.py) reads it with pandas.
`cnndm_sample` is 250 CNN/DailyMail test articles kept beside the repository for development and CI, a JSON list
of `{"id", "article", "highlights"}` whose highlights are PTB-tokenized (`-LRB-`, ` 's`, ` .`); they are
detokenized on reading, so that every data set hands the scorer plain text, as the MLCommons `output` is.
Each item's text is the article; the prompt is the reference's template around it (PROMPT_TEMPLATE).
"""
from __future__ import annotations

from pathlib import Path

from ..common.benchmark_api import DatasetSpec
from ..llm_tasks.datasets import ALL, TaskDataset
from ..llm_tasks.items import TaskItem, read_rows, require_columns, token_ids

CNN_EVAL_COUNT = 13368
CNN_EVAL_5000_COUNT = 5000
CNNDM_SAMPLE_COUNT = 250
DATASET_FILES = {"cnndm_sample": "cnndm_test_250.json", "cnn_eval": "cnn_eval.json",
                 "cnn_eval_5000": "sample_cnn_eval_5000.json"}
SUBSET = "cnn_dailymail"

# The reference's instruction template, verbatim (language/llama3.1-8b/download_cnndm.py, prepare-calibration.py):
# the MLCommons files' tok_input is the Llama-3.1 tokenization of this text with the article in place of {input}.
PROMPT_TEMPLATE = ("Summarize the following news article in 128 tokens. Please output the summary only, without any "
                   "other text.\n\nArticle:\n{input}\n\nSummary:")

_R2_DOWNLOADER = "bash <(curl -s https://raw.githubusercontent.com/mlcommons/r2-downloader/refs/heads/main/" \
                 "mlc-r2-downloader.sh)"
_CNN_EVAL_HOW_TO = (
    "The datacenter data set is MLCommons' preprocessed CNN/DailyMail 3.0.0 validation split (13368 samples with "
    "the Llama-3.1 tokenized prompts), cnn_eval.json, from the llama3.1-8b reference (language/llama3.1-8b/"
    "README.md, 'Get Dataset'). It is on MLCommons' R2 bucket: download it with MLCommons' downloader, "
    f"`{_R2_DOWNLOADER} -d <folder> https://inference.mlcommons-storage.org/metadata/llama3-1-8b-cnn-eval.uri`, "
    "or with MLCFlow (`pip install mlc-scripts`, then `mlcr get,dataset,cnndm,_validation,_datacenter,_llama3,_mlc,"
    "_r2-downloader --outdirname=<folder> -j`), then move or link cnn_eval.json into the data set folder.")
_CNN_EVAL_5000_HOW_TO = (
    "The edge data set is MLCommons' 5000-sample subset of the same preprocessed CNN/DailyMail validation split, "
    "sample_cnn_eval_5000.json, from the llama3.1-8b reference (language/llama3.1-8b/README.md, 'Get Dataset'). "
    f"Download it with MLCommons' downloader, `{_R2_DOWNLOADER} -d <folder> https://inference.mlcommons-storage.org/"
    "metadata/llama3-1-8b-sample-cnn-eval-5000.uri`, or with MLCFlow (`pip install mlc-scripts`, then "
    "`mlcr get,dataset,cnndm,_validation,_edge,_llama3,_mlc,_r2-downloader --outdirname=<folder> -j`), then move or "
    "link sample_cnn_eval_5000.json into the data set folder.")


def prompt_text(article: TaskItem | str) -> str:
    """The reference's prompt for one article (before any chat template)."""
    return PROMPT_TEMPLATE.format(input=article.user if isinstance(article, TaskItem) else article)


# -- PTB detokenization ---------------------------------------------------------------------------

_BRACKETS = {"-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"}
_ATTACH_LEFT = {".", ",", ":", ";", "?", "!", "%", ")", "]", "}", "...", "n't", "'s", "'re", "'ve", "'ll", "'d",
                "'m"}
_ATTACH_RIGHT = {"(", "[", "{", "$", "£", "€", "#"}


def detokenize_ptb(text: str) -> str:
    """Plain text from Penn-Treebank-tokenized text, as the untokenized highlights read.

    ROUGE's tokenizer keeps only letters and digits, so `did n't` would count as three words where the MLCommons
    references (never tokenized) have two, `didn't`: the sample's references must be detokenized for its figures
    to mean what the official ones mean. Brackets (-LRB- ...) become characters; clitics (n't, 's, 're, ...) and
    closing punctuation join the word before; currency signs and opening brackets the word after; `` ... ''
    becomes "...", and ` ... ' becomes '...' (a closing ' and an apostrophe, `Barrientos ' case`, both join the
    word before). The tokenizer's second period after a sentence-final abbreviation (`D.C. .`) is dropped.
    """
    out: list[str] = []
    glue_next = False
    for token in text.split():
        token = _BRACKETS.get(token, token)
        if token == "." and out and out[-1].endswith("."):
            continue
        attach_left, attach_right = token.lower() in _ATTACH_LEFT, token in _ATTACH_RIGHT
        if token in ("``", "`"):
            token, attach_right = ('"' if token == "``" else "'"), True
        elif token in ("''", "'"):
            token, attach_left = ('"' if token == "''" else "'"), True
        if out and not attach_left and not glue_next:
            out.append(" ")
        out.append(token)
        glue_next = attach_right
    return "".join(out)


# -- reading --------------------------------------------------------------------------------------

def read_cnn_eval(path: Path) -> list[TaskItem]:
    """An MLCommons file as items: the article (`input`), its prompt's Llama-3.1 token ids (`tok_input`, which the
    reference feeds the closed model) and the reference highlights (`output`, plain text)."""
    rows = read_rows(path)
    require_columns(rows, ("input", "output"), path, "an MLCommons CNN/DailyMail file of the llama3.1-8b reference")
    return [TaskItem(user=str(row["input"]), reference=str(row["output"]), subset=SUBSET,
                     tok_input=token_ids(row.get("tok_input")), row={"id": str(index)})
            for index, row in enumerate(rows)]


def read_cnndm_sample(path: Path) -> list[TaskItem]:
    """The development sample as items: the article, and its PTB-tokenized highlights as plain text."""
    rows = read_rows(path)
    require_columns(rows, ("id", "article", "highlights"), path, "the cnndm_sample file (CNN/DailyMail test articles)")
    return [TaskItem(user=str(row["article"]), reference=detokenize_ptb(str(row["highlights"])), subset=SUBSET,
                     row={"id": str(row["id"])})
            for row in rows]


DATASETS = {
    "cnndm_sample": TaskDataset(
        spec=DatasetSpec(
            name="cnndm_sample",
            sample_count=CNNDM_SAMPLE_COUNT,
            description="250 CNN/DailyMail test articles with their reference highlights, for development and CI "
                        "(not a submission data set)",
            how_to_get=f"Kept beside the repository in ../shared/data/cnndm_sample ({DATASET_FILES['cnndm_sample']}); "
                       f"`make download_data` links it into the scratch data folder."),
        files={ALL: DATASET_FILES["cnndm_sample"]}, read=read_cnndm_sample,
        shared=f"cnndm_sample/{DATASET_FILES['cnndm_sample']}",
        instead="Put it there, or bring the MLCommons data set: `make download_data RUN_ARGS=\"--benchmarks="
                "llama3.1-8b --dataset=cnn_eval\"` says how."),
    "cnn_eval": TaskDataset(
        spec=DatasetSpec(
            name="cnn_eval",
            sample_count=CNN_EVAL_COUNT,
            description="CNN/DailyMail 3.0.0 validation, 13368 articles: the MLPerf llama3.1-8b (datacenter) data set",
            how_to_get=_CNN_EVAL_HOW_TO),
        files={ALL: DATASET_FILES["cnn_eval"]}, read=read_cnn_eval, part_counts={ALL: CNN_EVAL_COUNT}),
    "cnn_eval_5000": TaskDataset(
        spec=DatasetSpec(
            name="cnn_eval_5000",
            sample_count=CNN_EVAL_5000_COUNT,
            description="5000 articles of CNN/DailyMail 3.0.0 validation: the MLPerf llama3.1-8b-edge data set",
            how_to_get=_CNN_EVAL_5000_HOW_TO),
        files={ALL: DATASET_FILES["cnn_eval_5000"]}, read=read_cnn_eval, part_counts={ALL: CNN_EVAL_5000_COUNT}),
}
