"""Benchmarks llama3.1-8b (datacenter) and llama3.1-8b-edge behind `code.common.benchmark_api.Benchmark`:
CNN/DailyMail summarization, generated token by token, scored by ROUGE.

Models: `llama3.1-8b-instruct` (closed division, the user's checkpoint) and `smollm2-135m-instruct` (open
division, fetched from the package registry: what `make run` runs on any machine). Data sets: `cnn_eval` (MLCommons'
13368 validation samples, datacenter), `cnn_eval_5000` (its 5000-sample edge subset) and `cnndm_sample` (250
test articles kept beside the repository, for development and CI).
Each sample's response in the accuracy log is its generated token ids as int32, as the reference SUT writes them
and evaluation.py / TEST06 read them (`--dtype int32`).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..common.benchmark_api import (AccuracyResult, DatasetSpec, Log, ModelSpec, PackagedBenchmark, Postprocess,
                                    ResponseFormat, Responses, ServingFolder)
from ..common.config_registry import PerCore
from ..common.errors import EXIT_FAILURE, UserError
from ..common.generation import GenerationSettings
from ..common.paths import Paths
from . import datasets as _datasets
from . import models as _models

RESPONSE_DTYPE = "int32"
# The reference's sampling parameters (SUT_VLLM.py, every run): temperature 0 (greedy; top_k 1, top_p 1), seed 42,
# max_tokens 128, min_tokens 1, ending at the model's EOS.
REFERENCE_MAX_NEW_TOKENS, REFERENCE_MIN_NEW_TOKENS, REFERENCE_SEED = 128, 1, 42


@lru_cache(maxsize=4)
def _tokenizer(model: str, scratch: str, benchmark: str):
    return _models.tokenizer(model, Paths.create(scratch=scratch), benchmark)


class LlamaBenchmark(PackagedBenchmark):
    package = "code.llama3_1_8b"
    name = _models.BENCHMARK
    generates_tokens = True
    models: Mapping[str, ModelSpec] = _models.MODELS
    datasets: Mapping[str, DatasetSpec] = _datasets.DATASETS
    response = ResponseFormat(dtype=RESPONSE_DTYPE, fields=("token_id",), records_per_sample=None,
                              typical_records=REFERENCE_MAX_NEW_TOKENS)
    field_defaults: Mapping[str, Any] = {"max_output_tokens": REFERENCE_MAX_NEW_TOKENS}
    # What `make run RUN_ARGS=--benchmarks=llama3.1-8b` runs: the substitute on 24 sample articles, prompts capped
    # at 512 tokens and outputs at 64, so that a performance and an accuracy run end in minutes on 2 cores. The
    # caps are recorded in user.conf and metadata.json; an uncapped run is `--max_input_tokens=0
    # --max_output_tokens=128` without --total_sample_count.
    # Speed hints of the substitute under those caps (measured on a 2-core Xeon: about 0.85 samples/s Offline at
    # batch 8, a summary in about 2.5 s alone); Server and Interactive at a fraction of the Offline rate.
    embedded_default: Mapping[str, Any] = {"model": _models.SMOLLM2, "dataset": "cnndm_sample",
                                           "max_input_tokens": 512, "max_output_tokens": 64,
                                           "total_sample_count": 24, "offline_expected_qps": PerCore(0.4),
                                           "server_target_qps": PerCore(0.1),
                                           "single_stream_expected_latency_ns": 2_500_000_000}

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        return _models.download_model(model, paths, log, self.name)

    def serving_folder(self, model: str, paths: Paths, log: Log, remake: bool = False) -> ServingFolder:
        return _models.serving_folder(model, paths, log, self.name, remake=remake)

    def preprocess(self, model: str, dataset: str, paths: Paths, log: Log):
        from .preprocessing import preprocess

        return preprocess(model, dataset, paths, log, self.name)

    def preprocessed(self, model: str, dataset: str, paths: Paths):
        from .preprocessing import preprocessed

        return preprocessed(model, dataset, paths, self.name)

    def tokenizer(self, model: str, paths: Paths):
        return _tokenizer(model, str(paths.scratch), self.name)

    def generation(self, model: str, fields: Mapping[str, Any], paths: Paths) -> GenerationSettings:
        """Greedy, up to max_output_tokens (the benchmark's default: the reference's 128), ending at the model's EOS
        tokens."""
        tokenizer = self.tokenizer(model, paths)
        return GenerationSettings(max_new_tokens=int(fields["max_output_tokens"]),
                                  min_new_tokens=REFERENCE_MIN_NEW_TOKENS, seed=REFERENCE_SEED,
                                  eos_token_ids=tuple(int(i) for i in tokenizer.eos_token_ids),
                                  max_batch=int(fields.get("batch_size") or 1),
                                  prefill_batch=int(fields.get("prefill_batch") or 1),
                                  prefill_chunk_tokens=int(fields.get("prefill_chunk_tokens") or 0))

    def postprocessor(self, model: str, samples) -> Postprocess:
        """Token ids as they go into the accuracy log: int32, one array per sample."""
        def postprocess(outputs: Sequence[np.ndarray], indices: np.ndarray) -> Responses:
            return Responses.pieces([np.asarray(o, dtype=RESPONSE_DTYPE).reshape(-1) for o in outputs])

        return postprocess

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        """ROUGE and GEN_LEN as the reference evaluation.py computes them, against the data set's references."""
        from .accuracy import score_accuracy_log
        from .preprocessing import check_source

        check_source(model, dataset, paths, self.name)
        articles = _datasets.load_articles(dataset, paths)
        tokenizer = self.tokenizer(model, paths)
        if not accuracy_log.is_file():
            raise UserError(f"Cannot score: {accuracy_log} is missing.", exit_code=EXIT_FAILURE)
        result = score_accuracy_log(accuracy_log, [a.reference for a in articles],
                                    lambda ids: tokenizer.decode(ids, skip_special_tokens=True),
                                    dtype=RESPONSE_DTYPE)
        return result.result


class LlamaEdgeBenchmark(LlamaBenchmark):
    """The edge variant: the same model and harness, 5000 samples, SingleStream and Offline."""

    name = "llama3.1-8b-edge"


BENCHMARK = LlamaBenchmark()
EDGE_BENCHMARK = LlamaEdgeBenchmark()
