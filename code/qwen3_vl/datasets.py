"""The data sets of qwen3-vl-235b-a22b: where they come from, how `make download_data` finds them, and the prompts
`make preprocess_data` checks (every image decodable, every product with candidates) before any run reads them.

The products' chats are built when a sample is loaded, from the data set's own bytes; what preprocessing keeps is the
check's record (the image formats, and the size, time and sha256 of every file read), so that a run reads products
whose check still holds and checks them again where a file changed (hashed where its time changed).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..common import shared_samples
from ..common.benchmark_api import DatasetSpec, Log
from ..common.errors import EXIT_FAILURE, UserError
from ..common.fileio import write_atomically
from ..common.integrity import digests_of, files_problem
from ..common.paths import Paths
from ..common.preprocessed_store import MANIFEST
from ..common.prompts import Chat
from . import products as _products
from .products import Product

CATALOGUE, CATALOGUE_8K, SUBSTITUTE = "shopify_product_catalogue", "shopify_product_catalogue_8k", "shopify_substitute"
IMAGES = "imagenet_sample"           # the substitute's photographs, linked into its data set folder
CHECKED = MANIFEST                   # the check's record, in the preprocessed folder (what a run record names)

_HF = ("Download it with the Hugging Face CLI (`huggingface-cli download --repo-type dataset {repo} --revision "
       "{revision} --local-dir <folder>`; the data set's terms must be accepted on huggingface.co first), or "
       "MLCommons' copy (`mlcr get-dataset-mlperf-inference-shopify-catalogue,_mlc,_r2-downloader "
       "--outdirname=<folder> -j`, multimodal/qwen3-vl/README.md), then move or link the Parquet files "
       "({files}) into {{folder}}, any layout under it.")


@dataclass(frozen=True)
class ProductSet:
    spec: DatasetSpec
    splits: tuple[str, ...] = ()         # the Parquet splits, in the reference's order; none for the substitute
    count: int | None = None             # products of the published set


DATASETS = {
    CATALOGUE: ProductSet(
        DatasetSpec(name=CATALOGUE, sample_count=48289,
                    description="Shopify/product-catalogue (revision d5c517c5), train + test: 48,289 products with an "
                                "image, title, description and 8-9 candidate categories (Offline and Server)",
                    how_to_get=_HF.format(repo="Shopify/product-catalogue",
                                          revision="d5c517c509f5aca99053897ef1de797d6d7e5aa5",
                                          files="data/train-*.parquet and data/test-*.parquet")),
        splits=("train", "test"), count=48289),
    CATALOGUE_8K: ProductSet(
        DatasetSpec(name=CATALOGUE_8K, sample_count=8000,
                    description="nvidia/Shopify-product-catalogue-8k (revision 2bc8c6c4), train: 8,000 products "
                                "(Interactive)",
                    how_to_get=_HF.format(repo="nvidia/Shopify-product-catalogue-8k",
                                          revision="2bc8c6c4b6ebd27b880b0cba519cb45d09867045",
                                          files="data/train-*.parquet")),
        splits=("train",), count=8000),
    SUBSTITUTE: ProductSet(
        DatasetSpec(name=SUBSTITUTE, sample_count=7,
                    description="7 real ImageNet photographs of retail products (basketball, baseball, puck, punching "
                                "bag, scoreboard, whistle, sweatshirt) with real Shopify taxonomy paths and 8 "
                                "candidates each, for development and CI (not a submission data set; its F1 is a "
                                "figure of the path, not of a model)",
                    how_to_get="The photographs are kept beside the repository in ../shared/data/imagenet_sample; "
                               "`make download_data` links them into the scratch data folder. The products "
                               "(code/qwen3_vl/substitute_products.txt) come with the toolkit.")),
}


def dataset(name: str) -> ProductSet:
    if name not in DATASETS:
        raise UserError(f"Data set {name!r} is not one of qwen3-vl-235b-a22b's: {', '.join(DATASETS)}.")
    return DATASETS[name]


def hint(benchmark: str, name: str) -> str:
    return f'make download_data RUN_ARGS="--benchmarks={benchmark} --dataset={name}"'


def sources(name: str, paths: Paths) -> list[Path]:
    """The files the data set is read from."""
    data = dataset(name)
    folder = paths.dataset_dir(name)
    if not data.splits:
        return [_products.SUBSTITUTE_PRODUCTS, folder / IMAGES]
    return _products.parquet_files(folder, data.splits)


def read(benchmark: str, name: str, paths: Paths) -> list[Product]:
    """The data set's products in QSL order; UserError naming `make download_data` where its files are absent."""
    data = dataset(name)
    folder = paths.dataset_dir(name)
    if not data.splits:
        images = folder / IMAGES
        if not images.is_dir():
            raise UserError(f"Data set {name} is not at {images}. Run `{hint(benchmark, name)}` first.",
                            exit_code=EXIT_FAILURE)
        return _products.read_substitute(images)
    files = sources(name, paths)
    if not files:
        raise UserError(f"Data set {name}: no {' or '.join(f'{s}-*.parquet' for s in data.splits)} under {folder}. "
                        f"{data.spec.how_to_get.format(folder=folder)}", exit_code=EXIT_FAILURE)
    return _products.read_parquet(files, data.spec.how_to_get.format(folder=folder))


def download_data(benchmark: str, name: str, paths: Paths, log: Log) -> Path:
    """Link the substitute's photographs, or check the Shopify files where the user put them (they are never
    downloaded here: the Hugging Face data sets need the user's account)."""
    data = dataset(name)
    folder = paths.dataset_dir(name)
    if not data.splits:
        source = paths.shared_data / IMAGES
        if not source.is_dir():
            raise shared_samples.absent(name, source, f"Put it there, or bring the Shopify product catalogue "
                                                      f"(`{hint(benchmark, CATALOGUE)}` says how).")
        shared_samples.link_sample(name, folder / IMAGES, source, log)
        return folder
    found = read(benchmark, name, paths)
    if data.count is not None and len(found) != data.count:
        raise UserError(f"{name}: the Parquet files under {folder} hold {len(found)} products, the published set "
                        f"{data.count}: they are not the published files, or a part of them. "
                        f"{data.spec.how_to_get.format(folder=folder)}", exit_code=EXIT_FAILURE)
    log(f"{name}: {len(found)} products present in {folder}")
    return folder


def prepared_size(name: str, paths: Paths) -> int | None:
    """Products of the data set's Parquet files as their footers count them (nothing decoded); None where there are
    none, or one does not read (preprocessing names it)."""
    import pyarrow.parquet as pq

    data = dataset(name)
    if not data.splits:
        return None
    files = sources(name, paths)
    try:
        return sum(pq.ParquetFile(file).metadata.num_rows for file in files) if files else None
    except (OSError, ValueError):
        return None


class ProductChats:
    """The preprocessed set: one chat per product, in QSL order, built when loaded."""

    def __init__(self, products: Sequence[Product], formats: Sequence[str], directory: Path) -> None:
        self.products, self.formats = list(products), list(formats)
        self.directory = directory       # the preprocessed folder, which holds the check's record

    def __len__(self) -> int:
        return len(self.products)

    def load(self, index: int) -> Chat:
        from .products import sent_image
        from .prompt import chat

        p = self.products[index]
        return chat(p.title, p.description, p.candidates, sent_image(p), self.formats[index])


def _source_files(files: Sequence[Path]) -> dict[str, Path]:
    """The files the products are read from (a folder's files one by one), by name."""
    return {member.name: member for file in files
            for member in (sorted(p for p in file.rglob("*") if p.is_file()) if file.is_dir() else [file])}


def preprocess(benchmark: str, model: str, name: str, paths: Paths, log: Log) -> ProductChats:
    """Check every product (candidates present, image decodable) and record the check; UserError naming the
    first product that fails it and its file."""
    chats = _checked(benchmark, model, name, paths, force=True)
    log(f"{name}: {len(chats)} products checked (images decodable, candidates present)")
    return chats


def preprocessed(benchmark: str, model: str, name: str, paths: Paths) -> ProductChats:
    """The products, checked again where the files changed since the last check (or never were)."""
    return _checked(benchmark, model, name, paths, force=False)


def _checked(benchmark: str, model: str, name: str, paths: Paths, force: bool) -> ProductChats:
    files = _source_files(sources(name, paths))
    digests = digests_of(files)           # before reading: a file written meanwhile shows as changed later
    products = read(benchmark, name, paths)
    record = paths.preprocessed_dir(benchmark, model, name) / CHECKED
    if not force and record.is_file():
        try:
            kept = json.loads(record.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError):
            kept = {}
        kept = kept if isinstance(kept, dict) else {}
        recorded = kept.get("files")
        if isinstance(recorded, dict) and set(recorded) == set(files) and \
                files_problem(files, recorded, hash_below=0) is None and len(kept.get("formats", ())) == len(products):
            return ProductChats(products, kept["formats"], record.parent)
    formats = [_products.check(product, index) for index, product in enumerate(products)]
    record.parent.mkdir(parents=True, exist_ok=True)
    write_atomically(record, json.dumps({"files": digests, "formats": formats}))
    return ProductChats(products, formats, record.parent)
