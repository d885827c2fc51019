"""VBench's score of wan-2.2-t2v-a14b's videos, where its checkpoints are: the reference's run_evaluation.py runs
VBench's launch/evaluate.py under torch.distributed.run on the six dimensions with `--load_ckpt_from_local=True`, and
VBench writes `results_<time>_eval_results.json` ({dimension: [mean, [per-video entries]]}) into its output folder.

VBench reads its checkpoints from VBENCH_CACHE_DIR (its own name for them, ~/.cache/vbench where unset) and fetches
the missing ones at run time; here nothing may be fetched, so the folder must hold them all. VBench pins old
transformers and numpy < 2 and asks for a CUDA device, so it runs in an environment of its own (`.venv-vbench`,
requirements/vbench.txt: the vbench package 0.1.5 and its requirements with PyPI's CUDA build of torch), never in
the toolkit's or the diffusers one. Setting VBENCH_CACHE_DIR is how a user asks for a score, so it is also what
makes make build and make run install that environment (gigabytes: nobody else pays for it).
"""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from ..common.errors import EXIT_FAILURE, UserError
from ..common.paths import Paths
from .models import Log, install_environment

CACHE_VARIABLE = "VBENCH_CACHE_DIR"
ENVIRONMENT = "vbench"
# What VBench's init_submodules loads for each of the six dimensions in local mode (paths in VBENCH_CACHE_DIR).
CHECKPOINTS = {
    "subject_consistency": ("dino_model/dino_vitbase16_pretrain.pth", "dino_model/facebookresearch_dino_main"),
    "background_consistency": ("clip_model/ViT-B-32.pt",),
    "motion_smoothness": ("amt_model/amt-s.pth",),
    "dynamic_degree": ("raft_model/models/raft-things.pth",),
    "appearance_style": ("clip_model/ViT-B-32.pt",),
    "scene": ("caption_model/tag2text_swin_14m.pth",),
}
RESULTS_GLOB = "results_*_eval_results.json"
# A Python exception's last line (`ValueError: ...`); torchrun's own ChildFailedError after it names no cause.
ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception): \S")


def checkpoint_dir() -> Path | None:
    """The folder of VBench's checkpoints the user named (VBENCH_CACHE_DIR), or None."""
    value = os.environ.get(CACHE_VARIABLE, "").strip()
    return Path(value).expanduser() if value else None


def missing_checkpoints(folder: Path) -> list[str]:
    """The checkpoints of the six dimensions that `folder` lacks (each named once)."""
    needed = dict.fromkeys(path for paths in CHECKPOINTS.values() for path in paths)
    return [path for path in needed if not (folder / path).exists()]


def why_not_run(paths: Paths) -> str | None:
    """Why VBench cannot run here (one sentence), or None where it can."""
    folder = checkpoint_dir()
    if folder is None:
        return (f"{CACHE_VARIABLE} names no folder of VBench's scorer checkpoints (CLIP ViT-B/32, DINO ViT-B/16, "
                f"RAFT, AMT-S, Tag2Text), and none ships in a package this toolkit can install")
    missing = missing_checkpoints(folder)
    if missing:
        return f"{CACHE_VARIABLE}={folder} lacks {', '.join(missing)} (VBench would fetch them; nothing is fetched here)"
    if not (paths.vbench_venv / "bin" / "python").is_file():
        return (f"VBench's own environment {paths.vbench_venv.name} is not installed; make build RUN_ARGS="
                f"\"--benchmarks=wan-2.2-t2v-a14b\" with {CACHE_VARIABLE} set installs it")
    return None


def make_environment(paths: Paths, log: Log) -> None:
    """VBench's environment, hash-checked from requirements/vbench.txt, where the user asks for a score by naming
    its checkpoints (VBENCH_CACHE_DIR); nothing otherwise (it is gigabytes, CUDA's libraries included)."""
    if checkpoint_dir() is None:
        return
    log(f"{CACHE_VARIABLE} is set: installing VBench's environment {paths.vbench_venv.name} (minutes and about "
        f"8 GB the first time; seconds when it is up to date) ...")
    install_environment(paths, ENVIRONMENT, paths.vbench_venv, log)


def evaluate_command(paths: Paths, videos: Path, output: Path) -> list[str]:
    """The reference's VBench command (run_evaluation.py) on one device, in VBench's environment."""
    return [str(paths.vbench_venv / "bin" / "python"), "-m", "torch.distributed.run", "--standalone",
            "--nproc_per_node=1", "-m", "vbench.launch.evaluate", f"--videos_path={videos}",
            f"--output_path={output}", "--load_ckpt_from_local=True", "--dimension", *CHECKPOINTS]


def run_vbench(paths: Paths, videos: Path, output: Path) -> Path:
    """Run VBench on the videos in `videos`; its newest results JSON in `output`. UserError with the end of its
    output where it fails."""
    output.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, CACHE_VARIABLE: str(checkpoint_dir())}
    done = subprocess.run(evaluate_command(paths, videos, output), capture_output=True, text=True, check=False,
                          env=environment)
    (output / "vbench.log").write_text(done.stdout + done.stderr)
    found = results_file(output)
    if done.returncode != 0 or found is None:
        cause = root_cause(done.stdout + done.stderr)
        raise UserError(f"VBench failed (exit status {done.returncode}) on {videos}"
                        f"{f': {cause}' if cause else ''}; the end of its output ({output / 'vbench.log'}):\n"
                        f"{(done.stdout + done.stderr)[-1500:]}", exit_code=EXIT_FAILURE)
    return found


def root_cause(output: str) -> str | None:
    """The exception VBench's own process ended with (e.g. NCCL finding no GPU), which torchrun's summary at the end
    of the output does not name; None where there is none."""
    errors = [line.strip() for line in output.splitlines()
              if ERROR_LINE.match(line.strip()) and "ChildFailedError" not in line]
    return errors[-1] if errors else None


def results_file(output: Path) -> Path | None:
    """The newest results_<time>_eval_results.json in `output` (as run_evaluation.py's parse_results picks it)."""
    found = sorted(Path(output).glob(RESULTS_GLOB))
    return found[-1] if found else None
