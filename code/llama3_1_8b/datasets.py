"""The CNN/DailyMail data sets of benchmark llama3.1-8b: where they come from, how they are read, the prompt.

The MLCommons files (`cnn_eval.json`, `sample_cnn_eval_5000.json`) are JSON lists of `{"instruction", "input",
"tok_input", "output"}`: the article, the Llama-3.1 token ids of the whole prompt, and the reference highlights.
The QSL order is the file's order, as the reference (language/llama3.1-8b/dataset.py) reads it with pandas.
`cnndm_sample` is 250 CNN/DailyMail test articles kept beside the repository for development and CI, a JSON list
of `{"id", "article", "highlights"}` whose highlights are PTB-tokenized (`-LRB-`, ` 's`, ` .`); they are
detokenized on reading, so that every data set hands the scorer plain text, as the MLCommons `output` is.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from ..common.benchmark_api import DatasetSpec, Log
from ..common.errors import EXIT_FAILURE, UserError, choose
from ..common.paths import Paths

BENCHMARK = "llama3.1-8b"
CNN_EVAL_COUNT = 13368
CNN_EVAL_5000_COUNT = 5000
CNNDM_SAMPLE_COUNT = 250
DATASET_FILES = {"cnndm_sample": "cnndm_test_250.json", "cnn_eval": "cnn_eval.json",
                 "cnn_eval_5000": "sample_cnn_eval_5000.json"}
MLCOMMONS_FIELDS = ("input", "tok_input", "output")

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

DATASETS: dict[str, DatasetSpec] = {
    "cnndm_sample": DatasetSpec(
        name="cnndm_sample",
        sample_count=CNNDM_SAMPLE_COUNT,
        description="250 CNN/DailyMail test articles with their reference highlights, for development and CI "
                    "(not a submission data set)",
        how_to_get=f"Kept beside the repository in ../shared/data/cnndm_sample ({DATASET_FILES['cnndm_sample']}); "
                   f"`make download_data` links it into the scratch data folder.",
    ),
    "cnn_eval": DatasetSpec(
        name="cnn_eval",
        sample_count=CNN_EVAL_COUNT,
        description="CNN/DailyMail 3.0.0 validation, 13368 articles: the MLPerf llama3.1-8b (datacenter) data set",
        how_to_get=_CNN_EVAL_HOW_TO,
    ),
    "cnn_eval_5000": DatasetSpec(
        name="cnn_eval_5000",
        sample_count=CNN_EVAL_5000_COUNT,
        description="5000 articles of CNN/DailyMail 3.0.0 validation: the MLPerf llama3.1-8b-edge data set",
        how_to_get=_CNN_EVAL_5000_HOW_TO,
    ),
}


@dataclass(frozen=True)
class Article:
    """One sample: what the prompt and the scorer need. `reference` is plain text (never PTB-tokenized)."""

    id: str
    article: str
    reference: str


def check_dataset(dataset: str) -> DatasetSpec:
    return choose(DATASETS, dataset, "data set", BENCHMARK)


def download_hint(dataset: str) -> str:
    return f'make download_data RUN_ARGS="--benchmarks={BENCHMARK} --dataset={dataset}"'


def dataset_file(dataset: str, paths: Paths) -> Path:
    """Where the data set's JSON file is once `make download_data` has run."""
    check_dataset(dataset)
    return paths.dataset_dir(dataset) / DATASET_FILES[dataset]


def prompt_text(article: Article | str) -> str:
    """The reference's prompt for one article (before any chat template)."""
    return PROMPT_TEMPLATE.format(input=article.article if isinstance(article, Article) else article)


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

@lru_cache(maxsize=4)
def _read_articles(path: str, size: int, mtime_ns: int, sample: bool) -> tuple[Article, ...]:
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read the data set file {path}: {error}", exit_code=EXIT_FAILURE) from None
    if not isinstance(rows, list):
        raise UserError(f"{path} is not a JSON list of samples", exit_code=EXIT_FAILURE)
    try:
        if sample:
            return tuple(Article(str(r["id"]), str(r["article"]), detokenize_ptb(str(r["highlights"])))
                         for r in rows)
        return tuple(Article(str(i), str(r["input"]), str(r["output"])) for i, r in enumerate(rows))
    except (KeyError, TypeError) as error:
        fields = "id, article, highlights" if sample else "input, output"
        raise UserError(f"{path}: a sample lacks one of the fields {fields} ({error!r})",
                        exit_code=EXIT_FAILURE) from None


def read_articles(path: Path, sample_format: bool = False) -> list[Article]:
    """The samples of a data set file in its order (cached while the file is unchanged)."""
    try:
        stat = Path(path).stat()
    except OSError as error:
        raise UserError(f"cannot read the data set file {path}: {error}", exit_code=EXIT_FAILURE) from None
    return list(_read_articles(str(path), stat.st_size, stat.st_mtime_ns, sample_format))


def load_articles(dataset: str, paths: Paths) -> list[Article]:
    """The data set's samples in QSL order (the file's order); UserError naming `make download_data` when the
    file is absent."""
    source = dataset_file(dataset, paths)
    if not source.is_file():
        raise UserError(f"Data set {dataset} is not at {source}. Run `{download_hint(dataset)}` first.",
                        exit_code=EXIT_FAILURE)
    return read_articles(source, sample_format=dataset == "cnndm_sample")


# -- download_data --------------------------------------------------------------------------------

def download_data(dataset: str, paths: Paths, log: Log) -> Path:
    """The data set's file in the scratch data folder: cnndm_sample is linked from ../shared; the MLCommons files
    are never downloaded (they are behind MLCommons' own downloader) but checked where the user put them."""
    check_dataset(dataset)
    if dataset == "cnndm_sample":
        return _link_cnndm_sample(paths, log)
    return _check_mlcommons_file(dataset, paths, log)


def cnndm_sample_source(paths: Paths) -> Path:
    return paths.repo.parent / "shared" / "data" / "cnndm_sample" / DATASET_FILES["cnndm_sample"]


def _link_cnndm_sample(paths: Paths, log: Log) -> Path:
    source, target = cnndm_sample_source(paths), dataset_file("cnndm_sample", paths)
    if not source.is_file():
        raise UserError(f"cnndm_sample: {source} is absent; it is development data kept beside the repository, not "
                        f"part of a fresh clone. Put it there, or bring the MLCommons data set: "
                        f"`{download_hint('cnn_eval')}` says how.", exit_code=EXIT_FAILURE)
    if target.is_symlink():
        if target.resolve() == source.resolve():
            log(f"cnndm_sample: {target} already links to {source}")
            return target
        target.unlink()   # dangling or pointing elsewhere: replace it
    elif target.exists():
        log(f"cnndm_sample: {target} is a file of yours; it stays")
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    target.symlink_to(source)
    log(f"cnndm_sample: {target} -> {source}")
    return target


def _check_mlcommons_file(dataset: str, paths: Paths, log: Log) -> Path:
    spec, target = DATASETS[dataset], dataset_file(dataset, paths)
    where = f"Put {DATASET_FILES[dataset]} at {target}.\n{spec.how_to_get}"
    if not target.is_file():
        raise UserError(f"{dataset}: not found ({target} is missing).\n{where}", exit_code=EXIT_FAILURE)
    rows = _rows(target)
    problem = None
    if len(rows) != spec.sample_count:
        problem = f"it holds {len(rows)} samples, the data set has {spec.sample_count}"
    else:
        lacking = next((i for i, row in enumerate(rows)
                        if not isinstance(row, dict) or any(f not in row for f in MLCOMMONS_FIELDS)), None)
        if lacking is not None:
            problem = f"sample {lacking} lacks one of the fields {', '.join(MLCOMMONS_FIELDS)}"
    if problem:
        raise UserError(f"{dataset}: {target} is not the MLCommons file: {problem}.\n{where}", exit_code=EXIT_FAILURE)
    log(f"{dataset}: {len(rows)} samples present in {target}")
    return target


def _rows(path: Path) -> list[Any]:
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read the data set file {path}: {error}", exit_code=EXIT_FAILURE) from None
    if not isinstance(rows, list):
        raise UserError(f"{path} is not a JSON list of samples", exit_code=EXIT_FAILURE)
    return rows


# -- calibration ----------------------------------------------------------------------------------

def calibration_indices(dataset: str, count: int, paths: Paths) -> Sequence[int]:
    """QSL indices of at most `count` calibration samples: the first `count`.

    The toolkit runs the LLM unquantized, which needs no calibration; the list exists for the harness's
    interface. (MLCommons publishes a separate calibration set drawn from the training split,
    cnn_dailymail_calibration.json, for submitters who quantize; it is not one of these data sets.)
    """
    if count < 1:
        raise UserError(f"calibration count must be at least 1, got {count}")
    total = check_dataset(dataset).sample_count or 0
    return list(range(min(count, total)))
