"""The contract every registered benchmark keeps (documentation/adding_a_benchmark.md).

For each benchmark in `benchmark_api.IMPLEMENTATIONS`: its models, data sets, response format and embedded default
are declared and consistent, the round's rules and the configs know it, and a round trip on two real samples of
its embedded default (preprocess -> the model in ONNX Runtime, or the benchmark's own in-process engine ->
postprocess -> an accuracy log -> score) gives an accuracy.txt that the round's checker reads, with the value the benchmark reports.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

from code.common.audit.verify import accuracy_value
from code.common.benchmark_api import IMPLEMENTATIONS, AccuracyResult, Responses, get_benchmark
from code.common.config_registry import ConfigRegistry
from code.common.errors import UserError
from code.common.fields import FIELDS
from code.common.named_inputs import named_sample
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.systems.known import GENERIC_CPU
from tests.conftest import FOOLBOX, MOBILENET, SMOLLM2, WHISPER_TINY_EN, seed_downloads

BENCHMARKS = sorted(IMPLEMENTATIONS)
ROUND = get_round("v6.1")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_models_data_sets_and_responses_are_declared(name: str) -> None:
    benchmark = get_benchmark(name)
    assert benchmark.name == name
    assert benchmark.models and benchmark.datasets
    for key, spec in benchmark.models.items():
        assert spec.name == key and spec.division in ("open", "closed") and spec.description
        assert spec.inputs, f"{key} declares no input"
        assert len({i.name for i in spec.inputs}) == len(spec.inputs), f"{key} names two inputs alike"
        for tensor in spec.inputs:     # a batch of samples of varying shape needs a padding rule
            assert spec.decoder or tensor.fixed or tensor.padding is not None, f"{key}: {tensor.name} varies"
            assert tensor.padding is None or all(b > 0 for b in tensor.padding.buckets)
        for tensor in (*spec.inputs, *spec.outputs):
            np.dtype(tensor.dtype)   # a real numpy dtype
            assert tensor.name and all(size is None or size > 0 for size in tensor.shape)
        assert spec.starting_weights_filename and spec.weight_transformations
    assert any(spec.division == "closed" for spec in benchmark.models.values()), "no closed-division model"
    for key, spec in benchmark.datasets.items():
        assert spec.name == key and spec.description and spec.how_to_get
    response = benchmark.response
    assert response.fields and response.record_bytes == len(response.fields) * np.dtype(response.dtype).itemsize
    assert response.typical_bytes > 0
    assert benchmark.embedded_default["model"] in benchmark.models
    assert benchmark.embedded_default["dataset"] in benchmark.datasets
    assert set(benchmark.embedded_default) <= set(FIELDS), "the embedded default sets only config fields"


@pytest.mark.parametrize("name", BENCHMARKS)
def test_the_round_and_the_configs_know_it(name: str) -> None:
    rules = ROUND.benchmark(name)
    registry = ConfigRegistry.load([name])
    assert rules.required_scenarios, f"{name} is in no suite of the round"
    for scenario in {s for scenarios in rules.required_scenarios.values() for s in scenarios}:
        assert registry.systems_for(name, scenario), f"no config for {name} {scenario.value}"
        assert GENERIC_CPU in registry.systems_for(name, scenario)
    re.compile(rules.accuracy_pattern)


@pytest.fixture(scope="module")
def embedded(tmp_path_factory) -> Paths:
    root = tmp_path_factory.mktemp("contract")
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    seed_downloads(paths, FOOLBOX, MOBILENET, SMOLLM2, WHISPER_TINY_EN)
    return paths


def _prepared(name: str, paths: Paths):
    """The embedded default's model file and preprocessed set; skip, saying why, when they cannot be had here."""
    benchmark = get_benchmark(name)
    model, dataset = benchmark.embedded_default["model"], benchmark.embedded_default["dataset"]
    log = lambda _: None  # noqa: E731
    try:
        # A model only serving engines run has no file here: the servers load it (make run fetches it for them).
        model_file = None if benchmark.models[model].served_only else benchmark.download_model(model, paths, log)
        benchmark.download_data(dataset, paths, log)
        samples = benchmark.preprocess(model, dataset, paths, log)
    except UserError as error:
        pytest.skip(f"{name}: the embedded default cannot be prepared here: {error}")
    return benchmark, model, dataset, model_file, samples


def _infer(session, spec):
    """A fixed-size model's outputs for one sample, fed each named input as a batch of one."""
    return lambda sample: session.run(None, {name: array[np.newaxis]
                                             for name, array in named_sample(sample, spec.inputs).items()})


def _generate(benchmark, model: str, model_file: Path, paths: Paths, max_new_tokens: int = 8):
    """A decoder's answer to one prompt (greedy, a few tokens), as the harness makes it: (its tokens, no content)."""
    from code.common.backends.onnxruntime_decoder import OnnxRuntimeDecoder
    from code.common.harness.llm_baseline import greedy_static

    settings = benchmark.generation(model, {"batch_size": 1, "max_output_tokens": max_new_tokens}, paths)
    decoder = OnnxRuntimeDecoder(model_file, threads=1, max_batch=1)
    return lambda prompt: (list(greedy_static(decoder, [prompt[:256]], settings).outputs[0]), None)


def _served():
    """A model only serving engines run (its prompts chats): the toolkit's fake server's answer to each prompt (a
    JSON choice among the candidates a prompt lists, else its usual text): (no tokens counted here, the text)."""
    from code.common.serving.payloads import _message_content
    from code.common.serving.fake_server import chat_parts, content_key, json_choice

    def run(prompt):
        messages = [{"role": m.role, "content": _message_content(m.content)} for m in prompt.messages]
        key = content_key(chat_parts(messages))
        text = json_choice(messages, key) or f" t{key % 1000}"
        return [], text

    return run


class _Outputs:
    """A token stream that keeps each request's tokens until its final chunk."""

    def __init__(self) -> None:
        import threading

        self.done: dict[int, list[int]] = {}
        self.error: BaseException | None = None
        self._partial: dict[int, list[int]] = {}
        self.event = threading.Event()
        self.content: dict[int, object] = {}

    def answer(self, request_id, content) -> None:
        self.content[request_id] = content

    def chunk(self, request_id, tokens, final) -> None:
        self._partial.setdefault(request_id, []).extend(int(t) for t in tokens)
        if final:
            self.done[request_id] = self._partial.pop(request_id)
            self.event.set()

    def failed(self, error) -> None:
        self.error = error
        self.event.set()


def _own_engine(benchmark, model: str, paths: Paths):
    """A benchmark's own in-process engine (`request_engines`): each prompt's response bytes, as the streaming system
    under test makes them (the benchmark's answer kind, of the generated tokens and any content reported)."""
    from code.common.generation import Request

    settings = benchmark.generation(model, {"batch_size": 1}, paths)
    engine = benchmark.request_engines(model, {"batch_size": 1}, paths, instances=1, threads=1)[0]
    answer = benchmark.answer(model, paths)
    outputs = _Outputs()
    engine.open(outputs)

    def run(prompt):
        number = len(outputs.done)
        outputs.event.clear()
        engine.submit([Request(number, prompt, settings)])
        assert outputs.event.wait(300) and outputs.error is None, outputs.error
        tokens = outputs.done[number]
        assert 0 < len(tokens) <= settings.max_new_tokens
        return answer.response(tokens, outputs.content.get(number))

    return run, engine


def _round_trip_own_engine(benchmark, model: str, samples, paths: Paths) -> list[dict]:
    run, engine = _own_engine(benchmark, model, paths)
    try:
        entries = []
        for index in (0, len(samples) - 1):
            data = np.ascontiguousarray(run(samples.load(index))).tobytes()
            assert len(data) % benchmark.response.record_bytes == 0
            entries.append({"seq_id": len(entries), "qsl_idx": index, "data": data.hex().upper()})
        return entries
    finally:
        engine.close()


@pytest.mark.parametrize("name", BENCHMARKS)
def test_round_trip_on_two_samples(name: str, embedded: Paths, tmp_path: Path) -> None:
    import onnxruntime as ort

    if get_benchmark(name).generates_tokens and get_benchmark(name).endpoints_only:
        # No LoadGen accuracy log: the MLCommons endpoints client scores it (tests/test_qwen3_6.py, test_endpoints_*)
        with pytest.raises(UserError, match="scored by the MLCommons endpoints client"):
            get_benchmark(name).score("", "", tmp_path / "mlperf_log_accuracy.json", embedded)
        return
    benchmark, model, dataset, model_file, samples = _prepared(name, embedded)
    spec = benchmark.models[model]
    assert len(samples) >= 2
    if benchmark.generates_tokens and benchmark.own_engines:
        entries = _round_trip_own_engine(benchmark, model, samples, embedded)
        _score_and_read(name, benchmark, model, dataset, entries, embedded, tmp_path)
        return
    if spec.served_only:
        run = _served()
    else:
        run = _generate(benchmark, model, model_file, embedded) if spec.decoder else \
            _infer(ort.InferenceSession(str(model_file), providers=["CPUExecutionProvider"]), spec)
    if benchmark.generates_tokens:     # its answer kind makes the response of an answer
        answer = benchmark.answer(model, embedded)

        def postprocess(outputs, indices) -> Responses:
            return Responses.pieces([answer.response(*outputs)])
    else:
        postprocess = benchmark.postprocessor(model, samples)
    entries = []
    for index in (0, len(samples) - 1):
        sample = samples.load(index)
        if not spec.served_only:               # a served model's prompt is a chat, whose parts the server takes
            named_sample(sample, spec.inputs)  # every declared input, of its dtype and shape (ValueError else)
        responses = postprocess(run(sample), np.array([index]))
        assert isinstance(responses, Responses) and len(responses) == 1
        data = responses.sample(0)
        assert len(data) % benchmark.response.record_bytes == 0
        if benchmark.response.records_per_sample is not None:
            assert len(data) == benchmark.response.typical_bytes
        entries.append({"seq_id": len(entries), "qsl_idx": index, "data": data.hex().upper()})
    _score_and_read(name, benchmark, model, dataset, entries, embedded, tmp_path)


def _score_and_read(name: str, benchmark, model: str, dataset: str, entries: list[dict], paths: Paths,
                    tmp_path: Path) -> None:
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps(entries))
    result = benchmark.score(model, dataset, log, paths)
    assert isinstance(result, AccuracyResult) and result.samples == 2
    if math.isnan(result.value):
        # A scorer that cannot run here (wan-2.2-t2v-a14b's VBench, whose checkpoints no package carries) says so in
        # plain words, and accuracy.txt holds no figure the checker could take for one.
        assert "no accuracy figure" in result.text
        assert accuracy_value(result.text, ROUND.benchmark(name).accuracy_pattern) is None
        return
    read = accuracy_value(result.text, ROUND.benchmark(name).accuracy_pattern)
    assert read is not None, f"the round's checker reads no accuracy from {result.text!r}"
    assert read == pytest.approx(result.value, abs=5e-3)
