"""Prompts of the LLM benchmarks: each article in the reference's prompt template, tokenized once.

The preprocessed set is one `prompts.npz` (all prompts' tokens back to back, int32, with offsets) and a
`manifest.json` saying what it was made from and the digest of the `prompts.npz` written (integrity.py:
checked whenever the set is opened; `make preprocess_data` makes a changed one again). For each prompt it also
records where the article's tokens are, so that a development run can cap the prompt length (`max_input_tokens`)
by cutting the article's end, never the instruction around it, without preprocessing again.

- The MLCommons files (`cnn_eval`, `cnn_eval_5000`) with the closed model: the prompts are the file's `tok_input`,
  as the reference feeds them (no chat template); their article spans are unknown, so they cannot be capped.
- Otherwise the article goes into the reference's template, wrapped in the model's chat template where the model
  is an instruct model that expects it (the substitute), and is tokenized here.
"""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np

from ..common.benchmark_api import Log
from ..common.errors import EXIT_FAILURE, UserError
from ..common.fileio import atomic_path
from ..common.integrity import FileDigest, changed_source, problem, source_sha256
from ..common.paths import Paths
from ..llm.prompt_set import PromptSet
from . import datasets as _datasets
from . import models as _models

FORMAT_VERSION = 1
PROMPTS_FILE = "prompts.npz"
MANIFEST_FILE = "manifest.json"
PROMPTS_DIGEST = "prompts_file"     # manifest key: the FileDigest of prompts.npz as written


def preprocess_hint(benchmark: str, model: str, dataset: str) -> str:
    return f'make preprocess_data RUN_ARGS="--benchmarks={benchmark} --model={model} --dataset={dataset}"'


def _manifest(model: str, dataset: str, paths: Paths, benchmark: str) -> dict:
    source = _datasets.dataset_file(dataset, paths)
    return {"format": FORMAT_VERSION, "benchmark": benchmark, "model": model, "dataset": dataset,
            "dataset_sha256": source_sha256(source) if source.is_file() else None,
            "tokenizer": _models.tokenizer_source(model, paths, benchmark),
            "template": _datasets.PROMPT_TEMPLATE, "chat_template": _models.facts(model).chat_template,
            "uses_tok_input": _uses_tok_input(model, dataset)}


def _uses_tok_input(model: str, dataset: str) -> bool:
    return model == _models.LLAMA and dataset != "cnndm_sample"


def _directory(benchmark: str, model: str, dataset: str, paths: Paths) -> Path:
    return paths.preprocessed_dir(benchmark, model, dataset)


def preprocess(model: str, dataset: str, paths: Paths, log: Log, benchmark: str = _models.BENCHMARK) -> PromptSet:
    """Write (or reuse, when its manifest matches) the tokenized prompts."""
    _models.facts(model)
    _datasets.check_dataset(dataset)
    directory = _directory(benchmark, model, dataset, paths)
    source = _datasets.dataset_file(dataset, paths)
    if not source.is_file():
        raise UserError(f"The data set file {source} is missing. Run `{_datasets.download_hint(dataset)}` first.",
                        exit_code=EXIT_FAILURE)
    expected = _manifest(model, dataset, paths, benchmark)
    try:
        current = json.loads((directory / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        current = None
    if current is not None and {k: current.get(k) for k in expected} == expected:
        damage = _prompts_problem(directory, current)
        if damage is None:
            log(f"preprocessed prompts up to date: {directory}")
            return preprocessed(model, dataset, paths, benchmark)
        log(f"{directory / PROMPTS_FILE} {damage}: tokenizing the prompts again")
    if _uses_tok_input(model, dataset):
        prompts, spans = _tok_inputs(source)
    else:
        prompts, spans = _tokenize(model, dataset, paths, benchmark, log)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST_FILE).unlink(missing_ok=True)     # stale until the new manifest is written, last
    offsets = np.zeros(len(prompts) + 1, dtype=np.int64)
    np.cumsum([len(p) for p in prompts], out=offsets[1:])
    with atomic_path(directory / PROMPTS_FILE, ".tmp.npz") as tmp:
        np.savez(tmp, tokens=np.concatenate(prompts).astype(np.int32), offsets=offsets,
                 article_spans=np.asarray(spans, dtype=np.int64).reshape(-1, 2))
    lengths = np.diff(offsets)
    written = FileDigest.of(directory / PROMPTS_FILE).to_dict()
    with atomic_path(directory / MANIFEST_FILE) as tmp:
        tmp.write_text(json.dumps({**expected, "samples": len(prompts), "max_prompt_tokens": int(lengths.max()),
                                   "mean_prompt_tokens": round(float(lengths.mean()), 1), PROMPTS_DIGEST: written},
                                  indent=2) + "\n")
    log(f"{len(prompts)} prompts tokenized ({int(lengths.min())} to {int(lengths.max())} tokens, mean "
        f"{lengths.mean():.0f})")
    return preprocessed(model, dataset, paths, benchmark)


def _prompts_problem(directory: Path, manifest: dict) -> str | None:
    """Why prompts.npz is not the file the manifest records (a clause), or None."""
    recorded = FileDigest.from_dict(manifest.get(PROMPTS_DIGEST))
    if recorded is None:
        return "has no digest in its manifest (made by an older version)"
    return problem(directory / PROMPTS_FILE, recorded)


def _tokenize(model: str, dataset: str, paths: Paths, benchmark: str, log: Log):
    tokenizer = _models.tokenizer(model, paths, benchmark)
    chat = _models.facts(model).chat_template
    marker = "\x00ARTICLE\x00"
    template = _datasets.PROMPT_TEMPLATE.format(input=marker)
    text = tokenizer.chat_prompt(template) if chat else template
    head, _, tail = text.partition(marker)
    head_ids = tokenizer.encode(head, add_bos=True)
    tail_ids = tokenizer.encode(tail, add_bos=False)
    articles = _datasets.load_articles(dataset, paths)
    log(f"tokenizing {len(articles)} {dataset} prompts for {model} ...")
    prompts, spans = [], []
    for article in articles:
        body = tokenizer.encode(article.article, add_bos=False)
        prompts.append(np.asarray(head_ids + body + tail_ids, dtype=np.int32))
        spans.append((len(head_ids), len(head_ids) + len(body)))
    return prompts, spans


def _tok_inputs(source: Path):
    rows = json.loads(source.read_text())
    prompts = [np.asarray(row["tok_input"], dtype=np.int32) for row in rows]
    return prompts, [(-1, -1)] * len(prompts)


def preprocessed(model: str, dataset: str, paths: Paths, benchmark: str = _models.BENCHMARK) -> PromptSet:
    """The preprocessed prompts; UserError naming `make preprocess_data` when missing or made from other inputs."""
    directory = _directory(benchmark, model, dataset, paths)
    hint = preprocess_hint(benchmark, model, dataset)
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        raise UserError(f"No preprocessed prompts of {dataset} for {model} in {directory} (no readable "
                        f"{MANIFEST_FILE}). Run `{hint}`.", exit_code=EXIT_FAILURE) from None
    damage = _prompts_problem(directory, manifest)
    if damage is not None:
        raise UserError(f"{directory / PROMPTS_FILE} {damage}. Run `{hint}`: it makes the prompts again.",
                        exit_code=EXIT_FAILURE)
    try:
        with np.load(directory / PROMPTS_FILE) as data:
            prompts = PromptSet(directory, data["tokens"], data["offsets"], data["article_spans"])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
        raise UserError(f"{directory / PROMPTS_FILE} cannot be read as preprocessed prompts ({error}). Run "
                        f"`{hint}`: it makes them again.", exit_code=EXIT_FAILURE) from None
    if manifest.get("format") != FORMAT_VERSION or manifest.get("model") != model or \
            manifest.get("samples") != len(prompts) or manifest.get("template") != _datasets.PROMPT_TEMPLATE:
        raise UserError(f"The preprocessed prompts in {directory} were made by another version or from other "
                        f"inputs. Run `{hint}` again.", exit_code=EXIT_FAILURE)
    check_source(model, dataset, paths, benchmark, manifest)
    return prompts


def check_source(model: str, dataset: str, paths: Paths, benchmark: str = _models.BENCHMARK,
                 manifest: dict | None = None) -> None:
    """UserError naming the data set file and `make preprocess_data` when it changed since its prompts were made
    (the prompts would be the old articles, the references the new); nothing to compare without prompts."""
    if manifest is None:
        try:
            manifest = json.loads((_directory(benchmark, model, dataset, paths) / MANIFEST_FILE).read_text())
        except (OSError, ValueError):
            return
    source = _datasets.dataset_file(dataset, paths)
    why = changed_source(source, manifest.get("dataset_sha256") if isinstance(manifest, dict) else None)
    if why is not None:
        raise UserError(f"The data set file {source} {why}: the preprocessed prompts of {model} are the old ones, "
                        f"and the summaries would be scored against the new references. Run "
                        f"`{preprocess_hint(benchmark, model, dataset)}` again.", exit_code=EXIT_FAILURE)
