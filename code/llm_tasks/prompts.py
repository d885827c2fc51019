"""The tokenized prompts of a task benchmark: one `prompts.<part>.npz` per part of the data set and a
`manifest.json` saying what they were made from, with each file's digest (checked whenever the set is opened;
`make preprocess_data` makes a changed one again).

- The closed model on an official file with token ids: the prompts are the file's ids (`tok_input`, gpt-oss-120b's
  `input_tokens`), as the reference feeds them.
- The closed model on a file without them: the benchmark's own rendering of the reference's prompt text
  (`TaskBenchmark.closed_prompt`), tokenized with the model's tokenizer.
- The substitute: the prompt's text in the substitute's chat template (with the task's system message), tokenized
  here; where the benchmark has a prompt template (llama3.1-8b's instruction around the article), the user turn is
  that template with the text in its place. The position of the user text is recorded, so that a development run
  can cap a prompt's length (`max_input_tokens`) by cutting the end of the user text, never the template around it.
"""
from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

import numpy as np

from ..common.benchmark_api import Log
from ..common.errors import EXIT_FAILURE, UserError
from ..common.fileio import atomic_path
from ..common.integrity import FileDigest, changed_source, problem, source_sha256
from ..common.paths import Paths
from ..llm.prompt_set import PromptSet
from .datasets import TaskDataset, file_of, load_items, part_for
from .items import TaskItem

if TYPE_CHECKING:
    from ..llm.tokenizer import TextTokenizer

FORMAT_VERSION = 1
MANIFEST_FILE = "manifest.json"
_MARKER = "\x00USER\x00"


def prompts_file(part: str) -> str:
    return f"prompts.{part}.npz"


@dataclass(frozen=True)
class PromptSource:
    """How one benchmark and model make prompts: the closed model's own text (None: the file's token ids are
    required) or the substitute's chat template, and the tokenizer's identity for the manifest."""

    tokenizer: Callable[[], "TextTokenizer"]
    tokenizer_identity: str
    chat_template: bool                              # the substitute: the prompt goes into the model's template
    closed_prompt: Callable[[TaskItem], str] | None  # the closed model's prompt text where the file has no ids
    closed_needs_ids: str = ""                       # why the closed model cannot do without the file's ids
    template: str = ""        # the user turn around the item's text, at `{input}` ("": the text alone)

    def user_turn(self, text: str) -> str:
        return self.template.format(input=text) if self.template else text


@dataclass(frozen=True)
class TaskPrompts:
    """The preprocessed prompts of one (model, data set), per part. As a preprocessed set it is the first part
    (performance runs); `for_run` gives the part a kind of run reads."""

    directory: Path
    parts: Mapping[str, PromptSet]
    dataset: TaskDataset
    max_input_tokens: int = 0

    @property
    def default(self) -> PromptSet:
        return self._capped(self.dataset.parts[0])

    def _capped(self, part: str) -> PromptSet:
        return self.parts[part].capped(self.max_input_tokens)

    def __len__(self) -> int:
        return len(self.default)

    def load(self, index: int) -> np.ndarray:
        return self.default.load(index)

    def lengths(self) -> np.ndarray:
        return self.default.lengths()

    def capped(self, max_input_tokens: int) -> "TaskPrompts":
        return TaskPrompts(self.directory, self.parts, self.dataset, int(max_input_tokens))

    def for_run(self, accuracy: bool, audit_test: str | None) -> PromptSet:
        return self._capped(part_for(self.dataset, accuracy, audit_test))


def _manifest(benchmark: str, model: str, dataset: TaskDataset, source: PromptSource, paths: Paths) -> dict:
    files = {}
    for part in dataset.parts:
        path = file_of(dataset, part, paths)
        files[part] = source_sha256(path) if path.is_file() else None
    # A prompt template is recorded where the benchmark has one: editing it makes the prompts again.
    template = {"template": source.template} if source.template else {}
    return {"format": FORMAT_VERSION, "benchmark": benchmark, "model": model, "dataset": dataset.name,
            "dataset_sha256": files, "tokenizer": source.tokenizer_identity, "chat_template": source.chat_template,
            **template}


def preprocess(benchmark: str, model: str, dataset: TaskDataset, source: PromptSource, paths: Paths,
               log: Log) -> TaskPrompts:
    """Write (or reuse, when its manifest matches) the tokenized prompts of every part."""
    directory = paths.preprocessed_dir(benchmark, model, dataset.name)
    for part in dataset.parts:
        load_items(benchmark, dataset, part, paths)     # names `make download_data` when a file is missing
    expected = _manifest(benchmark, model, dataset, source, paths)
    current = _read_manifest(directory)
    if current is not None and {k: current.get(k) for k in expected} == expected:
        damage = _damage(directory, current, dataset)
        if damage is None:
            log(f"preprocessed prompts up to date: {directory}")
            return preprocessed(benchmark, model, dataset, paths, source.template)
        log(f"{damage}: tokenizing the prompts again")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MANIFEST_FILE).unlink(missing_ok=True)     # stale until the new manifest is written, last
    written, facts = {}, {}
    for part in dataset.parts:
        items = load_items(benchmark, dataset, part, paths)
        prompts, spans = _tokenize(items, source, f"{dataset.name} ({part})" if part != "all" else dataset.name,
                                   model, log)
        offsets = np.zeros(len(prompts) + 1, dtype=np.int64)
        np.cumsum([len(p) for p in prompts], out=offsets[1:])
        with atomic_path(directory / prompts_file(part), ".tmp.npz") as tmp:
            np.savez(tmp, tokens=np.concatenate(prompts).astype(np.int32), offsets=offsets,
                     article_spans=np.asarray(spans, dtype=np.int64).reshape(-1, 2))
        lengths = np.diff(offsets)
        written[part] = FileDigest.of(directory / prompts_file(part)).to_dict()
        facts[part] = {"samples": len(prompts), "max_prompt_tokens": int(lengths.max()),
                       "mean_prompt_tokens": round(float(lengths.mean()), 1)}
        log(f"{part}: {len(prompts)} prompts ({int(lengths.min())} to {int(lengths.max())} tokens, mean "
            f"{lengths.mean():.0f})")
    with atomic_path(directory / MANIFEST_FILE) as tmp:
        tmp.write_text(json.dumps({**expected, "parts": facts, "prompt_files": written}, indent=2) + "\n")
    return preprocessed(benchmark, model, dataset, paths, source.template)


def _tokenize(items: Sequence[TaskItem], source: PromptSource, what: str, model: str, log: Log):
    if not source.chat_template:
        if all(item.tok_input for item in items):
            log(f"{what}: the file's token ids are the prompts")
            return [np.asarray(item.tok_input, dtype=np.int32) for item in items], [(-1, -1)] * len(items)
        if source.closed_prompt is None:
            raise UserError(f"{what} has no prompt token ids, and {model} cannot be prompted without them: "
                            f"{source.closed_needs_ids}", exit_code=EXIT_FAILURE)
    tokenizer = source.tokenizer()
    log(f"tokenizing {len(items)} {what} prompts for {model} ...")
    prompts, spans = [], []
    for item in items:
        if source.chat_template:
            text = tokenizer.chat_prompt(source.user_turn(_MARKER), system=item.system)
        else:
            assert source.closed_prompt is not None
            text = source.closed_prompt(item).replace(item.user, _MARKER, 1) if item.user else \
                source.closed_prompt(item)
        head, _, tail = text.partition(_MARKER)
        head_ids = tokenizer.encode(head, add_bos=True)
        body = tokenizer.encode(item.user, add_bos=False) if _MARKER in text else []
        tail_ids = tokenizer.encode(tail, add_bos=False) if tail else []
        prompts.append(np.asarray(head_ids + body + tail_ids, dtype=np.int32))
        spans.append((len(head_ids), len(head_ids) + len(body)) if body else (-1, -1))
    return prompts, spans


def _read_manifest(directory: Path) -> dict | None:
    try:
        return json.loads((directory / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return None


def _damage(directory: Path, manifest: dict, dataset: TaskDataset) -> str | None:
    recorded = manifest.get("prompt_files") or {}
    for part in dataset.parts:
        digest = FileDigest.from_dict(recorded.get(part))
        if digest is None:
            return f"{directory / prompts_file(part)} has no digest in its manifest"
        found = problem(directory / prompts_file(part), digest)
        if found is not None:
            return f"{directory / prompts_file(part)} {found}"
    return None


def check_sources(benchmark: str, model: str, dataset: TaskDataset, paths: Paths, manifest: dict | None = None,
                  parts: Sequence[str] | None = None) -> None:
    """UserError naming the data set file and `make preprocess_data` when a file of `parts` (default: all) changed
    since its prompts were made: its prompts would be the old ones and its references the new. Without
    preprocessed prompts there is nothing to compare."""
    manifest = manifest if manifest is not None else \
        _read_manifest(paths.preprocessed_dir(benchmark, model, dataset.name))
    if manifest is None:
        return
    recorded = manifest.get("dataset_sha256") or {}
    for part in parts if parts is not None else dataset.parts:
        path = file_of(dataset, part, paths)
        why = changed_source(path, recorded.get(part) if isinstance(recorded, dict) else None)
        if why is not None:
            raise UserError(f"The data set file {path} {why}: the preprocessed prompts of {model} are the old ones, "
                            f"and the answers would be scored against the new references. Run "
                            f"`{preprocess_hint(benchmark, model, dataset.name)}` again.", exit_code=EXIT_FAILURE)


def preprocess_hint(benchmark: str, model: str, dataset: str) -> str:
    return f'make preprocess_data RUN_ARGS="--benchmarks={benchmark} --model={model} --dataset={dataset}"'


def preprocessed(benchmark: str, model: str, dataset: TaskDataset, paths: Paths, template: str = "") -> TaskPrompts:
    """The preprocessed prompts (made with the prompt template `template`); UserError naming `make preprocess_data`
    when missing, damaged or stale."""
    directory = paths.preprocessed_dir(benchmark, model, dataset.name)
    hint = preprocess_hint(benchmark, model, dataset.name)
    manifest = _read_manifest(directory)
    if manifest is None:
        raise UserError(f"No preprocessed prompts of {dataset.name} for {model} in {directory} (no readable "
                        f"{MANIFEST_FILE}). Run `{hint}`.", exit_code=EXIT_FAILURE)
    if manifest.get("format") != FORMAT_VERSION or manifest.get("model") != model \
            or set(manifest.get("parts") or {}) != set(dataset.parts) or manifest.get("template", "") != template:
        raise UserError(f"The preprocessed prompts in {directory} were made by another version or from other "
                        f"inputs. Run `{hint}` again.", exit_code=EXIT_FAILURE)
    damage = _damage(directory, manifest, dataset)
    if damage is not None:
        raise UserError(f"{damage}. Run `{hint}`: it makes the prompts again.", exit_code=EXIT_FAILURE)
    check_sources(benchmark, model, dataset, paths, manifest)
    parts = {}
    for part in dataset.parts:
        path = directory / prompts_file(part)
        try:
            with np.load(path) as data:
                parts[part] = PromptSet(directory, data["tokens"], data["offsets"], data["article_spans"])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
            raise UserError(f"{path} cannot be read as preprocessed prompts ({error}). Run `{hint}`: it makes them "
                            f"again.", exit_code=EXIT_FAILURE) from None
        if len(parts[part]) != manifest["parts"][part].get("samples"):
            raise UserError(f"{path} does not hold the {manifest['parts'][part].get('samples')} prompts its "
                            f"manifest records. Run `{hint}`.", exit_code=EXIT_FAILURE)
    return TaskPrompts(directory, parts, dataset)
