"""wan-2.2-t2v-a14b's accuracy: the videos of an accuracy log, the artefacts the checker asks for, and VBench's score.

The accuracy log holds each sample's mp4 as it is (answers.Media). From it:

- `videos/<id>.mp4` for the round's 10 audit ids and `videos/captions.txt` (their prompts, "<id>: <prompt>" a line)
  beside accuracy.txt, as the checkers' REQUIRED_ACC_BENCHMARK asks;
- `vbench_videos/<prompt>-0.mp4` for every sample, the names VBench's evaluation reads (run_evaluation.py);
- accuracy.txt: `'vbench_score': X` (the mean of the six dimensions x 100) and each dimension, where VBench ran (its
  results JSON, read by `parse_vbench_results`); otherwise a plain line that no figure was computed and why.

VBench runs where its checkpoints and environment are (vbench.py); elsewhere accuracy.txt says why it did not.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Mapping

from ..common.errors import EXIT_FAILURE, UserError
from ..common.fileio import write_atomically
from ..common.records.loadgen_log import read_accuracy_entries
from . import reference as ref

VIDEOS, VBENCH_VIDEOS, CAPTIONS = "videos", "vbench_videos", "captions.txt"
# The six dimensions run_evaluation.py averages (x 100) into vbench_score.
DIMENSIONS = ("subject_consistency", "background_consistency", "motion_smoothness", "dynamic_degree",
              "appearance_style", "scene")
NO_FIGURE = "no accuracy figure was computed"


def videos_of(accuracy_log: Path, count: int) -> dict[int, bytes]:
    """qsl_idx -> the mp4 bytes of an accuracy log (the first entry of a sample logged twice)."""
    videos: dict[int, bytes] = {}
    for entry in read_accuracy_entries(accuracy_log):
        index = int(entry["qsl_idx"])
        if not 0 <= index < count:
            raise UserError(f"{accuracy_log} names sample {index}, and the data set has {count}; score it with the "
                            f"data set it was run on.", exit_code=EXIT_FAILURE)
        data = bytes.fromhex(entry["data"])
        if data[4:8] != b"ftyp":
            raise UserError(f"{accuracy_log}: the response of sample {index} is not an mp4 file; it was not "
                            f"written by a wan-2.2-t2v-a14b run.", exit_code=EXIT_FAILURE)
        videos.setdefault(index, data)
    return videos


def write_artefacts(folder: Path, videos: Mapping[int, bytes], prompts: list[str]) -> list[Path]:
    """The videos VBench reads and the checker's audit videos with their captions, in `folder`; the files
    written."""
    written = []
    for index, data in sorted(videos.items()):
        written.append(write_atomically(folder / VBENCH_VIDEOS / f"{prompts[index]}-0.mp4", data))
    audited = [i for i in ref.AUDIT_IDS if i in videos]
    for index in audited:
        written.append(write_atomically(folder / VIDEOS / f"{index}.mp4", videos[index]))
    if audited:
        captions = "".join(f"{index}: {prompts[index]}\n" for index in audited)
        written.append(write_atomically(folder / VIDEOS / CAPTIONS, captions))
    return written


def parse_vbench_results(path: Path) -> dict[str, float]:
    """Each dimension's score (0..1) from VBench's results JSON (`{dimension: [score, per-video list]}`, what
    VBench.evaluate writes as <name>_eval_results.json); UserError naming a dimension that is missing."""
    try:
        results = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read VBench's results {path}: {error}", exit_code=EXIT_FAILURE) from None
    scores = {}
    for dimension in DIMENSIONS:
        value = results.get(dimension)
        value = value[0] if isinstance(value, list) and value else value
        if not isinstance(value, (int, float)) or math.isnan(value):
            raise UserError(f"{path} holds no score for {dimension}; run VBench with all six dimensions "
                            f"({', '.join(DIMENSIONS)}).", exit_code=EXIT_FAILURE)
        scores[dimension] = float(value)
    return scores


def accuracy_text(scores: Mapping[str, float] | None, videos: int, why: str = "VBench did not run") \
        -> tuple[float, str]:
    """(vbench_score, accuracy.txt) from the six dimensions' scores; NaN and the no-figure line, saying `why`,
    without them."""
    if scores is None:
        return math.nan, (f"{NO_FIGURE}: {why}; score the videos in {VBENCH_VIDEOS}/ with VBench (the reference's "
                          f"run_evaluation.py) to have one\nvideos={videos} in {VBENCH_VIDEOS}/\n")
    score = sum(scores[d] for d in DIMENSIONS) / len(DIMENSIONS) * 100
    dims = ", ".join(f"'{d}': {scores[d] * 100:.4f}" for d in DIMENSIONS)
    return score, f"{{'vbench_score': {score:.4f}, {dims}}}\nvideos={videos} in {VBENCH_VIDEOS}/\n"
