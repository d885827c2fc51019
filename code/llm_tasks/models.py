"""The models of a task benchmark: the embedded substitute (SmolLM2-135M-Instruct, code/llm/substitute.py, kept in
the benchmark's own model folder) and the round's closed-division model, which only a serving
engine runs: a Hugging Face checkpoint the user brings (70 to 671 billion parameters; the in-process ONNX decoder is
not built for it)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..common.benchmark_api import Log, ModelSpec, ServingFolder
from ..common.fileio import sha256_file
from ..common.paths import Paths
from ..llm import substitute as _substitute
from ..llm.checkpoint import require_checkpoint

if TYPE_CHECKING:
    from ..llm.tokenizer import TextTokenizer

SUBSTITUTE = _substitute.SMOLLM2
SUBSTITUTE_SPEC = _substitute.SPEC


@dataclass(frozen=True)
class ClosedModel:
    """The round's reference model of a benchmark, as a served checkpoint."""

    name: str                    # the toolkit's model name, e.g. "llama2-70b-chat"
    hf_id: str                   # its Hugging Face id (what the servers serve it as)
    description: str
    checkpoint_dir: str          # the folder inside the benchmark's model folder
    how_to_get: str              # a paragraph: where it comes from (licence, revision)
    max_model_len: int           # prompt plus output tokens the server must hold per sequence (the reference's)
    dtype: str = "auto"          # what to serve it in ("auto": the checkpoint's own, as the references do)
    weight_transformations: str = "none (served as published)"

    @property
    def spec(self) -> ModelSpec:
        return ModelSpec(name=self.name, description=self.description, division="closed",
                         inputs=SUBSTITUTE_SPEC.inputs, outputs=SUBSTITUTE_SPEC.outputs, decoder=True,
                         starting_weights_filename=f"{self.hf_id} (Hugging Face)",
                         weight_transformations=self.weight_transformations, served_name=self.hf_id,
                         served_only=True)


def checkpoint(model: ClosedModel, benchmark: str, paths: Paths) -> Path:
    """The user's checkpoint folder; UserError saying where it goes and where to get it when it is incomplete."""
    folder = paths.model_dir(benchmark) / model.checkpoint_dir
    return require_checkpoint(folder, model.name, f"{model.how_to_get} Put or link the checkpoint folder (config.json, "
                                                  f"tokenizer.json, *.safetensors) at {folder}; it is served by an "
                                                  f"OpenAI-compatible serving engine (--harness_type=openai).")


def download_model(model: ClosedModel | None, benchmark: str, paths: Paths, log: Log) -> Path:
    """The substitute's decoder graph (made as llama3.1-8b's), or the closed model's checkpoint folder, checked."""
    if model is None:
        return _substitute.download(paths, log, benchmark)
    folder = checkpoint(model, benchmark, paths)
    log(f"{model.name}: checkpoint present in {folder}; it runs on serving engines only (--harness_type=openai)")
    return folder


def serving_folder(model: ClosedModel | None, benchmark: str, paths: Paths, log: Log,
                   remake: bool = False) -> ServingFolder:
    if model is None:
        return _substitute.serving_folder(paths, log, benchmark, remake=remake)
    folder = checkpoint(model, benchmark, paths)
    files = tuple(sorted(f.name for f in folder.glob("*.safetensors"))) + ("config.json", "tokenizer.json")
    return ServingFolder(folder, files, model.dtype, model.max_model_len, made_by_toolkit=False)


def tokenizer(model: ClosedModel | None, benchmark: str, paths: Paths) -> "TextTokenizer":
    if model is None:
        return _substitute.tokenizer(paths, benchmark)
    from ..llm.tokenizer import TextTokenizer

    return TextTokenizer.from_tokenizer_json(checkpoint(model, benchmark, paths) / "tokenizer.json")


def tokenizer_identity(model: ClosedModel | None, benchmark: str, paths: Paths) -> str:
    """A cheap identity of the tokenizer's files, for the preprocessed manifest."""
    if model is None:
        return _substitute.tokenizer_source()
    path = paths.model_dir(benchmark) / model.checkpoint_dir / "tokenizer.json"
    return f"tokenizer.json sha256 {sha256_file(path)}" if path.is_file() else "tokenizer.json absent"
