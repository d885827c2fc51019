"""qwen3-vl-235b-a22b: the substitute product set, the prompt against the reference's, the scorer against the official
evaluation, the rules against the checkers, and runs through the openai harness on the toolkit's test server (JSON
answers, answers that are not JSON, a damaged image, a product without candidates)."""
from __future__ import annotations

import __future__
import ast
import base64
import io
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from code.common.benchmark_api import get_benchmark
from code.common.constants import AccuracyTarget, Scenario, SystemType
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.prompts import Image, Text
from code.common.records.metadata import find_metadata, read_metadata
from code.common.rules import get_round
from code.common.serving.fake_server import ServerSettings, StreamingServer, chat_parts, content_key, json_choice
from code.main import main
from code.qwen3_vl import datasets as qdata
from code.qwen3_vl import products as qproducts
from code.qwen3_vl import prompt as qprompt
from code.qwen3_vl import scoring as qscoring
from code.qwen3_vl.benchmark import SUBSTITUTE

from .conftest import SHARED
from .official_tools import NOT_AT_HAND, inference_dir, load_official_module

NAME = "qwen3-vl-235b-a22b"
IMAGES = SHARED / "data" / "imagenet_sample"
REFERENCE = Path("multimodal") / "qwen3-vl" / "src" / "mlperf_inf_mm_q3vl"
RUN = ["--benchmarks=qwen3-vl", "--harness_type=openai", f"--model={SUBSTITUTE}", "--dataset=shopify_substitute",
       "--scenarios=offline"]
needs_images = pytest.mark.skipif(not IMAGES.is_dir(), reason=f"{IMAGES} is absent: the substitute product set's "
                                                               f"photographs are development data beside the repo")
needs_checkout = pytest.mark.skipif(inference_dir() is None, reason=NOT_AT_HAND)


# -- reading official code (tests only) ------------------------------------------------------------------------
def official_definitions(path: Path, names: tuple[str, ...], **module_globals: Any) -> dict[str, Any]:
    """The functions, classes and constants `names` of an official file, compiled from the file itself with
    `module_globals` as their globals (the file's own imports, datasets and the LoadGen bindings among them, are
    not in the toolkit's environment, so the module cannot be imported whole). A method is found in its class."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in tree.body:
        nodes = node.body if isinstance(node, ast.ClassDef) and node.name not in names else [node]
        for item in nodes:
            name = getattr(item, "name", None) or (
                item.targets[0].id if isinstance(item, ast.Assign) and isinstance(item.targets[0], ast.Name) else None)
            if name in names:
                if isinstance(item, ast.FunctionDef):
                    item.decorator_list = []
                found.append(item)
    namespace = dict(module_globals)
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec",  # noqa: S102
                 flags=__future__.annotations.compiler_flag, dont_inherit=True), namespace)
    missing = [n for n in names if n not in namespace]
    assert not missing, f"{path} lacks {missing}"
    return namespace


def official_product_metadata(checkout: Path):
    from pydantic import BaseModel, ConfigDict

    return official_definitions(checkout / REFERENCE / "schema.py", (
        "BaseModelWithAttributeDescriptionsFromDocstrings", "ProductMetadata"),
        BaseModel=BaseModel, ConfigDict=ConfigDict)["ProductMetadata"]


def official_evaluation(checkout: Path) -> dict[str, Any]:
    from pydantic import ValidationError

    return official_definitions(checkout / REFERENCE / "evaluation.py", (
        "_PRED_CATEGORY_PAD", "_PRED_BRAND_PAD", "_CATEGORY_SEPARATOR", "_WORKER_CONTEXT",
        "get_hierarchical_components", "calculate_hierarchical_f1", "init_worker", "_process_chunk"),
        np=np, ValidationError=ValidationError, ProductMetadata=official_product_metadata(checkout))


# -- the substitute product set --------------------------------------------------------------------------------
@needs_images
def test_the_substitute_products_are_real_photographs_with_8_taxonomy_candidates():
    found = qproducts.read_substitute(IMAGES)
    assert len(found) == qdata.DATASETS[qdata.SUBSTITUTE].spec.sample_count == 7
    for index, product in enumerate(found):
        assert product.title and product.description == ""
        assert len(product.candidates) == len(set(product.candidates)) == 8 and product.truth in product.candidates
        truth = product.truth.split(" > ")
        # siblings or cousins: every candidate shares the true path's root level
        assert all(c.split(" > ")[0] == truth[0] for c in product.candidates)
        assert product.image == (IMAGES / Path(product.source).name).read_bytes()
        assert qproducts.check(product, index) == "JPEG"
    header = qproducts.SUBSTITUTE_PRODUCTS.read_text().splitlines()[:10]
    assert any("Shopify/product-taxonomy" in line and "categories.txt" in line for line in header)
    assert "MIT licence" in " ".join(line.lstrip("# ") for line in header)


# -- the prompt ------------------------------------------------------------------------------------------------
def product_and_chat(index: int = 0):
    product = qproducts.read_substitute(IMAGES)[index]
    chat = qdata.ProductChats([product], [qproducts.check(product, index)], Path(".")).load(0)
    return product, chat


@needs_images
@needs_checkout
def test_the_prompt_is_the_references_with_the_v6_1_wording(tmp_path: Path):
    """The v6.0 reference's own formulate_loaded_sample, run on a product: the toolkit's messages are its messages
    with the v6.1 client's three changes (two typos fixed, its answer schema, the candidates as a JSON list), and
    its image the same bytes (the decoded image saved again by Pillow, as the reference does)."""
    from PIL import Image as Pillow

    checkout = inference_dir()
    metadata = official_product_metadata(checkout)
    official = official_definitions(checkout / REFERENCE / "task.py", ("formulate_loaded_sample",),
                                    json=json, base64=base64, BytesIO=io.BytesIO, ProductMetadata=metadata,
                                    LoadedSample=dict)["formulate_loaded_sample"]
    product, chat = product_and_chat(0)
    sample = {"product_image": Pillow.open(io.BytesIO(product.image)), "product_title": product.title,
              "product_description": product.description, "potential_product_categories": list(product.candidates)}
    system, user = official(sample)["messages"]
    ours_system, ours_user = chat.messages
    assert (ours_system.role, ours_user.role) == (system["role"], user["role"]) == ("system", "user")
    v61_system = system["content"].replace("specifc\n", "specific\n").replace("followng JSON", "following JSON") \
        .replace(json.dumps(metadata.model_json_schema(), indent=2), json.dumps(qprompt.ANSWER_SCHEMA, indent=2))
    assert ours_system.content == (Text(v61_system),)
    text, image = user["content"]
    assert text["type"] == "text" and image["type"] == "image_url"
    candidates = list(product.candidates)
    assert ours_user.content[0] == Text(text["text"].replace(str(candidates), json.dumps(candidates)))
    head, data = image["image_url"]["url"].split(",", 1)
    assert ours_user.content[1] == Image(base64.b64decode(data), "image/JPEG") and head == "data:image/JPEG;base64"
    assert base64.b64decode(data) != product.image               # a re-save: not the stored file


ENDPOINTS = os.environ.get("MLCOMMONS_ENDPOINTS_DIR")


@needs_images
@pytest.mark.skipif(not ENDPOINTS, reason="MLCOMMONS_ENDPOINTS_DIR does not point at a checkout of mlcommons/endpoints "
                                          "at 381d13bb (the v6.1 reference client)")
def test_the_prompt_is_the_v6_1_clients_text_for_text():
    """The endpoints client's ShopifyMultimodalFormatter (v6.1) on the product: the same system and user text, the
    same data URL head; its image bytes are its Pillow re-save of the same picture."""
    from PIL import Image as Pillow
    from pydantic import BaseModel, ConfigDict

    folder = Path(ENDPOINTS) / "src" / "inference_endpoint" / "dataset_manager" / "predefined" / \
        "shopify_product_catalogue"
    metadata = official_definitions(folder / "metadata.py", ("ProductMetadata",), BaseModel=BaseModel,
                                    ConfigDict=ConfigDict)["ProductMetadata"]
    to_row = official_definitions(folder / "__init__.py", ("_process_sample_to_row",), base64=base64, json=json,
                                  BytesIO=io.BytesIO)["_process_sample_to_row"]
    process_row = official_definitions(folder / "presets.py", ("process_row",), json=json,
                                       ProductMetadata=metadata)["process_row"]
    product, chat = product_and_chat(3)
    row = process_row(None, to_row({"product_image": Pillow.open(io.BytesIO(product.image)),
                                    "product_title": product.title, "product_description": product.description,
                                    "potential_product_categories": list(product.candidates)}))
    assert chat.messages[0].content == (Text(row["system"]),)
    text, image = row["prompt"]
    assert chat.messages[1].content[0] == Text(text["text"])
    head, data = image["image_url"]["url"].split(",", 1)
    assert head == f"data:{chat.messages[1].content[1].media_type};base64"
    assert Pillow.open(io.BytesIO(base64.b64decode(data))).size == Pillow.open(io.BytesIO(product.image)).size


# -- scoring against the official evaluation -------------------------------------------------------------------
def answers_of_every_kind(truths: list[str], candidates: list[tuple[str, ...]]) -> list[str]:
    """Right, partly right and wrong answers, and answers the schema refuses: not JSON, fenced, an extra field, a
    wrong type, a missing field, empty; and the lax ones pydantic accepts (a bool as "true")."""
    def answer(category, brand="acme", secondhand=False, **extra):
        return json.dumps({"category": category, "brand": brand, "is_secondhand": secondhand, **extra})

    wrong = [next(c for c in cands if c != truth) for truth, cands in zip(truths, candidates)]
    return [
        answer(truths[0]),
        answer(wrong[1]),
        " t12 t13 t14",
        "```json\n" + answer(truths[3]) + "\n```",
        answer(truths[4], color="red"),
        json.dumps({"category": truths[5], "brand": 7, "is_secondhand": False}),
        json.dumps({"category": truths[6], "brand": "x", "is_secondhand": "true"}),
        json.dumps({"category": truths[0], "brand": "x"}),
        "",
        answer(truths[2] + " > Extra Level"),
        answer(" > ".join(truths[1].split(" > ")[:2])),
        json.dumps({"category": truths[3], "brand": "x", "is_secondhand": "maybe"}),
        answer(truths[4]) + "\n",
        answer(truths[5]) + " trailing",
        json.dumps({"category": 12, "brand": "x", "is_secondhand": True}),
    ]


def write_accuracy_log(path: Path, indices: list[int], answers: list[str]) -> Path:
    path.write_text(json.dumps([{"seq_id": n, "qsl_idx": i, "data": a.encode("utf-8").hex().upper()}
                                for n, (i, a) in enumerate(zip(indices, answers))]))
    return path


@needs_images
@needs_checkout
def test_the_f1_is_the_official_evaluations_on_answers_of_every_kind(tmp_path: Path):
    found = qproducts.read_substitute(IMAGES)
    truths, candidates = [p.truth for p in found], [p.candidates for p in found]
    answers = answers_of_every_kind(truths, candidates)
    indices = [n % len(found) for n in range(len(answers))]
    log = write_accuracy_log(tmp_path / "mlperf_log_accuracy.json", indices, answers)

    paths = Paths.create(scratch=tmp_path / "scratch")
    benchmark = get_benchmark(NAME)
    benchmark.download_data(qdata.SUBSTITUTE, paths, lambda _: None)
    ours = benchmark.score(SUBSTITUTE, qdata.SUBSTITUTE, log, paths)

    official = official_evaluation(inference_dir())
    official["init_worker"]([{"ground_truth_category": p.truth, "ground_truth_brand": "",
                              "ground_truth_is_secondhand": False, "potential_product_categories": list(p.candidates)}
                             for p in found])
    chunk = official["_process_chunk"]((json.loads(log.read_text()), 12345))
    expected = official["calculate_hierarchical_f1"](chunk["category_dataset_pred_src"])
    assert ours.value == expected and 0 < expected < 1
    score = qscoring.score_answers([answers[i] for i in range(len(answers))], [truths[i] for i in indices])
    assert score.invalid == chunk["num_unparsable_responses"] == 9
    line = next(line for line in ours.text.splitlines() if re.match(get_round().benchmark(NAME).accuracy_pattern,
                                                                     line))
    assert float(re.match(get_round().benchmark(NAME).accuracy_pattern, line).group(1)) == expected
    assert line == json.dumps({"f1": expected}, sort_keys=True)   # the evaluation's own line
    assert "not of a model" in ours.text                           # the substitute's figure says what it is


def test_a_log_that_is_not_text_is_named(tmp_path: Path):
    log = tmp_path / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([{"seq_id": 0, "qsl_idx": 0, "data": "FFFE"}]))
    with pytest.raises(UserError, match="qsl_idx 0 is not UTF-8 text"):
        qscoring.read_answers(log, 7)


# -- rules -----------------------------------------------------------------------------------------------------
@needs_checkout
def test_rules_are_the_checkers_and_mlperf_conf():
    checkout = inference_dir()
    official = load_official_module(checkout / "tools" / "submission" / "submission_checker" / "constants.py",
                                    "official_checker_constants")
    config = official.MODEL_CONFIG["v6.1"]
    bench = get_round().benchmark(NAME)
    assert bench.submission_name(AccuracyTarget.k_99) == NAME
    for system_type, key in ((SystemType.datacenter, "datacenter"), (SystemType.datacenter_edge, "datacenter-edge")):
        assert list(bench.required_scenarios[system_type]) == [Scenario(s) for s in
                                                               config[f"required-scenarios-{key}"][NAME]]
        assert set(bench.optional_scenarios[system_type]) == {Scenario(s) for s in
                                                              config[f"optional-scenarios-{key}"][NAME]}
        assert set(bench.required_one_of[system_type]) == {Scenario.Server, Scenario.Interactive}
    assert not bench.allows(SystemType.edge) and NAME not in config["required-scenarios-edge"]
    for scenario, (metric, target) in config["accuracy-target"][NAME].items():
        (bound,) = bench.accuracy_bounds(AccuracyTarget.k_99, Scenario(scenario))
        assert (bound.name, bound.minimum) == (metric, target) and bound.pattern == official.ACC_PATTERN[metric]
    assert bench.accuracy_threshold(AccuracyTarget.k_99) == pytest.approx(0.782397)
    assert bench.accuracy_threshold(AccuracyTarget.k_99, Scenario.Interactive) == pytest.approx(0.779922)
    for scenario, count in config["accuracy-sample-count"][NAME].items():
        assert bench.accuracy_samples_for(Scenario(scenario)) == count
    assert bench.performance_sample_count == config["performance-sample-count"][NAME] == 48289
    assert bench.dataset_size == config["dataset-size"][NAME] == official.OFFLINE_MIN_SPQ_SINCE_V4[NAME] \
        == bench.offline_min_samples
    latency = config["latency-constraint"][NAME]
    assert (int(bench.server_latency_ms * 1e6), int(bench.interactive_latency_ms * 1e6)) == \
        (latency["Server"], latency["Interactive"]) == (12_000_000_000, 1_500_000_000)
    assert bench.compliance_tests == () and not any(NAME in config[f"models_{t}"] for t in
                                                    ("TEST01", "TEST04", "TEST06", "TEST07", "TEST09"))
    assert get_round().min_duration_ms == 600_000
    # The old checker's accuracy-sample-count for it is a table per scenario it compares with a number: it crashes.
    old = (checkout / "tools" / "submission" / "submission_checker_old.py").read_text()
    assert re.search(r'"accuracy-sample-count": \{[^}]*"qwen3-vl-235b-a22b": \{', old) and bench.official_checker_defect
    conf = (checkout / "loadgen" / "mlperf.conf").read_text()
    assert f"{NAME}.Server.target_latency = 12000" in conf and f"{NAME}.Offline.min_query_count = 48289" in conf
    assert f"{NAME}.*.sample_concatenate_permutation = 1" in conf and bench.equal_issue
    assert f"{NAME}.*.use_token_latencies = 0" in conf and not bench.uses_token_latencies
    assert "interactive" not in "".join(line for line in conf.splitlines() if NAME in line)   # user.conf's to set


def test_interactive_gets_its_latency_bound_in_user_conf():
    from code.common.harness.settings import user_conf_lines

    bench = get_round().benchmark(NAME)
    fields = {"server_target_qps": 0.5, "offline_expected_qps": 1.0, "max_output_tokens": 150}
    lines = user_conf_lines(bench.loadgen_model_for(Scenario.Interactive), Scenario.Interactive, fields, bench,
                            8000, test_run=False)
    assert f"{NAME}.Server.target_latency = 1500" in lines
    assert f"{NAME}.Server.performance_sample_count_override = 8000" in lines
    server = user_conf_lines(bench.loadgen_model_for(Scenario.Server), Scenario.Server, fields, bench, 48289, False)
    assert not any("target_latency" in line for line in server)        # mlperf.conf's 12 s


# -- runs on the test server -----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def qwen_scratch(tmp_path_factory) -> Paths:
    if not IMAGES.is_dir():
        pytest.skip(f"{IMAGES} is absent: the substitute product set's photographs are development data")
    root = tmp_path_factory.mktemp("qwen")
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    for action in ("download_data", "preprocess_data"):
        assert main([f"--action={action}", f"--scratch_path={paths.scratch}", *RUN], log=lambda _: None) == 0
    return paths


def run_harness(paths: Paths, url: str, log_dir: Path, *extra: str) -> tuple[int, str]:
    lines: list[str] = []
    code = main(["--action=run_harness", f"--scratch_path={paths.scratch}", *RUN, "--test_mode=AccuracyOnly",
                 f"--endpoints={url}", f"--log_dir={log_dir}", *extra], log=lines.append)
    return code, "\n".join(lines)


def accuracy_run(log_dir: Path):
    (record,) = [read_metadata(m) for m in find_metadata(log_dir)]
    return record


@pytest.mark.parametrize("client", [(), ("--openai_workers=2", "--openai_offline_answers=streamed")],
                         ids=["one loop, whole answers", "two worker processes, streamed"])
def test_json_answers_through_the_openai_harness(qwen_scratch: Paths, tmp_path: Path, client: tuple[str, ...]):
    """Offline accuracy against a server answering JSON: every answer's text in the log as hex of UTF-8, the F1 of
    those answers, requests that carry the reference's image bytes and the output cap and no sampling parameter;
    the same when worker processes stream the answers (their texts travel with their final chunks); every body says
    the answer mode the record says (`"stream": false` for whole answers)."""
    with StreamingServer(ServerSettings(model=SUBSTITUTE, answer="json_choice")) as server:
        code, out = run_harness(qwen_scratch, server.url, tmp_path / "logs", *client)
    assert code == 0, out
    record = accuracy_run(tmp_path / "logs")
    entries = json.loads((Path(record.log_dir) / qscoring_log()).read_text())
    samples = qdata.preprocessed(NAME, SUBSTITUTE, qdata.SUBSTITUTE, qwen_scratch)
    found = qproducts.read_substitute(IMAGES)
    expected = {}
    for index in range(len(samples)):
        messages = [{"role": m.role, "content": _message_content(m.content)} for m in samples.load(index).messages]
        expected[index] = json_choice(messages, content_key(chat_parts(messages)))
    assert sorted(e["qsl_idx"] for e in entries) == list(range(7))
    assert all(bytes.fromhex(e["data"]).decode("utf-8") == expected[e["qsl_idx"]] for e in entries)
    score = qscoring.score_answers([expected[i] for i in range(7)], [p.truth for p in found])
    assert record.accuracy.metrics["F1_HIERARCHICAL"] == pytest.approx(score.f1) and score.invalid == 0
    assert "not of a model" in out
    chats = [body for body in server.received if body["max_completion_tokens"] == 150]
    assert len(chats) == 7
    # What was sent is what the record says: Offline's whole answers are not streamed, under server sampling too.
    streamed = "--openai_offline_answers=streamed" in client
    assert {e.transport for e in record.endpoints} == {
        f"HTTP, {'streamed' if streamed else 'whole answers'} /v1/chat/completions"}
    assert all(body["stream"] is streamed for body in server.received)
    for body in chats:
        assert not {"temperature", "top_p", "top_k", "min_tokens", "stop_token_ids", "seed"} & set(body)
        assert "response_format" not in body         # guided decoding is off by default, as in the reference
        image = body["messages"][1]["content"][1]["image_url"]["url"]
        head, data = image.split(",", 1)
        assert head == "data:image/JPEG;base64" and base64.b64decode(data) in {qproducts.sent_image(p) for p in found}


def test_guided_decoding_sends_the_answer_schema_and_is_recorded(qwen_scratch: Paths, tmp_path: Path):
    """--use_guided_decoding, the reference's option: every chat request carries the answer schema as its
    response_format (OpenAI's json_schema form, as multimodal/qwen3-vl task.py sends it) and the run's record says
    it was on; a benchmark whose reference has no schema refuses it."""
    with StreamingServer(ServerSettings(model=SUBSTITUTE, answer="json_choice")) as server:
        code, out = run_harness(qwen_scratch, server.url, tmp_path / "logs", "--use_guided_decoding=true")
    assert code == 0, out
    chats = [body for body in server.received if body["max_completion_tokens"] == 150]
    assert len(chats) == 7 and all(body["response_format"] == qprompt.RESPONSE_FORMAT for body in chats)
    assert qprompt.RESPONSE_FORMAT["json_schema"]["schema"] == qprompt.ANSWER_SCHEMA
    record = accuracy_run(tmp_path / "logs")
    assert record.config.fields["use_guided_decoding"] is True
    assert record.config.sources["use_guided_decoding"] == "command line"
    lines: list[str] = []
    refused = main(["--action=run_harness", "--benchmarks=llama3.1-8b", "--use_guided_decoding=true", "--dry_run",
                    f"--log_dir={tmp_path / 'other'}"], log=lines.append)
    assert refused == 2


def qscoring_log() -> str:
    from code.common.paths import ACCURACY_LOG

    return ACCURACY_LOG


def _message_content(parts):
    from code.common.serving.payloads import _message_content as content

    return content(parts)


def test_answers_that_are_not_json_score_zero_and_the_run_completes(qwen_scratch: Paths, tmp_path: Path):
    """The reference scores an answer that does not validate as wrong at every level; nothing crashes."""
    with StreamingServer(ServerSettings(model=SUBSTITUTE)) as server:   # answers " t<id> t<id> ..."
        code, out = run_harness(qwen_scratch, server.url, tmp_path / "logs")
    assert code == 0, out
    record = accuracy_run(tmp_path / "logs")
    assert record.accuracy.metrics["F1_HIERARCHICAL"] == 0.0
    assert "7 answers, 7 not valid JSON of the answer schema" in (Path(record.log_dir) / "accuracy.txt").read_text()


def test_a_damaged_image_stops_preprocessing_and_the_run_naming_it(qwen_scratch: Paths, tmp_path: Path, capsys):
    copy = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    images = tmp_path / "images"
    images.mkdir()
    for product in qproducts.read_substitute(IMAGES):
        name = Path(product.source).name
        (images / name).write_bytes(product.image[:len(product.image) // 3] if "puck" in name else product.image)
    folder = copy.dataset_dir(qdata.SUBSTITUTE)
    folder.mkdir(parents=True)
    (folder / qdata.IMAGES).symlink_to(images)
    code = main(["--action=preprocess_data", f"--scratch_path={copy.scratch}", *RUN], log=lambda _: None)
    error = capsys.readouterr().err
    assert code == 1 and "Sample 2 (" in error and "n04019541_puck.JPEG) has an image Pillow cannot decode" in error
    with StreamingServer(ServerSettings(model=SUBSTITUTE, answer="json_choice")) as server:
        code, out = run_harness(copy, server.url, tmp_path / "run")
        assert server.received == []                              # nothing sent
    out += capsys.readouterr().err
    assert code != 0 and "n04019541_puck.JPEG) has an image Pillow cannot decode" in out, out
    assert not list((tmp_path / "run").rglob("mlperf_log_accuracy.json"))   # no result to stage


def test_a_product_without_candidates_is_named_with_its_file(tmp_path: Path):
    """The Shopify Parquet layout as the datasets library stores it, one product with no candidates."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not IMAGES.is_dir():
        pytest.skip(f"{IMAGES} is absent")
    photo = (IMAGES / "n02802426_basketball.JPEG").read_bytes()
    rows = {"product_title": ["ball", "ball"], "product_description": ["", "<p>round</p>"],
            "product_image": [{"bytes": photo, "path": "a.jpg"}, {"bytes": photo, "path": "b.jpg"}],
            "potential_product_categories": [["A > B", "A > C"], []], "ground_truth_category": ["A > B", "A > C"],
            "ground_truth_brand": ["", ""], "ground_truth_is_secondhand": [False, True]}
    paths = Paths.create(scratch=tmp_path / "scratch")
    data = paths.dataset_dir(qdata.CATALOGUE_8K) / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.table(rows), data / "train-00000-of-00001.parquet")
    found = qdata.read(NAME, qdata.CATALOGUE_8K, paths)
    assert [p.image for p in found] == [photo, photo] and found[1].description == "<p>round</p>"
    with pytest.raises(UserError, match=r"Sample 1 \(train-00000-of-00001.parquet row 1, image b.jpg\) has no "
                                        r"candidate categories"):
        qdata.preprocess(NAME, SUBSTITUTE, qdata.CATALOGUE_8K, paths, lambda _: None)
    with pytest.raises(UserError, match="hold 2 products, the published set 8000"):
        qdata.download_data(NAME, qdata.CATALOGUE_8K, paths, lambda _: None)
    shutil.rmtree(data)
    with pytest.raises(UserError, match="no train-\\*.parquet under .*huggingface-cli download"):
        qdata.read(NAME, qdata.CATALOGUE_8K, paths)


@needs_images
def test_one_shard_of_the_catalogue_runs_as_a_labelled_subset_and_never_as_the_closed_catalogue(
        tmp_path: Path, capsys):
    """One Parquet shard of 3 products once ran as the 48,289-product catalogue (the plan announced 48,289 samples
    and 2 h 40 min): the plan, the record and the report now say 3 of 48,289, and the closed model is refused."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from code.common.report.collect import read_rows

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    photos = sorted(IMAGES.glob("*.JPEG"))[:3]
    rows = {"product_title": ["a", "b", "c"], "product_description": ["", "", ""],
            "product_image": [{"bytes": p.read_bytes(), "path": p.name} for p in photos],
            "potential_product_categories": [["A > B", "A > C"]] * 3, "ground_truth_category": ["A > B"] * 3}
    data = paths.dataset_dir(qdata.CATALOGUE) / "data"
    data.mkdir(parents=True)
    pq.write_table(pa.table(rows), data / "train-00000-of-00004.parquet")
    assert qdata.prepared_size(qdata.CATALOGUE, paths) == 3
    run = ["--benchmarks=qwen3-vl", "--harness_type=openai", f"--dataset={qdata.CATALOGUE}", "--scenarios=offline",
           f"--scratch_path={paths.scratch}", f"--log_dir={paths.log_dir}"]
    assert main(["--action=preprocess_data", f"--model={SUBSTITUTE}", *run], log=print) == 0
    with StreamingServer(ServerSettings(model=SUBSTITUTE, answer="json_choice")) as server:
        code = main(["--action=run_harness", f"--model={SUBSTITUTE}", "--test_mode=AccuracyOnly",
                     f"--endpoints={server.url}", *run], log=print)
        out = capsys.readouterr().out
        assert code == 0, out
        assert "3 samples in 1 query" in out and "48289 samples" not in out
        assert f"{qdata.CATALOGUE} is a subset: 3 of the published 48,289 samples" in out
        record = accuracy_run(paths.log_dir)
        assert (record.data.samples, record.data.published_samples) == (3, 48289)
        (row,) = read_rows([paths.log_dir], lambda path, why: None)
        assert "a subset: 3 of the published 48,289 samples" in row.verdict_text

        code = main(["--action=run_harness", f"--model={NAME}", f"--endpoints={server.url}", *run], log=print)
    err = capsys.readouterr().err
    assert code == 1 and "a closed-division run needs the whole published set" in err, err
    assert "internal error" not in err


def test_a_damaged_parquet_file_is_named_with_exit_status_1(tmp_path: Path, capsys):
    """A shard cut short (a download that stopped): one sentence naming the file, never ArrowInvalid or
    `internal error`, from download_data (which does not say ready) and preprocess_data alike."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    paths = Paths.create(scratch=tmp_path / "scratch")
    data = paths.dataset_dir(qdata.CATALOGUE_8K) / "data"
    data.mkdir(parents=True)
    shard = data / "train-00000-of-00001.parquet"
    pq.write_table(pa.table({"product_title": ["ball"] * 50}), shard)
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    for action in ("download_data", "preprocess_data"):
        code = main([f"--action={action}", f"--scratch_path={paths.scratch}", "--benchmarks=qwen3-vl",
                     "--harness_type=openai", f"--model={SUBSTITUTE}", f"--dataset={qdata.CATALOGUE_8K}"],
                    log=print)
        out, err = capsys.readouterr()
        assert code == 1, (out, err)
        assert f"{shard} is not a readable Parquet file" in err and "internal error" not in err
        assert "ready" not in out


# -- a staged test-run tree and the checkers -------------------------------------------------------------------
SHORT_RUN_FACTS = ("performance_sample_count, found 7, needs to be >= 48289", "Early stopping condition was not met",
                   "Test duration less than 600s", "accurcy run does not cover all dataset", "Some performance checks",
                   "Some accuracy checks", "NoResults", "SUMMARY: submission has errors")


@pytest.mark.slow
@needs_checkout
def test_a_staged_test_run_tree_fails_the_checkers_only_on_short_run_facts(qwen_scratch: Paths, tmp_path: Path):
    """Offline, Server and Interactive test runs on the test server, staged, truncated and exported as a datacenter
    system's: the toolkit's checker warns only of the short-run facts (--allow_test_runs), main.py errs on those
    alone and reads the F1 the toolkit wrote; the old checker crashes on the benchmark (the rules say so)."""
    from tests.official_tools import run_checker
    from tests.test_llm_e2e import toolkit

    repo = tmp_path / "repo"
    for name in ("code", "configs", "scripts", "requirements"):
        shutil.copytree(Path(__file__).resolve().parents[1] / name, repo / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (repo.parent / "shared").symlink_to(SHARED)
    logs, common = repo / "build" / "logs" / "q", ("--submitter=Org", "--allow_test_runs")
    printed = ""
    with StreamingServer(ServerSettings(model=SUBSTITUTE, answer="json_choice")) as server:
        for mode in ("PerformanceOnly", "AccuracyOnly"):
            done = toolkit(repo, qwen_scratch.scratch, "--action=run_harness", *RUN[:-1],
                           "--scenarios=Offline,Server,Interactive", f"--endpoints={server.url}", "--test_run",
                           f"--test_mode={mode}", f"--log_dir={logs}", "--offline_expected_qps=20",
                           "--server_target_qps=5")
            assert done.returncode == 0, done.stdout + done.stderr
            printed += done.stdout
    assert re.search(r"Server PerformanceOnly: [\d.]+ samples/s .*latency p99 [\d.]+ ms \(bound 12000 ms\)", printed)
    assert re.search(r"Interactive PerformanceOnly: .*latency p99 [\d.]+ ms \(bound 1500 ms\)", printed)
    assert re.search(r'Offline AccuracyOnly: Results; \{"f1": [\d.]+\}.*not of a model', printed)
    (repo / "systems").mkdir()
    # The first writes the system's overrides template and refuses the description it leaves incomplete.
    toolkit(repo, qwen_scratch.scratch, "--action=generate_conf_files", f"--log_dir={logs}", *common)
    (overrides_file,) = (repo / "systems").glob("*.overrides.json")
    overrides_file.write_text(json.dumps({
        "system_type": "datacenter", "status": "available", "host_storage_type": "SSD", "cooling": "air",
        "host_memory_configuration": "N/A", "host_networking": "N/A", "host_networking_topology": "N/A",
        "host_network_card_count": "1"}))
    for action in ("generate_conf_files", "stage_results", "truncate_results", "export_submission",
                   "check_submission"):
        done = toolkit(repo, qwen_scratch.scratch, f"--action={action}", f"--log_dir={logs}", *common)
        assert done.returncode == 0, f"{action}: {done.stdout}{done.stderr}"
    warnings = [line for line in done.stdout.splitlines() if line.startswith("WARNING")]
    assert "0 errors" in done.stdout and warnings
    short = ("below the round's 600000", "early_stopping_met false", "effective_performance_sample_count is 7",
             "effective_samples_per_query is 200", "the accuracy run covered 7 samples",
             "the old checker (submission_checker_old.py) crashes on every qwen3-vl-235b-a22b")   # the rules' word
    assert all(any(fact in line for fact in short) for line in warnings), warnings
    assert any("not the whole data set of 8000" in line for line in warnings)      # Interactive's 8k set
    tree = repo / "build" / "submission"
    verdict, output = run_checker(inference_dir(), tree, "main", tmp_path / "main")
    errors = [line for line in output.splitlines() if " ERROR]" in line]
    assert verdict == "fail" and errors
    assert all(any(fact in line for fact in SHORT_RUN_FACTS) for line in errors), errors
    accuracy_txt = next((tree / "open" / "Org" / "results").rglob("accuracy.txt"))
    f1 = json.loads(next(line for line in accuracy_txt.read_text().splitlines() if line.startswith('{"f1"')))["f1"]
    assert f"found={f1}" in output                                               # main.py read the toolkit's F1
    verdict, output = run_checker(inference_dir(), tree, "old", tmp_path / "old")
    assert verdict == "crash" and "TypeError: '<' not supported between instances of 'int' and 'dict'" in output
    assert "crashes on every qwen3-vl-235b-a22b" in get_round().benchmark(NAME).official_checker_defect


def test_the_in_process_harness_refuses_it_naming_the_openai_harness(qwen_scratch: Paths, tmp_path: Path, capsys):
    code = main(["--action=run_harness", f"--scratch_path={qwen_scratch.scratch}", *RUN[:1], *RUN[2:],
                 "--test_run", f"--log_dir={tmp_path / 'logs'}"], log=lambda _: None)
    error = capsys.readouterr().err
    assert code == 2 and "prompts are made of image, text: run it with --harness_type=openai" in error, error
    assert not (tmp_path / "logs").exists() or not list((tmp_path / "logs").rglob("mlperf_log_*"))
