"""The models of a task benchmark: the embedded substitute (SmolLM2-135M-Instruct, code/llm/substitute.py, kept in
the benchmark's own model folder) and the round's closed-division model, a Hugging Face checkpoint the user brings.
A serving engine runs every closed model; one small enough (llama3.1-8b's) is also converted into the in-process
decoder graph (the same ONNX contract as the substitute's), which the 70 to 671 billion parameter models are not."""
from __future__ import annotations

import hashlib
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
    weights_format: str = "Hugging Face"     # how the starting weights come (the system description names it)
    # Not empty for a model that also runs in process: what its converted decoder graph is ("fp32, about 32 GB on
    # disk"), said where the checkpoint is missing. Empty: served only.
    conversion: str = ""

    @property
    def spec(self) -> ModelSpec:
        return ModelSpec(name=self.name, description=self.description, division="closed",
                         inputs=SUBSTITUTE_SPEC.inputs, outputs=SUBSTITUTE_SPEC.outputs, decoder=True,
                         starting_weights_filename=f"{self.hf_id} ({self.weights_format})",
                         weight_transformations=self.weight_transformations, served_name=self.hf_id,
                         served_only=not self.conversion)


def checkpoint_dir(model: ClosedModel, benchmark: str, paths: Paths) -> Path:
    return paths.model_dir(benchmark) / model.checkpoint_dir


def checkpoint(model: ClosedModel, benchmark: str, paths: Paths) -> Path:
    """The user's checkpoint folder; UserError saying where it goes and where to get it when it is incomplete."""
    folder = checkpoint_dir(model, benchmark, paths)
    if model.conversion:
        use = (f"Put or link the checkpoint folder (config.json, *.safetensors, tokenizer.json) at {folder}, then run "
               f"make download_model again: it converts it into the decoder graph ({model.conversion}).")
    else:
        use = (f"Put or link the checkpoint folder (config.json, tokenizer.json, *.safetensors) at {folder}; it is "
               f"served by an OpenAI-compatible serving engine (--harness_type={_served_harness(benchmark)}).")
    substitute = (f" Without it, the benchmark runs end to end on the embedded substitute: add "
                  f"--model={SUBSTITUTE} to RUN_ARGS.")
    return require_checkpoint(folder, model.name, f"{model.how_to_get} {use}{substitute}")


def _served_harness(benchmark: str) -> str:
    """The harness a served checkpoint of `benchmark` runs on: the endpoints client where the round runs the
    benchmark on it alone, else the openai harness."""
    from ..common.benchmark_api import endpoints_only, get_benchmark

    return "endpoints" if endpoints_only(get_benchmark(benchmark)) else "openai"


def _checkpoint_identity(folder: Path) -> str:
    """What a converted decoder graph was made from: the checkpoint's weights and config (names, sizes, times) and
    the converter's version."""
    digest = hashlib.sha256()
    for file in sorted(folder.glob("*.safetensors")) + [folder / "config.json"]:
        stat = file.stat()
        digest.update(f"{file.name} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return f"checkpoint {digest.hexdigest()} converter {_substitute.CONVERTER_VERSION}"


def download_model(model: ClosedModel | None, benchmark: str, paths: Paths, log: Log) -> Path:
    """The substitute's decoder graph; the closed model's checkpoint folder, checked, or, for a model that runs in
    process, its decoder graph at paths.model_file(...), converted from the checkpoint unless it is current."""
    if model is None:
        return _substitute.download(paths, log, benchmark)
    folder = checkpoint(model, benchmark, paths)
    if model.conversion:
        from ..llm.gguf_weights import read_safetensors_checkpoint

        return _substitute.convert_when_stale(model.name, folder, _checkpoint_identity(folder),
                                              read_safetensors_checkpoint, paths.model_file(benchmark, model.name),
                                              log)
    log(f"{model.name}: checkpoint present in {folder}; it runs on serving engines only "
        f"(--harness_type={_served_harness(benchmark)})")
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
