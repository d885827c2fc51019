"""A generative benchmark that lives in tests/ alone, whose answer is of a kind the toolkit does not have: a fixed-size
tensor per sample (as a model that answers with an embedding, or a video model with frames, would). It declares its
answer kind (`FixedTensor`, an answers.AnswerKind of its own), brings its own in-process engine and registers itself
(`register()`): the engine harness runs it through LoadGen with nothing edited outside this file.

Its engine answers each prompt (token ids) with two tokens, and with the tensor [first id, last id, length, sum] as
float32, reported as the request's content just before its final chunk (generation.TokenStream.answer)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from code.common.answers import AnswerKind
from code.common.benchmark_api import (IMPLEMENTATIONS, AccuracyResult, DatasetSpec, GenerativeBenchmark, Metric,
                                       ModelSpec, ResponseFormat, TensorSpec)
from code.common.generation import GenerationSettings, Request, TokenStream

NAME = "tensor-answers-test"
MODEL = "summing-engine"
DATASET = "counted-prompts"
SAMPLES = 12
SHAPE = (4,)
ENGINE = "summing"


class FixedTensor(AnswerKind):
    """A tensor of one shape and dtype per sample, logged as its bytes; a tensor of another shape fails the run."""

    name = "fixed-size tensor"
    takes_content = True

    def __init__(self, shape: tuple[int, ...], dtype: str) -> None:
        self.shape, self.dtype = shape, np.dtype(dtype)

    def response(self, tokens: Sequence[int], content: Any) -> np.ndarray:
        tensor = np.ascontiguousarray(content, dtype=self.dtype)
        if tensor.shape != self.shape:
            raise ValueError(f"an answer of shape {tensor.shape}; {NAME} answers {self.shape}")
        return tensor


def expected(prompt: np.ndarray) -> np.ndarray:
    ids = np.asarray(prompt, dtype=np.int64)
    return np.asarray([ids[0], ids[-1], len(ids), ids.sum()], dtype=np.float32)


class SummingEngine:
    """A request-level engine that answers at once, from the thread that submits."""

    prompt_parts = frozenset({"token_ids"})

    def __init__(self, number: int) -> None:
        self.name = f"{ENGINE} engine {number}"
        self._stream: TokenStream | None = None
        self._lock = threading.Lock()

    def open(self, stream: TokenStream) -> None:
        self._stream = stream

    def submit(self, requests: Sequence[Request]) -> None:
        with self._lock:
            for request in requests:
                self._stream.answer(request.id, expected(request.prompt))
                self._stream.chunk(request.id, [7, request.settings.eos_token_ids[0]], True)

    def cancel(self, request_ids: Sequence[int]) -> None:
        pass

    def close(self) -> None:
        self._stream = None


class TensorAnswersBenchmark(GenerativeBenchmark):
    package = "tests"
    name = NAME
    own_engines = (ENGINE,)
    models: Mapping[str, ModelSpec] = {MODEL: ModelSpec(
        MODEL, "sums its prompt", "open", (TensorSpec("input_ids", "int64", (None,)),), "", "",
        outputs=(TensorSpec("answer", "float32", SHAPE),))}
    datasets: Mapping[str, DatasetSpec] = {DATASET: DatasetSpec(DATASET, "prompts of counted ids", "generated",
                                                                SAMPLES)}
    response = ResponseFormat(dtype="float32", fields=("first", "last", "length", "sum"))
    embedded_default: Mapping[str, Any] = {"model": MODEL, "dataset": DATASET}

    def generation(self, model: str, fields: Mapping[str, Any], paths) -> GenerationSettings:
        return GenerationSettings(max_new_tokens=2, eos_token_ids=(2,), max_batch=4)

    def request_engines(self, model: str, fields: Mapping[str, Any], paths, *, instances: int, threads: int) -> list:
        return [SummingEngine(number) for number in range(instances)]

    def answer(self, model: str, paths) -> FixedTensor:
        return FixedTensor(SHAPE, self.response.dtype)

    def score(self, model: str, dataset: str, accuracy_log: Path, paths) -> AccuracyResult:
        """The share of logged tensors that are their prompt's (prompts as tests.test_llm_sut.Prompts makes them)."""
        import json

        from tests.test_llm_sut import Prompts

        prompts = Prompts(SAMPLES)
        entries = json.loads(Path(accuracy_log).read_text())
        good = sum(np.array_equal(self.response.decode(bytes.fromhex(e["data"]))[0],
                                  expected(prompts.load(e["qsl_idx"]))) for e in entries)
        share = 100.0 * good / max(len(entries), 1)
        return AccuracyResult((Metric("answers as expected", share),), f"match={share:.3f}%, good={good}",
                              len({e["qsl_idx"] for e in entries}))


BENCHMARK = TensorAnswersBenchmark()


def register() -> list[str]:
    """Register the benchmark (from this module alone, as a benchmark outside code/ does); its name."""
    IMPLEMENTATIONS.register(NAME, BENCHMARK)
    return [NAME]
