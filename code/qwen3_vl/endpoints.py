"""qwen3-vl-235b-a22b on the MLCommons endpoints client (`--harness_type=endpoints`), the round's reference load
generator for it: what the client runs for one test, as the reference example writes it
(examples/08_Qwen3-VL-235B-A22B_Example of mlcommons/endpoints):

- the data set blocks: `shopify_product_catalogue::q3vl` (Offline, Server) or `shopify_product_catalogue_8k::q3vl`
  (Interactive), the client's own data set and its q3vl preset (the prompt and the image as a data URL), once as the
  performance set and once as the accuracy set scored by `shopify_category_f1` (hierarchical category F1);
- the scenario's settings: Offline `type: offline` with `max_throughput`; Server and Interactive `type: online`
  with a Poisson load at the config's server_target_qps, streaming on; at most 150 new tokens and no sampling
  parameter (the model's own defaults, as the rules ask); the example's warm-up, timeout, workers and connections
  for the closed model;
- the gates: the F1 target of the round (rules: 0.782397 Offline and Server, 0.779922 Interactive) and the round's
  accuracy sample count (48,289; 8,000 for Interactive).

The client reads the catalogue from Hugging Face itself (its shopify data set's generate()), which this toolkit
never reaches: the products of the toolkit's data set (your Parquet files, or the substitute's 7 products) are
written into the client's data set cache in the form generate() writes (the image decoded by Pillow and saved again
in its own format, base64), where the client loads them as it loads a cache it made. The cache folder is the
client's default under its working folder (the run folder): `dataset_cache/` at ea332753, `datasets/` at 381d13bb
(linked to the first).
"""
from __future__ import annotations

import base64
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from ..common.constants import AccuracyTarget, Scenario
from ..common.errors import UserError
from ..common.paths import Paths
from . import datasets as _datasets
from .products import Product, sent_image

PRESET = "q3vl"
CACHE_DIR, OLD_CACHE_DIR = "dataset_cache", "datasets"    # the client's default datasets_dir: ea332753, 381d13bb
CLIENT_CACHE = "client_dataset_cache"                    # the full sets' cache, in their preprocessed folder
# The client's data sets (dataset_manager/predefined/shopify_product_catalogue): its id and the splits it joins.
CLIENT_DATASETS = {_datasets.CATALOGUE: ("shopify_product_catalogue", "train+test"),
                   _datasets.CATALOGUE_8K: ("shopify_product_catalogue_8k", "train")}
ACCURACY_CONFIG: Mapping[str, Any] = {"eval_method": "shopify_category_f1", "ground_truth": "ground_truth_category",
                                      "extractor": "identity_extractor", "num_repeats": 1}
# A test run (--test_run) on a published set sends its first products only.
TEST_RUN_PRODUCTS = 8


@dataclass(frozen=True)
class ScenarioExample:
    """One scenario's YAML of the reference example (the fields a submitter may tune are the example's)."""

    test_type: str
    data_set: str                   # the toolkit's data set the round runs it on
    timeout_s: int
    warmup_requests: int
    streaming: bool


EXAMPLES = {
    Scenario.Offline: ScenarioExample("offline", _datasets.CATALOGUE, 14_400, 1_600, streaming=False),
    Scenario.Server: ScenarioExample("online", _datasets.CATALOGUE, 14_400, 1_600, streaming=True),
    Scenario.Interactive: ScenarioExample("online", _datasets.CATALOGUE_8K, 1_800, 400, streaming=True),
}
# The example's client settings (num_workers, max_connections) and Offline's drain block, for the closed model.
REFERENCE_WORKERS, REFERENCE_CONNECTIONS = 5, 1000
OFFLINE_DRAIN: Mapping[str, Any] = {"warmup_timeout_s": 240.0, "performance_timeout_s": None,
                                    "accuracy_timeout_s": None}
# The substitute on a small CPU server: one worker, a few requests in flight.
SUBSTITUTE_WORKERS, SUBSTITUTE_CONNECTIONS = 1, 4


def scenario_of(name: str) -> Scenario:
    """The scenario of a test's name (RunSpec.scenario), one the example has; UserError naming those otherwise."""
    found = next((s for s in EXAMPLES if s.value.lower() == str(name).lower()), None)
    if found is None:
        raise UserError(f"qwen3-vl-235b-a22b runs Offline, Server and Interactive on the MLCommons endpoints client, "
                        f"not {name or 'no scenario'}: choose one of them with --scenarios.")
    return found


def example(name: str) -> ScenarioExample:
    return EXAMPLES[scenario_of(name)]


def client_dataset(dataset: str, scenario_example: ScenarioExample) -> tuple[str, str]:
    """The client's data set id and split key the products of `dataset` are written as: the published sets as
    themselves, the substitute as the scenario's set."""
    return CLIENT_DATASETS.get(dataset) or CLIENT_DATASETS[scenario_example.data_set]


def row(product: Product, image_format: str) -> dict[str, Any]:
    """A product as the client's shopify generate() stores it (its _process_sample_to_row)."""
    return {"product_title": product.title, "product_description": product.description,
            "product_image_base64": base64.b64encode(sent_image(product)).decode("ascii"),
            "product_image_format": image_format,
            "potential_product_categories": json.dumps(list(product.candidates)),
            "ground_truth_category": product.truth, "ground_truth_brand": product.brand,
            "ground_truth_is_secondhand": json.dumps(bool(product.is_secondhand))}


def write_cache(folder: Path, client_id: str, split_key: str, products: Sequence[Product],
                formats: Sequence[str]) -> Path:
    """The client's cache file of `products` under `folder` (its datasets_dir), written whole or not at all."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = folder / client_id / split_key / f"{client_id}_{split_key}.parquet"
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    pq.write_table(pa.Table.from_pylist([row(p, f) for p, f in zip(products, formats)]), partial)
    os.replace(partial, target)
    return target


def link_cache(run_dir: Path, client_id: str, folder: Path) -> None:
    """The run folder's cache of the client: its `client_id` folder linked to `folder`'s, and the older commit's
    datasets/ linked to dataset_cache/."""
    cache = Path(run_dir) / CACHE_DIR
    cache.mkdir(parents=True, exist_ok=True)
    if folder.resolve() != cache.resolve():
        link = cache / client_id
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to((folder / client_id).resolve(), target_is_directory=True)
    old = Path(run_dir) / OLD_CACHE_DIR
    if not (old.exists() or old.is_symlink()):
        old.symlink_to(CACHE_DIR, target_is_directory=True)


def prepare_cache(benchmark: str, model: str, dataset: str, paths: Paths, run_dir: Path, client_id: str,
                  split_key: str, test_run: bool, notes: list[str]) -> Path:
    """The client's cache of the test's products, linked into the run folder; a full published set's is kept in its
    preprocessed folder and written again when the products' check was made again since."""
    chats = _datasets.preprocessed(benchmark, model, dataset, paths)
    products, formats = chats.products, chats.formats
    subset = test_run and _datasets.dataset(dataset).splits and len(products) > TEST_RUN_PRODUCTS
    if subset:
        products, formats = products[:TEST_RUN_PRODUCTS], formats[:TEST_RUN_PRODUCTS]
        notes.append(f"a test run: the first {TEST_RUN_PRODUCTS} of the {len(chats)} products of {dataset}")
    if subset or not _datasets.dataset(dataset).splits:
        folder = Path(run_dir) / CACHE_DIR
        written = write_cache(folder, client_id, split_key, products, formats)
    else:
        folder = chats.directory / CLIENT_CACHE
        written = folder / client_id / split_key / f"{client_id}_{split_key}.parquet"
        checked = chats.directory / _datasets.CHECKED
        if not written.is_file() or written.stat().st_mtime < checked.stat().st_mtime:
            written = write_cache(folder, client_id, split_key, products, formats)
    link_cache(run_dir, client_id, folder)
    notes.append(f"the {len(products)} products of {dataset} written into the client's data set cache "
                 f"({client_id}, {written}) as its Hugging Face loader writes them")
    return written


def client_load(accuracy: bool, scenario: str, fields: Mapping[str, Any], test_run: bool):
    """What the client will ask for in one test, for the plan: the products of the test's data set (a test run's
    first TEST_RUN_PRODUCTS of a published set), each once; a performance pass sets no count, so it runs at least
    min_duration_ms."""
    from ..common.endpoints_client.workload import ClientLoad

    name = str(fields.get("dataset") or example(scenario).data_set)
    products = _datasets.dataset(name).spec.sample_count
    if test_run and _datasets.dataset(name).splits:
        products = min(products, TEST_RUN_PRODUCTS)
    what = f"product{'s' if products != 1 else ''} of {name}, each asked once"
    return ClientLoad(products, what + (" and scored (F1)" if accuracy else ""),
                      one_pass="the client asks each product once" if accuracy else "")


def guided_decoding_refused() -> UserError:
    return UserError("--use_guided_decoding is not a setting of the MLCommons endpoints client's qwen3-vl preset (its "
                     "requests carry no response_format, as the reference's): run without it, or with "
                     "--harness_type=openai.")


def threshold_and_samples(rules, scenario: Scenario) -> tuple[float, int]:
    """The round's F1 target and accuracy sample count of `scenario` (rules/v6_1.py)."""
    benchmark = rules.benchmark("qwen3-vl-235b-a22b")
    return (benchmark.accuracy_threshold(AccuracyTarget.k_99, scenario),
            benchmark.accuracy_samples_for(scenario))
