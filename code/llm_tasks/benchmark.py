"""`TaskBenchmark`: what the LLM benchmarks (llama3.1-8b, llama2-70b-99.9, deepseek-r1, gpt-oss-120b) share behind
code.common.benchmark_api.

A subclass names its closed model, its data sets (with their readers), the reference's generation settings and
its scorer (`score_outputs`); prompts, models, serving folders and the reading of accuracy logs are done here the
same way for all of them. Responses in the accuracy log are the generated token ids as int32, as the reference
SUTs write them and the evaluation scripts and TEST06 read them.
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.benchmark_api import (AccuracyResult, DatasetSpec, GenerativeBenchmark, Log, ModelSpec,
                                    ResponseFormat, ServingFolder)
from ..common.config_registry import ByTestMode
from ..common.errors import UserError, choose
from ..common.generation import GenerationSettings
from ..common.paths import Paths
from . import datasets as _datasets
from . import models as _models
from . import prompts as _prompts
from .datasets import TaskDataset
from .items import TaskItem
from .responses import RESPONSE_DTYPE, Outputs, read_outputs


@lru_cache(maxsize=8)
def _tokenizer(benchmark: "TaskBenchmark", model: str, scratch: str):
    return _models.tokenizer(benchmark.closed_model(model), benchmark.name, Paths.create(scratch=scratch))


class TaskBenchmark(GenerativeBenchmark):
    closed: _models.ClosedModel
    task_datasets: Mapping[str, TaskDataset]
    # The reference's generation: output cap (one number, or one per kind of run), the fewest output tokens before
    # an EOS may end a sequence (min_tokens: 0 where the reference leaves the engine's default), sampling
    # (temperature 0: greedy), seed. The cap is the benchmark's default of max_output_tokens (`field_defaults`).
    reference_max_new_tokens: int | ByTestMode
    reference_min_new_tokens: int = 1
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    seed: int | None = None
    # Whether the evaluation script decodes with skip_special_tokens (gpt-oss-120b's keeps Harmony's markers).
    skip_special_tokens: bool = True
    # Whether the evaluation script counts only a sample's first log entry (gpt-oss-120b's counts every entry).
    first_entry_only: bool = True
    # Why the closed model needs the official file's token ids (where closed_prompt cannot build its prompt).
    closed_needs_ids: str = ""
    # The reference's instruction around an item's text, with `{input}` where the text goes ("": the text alone): the
    # substitute's user turn.
    prompt_template: str = ""

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def field_defaults(self) -> Mapping[str, Any]:
        return {"max_output_tokens": self.reference_max_new_tokens}

    @property
    def response(self) -> ResponseFormat:    # type: ignore[override]
        cap = self.reference_max_new_tokens
        performance_cap = cap.performance if isinstance(cap, ByTestMode) else cap
        return ResponseFormat(dtype=RESPONSE_DTYPE, fields=("token_id",), records_per_sample=None,
                              typical_records=min(performance_cap, 4096))

    @property
    def models(self) -> Mapping[str, ModelSpec]:
        return {_models.SUBSTITUTE: _models.SUBSTITUTE_SPEC, self.closed.name: self.closed.spec}

    @property
    def datasets(self) -> Mapping[str, DatasetSpec]:
        return {name: data.spec for name, data in self.task_datasets.items()}

    # -- models ---------------------------------------------------------------------------------------------
    def closed_model(self, model: str) -> _models.ClosedModel | None:
        """The closed model's facts, None for the substitute; UserError naming the models for any other name."""
        choose(self.models, model, "model", self.name)
        return None if model == _models.SUBSTITUTE else self.closed

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        return _models.download_model(self.closed_model(model), self.name, paths, log)

    def serving_folder(self, model: str, paths: Paths, log: Log, remake: bool = False) -> ServingFolder:
        return _models.serving_folder(self.closed_model(model), self.name, paths, log, remake=remake)

    def tokenizer(self, model: str, paths: Paths):
        return _tokenizer(self, model, str(paths.scratch))

    # -- data -----------------------------------------------------------------------------------------------
    def task_dataset(self, dataset: str) -> TaskDataset:
        return choose(self.task_datasets, dataset, "data set", self.name)

    def download_data(self, dataset: str, paths: Paths, log: Log) -> Path:
        return _datasets.download_data(self.name, self.task_dataset(dataset), paths, log)

    def items(self, dataset: str, paths: Paths, accuracy: bool = True, audit_test: str | None = None) \
            -> list[TaskItem]:
        """The data set's items of the part a run reads (by default the accuracy part), in QSL order."""
        data = self.task_dataset(dataset)
        return _datasets.load_items(self.name, data, _datasets.part_for(data, accuracy, audit_test), paths)

    def closed_prompt(self, item: TaskItem) -> str | None:
        """The closed model's prompt text for an item the official file gives no token ids for (None: it needs
        them). The text is encoded with the model's tokenizer, BOS first."""
        return None

    def _prompt_source(self, model: str, paths: Paths) -> _prompts.PromptSource:
        closed = self.closed_model(model)
        can_build = closed is not None and self.closed_prompt(TaskItem(user="", reference="", subset="")) is not None
        return _prompts.PromptSource(
            tokenizer=lambda: self.tokenizer(model, paths),
            tokenizer_identity=_models.tokenizer_identity(closed, self.name, paths),
            chat_template=closed is None,
            closed_prompt=(lambda item: self.closed_prompt(item) or "") if can_build else None,
            closed_needs_ids=self.closed_needs_ids, template=self.prompt_template)

    def preprocess(self, model: str, dataset: str, paths: Paths, log: Log):
        return _prompts.preprocess(self.name, model, self.task_dataset(dataset), self._prompt_source(model, paths),
                                   paths, log)

    def preprocessed(self, model: str, dataset: str, paths: Paths):
        self.closed_model(model)
        return _prompts.preprocessed(self.name, model, self.task_dataset(dataset), paths, self.prompt_template)

    def calibration_indices(self, dataset: str, count: int, paths: Paths) -> Sequence[int]:
        """The first `count` samples: the models run unquantized here, which needs no calibration (MLCommons
        publishes separate calibration sets for submitters who quantize)."""
        if count < 1:
            raise UserError(f"calibration count must be at least 1, got {count}")
        return list(range(min(count, len(self.items(dataset, paths, accuracy=False)))))

    # -- generation and responses ---------------------------------------------------------------------------
    def generation(self, model: str, fields: Mapping[str, Any], paths: Paths) -> GenerationSettings:
        """The reference's generation under the resolved `fields` (max_output_tokens is the reference's cap for the
        test's kind of run unless the config or the command line set another)."""
        tokenizer = self.tokenizer(model, paths)
        return GenerationSettings(
            max_new_tokens=int(fields["max_output_tokens"]), min_new_tokens=self.reference_min_new_tokens,
            eos_token_ids=tuple(int(i) for i in tokenizer.eos_token_ids),
            max_batch=int(fields.get("batch_size") or 1),
            prefill_batch=int(fields.get("prefill_batch") or 1),
            prefill_chunk_tokens=int(fields.get("prefill_chunk_tokens") or 0),
            temperature=self.temperature, top_p=self.top_p, top_k=self.top_k, seed=self.seed)

    # -- scoring --------------------------------------------------------------------------------------------
    def outputs(self, model: str, dataset: str, accuracy_log: Path, paths: Paths, audit_test: str | None = None) \
            -> tuple[list[TaskItem], Outputs]:
        """The items of the part the log's run read and the log's decoded responses; UserError naming `make
        preprocess_data` when that part's file changed since its prompts were made."""
        data = self.task_dataset(dataset)
        _prompts.check_sources(self.name, model, data, paths,
                               parts=[_datasets.part_for(data, True, audit_test)])
        items = self.items(dataset, paths, accuracy=True, audit_test=audit_test)
        tokenizer = self.tokenizer(model, paths)
        outputs = read_outputs(accuracy_log, len(items),
                               lambda ids: tokenizer.decode(ids, skip_special_tokens=self.skip_special_tokens),
                               first_entry_only=self.first_entry_only)
        return items, outputs

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths,
              audit_test: str | None = None) -> AccuracyResult:
        """The accuracy log scored as the round's evaluation script scores it (`audit_test`: the log of that
        compliance test, which read its own part of the data set)."""
        items, outputs = self.outputs(model, dataset, accuracy_log, paths, audit_test)
        return self.score_outputs([items[i] for i in outputs.qsl_indices], outputs, paths.dataset_dir(dataset))

    def score_outputs(self, items: Sequence[TaskItem], outputs: Outputs, folder: Path | None = None) \
            -> AccuracyResult:
        """The figures of the responses `outputs` to `items` (pairwise, log order); `folder` is the data set's, where
        a scorer finds data it may need beyond the items (e.g. code problems' tests)."""
        raise NotImplementedError(f"{type(self).__name__} does not say how its answers are scored")
