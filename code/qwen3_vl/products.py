"""The products of qwen3-vl-235b-a22b's data sets, read as the reference reads them.

- `shopify_product_catalogue`: Hugging Face `Shopify/product-catalogue` (revision d5c517c5), its train and test splits
  concatenated in that order, 48,289 products (Offline and Server);
- `shopify_product_catalogue_8k`: `nvidia/Shopify-product-catalogue-8k` (revision 2bc8c6c4), its train split, 8,000
  products (Interactive).
Both are the Parquet files the `datasets` library stores (`data/train-00000-of-000NN.parquet`, ...): per row
`product_title`, `product_description`, `product_image` ({bytes, path}: the image file as published),
`potential_product_categories` (the candidate paths), `ground_truth_category` (levels joined by " > ").

`shopify_substitute` is the development set, kept beside the repository: real photographs of retail-product classes
of ../shared/data/imagenet_sample, each mapped to a real path of the Shopify product taxonomy with 8 candidates
(substitute_products.txt, beside this file). Its figures are those of the path, not of a model.

A product's image goes to the server as the reference's client sends it: decoded by Pillow and saved again in its
own format (`sent_image`). The model must see what the reference's model saw, and for a JPEG the re-save is another
file with other pixels than the stored one. A product whose image Pillow cannot decode, or that has no candidate
categories, stops the work that reads it with its index and file named.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..common.errors import EXIT_FAILURE, UserError

SUBSTITUTE_PRODUCTS = Path(__file__).with_name("substitute_products.txt")
PARQUET_COLUMNS = ("product_title", "product_description", "product_image", "potential_product_categories",
                   "ground_truth_category")


@dataclass(frozen=True)
class Product:
    title: str
    description: str
    image: bytes                     # the image file's bytes, as stored
    candidates: tuple[str, ...]
    truth: str                       # the ground-truth category path
    source: str                      # where it was read (file, and row or image), for messages
    brand: str = ""
    is_secondhand: bool = False


def _damaged(message: str) -> UserError:
    """A data set file that is not what the benchmark reads: damaged or not the published one (exit status 1)."""
    return UserError(message, exit_code=EXIT_FAILURE)


def image_format(product: Product, index: int) -> str:
    """The image's format as Pillow names it (JPEG, PNG, WEBP, ...), the word the reference's data URL carries;
    UserError naming the sample and its file when Pillow cannot decode the image."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(product.image)) as image:
            image.load()                 # decode it all: a truncated or damaged file fails here, not at the server
            found = image.format
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as error:
        raise _damaged(f"Sample {index} ({product.source}) has an image Pillow cannot decode ({error}): the data "
                        f"set stores it damaged. Replace the file with the published one (make download_data says "
                        f"where it comes from).") from None
    if not found:
        raise _damaged(f"Sample {index} ({product.source}) has an image of no format Pillow names.")
    return str(found)


def sent_image(product: Product) -> bytes:
    """The image bytes the reference's client puts in the data URL: the stored image decoded by Pillow and saved in
    the format Pillow read it in, with Pillow's default settings (JPEG at quality 75, as its `save` does)."""
    from PIL import Image

    with Image.open(io.BytesIO(product.image)) as image:
        saved = io.BytesIO()
        image.save(saved, format=image.format)
    return saved.getvalue()


def check(product: Product, index: int) -> str:
    """The product's image format, once the product is known whole: candidates present, image decodable."""
    if not product.candidates:
        raise _damaged(f"Sample {index} ({product.source}) has no candidate categories "
                        f"(potential_product_categories is empty): the prompt asks the model to choose one of them. "
                        f"The data set file is not the published one; get it again (make download_data says how).")
    return image_format(product, index)


def read_substitute(images: Path, products_file: Path = SUBSTITUTE_PRODUCTS) -> list[Product]:
    """The substitute set: each block of `products_file` with its photograph from `images` (imagenet_sample)."""
    products = []
    for number, block in enumerate(_blocks(products_file)):
        for key in ("image", "title", "truth"):
            if len(block.get(key, ())) != 1:
                raise _damaged(f"{products_file}: product {number} needs one `{key}:` line.")
        file = images / block["image"][0]
        try:
            data = file.read_bytes()
        except OSError as error:
            raise _damaged(f"Sample {number}: {file} cannot be read ({error.strerror}); link the development images "
                            f"again with make download_data.") from None
        products.append(Product(title=block["title"][0], description="", image=data,
                                candidates=tuple(block.get("candidate", ())), truth=block["truth"][0],
                                source=str(file)))
    return products


def _blocks(path: Path) -> list[dict[str, list[str]]]:
    blocks: list[dict[str, list[str]]] = []
    current: dict[str, list[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines() + [""]:
        if line.startswith("#"):
            continue
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, _, value = line.partition(":")
        current.setdefault(key.strip(), []).append(value.strip())
    return blocks


def parquet_files(folder: Path, splits: Sequence[str]) -> list[Path]:
    """The data set's Parquet files, split by split in the reference's order (train, then test), each split's shards
    in order (train-00000-of-00004.parquet, ...), found anywhere under `folder`."""
    files: list[Path] = []
    for split in splits:
        files += sorted(folder.rglob(f"{split}-*.parquet"), key=lambda p: p.name)
    return files


def read_parquet(files: Sequence[Path],
                 how_to_get: str = "make download_data says where it comes from") -> list[Product]:
    """The products of the Parquet files as the datasets library stores them, in order; UserError (exit status 1)
    naming a file that does not read, with `how_to_get` the published files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    products: list[Product] = []
    for file in files:
        try:
            table = pq.read_table(file)
        except (OSError, ValueError, pa.ArrowException) as error:    # ArrowInvalid is a ValueError
            raise _damaged(f"{file} is not a readable Parquet file ({error}): it is damaged or cut short; replace it "
                           f"with the published file. {how_to_get}") from None
        missing = [c for c in PARQUET_COLUMNS if c not in table.column_names]
        if missing:
            raise _damaged(f"{file} lacks the column(s) {', '.join(missing)} of the Shopify product catalogue: it is "
                            f"not the published data set.")
        rows = table.to_pylist()
        for row_number, row in enumerate(rows):
            image = row["product_image"] or {}
            data = image.get("bytes") if isinstance(image, dict) else None
            where = f"{file.name} row {row_number}" + (f", image {image.get('path')}" if image.get("path") else "")
            products.append(Product(
                title=str(row["product_title"] or ""), description=str(row["product_description"] or ""),
                image=bytes(data or b""), candidates=tuple(str(c) for c in row["potential_product_categories"] or ()),
                truth=str(row["ground_truth_category"] or ""), source=where,
                brand=str(row.get("ground_truth_brand") or ""),
                is_secondhand=bool(row.get("ground_truth_is_secondhand") or False)))
    return products
