"""wan-2.2-t2v-a14b's models and the environment that runs them.

- The closed model, `wan-2.2-t2v-a14b`: the user's diffusers folder of Wan-AI/Wan2.2-T2V-A14B-Diffusers (or a
  variant of the same layout, such as an FP8 one) in the models folder, with the reference's fixed latent
  (data/fixed_latent.pt) beside it, checked by its git blob id. Never downloaded here: make download_model says
  where they go.
- The embedded substitute, `wan-2.2-substitute`: a pipeline of the same architecture (WanPipeline, UMT5 text encoder,
  two WanTransformer3DModel experts switched at boundary_ratio 0.875, AutoencoderKLWan, a tokenizer trained on the
  248 prompts) with generated weights, about 1 MB, and a fixed latent of its own for 64x64 videos of 9 frames.
  `make download_model` writes it deterministically (pipeline_worker.py make-substitute, in the diffusers
  environment). Its videos are noise of the right shape: it tests the code path, never the model.

Both run in the diffusers environment (.venv-diffusers, requirements/diffusers.txt), which make download_model and
make run install through the same hash-checked bootstrap as every environment (seconds when it is up to date).
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from ..common.errors import EXIT_FAILURE, UserError
from ..common.integrity import (DamagedInput, forget_record, read_record, record_path, record_problem,
                                write_folder_record)
from ..common.paths import Paths
from . import reference as ref
from .datasets import check_prompts, official_file

Log = Callable[[str], None]
CLOSED, SUBSTITUTE = "wan-2.2-t2v-a14b", "wan-2.2-substitute"
ENVIRONMENT = "diffusers"
WORKER = "code.wan.pipeline_worker"
# The substitute's videos: 64x64, 9 frames (a latent of [1, 16, 3, 8, 8]); 20 steps as the reference.
SUBSTITUTE_SIZE = (64, 64, 9)                      # height, width, frames
SUBSTITUTE_LABEL = ("an open substitute with generated weights (not Wan 2.2's): its videos test the code path "
                    "and say nothing of a model's quality")
COMPONENTS = ("model_index.json", "transformer", "transformer_2", "vae", "text_encoder", "tokenizer", "scheduler")


def model_folder(paths: Paths, model: str) -> Path:
    return paths.model_dir(ref.NAME) / model


def fixed_latent(paths: Paths, model: str) -> Path:
    return model_folder(paths, model) / ref.FIXED_LATENT


def video_size(paths: Paths, model: str) -> tuple[int, int, int]:
    """(height, width, frames) of the model's videos, as its fixed latent [1, 16, t, h, w] decides them (the Wan
    VAE: 8x8 pixels and 4 frames a cell, the first frame alone), read from the latent's pickle without torch."""
    from ..common.torch_checkpoint import tensor_shape

    latent = fixed_latent(paths, model)
    try:
        shape = tensor_shape(latent)
    except (OSError, ValueError) as error:
        raise UserError(f"{model}: the fixed latent {latent} cannot be read ({error}); run make download_model "
                        f"RUN_ARGS=\"--benchmarks={ref.NAME} --model={model}\".", exit_code=EXIT_FAILURE) from None
    if len(shape) != 5 or shape[:2] != (1, 16):
        raise UserError(f"{model}: the fixed latent {latent} is {list(shape)}, not [1, 16, t, h, w].",
                        exit_code=EXIT_FAILURE)
    return shape[3] * 8, shape[4] * 8, (shape[2] - 1) * 4 + 1


def python(paths: Paths) -> Path:
    """The diffusers environment's interpreter; UserError naming the make target where it is missing."""
    interpreter = paths.diffusers_venv / "bin" / "python"
    if not interpreter.is_file():
        raise UserError(f"The diffusers environment ({paths.diffusers_venv.name}) is not installed; run make "
                        f"download_model RUN_ARGS=\"--benchmarks={ref.NAME}\" (or make run), which installs it.",
                        exit_code=EXIT_FAILURE)
    return interpreter


def make_environment(paths: Paths, log: Log) -> Path:
    """The diffusers environment, hash-checked from requirements/diffusers.txt (minutes the first time)."""
    install_environment(paths, ENVIRONMENT, paths.diffusers_venv, log)
    return python(paths)


def install_environment(paths: Paths, name: str, venv: Path, log: Log) -> None:
    """Install the standalone environment `name` into `venv` through the hash-checked bootstrap (nothing when it is
    up to date); UserError with the end of the installer's messages where it fails."""
    bootstrap = paths.repo / "scripts" / "bootstrap_venv.py"
    done = subprocess.run([sys.executable, str(bootstrap), "--environment", name, "--venv", str(venv)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"The {name} environment could not be installed into {venv}: "
                        f"{(done.stderr or done.stdout).strip()[-800:]} (the package registry must be reachable).",
                        exit_code=EXIT_FAILURE)
    log(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else f"{venv} is ready")


def worker_command(paths: Paths, *args: str) -> list[str]:
    return [str(python(paths)), "-m", WORKER, *args]


def download_model(model: str, paths: Paths, log: Log) -> Path:
    """The model's folder, checked (the substitute written first where it is not there)."""
    make_environment(paths, log)
    folder = model_folder(paths, model)
    if model == SUBSTITUTE:
        recorded = read_record(folder)
        changed = record_problem(folder, recorded) if recorded is not None else None
        if changed is not None:      # the toolkit's own files, made from fixed seeds: written again
            log(f"{changed}: writing the {SUBSTITUTE} again")
            shutil.rmtree(folder)
            forget_record(folder)
        if not (folder / "model_index.json").is_file() or not fixed_latent(paths, model).is_file():
            prompts = official_file(paths, ref.PROMPTS_FILE)
            if not prompts.is_file():
                raise UserError(f"{SUBSTITUTE}: its tokenizer is trained on the reference's prompts, and "
                                f"{prompts} is not here; copy data/{ref.PROMPTS_FILE} of {ref.OFFICIAL_FOLDER} "
                                f"there and rerun.", exit_code=EXIT_FAILURE)
            check_prompts(prompts)
            log(f"{SUBSTITUTE}: writing the embedded substitute into {folder} ({SUBSTITUTE_LABEL})")
            height, width, frames = SUBSTITUTE_SIZE
            make_substitute(paths, folder, prompts, height, width, frames)
            forget_record(folder)
        check_folder(paths, model)
        if read_record(folder) is None:
            write_folder_record(folder)
        return folder
    if model != CLOSED:
        raise UserError(f"Unknown model '{model}' for {ref.NAME}. Valid choices: {CLOSED}, {SUBSTITUTE}.")
    check_folder(paths, model)
    verify_folder(folder, model, log)
    return folder


def verify_folder(folder: Path, model: str, log: Log) -> None:
    """The user's model folder as it was when first used: its files' digests recorded then (hashing it once; later
    runs compare each large file's size and time), and DamagedInput naming a file changed since."""
    recorded = read_record(folder)
    if recorded is None:
        log(f"{model}: recording the sha256 of the files of {folder} (once: later runs check them against it)")
        write_folder_record(folder)
        return
    changed = record_problem(folder, recorded)
    if changed is not None:
        raise DamagedInput(f"{changed} since {model} was first used, so it is not run",
                           f"Restore the model folder, or delete {record_path(folder)} to take it as it is now")


def make_substitute(paths: Paths, folder: Path, prompts: Path, height: int, width: int, frames: int) -> None:
    """Write a substitute pipeline for videos of this size into `folder` (from fixed seeds)."""
    done = subprocess.run(worker_command(paths, "make-substitute", str(folder), str(prompts), str(height),
                                         str(width), str(frames)), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"The substitute could not be written into {folder}: {done.stderr.strip()[-1500:]}",
                        exit_code=EXIT_FAILURE)


def check_folder(paths: Paths, model: str) -> None:
    """That the model's folder is a Wan 2.2 A14B diffusers pipeline with its fixed latent (the closed model's: the
    reference's, by its git blob id). UserError saying what is missing or of another architecture."""
    folder = model_folder(paths, model)
    index = folder / "model_index.json"
    if not index.is_file():
        raise UserError(f"{model}: {folder} holds no diffusers pipeline (model_index.json). Put the diffusers folder "
                        f"of {ref.HF_ID} (revision {ref.HF_REVISION}) there, and the reference's data/"
                        f"{ref.FIXED_LATENT} beside it; this toolkit does not download them.",
                        exit_code=EXIT_FAILURE)
    layout = json.loads(index.read_text())
    if layout.get("_class_name") != "WanPipeline" or not layout.get("transformer_2") or \
            layout.get("boundary_ratio") is None:
        raise UserError(f"{model}: {index} is a {layout.get('_class_name')} pipeline without the A14B layout "
                        f"(WanPipeline with transformer_2 and boundary_ratio); {ref.NAME} runs "
                        f"{ref.HF_ID}.", exit_code=EXIT_FAILURE)
    missing = [name for name in COMPONENTS if not (folder / name).exists()]
    if missing:
        raise UserError(f"{model}: {folder} lacks {', '.join(missing)}; copy the whole diffusers folder.",
                        exit_code=EXIT_FAILURE)
    latent = fixed_latent(paths, model)
    if not latent.is_file():
        raise UserError(f"{model}: the fixed latent {latent} is missing; copy the reference's data/"
                        f"{ref.FIXED_LATENT} there.", exit_code=EXIT_FAILURE)
    if model == CLOSED:
        blob = ref.git_blob_id(latent.read_bytes())
        if blob != ref.FIXED_LATENT_GIT_BLOB:
            raise UserError(f"{latent} is not the reference's fixed latent (git blob {blob[:12]}, the reference's "
                            f"is {ref.FIXED_LATENT_GIT_BLOB[:12]}); copy data/{ref.FIXED_LATENT} of "
                            f"{ref.OFFICIAL_FOLDER}.", exit_code=EXIT_FAILURE)
