"""Benchmark whisper: speech to text (MLPerf Inference v6.1, speech2text), Offline.

Samples are repacked LibriSpeech clips of at most 30 s (datasets.py, preprocessing.py), handed to the engine as a
chat's audio part: the in-process engines (the CTranslate2 default, ONNX Runtime) compute the 30 s log-mel features
and decode greedily (engines.py); a served Whisper gets the clip through /v1/audio/transcriptions. Outputs stream to
LoadGen as token counts (the metric is tokens/s); the answer's kind is labels made from its text (answers.py): the
text's characters as label indices (accuracy.py), from the text a server sends or the in-process engine's tokens
decoded, scored by word error rate as the official accuracy_eval.py scores them.
"""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..common.answers import TextLabels
from ..common.benchmark_api import (AccuracyResult, DatasetSpec, GenerativeBenchmark, Metric, ModelSpec,
                                    ResponseFormat, TensorSpec)
from ..common.config_registry import PerCore
from ..common.errors import UserError
from ..common.generation import GenerationSettings
from ..common.paths import Paths
from ..common.prompts import AUDIO
from . import models as whisper_models
from .datasets import DATASETS
from .engines import ENGINES

Log = Any


def _spec(model: whisper_models.WhisperModel) -> ModelSpec:
    closed = model.name == whisper_models.CLOSED_MODEL
    return ModelSpec(
        name=model.name, description=model.description, division="closed" if closed else "open",
        inputs=(TensorSpec("input_features", "float32", (model.n_mels, whisper_models.FRAMES)),),
        outputs=(TensorSpec("tokens", "int64", (None,)),),
        starting_weights_filename=f"openai/{model.name}" if closed else
        ", ".join(f"{p.package}=={p.version}" for p in model.parts),
        weight_transformations="converted to CTranslate2 (float16 weights), otherwise as published",
        served_name=f"openai/{model.name}", prompt_parts=(AUDIO,), serving_api="transcriptions")


class WhisperBenchmark(GenerativeBenchmark):
    package = "code.whisper"
    name = "whisper"
    own_engines = tuple(ENGINES)           # in process: CTranslate2 (the default), ONNX Runtime
    # The reference's output cap (SamplingParams(max_tokens=200)), which --max_output_tokens changes.
    field_defaults = MappingProxyType({"max_output_tokens": whisper_models.MAX_NEW_TOKENS})
    models: Mapping[str, ModelSpec] = MappingProxyType({name: _spec(m) for name, m in whisper_models.MODELS.items()})
    datasets: Mapping[str, DatasetSpec] = MappingProxyType(DATASETS)
    # One int64 label index per character of the transcript; about 300 characters in a 30 s clip.
    response = ResponseFormat(dtype="int64", fields=("label",), records_per_sample=None, typical_records=300)
    # tiny.en with CTranslate2: about 0.3 clips/s on 2 loaded cores (6 clips, one of 26.7 s, in ~20 s).
    embedded_default = MappingProxyType({"model": whisper_models.DEFAULT_MODEL, "dataset": "librivox_sample",
                                         "offline_expected_qps": PerCore(0.15)})

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        """The model's CTranslate2 weights (model.bin, whose digest the toolkit records), in its folder."""
        return whisper_models.model_folder(paths, model, log, check=False) / whisper_models.WEIGHTS

    def calibration_indices(self, dataset: str, count: int, paths: Paths):
        raise UserError("whisper runs the weights as they ship: it has no INT8 calibration.")

    def _facts(self, model: str, paths: Paths) -> whisper_models.ModelFacts:
        return whisper_models.model_facts(model, whisper_models.model_folder(paths, model))

    def generation(self, model: str, fields: Mapping[str, Any], paths: Paths) -> GenerationSettings:
        facts = self._facts(model, paths)
        cap = fields.get("max_output_tokens") or whisper_models.MAX_NEW_TOKENS
        return GenerationSettings(max_new_tokens=int(cap), eos_token_ids=(facts.eot,),
                                  max_batch=int(fields.get("batch_size") or 1))

    def answer(self, model: str, paths: Paths) -> TextLabels:
        """Labels made from the answer's text: a server's text as it sent it, an in-process engine's tokens decoded
        (special tokens skipped), read on first use."""
        from .accuracy import encode_text

        folder = whisper_models.model_folder(paths, model)
        tokenizer: list = []

        def decode(tokens) -> str:
            if not tokenizer:
                tokenizer.append(_tokenizer(folder / whisper_models.TOKENIZER))
            return tokenizer[0].decode([int(t) for t in tokens], skip_special_tokens=True)

        return TextLabels(encode_text, decode)

    def tokenizer(self, model: str, paths: Paths):
        """The model's tokenizer, for the openai harness's text-to-ids (encode(text, add_bos=False))."""
        inner = _tokenizer(whisper_models.model_folder(paths, model) / whisper_models.TOKENIZER)

        class _Encoder:
            def encode(self, text: str, add_bos: bool = False) -> list[int]:
                return inner.encode(text, add_special_tokens=False).ids

        return _Encoder()

    def request_engines(self, model: str, fields: Mapping[str, Any], paths: Paths, *, instances: int,
                        threads: int) -> list:
        """The in-process engines of a test: one per instance, each batching up to batch_size clips."""
        from .engines import make_engine
        from .request_engine import WhisperRequestEngine

        folder = whisper_models.model_folder(paths, model)
        facts = whisper_models.model_facts(model, folder)
        name = str(fields.get("inprocess_engine") or "")
        batch = int(fields.get("batch_size") or 1)
        log = lambda line: None  # noqa: E731
        make = lambda: make_engine(name, folder, facts, threads=threads, paths=paths, log=log)  # noqa: E731
        make_engine_check = make()       # a wrong name or a missing engine fails here, before the test starts
        make_engine_check.close()
        return [WhisperRequestEngine(make, facts, batch, number) for number in range(max(1, instances))]

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        from .accuracy import accuracy_line, decode_labels, english_normalizer, label_transcript, read_accuracy_log, \
            word_error_rate
        from .preprocessing import preprocessed

        samples = preprocessed(model, dataset, paths)
        entries = read_accuracy_log(accuracy_log, len(samples))
        if not entries:
            raise UserError(f"{accuracy_log} holds no responses; run the accuracy test again.")
        references = [decode_labels(label_transcript(samples.transcript(index))) for index, _ in entries]
        wer, errors, words = word_error_rate([text for _, text in entries], references, english_normalizer(paths))
        line = accuracy_line(wer)
        text = (f"{line}\nerrors={errors}, reference words={words}, samples={len({i for i, _ in entries})}\n")
        # One metric, the one the target applies to: the run's summary then prints accuracy.txt's lines, the first
        # of them as the official accuracy_eval.py prints it (the WER is in that line).
        return AccuracyResult(metrics=(Metric("ACCURACY", (1 - wer) * 100),), text=text,
                              samples=len({index for index, _ in entries}))


def _tokenizer(path: Path):
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path))


BENCHMARK = WhisperBenchmark()
