"""qwen3-vl-235b-a22b on the endpoints harness: the client's YAML per scenario as the reference example writes it
(code/qwen3_vl/endpoints.py), the products in the client's data set cache as its loader writes them, a test run by
the harness's own load generator with a recording client, and the tree of the client's runs beside the LoadGen tree of
the same machine. The live test (the real client checks the YAML) runs where MLCOMMONS_ENDPOINTS_DIR names a checkout
and .venv-endpoints is made."""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from code.common.constants import Scenario, TestMode
from code.common.endpoints_client.config_yaml import as_mapping
from code.common.endpoints_client.run import client_test
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.records.metadata import COMPLETED
from code.common.records.record import ConfigRecord, RunRecord, SystemRecord
from code.common.records.runs import choose_runs
from code.common.rules import get_round
from code.common.submission.endpoints_tree import tree_key
from code.qwen3_vl import endpoints
from code.qwen3_vl.benchmark import BENCHMARK, CLOSED, SUBSTITUTE

SHARED_IMAGES = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "imagenet_sample"
needs_images = pytest.mark.skipif(not SHARED_IMAGES.is_dir(), reason=f"the substitute's photographs are not at "
                                                                      f"{SHARED_IMAGES} (../shared/data)")


@pytest.fixture(scope="module")
def paths(tmp_path_factory) -> Paths:
    root = tmp_path_factory.mktemp("vl")
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    BENCHMARK.download_data("shopify_substitute", paths, lambda _: None)
    return paths


def rendered(workload, scenario: Scenario, accuracy: bool, test_run: bool) -> dict:
    test = client_test(f"qwen3-vl-235b-a22b {scenario.value}", f"qwen3-vl-235b-a22b-{scenario.value}", "served",
                       workload, get_round(), accuracy, test_run)
    return as_mapping(test.config)


@needs_images
@pytest.mark.parametrize("scenario", [Scenario.Offline, Scenario.Server, Scenario.Interactive])
def test_the_yaml_is_the_reference_examples_with_the_rounds_seeds_and_gates(paths, tmp_path, scenario):
    run_dir = tmp_path / "run"
    workload = BENCHMARK.endpoints_workload(SUBSTITUTE, True, {"max_output_tokens": 150, "server_target_qps": 0.5,
                                                               "dataset": "shopify_substitute"},
                                            paths, run_dir, True, scenario=scenario.value)
    document = rendered(workload, scenario, accuracy=True, test_run=True)
    client_id = "shopify_product_catalogue_8k" if scenario is Scenario.Interactive else "shopify_product_catalogue"
    assert document["datasets"] == [
        {"name": f"{client_id}::q3vl", "type": "performance"},
        {"name": f"{client_id}::q3vl", "type": "accuracy",
         "accuracy_config": {"eval_method": "shopify_category_f1", "ground_truth": "ground_truth_category",
                             "extractor": "identity_extractor", "num_repeats": 1}}]
    online = scenario is not Scenario.Offline
    assert document["type"] == ("online" if online else "offline")
    assert document["model_params"] == {"name": "served", "max_new_tokens": 150,
                                        **({"streaming": "on"} if online else {})}   # no sampling parameter
    assert document["settings"]["load_pattern"] == ({"type": "poisson", "target_qps": 0.5} if online
                                                     else {"type": "max_throughput"})
    assert document["timeout"] == (1800 if scenario is Scenario.Interactive else 14400)
    assert "warmup" not in document["settings"]            # neither the substitute nor a test run warms up
    runtime = document["settings"]["runtime"]
    assert (runtime["dataloader_random_seed"], runtime["min_duration_ms"]) == (2747215439041700203, 0)
    f1, samples = (0.779922, 8000) if scenario is Scenario.Interactive else (0.782397, 48289)
    assert workload.targets == {"score": pytest.approx(f1)} and workload.samples_required == samples
    # the products in the client's cache, as its shopify loader writes them (read back as the client reads it)
    import pyarrow.parquet as pq

    split = "train" if scenario is Scenario.Interactive else "train+test"
    cache = run_dir / "dataset_cache" / client_id / split / f"{client_id}_{split}.parquet"
    rows = pq.read_table(cache).to_pylist()
    assert len(rows) == 7 and list(rows[0]) == [
        "product_title", "product_description", "product_image_base64", "product_image_format",
        "potential_product_categories", "ground_truth_category", "ground_truth_brand", "ground_truth_is_secondhand"]
    assert len(json.loads(rows[0]["potential_product_categories"])) == 8 and rows[0]["product_image_format"] == "JPEG"
    assert (run_dir / "datasets").resolve() == (run_dir / "dataset_cache").resolve()   # 381d13bb's folder
    assert any("not a qwen3-vl result" in note for note in workload.notes)


@needs_images
def test_a_full_run_of_the_closed_model_keeps_the_examples_warmup_workers_and_drain(paths, tmp_path):
    workload = BENCHMARK.endpoints_workload(CLOSED, False, {"max_output_tokens": 150, "dataset": "shopify_substitute"},
                                            paths, tmp_path / "run", False, scenario="Offline")
    document = rendered(workload, Scenario.Offline, accuracy=False, test_run=False)
    assert document["settings"]["warmup"] == {"enabled": True, "n_requests": 1600, "salt": False}
    assert document["settings"]["drain"]["warmup_timeout_s"] == 240.0
    assert (document["settings"]["client"]["num_workers"], document["settings"]["client"]["max_connections"]) == \
        (5, 1000)
    assert document["settings"]["runtime"]["min_duration_ms"] == 600000
    assert [block["type"] for block in document["datasets"]] == ["performance"] and workload.targets == {}


def test_guided_decoding_and_an_unknown_scenario_are_refused(paths, tmp_path):
    with pytest.raises(UserError, match="use_guided_decoding is not a setting of the MLCommons endpoints client"):
        BENCHMARK.endpoints_workload(SUBSTITUTE, False, {"max_output_tokens": 150, "use_guided_decoding": True},
                                     paths, tmp_path, True, scenario="Offline")
    with pytest.raises(UserError, match="Offline, Server and Interactive .* not SingleStream"):
        BENCHMARK.endpoints_workload(SUBSTITUTE, False, {"max_output_tokens": 150}, paths, tmp_path, True,
                                     scenario="SingleStream")


def a_record(folder: Path, benchmark: str, scenario: Scenario, mode: TestMode, client: bool) -> RunRecord:
    return RunRecord(status=COMPLETED, benchmark=benchmark, model="m", dataset="d", division="open",
                     scenario=scenario, test_mode=mode, system=SystemRecord(id="box"),
                     config=ConfigRecord(workload_setting="w", fields={}, sources={}), log_dir=str(folder),
                     valid=True, submittable=True, finished="2026-12-02T03:00:00",
                     load_generator={"commit": "ea33275"} if client else {})


def test_the_clients_tree_of_qwen3_vl_goes_beside_the_loadgen_tree_and_qwen3_6_stays_where_it_is(tmp_path):
    runs = [a_record(tmp_path / f"{b}{s.value}{m.value}{c}", b, s, m, c)
            for b, s, c in (("qwen3-vl-235b-a22b", Scenario.Offline, True),
                            ("qwen3-vl-235b-a22b", Scenario.Offline, False),
                            ("qwen3.6-27b", Scenario.SingleStream, True))
            for m in (TestMode.PerformanceOnly, TestMode.AccuracyOnly)]
    chosen = choose_runs(runs, allow_test_runs=False, system_id="box", key=tree_key)
    assert set(chosen) == {("box_endpoints", "qwen3-vl-235b-a22b", Scenario.Offline),
                           ("box", "qwen3-vl-235b-a22b", Scenario.Offline),
                           ("box", "qwen3.6-27b", Scenario.SingleStream)}
    for (system, _, _), choice in chosen.items():    # never a LoadGen run paired with a client's
        kinds = {bool(choice.performance.load_generator), bool(choice.accuracy.load_generator)}
        assert len(kinds) == 1 and (system == "box_endpoints") <= kinds.pop()


@pytest.mark.skipif(not os.environ.get("MLCOMMONS_ENDPOINTS_DIR"),
                    reason="set MLCOMMONS_ENDPOINTS_DIR to a checkout of mlcommons/endpoints (and make build "
                           "RUN_ARGS=\"--harness_type=endpoints\") to have the real client check the YAML")
@needs_images
def test_real_client_validates_the_yaml_of_each_scenario(paths, tmp_path):
    from code.common.endpoints_client.config_yaml import render
    from code.common.paths import REPO_ROOT

    client = REPO_ROOT / ".venv-endpoints" / "bin" / "inference-endpoint"
    if not client.is_file():
        pytest.skip(f"{client} is not made: make build RUN_ARGS=\"--harness_type=endpoints\" with "
                    f"MLCOMMONS_ENDPOINTS_DIR set")
    for scenario in (Scenario.Offline, Scenario.Interactive):
        workload = BENCHMARK.endpoints_workload(SUBSTITUTE, True, {"max_output_tokens": 150,
                                                                   "server_target_qps": 0.5,
                                                                   "dataset": "shopify_substitute"},
                                                paths, tmp_path / scenario.value, True, scenario=scenario.value)
        test = client_test("vl", "vl", "smolvlm-substitute", workload, get_round(), True, True)
        path = tmp_path / f"{scenario.value}.yaml"
        path.write_text(render(test.config))
        done = subprocess.run([str(client), "validate-yaml", "--config", str(path)], capture_output=True, text=True,
                              timeout=600, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


@needs_images
def test_the_harness_runs_qwen3_vl_on_the_client_and_gates_the_f1_and_the_rounds_sample_count(paths, tmp_path,
                                                                                               monkeypatch):
    from code.common.harness.plugins.endpoints import EndpointsHarness
    from code.common.serving.fake_server import ServerSettings, StreamingServer
    from tests.test_endpoints_run import fake_client

    monkeypatch.setenv("CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.setenv("OVERALL", "80.0")        # the recording client's score: 0.80
    client = fake_client(tmp_path)
    monkeypatch.setattr("code.common.endpoints_client.environment.require_environment", lambda venv: client)
    with StreamingServer(ServerSettings(model="smolvlm-substitute")) as server:
        spec = SimpleNamespace(label="qwen3-vl-235b-a22b Offline AccuracyOnly", benchmark="qwen3-vl-235b-a22b",
                               scenario="Offline", scenario_enum=Scenario.Offline, model=SUBSTITUTE,
                               dataset="shopify_substitute", mode_enum=TestMode.AccuracyOnly,
                               fields={"max_output_tokens": 150, "dataset": "shopify_substitute"}, test_run=True,
                               rules_version="v6.1",
                               harness_options={"endpoints": [server.url]})
        outcome = EndpointsHarness().run_own_test(spec, BENCHMARK, paths, tmp_path / "run")
    ran = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    assert [call["argv"][0] for call in ran] == ["validate-yaml", "benchmark"] and "--accuracy-only" in ran[1]["argv"]
    assert ran[1]["endpoints"] == [server.url] and ran[1]["model"] == "smolvlm-substitute"
    accuracy = outcome["accuracy"]
    assert (accuracy.metric, accuracy.value, accuracy.threshold) == ("score", 0.8, pytest.approx(0.782397))
    gates = {g["name"]: g["passed"] for g in outcome["load_generator"]["gates"]}
    assert gates["score >= 0.782397"] is True and gates["48289 samples scored"] is False   # 995 of the recording
    assert outcome["valid"] is False and accuracy.meets_target is False
    written = yaml.safe_load((tmp_path / "run" / "client.yaml").read_text())
    assert written["datasets"][1]["accuracy_config"]["eval_method"] == "shopify_category_f1"


def test_the_plan_counts_the_products_the_client_asks_not_loadgens_sizing(tmp_path):
    """A test run asks the first products of the published set once each; a full accuracy pass all of them; the
    substitute's set its 7 products."""
    from code.common.harness.plan import plan_entry
    from code.qwen3_vl.datasets import SUBSTITUTE as SUBSTITUTE_SET
    from tests.test_wan_endpoints import endpoints_plan_context

    name = BENCHMARK.name
    quick = plan_entry(endpoints_plan_context(tmp_path, name, CLOSED, "--scenarios=Offline", "--test_run"), name,
                       Scenario.Offline, TestMode.PerformanceOnly, [])
    assert quick.queries == endpoints.TEST_RUN_PRODUCTS
    assert f"{endpoints.TEST_RUN_PRODUCTS} products of shopify_product_catalogue, each asked once" in \
           "\n".join(quick.lines())
    full = plan_entry(endpoints_plan_context(tmp_path, name, CLOSED, "--scenarios=Interactive"), name,
                      Scenario.Interactive, TestMode.AccuracyOnly, [])
    assert full.queries == 8000 and "each asked once and scored (F1)" in "\n".join(full.lines())
    small = plan_entry(endpoints_plan_context(tmp_path, name, SUBSTITUTE, "--scenarios=Offline",
                                              f"--dataset={SUBSTITUTE_SET}"), name, Scenario.Offline,
                       TestMode.AccuracyOnly, [])
    assert small.queries == 7
