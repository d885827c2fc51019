"""Request-level LLM engines (generation.RequestEngine) under the streaming SUT, through real LoadGen.

A deterministic fake engine answers each request from a thread of its own, as an HTTP client's event loop would:
its output is a function of the prompt, cut into chunks as a test says (all tokens in one chunk, the first chunk
also the final one; one token then pieces; a last chunk of no tokens). Each run is one LoadGen test in a child
process. What is checked: LoadGen gets each sample's first token before its completion (it logs an error
otherwise) and the output's token ids (with EOS appended to a one-token output); an engine that fails fails the
run with every sample completed (never a partial VALID); several engines share the samples.
"""
from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from code.common.answers import TOKEN_IDS, AnswerKind
from code.common.constants import Scenario, TestMode
from code.common.generation import GenerationSettings, Request, TokenStream
from code.common.records.loadgen_log import read_detail

from .conftest import REPO
from .test_llm_sut import EMPTY_RESPONSE_ERROR, EOS, Prompts, accuracy_entries, run_streaming_test, tokens_of

RUN_TIMEOUT_S = 60


def output_of(prompt: np.ndarray, engine: int) -> list[int]:
    """The engine's whole output for `prompt`: 1 to 6 tokens, tagged with the engine's number, ending in EOS."""
    length = 1 + int(prompt.sum()) % 6
    return [100 * (engine + 1) + int(prompt[0]) + k for k in range(length - 1)] + [EOS]


def chunks_of(tokens: list[int], pattern: str) -> list[tuple[list[int], bool]]:
    if pattern == "whole":          # the first chunk is also the final one
        return [(tokens, True)]
    pieces = [tokens[:1]] + [tokens[k:k + 2] for k in range(1, len(tokens), 2)]
    if pattern == "pieces_then_empty":   # a serving engine's last event often carries only the finish reason
        return [(piece, False) for piece in pieces] + [([], True)]
    return [(piece, k == len(pieces) - 1) for k, piece in enumerate(pieces)]


class ScriptedEngine:
    """Answers requests in order from one thread; `fail_after` > 0 fails the engine at that request instead."""

    def __init__(self, number: int, pattern: str, fail_after: int = 0) -> None:
        self.name = f"scripted engine {number}"
        self.number, self.pattern, self.fail_after = number, pattern, fail_after
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.served = 0
        self.cancelled: list[int] = []
        self.closed = 0
        self._thread: threading.Thread | None = None

    def open(self, stream: TokenStream) -> None:
        self._thread = threading.Thread(target=self._serve, args=(stream,), daemon=True)
        self._thread.start()

    def submit(self, requests: Sequence[Request]) -> None:
        for request in requests:
            self.requests.put(request)

    def cancel(self, request_ids: Sequence[int]) -> None:
        self.cancelled += list(request_ids)

    def close(self) -> None:
        self.closed += 1
        self.requests.put(None)
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _serve(self, stream: TokenStream) -> None:
        while (request := self.requests.get()) is not None:
            self.served += 1
            if self.served == self.fail_after:
                stream.failed(RuntimeError(f"{self.name} lost its connection"))
                return
            for tokens, final in chunks_of(output_of(request.prompt, self.number), self.pattern):
                stream.chunk(request.id, np.asarray(tokens, np.int64), final)


def child(spec: dict[str, Any]) -> None:
    from code.common.harness.llm_sut import PromptLibrary, StreamingSUT

    out, scenario, mode = Path(spec["out"]), Scenario(spec["scenario"]), TestMode(spec["mode"])
    engines = [ScriptedEngine(n, spec["pattern"], spec["fail_after"] if n == 0 else 0) for n in range(spec["engines"])]
    prompts = PromptLibrary(Prompts(spec["samples"]), spec["samples"])
    settings = GenerationSettings(max_new_tokens=16, eos_token_ids=(EOS,))
    sut = StreamingSUT(scenario, prompts, engines, settings,
                       answer=EncodedTokens() if spec.get("encode") else TOKEN_IDS).start()
    run_streaming_test(sut, prompts, out, scenario, mode, spec["samples"])
    (out / "result.json").write_text(json.dumps({
        "issued": sut.counters.issued, "completed": sut.counters.completed, "tokens": sut.counters.tokens,
        "error": repr(sut.error) if sut.error else None, "served": [e.served for e in engines],
        "cancelled": [len(e.cancelled) for e in engines], "closed": [e.closed for e in engines],
        "prompts": {i: Prompts(spec["samples"]).load(i).tolist() for i in range(spec["samples"])}}))


def encoded(tokens: Sequence[int]) -> np.ndarray:
    """A response that is not the token ids (as whisper's label indices are not): each token's id mod 7, as int64,
    and a leading marker, so that its length differs from the token count."""
    return np.asarray([-1] + [t % 7 for t in tokens], dtype=np.int64)


class EncodedTokens(AnswerKind):
    """An answer kind of the test's own: `encoded` of the output's tokens."""

    name = "tokens mod 7"

    def response(self, tokens, content) -> np.ndarray:
        return encoded(tokens)


def run(tmp_path: Path, scenario: Scenario, mode: TestMode = TestMode.AccuracyOnly, *, pattern: str = "pieces",
        engines: int = 1, fail_after: int = 0, samples: int = 16, encode: bool = False) -> tuple[dict[str, Any], Path]:
    out = tmp_path / f"{scenario.value}_{mode.value}_{pattern}"
    out.mkdir(parents=True)
    spec = {"out": str(out), "scenario": scenario.value, "mode": mode.value, "pattern": pattern, "engines": engines,
            "fail_after": fail_after, "samples": samples, "encode": encode}
    (out / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, "-m", "tests.test_llm_engines", str(out / "spec.json")], cwd=REPO,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "result.json").read_text()), out


def expected(result: dict[str, Any], index: int, engines: range) -> set[tuple[int, ...]]:
    """The outputs sample `index` may have (any engine's), as LoadGen gets them: EOS appended to one token."""
    prompt = np.asarray(result["prompts"][str(index)])
    outputs = [output_of(prompt, n) for n in engines]
    return {tuple(o + [EOS] if len(o) == 1 else o) for o in outputs}


def test_a_response_made_of_the_tokens_is_logged_with_the_token_count(tmp_path):
    """A benchmark's answer kind: the accuracy log holds what it makes of the output, LoadGen counts the tokens."""
    result, out = run(tmp_path, Scenario.Offline, pattern="whole", encode=True)
    assert result["error"] is None and read_detail(out).errors == ()
    for entry in accuracy_entries(out):
        (output,) = expected(result, entry["qsl_idx"], range(1))
        assert np.frombuffer(bytes.fromhex(entry["data"]), np.int64).tolist() == encoded(output).tolist()
        assert entry["token_count"] == len(output)


@pytest.mark.parametrize("scenario", [Scenario.Offline, Scenario.Server, Scenario.SingleStream])
@pytest.mark.parametrize("pattern", ["whole", "pieces", "pieces_then_empty"])
def test_token_streams_reach_loadgen_first_token_first(tmp_path, scenario, pattern):
    result, out = run(tmp_path, scenario, pattern=pattern)
    assert result["error"] is None and result["issued"] == result["completed"] == 16
    assert read_detail(out).errors == ()       # no first token after its completion, none missing
    entries = accuracy_entries(out)
    assert sorted(e["qsl_idx"] for e in entries) == list(range(16))
    for entry in entries:
        assert tuple(tokens_of(entry["data"])) in expected(result, entry["qsl_idx"], range(1))
    assert result["closed"] == [1]


def test_token_latencies_are_measured_when_the_first_chunk_is_the_final_one(tmp_path):
    result, out = run(tmp_path, Scenario.Server, TestMode.PerformanceOnly, pattern="whole", samples=24)
    log = read_detail(out)
    assert result["error"] is None and log.errors == ()
    assert log.get("result_first_token_mean_latency_ns") is not None
    assert log.get("result_time_per_output_token_99.00_percentile_ns") is not None


@pytest.mark.parametrize("scenario", [Scenario.Offline, Scenario.Server])
def test_an_engine_failure_mid_run_fails_the_run_with_every_sample_completed(tmp_path, scenario):
    """Two engines; the first fails at its 4th request: the run is failed, every sample (answered, outstanding in
    either engine, issued later) is completed once."""
    result, out = run(tmp_path, scenario, engines=2, fail_after=4, samples=24)
    assert result["error"] is not None and "scripted engine 0 lost its connection" in result["error"]
    assert result["issued"] == result["completed"] == 24
    entries = accuracy_entries(out)
    assert sorted(e["qsl_idx"] for e in entries) == list(range(24))
    assert any(e["data"] == "" for e in entries)
    assert set(read_detail(out).errors) <= {EMPTY_RESPONSE_ERROR}   # each first token before its completion
    assert result["closed"] == [1, 1]


def test_several_engines_share_the_samples(tmp_path):
    result, out = run(tmp_path, Scenario.Offline, engines=3, samples=24)
    assert result["error"] is None and result["issued"] == result["completed"] == 24
    assert result["served"] == [8, 8, 8]         # the fewest outstanding, round robin among equals
    entries = accuracy_entries(out)
    assert sorted(e["qsl_idx"] for e in entries) == list(range(24))
    for entry in entries:
        assert tuple(tokens_of(entry["data"])) in expected(result, entry["qsl_idx"], range(3))
    assert read_detail(out).errors == ()


if __name__ == "__main__":
    child(json.loads(Path(sys.argv[1]).read_text()))
