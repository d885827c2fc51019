"""The answer kinds (code/common/answers.py): what each makes of an answer's token ids and reported content, and a
benchmark of tests/ alone whose answer is of a new kind (tests/answer_benchmark.py: a fixed-size tensor) through the
engine harness and LoadGen, registered from its own module, nothing edited outside it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from code.common.answers import TOKEN_IDS, Media, Text, TextLabels
from code.common.benchmark_api import IMPLEMENTATIONS
from code.common.constants import Scenario, TestMode

from . import answer_benchmark as tensor
from .conftest import REPO

RUN_TIMEOUT_S = 90


def test_token_ids_are_logged_as_int32_whatever_the_content():
    logged = TOKEN_IDS.response([5, 300000, 2], "ignored")
    assert logged.dtype == np.int32 and logged.tolist() == [5, 300000, 2]
    assert not TOKEN_IDS.reported


def test_text_is_the_engines_text_else_the_tokens_decoded():
    decoded = Text(decode=lambda ids: "".join(chr(96 + i) for i in ids))
    assert decoded.takes_text and decoded.reported
    assert decoded.response([1, 2], "é{}").tobytes() == "é{}".encode("utf-8")     # the server's text, as sent
    assert decoded.response([1, 2, 3], None).tobytes() == b"abc"                   # an engine of ids only
    assert Text().response([1, 2], None).tobytes() == b""                          # no text and no decoder


def test_labels_are_made_from_the_text_the_answer_has():
    labels = TextLabels(lambda text: np.asarray([ord(c) for c in text.lower()], np.int64),
                        decode=lambda ids: "AB"[: len(ids)])
    assert labels.response([9], "Hi").tolist() == [104, 105]                       # a served text, not re-tokenized
    assert labels.response([9, 9], None).tolist() == [97, 98]                      # in process: the ids decoded


def test_media_is_logged_byte_for_byte():
    video = b"\x00\x00\x00\x18ftypmp42"
    assert Media().takes_content and Media().response([1], video).tobytes() == video
    assert Media().response([1], None).size == 0


def test_whisper_declares_labels_from_text_and_qwen3_vl_text():
    from code.common.benchmark_api import get_benchmark
    from code.common.paths import Paths

    paths = Paths.create(scratch=Path("/nonexistent"))
    assert isinstance(get_benchmark("whisper").answer("whisper-tiny.en", paths), TextLabels)
    assert type(get_benchmark("qwen3-vl-235b-a22b").answer("smolvlm-substitute", paths)) is Text
    assert get_benchmark("llama3.1-8b").answer("smollm2-135m-instruct", paths) is TOKEN_IDS


# -- a new kind of answer, from tests/ alone, through the harness ------------------------------------------------
def child(spec: dict[str, Any]) -> None:
    """One Offline AccuracyOnly LoadGen test of the tensor benchmark through the engine harness."""
    from code.common.harness.registry import HARNESSES, HarnessRun, Selection
    from code.common.harness.spec import RunSpec
    from code.common.paths import Paths

    from .test_llm_sut import Prompts, run_streaming_test

    out = Path(spec["out"])
    tensor.register()
    plugin = HARNESSES.get("engine")
    assert plugin.why_not(Selection(tensor.NAME, tensor.MODEL, True, "lwis", out)) is None
    fields = {"instances": 2, "intra_op_threads": 1, "batch_size": 4}
    run_spec = RunSpec(
        benchmark=tensor.NAME, model=tensor.MODEL, dataset=tensor.DATASET, division="open",
        scenario=Scenario.Offline.value, test_mode=TestMode.AccuracyOnly.value, loadgen_model=tensor.NAME,
        log_dir=str(out), scratch=str(out), engine="", engine_manifest={},
        config={"fields": fields, "workload_setting": "lwis_k_99_MaxP"}, system={}, user_conf=[],
        performance_sample_count=tensor.SAMPLES, cpu_cores=2, test_run=True, rules_version="v6.1",
        accuracy_threshold=None, invocation={}, harness=plugin.name, harness_options={})
    benchmark = IMPLEMENTATIONS.get(tensor.NAME)
    paths = Paths.create(scratch=out, log_dir=out)
    run = HarnessRun(run_spec, benchmark, Prompts(tensor.SAMPLES), paths, out,
                     benchmark.generation(tensor.MODEL, fields, paths))
    sut, prompts = plugin.create(run)
    run_streaming_test(sut, prompts, out, Scenario.Offline, TestMode.AccuracyOnly, tensor.SAMPLES)
    (out / "result.json").write_text(json.dumps({"error": repr(sut.error) if sut.error else None,
                                                 "completed": sut.counters.completed}))


def test_a_benchmark_of_tests_alone_answers_with_a_tensor_through_the_engine_harness(tmp_path):
    from .test_llm_sut import Prompts

    (tmp_path / "spec.json").write_text(json.dumps({"out": str(tmp_path)}))
    done = subprocess.run([sys.executable, "-m", "tests.test_answer_kinds", str(tmp_path / "spec.json")], cwd=REPO,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads((tmp_path / "result.json").read_text()) == {"error": None, "completed": tensor.SAMPLES}
    entries = json.loads((tmp_path / "mlperf_log_accuracy.json").read_text())
    prompts = Prompts(tensor.SAMPLES)
    assert sorted(e["qsl_idx"] for e in entries) == list(range(tensor.SAMPLES))
    for entry in entries:
        logged = np.frombuffer(bytes.fromhex(entry["data"]), np.float32)
        assert logged.tolist() == tensor.expected(prompts.load(entry["qsl_idx"])).tolist()
        assert entry["token_count"] == 2                     # LoadGen still counts the answer's tokens
    result = tensor.BENCHMARK.score(tensor.MODEL, tensor.DATASET, tmp_path / "mlperf_log_accuracy.json", None)
    assert result.value == pytest.approx(100.0) and result.samples == tensor.SAMPLES


def test_a_tensor_of_another_shape_is_refused_by_its_kind():
    with pytest.raises(ValueError, match=r"answers \(4,\)"):
        tensor.FixedTensor(tensor.SHAPE, "float32").response([1], np.zeros(3))


if __name__ == "__main__":
    child(json.loads(Path(sys.argv[1]).read_text()))
