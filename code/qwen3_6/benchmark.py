"""Benchmark qwen3.6-27b behind `code.common.benchmark_api.Benchmark`: the edge agentic benchmark of round v6.1,
run on the MLCommons endpoints client only (documentation/endpoints.md).

- Performance: the agentic replay, SingleStream (one conversation at a time, `agentic_inference` with concurrency
  1): the 20 recorded SWE-bench agent conversations (1,007 assistant turns) of the client's example
  (examples/11_Edge_Agentic_Example/agentic_coding_2.5h.jsonl), each turn's tool calls scored inline against the
  recording (multiset IoU).
- Accuracy: BFCL v4 single turn, 995 samples (non_live 62 %, live 10 %, hallucination 10 %, subsets of 25 or fewer
  whole), which the client builds deterministically from the bfcl-eval package of its environment and scores; the
  gates are the round's: overall_accuracy >= 83.64 (0.97 x 86.23) and normalized_single_turn_score >= 85.32, both
  reported.
- The closed model is Qwen3.6-27B, served (the user's servers: --endpoints); the substitute SmolLM2-135M-Instruct
  runs on a local vLLM (CPU), its 4,096-token context holding only the start of each conversation: the replay is cut
  to what it holds (replay.trim) and the run says so. Neither the substitute nor a cut replay is a qwen3.6-27b
  result.
"""
from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.benchmark_api import AccuracyResult, DatasetSpec, Log, ModelSpec
from ..common.config_registry import PerCore
from ..common.errors import EXIT_FAILURE, UserError
from ..common.paths import Paths
from ..llm_tasks.benchmark import TaskBenchmark
from ..llm_tasks.datasets import ALL, TaskDataset
from ..llm_tasks.items import TaskItem
from ..llm_tasks.models import SUBSTITUTE, SUBSTITUTE_SPEC, ClosedModel
from ..llm_tasks.responses import Outputs
from . import bfcl as _bfcl
from . import replay as _replay

NAME = "qwen3.6-27b"
REPLAY = "qwen3_6_agentic_replay"
EXAMPLE = Path("examples") / "11_Edge_Agentic_Example"
REFERENCE_SEED, REFERENCE_MAX_NEW_TOKENS = 42, 1024     # the example's model_params
REPLAY_TURN_TIMEOUT_S = 600.0
# The round's BFCL v4 block, as the reference example writes it ("leave it as-is").
BFCL_BLOCK: Mapping[str, Any] = {
    "name": "bfcl_v4::function_calling", "type": "accuracy",
    "generate_params": {"categories": list(_bfcl.CATEGORY_PCT), "category_sample_pct": dict(_bfcl.CATEGORY_PCT),
                        "subset_floor": _bfcl.SUBSET_FLOOR},
    "accuracy_config": {"eval_method": "bfcl_v4", "ground_truth": "ground_truth",
                        "extractor": "function_call_extractor", "num_repeats": 1}}
BFCL_SAMPLES = 995
# The gates (rules/v6_1.py holds the checker's single figure; the client's ruleset both).
TARGETS = {"overall_accuracy": 83.64, "normalized_single_turn_score": 85.32}
# A test run (--test_run): the first conversation, 2 assistant turns; one BFCL sample of each of its 12 subsets.
TEST_RUN_CONVERSATIONS, TEST_RUN_TURNS, TEST_RUN_BFCL_SAMPLES = 1, 2, _bfcl.minimum()

QWEN3_6 = ClosedModel(
    name=NAME, hf_id="Qwen/Qwen3.6-27B",
    description="Qwen3.6-27B (dense, 27B), the MLPerf reference model of the edge agentic benchmark (the user's "
                "checkpoint, served, reasoning off)",
    checkpoint_dir="Qwen3.6-27B",
    how_to_get="Qwen3.6-27B is on Hugging Face (Qwen/Qwen3.6-27B); the reference serves it with reasoning off "
               "(examples/11_Edge_Agentic_Example/README.md of mlcommons/endpoints).",
    max_model_len=131_072)


def _with_tools(spec: ModelSpec, parser: str) -> ModelSpec:
    """The model served with a tool-call parser: the client's requests carry the conversations' tools."""
    return dataclasses.replace(spec, serving=dataclasses.replace(spec.serving, tool_call_parser=parser))


def checkout_example(env: Mapping[str, str] | None = None) -> Path:
    """The example folder of the client's checkout (MLCOMMONS_ENDPOINTS_DIR), at a commit the toolkit drives."""
    from ..common.endpoints_client.environment import find_checkout

    return find_checkout(os.environ if env is None else env).folder / EXAMPLE


class Qwen36Benchmark(TaskBenchmark):
    package = "code.qwen3_6"
    name = NAME
    closed = QWEN3_6
    endpoints_served = True
    endpoints_only = True
    reference_max_new_tokens = REFERENCE_MAX_NEW_TOKENS
    reference_min_new_tokens = 0
    seed = REFERENCE_SEED
    task_datasets = {REPLAY: TaskDataset(
        spec=DatasetSpec(name=REPLAY, sample_count=_replay.CONVERSATIONS,
                         description="the 20 recorded SWE-bench agent conversations (1,007 assistant turns) of the "
                                     "MLCommons endpoints client's edge agentic example",
                         how_to_get=f"It ships with the client: set MLCOMMONS_ENDPOINTS_DIR to your checkout of "
                                    f"https://github.com/mlcommons/endpoints (commit ea332753) and run make "
                                    f"download_data RUN_ARGS=\"--benchmarks={NAME}\"; it is linked from "
                                    f"{EXAMPLE / _replay.REPLAY_FILE}."),
        files={ALL: _replay.REPLAY_FILE}, read=_replay.read_items, part_counts={ALL: _replay.CONVERSATIONS})}
    # What `make run RUN_ARGS="--benchmarks=qwen3.6-27b --harness_type=endpoints"` runs: the substitute, answers
    # capped at 64 tokens (the reference's 1024 take minutes per turn on a small CPU).
    embedded_default: Mapping[str, Any] = {"model": SUBSTITUTE, "dataset": REPLAY, "max_output_tokens": 64,
                                           "single_stream_expected_latency_ns": PerCore(30_000_000_000)}

    @property
    def models(self) -> Mapping[str, ModelSpec]:
        return {SUBSTITUTE: _with_tools(SUBSTITUTE_SPEC, "hermes"),
                self.closed.name: _with_tools(self.closed.spec, "qwen3_coder")}

    def download_data(self, dataset: str, paths: Paths, log: Log) -> Path:
        """The replay linked from the client's checkout where it is not in the data set folder yet."""
        data = self.task_dataset(dataset)
        target = data.directory(paths) / _replay.REPLAY_FILE
        if not target.is_file():
            source = checkout_example() / _replay.REPLAY_FILE
            if not source.is_file():
                raise UserError(f"{source} is missing from the client's checkout; {data.spec.how_to_get}",
                                exit_code=EXIT_FAILURE)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            target.symlink_to(source)
            log(f"{dataset}: linked {target} -> {source}")
        return super().download_data(dataset, paths, log)

    def endpoints_workload(self, model: str, accuracy: bool, fields: Mapping[str, Any], paths: Paths,
                           run_dir: Path, test_run: bool, *, scenario: str = ""):
        from ..common.endpoints_client.workload import ClientWorkload

        substitute = self.closed_model(model) is None
        max_new = int(fields["max_output_tokens"])
        served = self.serving_folder(model, paths, lambda _: None)
        notes: list[str] = []
        if substitute:
            notes.append(f"the substitute {model} stands in for Qwen3.6-27B: not a qwen3.6-27b result")
            notes.append("no tokenizer_name: the client's token metrics (ISL, OSL, TPOT) are left empty, as its "
                         "tokenizer warm-up (25 s at most) fails on a small busy CPU machine")
        if max_new != REFERENCE_MAX_NEW_TOKENS:
            notes.append(f"max_new_tokens {max_new}, not the reference's {REFERENCE_MAX_NEW_TOKENS}")
        # The client's schema wants the agentic replay beside BFCL under the agentic load pattern, as the reference
        # YAML has both; an accuracy test runs the BFCL phase alone (--accuracy-only).
        datasets: list[Mapping[str, Any]] = [
            self._replay_block(model, fields, paths, run_dir, test_run, served.max_model_len, notes)]
        subset = None
        if accuracy:
            block = dict(BFCL_BLOCK)
            asked = accuracy_samples(fields, test_run)
            if asked is not None:
                params, subset = _bfcl.stratified(asked)     # its line heads the YAML (client_test)
                block["generate_params"] = params
            datasets.append(block)
        return ClientWorkload(
            datasets=tuple(datasets), tokenizer=None if substitute else str(served.folder),
            model_params={"temperature": 0, "seed": REFERENCE_SEED, "max_new_tokens": max_new},
            targets=TARGETS if accuracy else {}, samples_required=BFCL_SAMPLES if accuracy else None,
            notes=tuple(notes), accuracy_subset=subset)

    def endpoints_load(self, model: str, accuracy: bool, fields: Mapping[str, Any], test_run: bool, *,
                       scenario: str = ""):
        from ..common.endpoints_client.workload import ClientLoad

        if accuracy:
            asked = accuracy_samples(fields, test_run)
            return ClientLoad(asked or BFCL_SAMPLES, f"BFCL v4 samples ({'a stratified subset of the ' if asked else ''}"
                                                     f"{BFCL_SAMPLES}, each scored once)")
        cut = self.closed_model(model) is None
        conversations = TEST_RUN_CONVERSATIONS if test_run else _replay.CONVERSATIONS
        turns = TEST_RUN_TURNS if test_run else _replay.ASSISTANT_TURNS
        bound = f"; fewer where the model's context cuts them when the test starts" if cut else ""
        return ClientLoad(turns, f"assistant turns of the agentic replay, {conversations} conversation"
                                 f"{'s' if conversations != 1 else ''}, one at a time{bound}", at_most=cut,
                          one_pass="the client issues each recorded turn once, whatever min_duration_ms says")

    def _replay_block(self, model: str, fields: Mapping[str, Any], paths: Paths, run_dir: Path, test_run: bool,
                      context: int, notes: list[str]) -> dict[str, Any]:
        data = self.task_dataset(REPLAY)
        source = data.directory(paths) / _replay.REPLAY_FILE
        if not source.is_file():
            raise UserError(f"The agentic replay is not at {source}: run make download_data "
                            f"RUN_ARGS=\"--benchmarks={NAME}\" first.", exit_code=EXIT_FAILURE)
        path, count = source.resolve(), _replay.CONVERSATIONS
        if self.closed_model(model) is None or test_run:
            tokenizer = self.tokenizer(model, paths)
            cut = _replay.trim(_replay.read_rows(source), lambda text: len(tokenizer.encode(text, add_bos=False)),
                               context - int(fields["max_output_tokens"]),
                               TEST_RUN_CONVERSATIONS if test_run else None, TEST_RUN_TURNS if test_run else None)
            path = _replay.write_rows(cut.rows, Path(run_dir) / "replay_cut.jsonl")
            count = cut.conversations
            notes.append(f"the replay cut to what the model's {context}-token context holds"
                         f"{' and to a test run' if test_run else ''}: {cut.conversations} of "
                         f"{_replay.CONVERSATIONS} conversations, {cut.assistant_turns} of "
                         f"{_replay.ASSISTANT_TURNS} assistant turns ({path.name})")
        return {"name": "agentic_coding", "type": "performance", "path": str(path),
                "accuracy_config": {"eval_method": "agentic_inference_inline"},
                "agentic_inference": {"turn_timeout_s": REPLAY_TURN_TIMEOUT_S, "num_trajectories_to_issue": count}}

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths,
              audit_test: str | None = None) -> AccuracyResult:
        raise _scored_by_the_client()

    def score_outputs(self, items: Sequence[TaskItem], outputs: Outputs, folder: Path | None = None) \
            -> AccuracyResult:
        raise _scored_by_the_client()


def accuracy_samples(fields: Mapping[str, Any], test_run: bool) -> int | None:
    """The BFCL v4 samples a short accuracy pass scores (None: the round's 995): a test run's one of each subset,
    or total_sample_count where it asks fewer than 995 (refused below one of each subset)."""
    cap = fields.get("total_sample_count")
    asked = TEST_RUN_BFCL_SAMPLES if test_run else None
    if cap and int(cap) < BFCL_SAMPLES:
        asked = min(int(cap), asked or int(cap))
        if asked < _bfcl.minimum():
            raise UserError(f"{NAME}'s short accuracy pass takes at least one sample of each of BFCL v4's "
                            f"{_bfcl.minimum()} subsets: give --total_sample_count={_bfcl.minimum()} or more (or none "
                            f"for all {BFCL_SAMPLES}).")
    return asked


def _scored_by_the_client() -> UserError:
    return UserError(f"{NAME} is scored by the MLCommons endpoints client (its BFCL v4 scorer, --harness_type="
                     f"endpoints), not from a LoadGen accuracy log.", exit_code=EXIT_FAILURE)


BENCHMARK = Qwen36Benchmark()
