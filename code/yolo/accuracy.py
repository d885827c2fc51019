"""COCO mAP of an mlperf_log_accuracy.json, scored as MLPerf's accuracy-coco.py does.

Each log entry's `data` is the upper-case hex of float32 records `[qsl_idx, ymin, xmin, ymax, xmax, score,
category_id]`, box corners normalised by the image's height and width; an entry with fewer than 7 values is an
image without detections. As accuracy-coco.py: entries repeating a `qsl_idx` are skipped (the first counts), the
qsl_idx indexes the annotation file's `images` (the QSL order), corners are scaled by the height and width the
annotation file records, and pycocotools' COCOeval (bbox) runs over every image seen, those without detections
included. The first line of the text, `mAP=<100 x AP@[.50:.95]>%`, is the one the round's checker reads.

    python -m code.yolo.accuracy --mlperf-accuracy-file mlperf_log_accuracy.json --coco-dir <data set folder> \
        [--verbose]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ..common.benchmark_api import AccuracyResult, Metric
from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.records.loadgen_log import read_accuracy_entries
from .datasets import ANNOTATIONS, CocoImage, annotation_images

RECORD = 7


@dataclass(frozen=True)
class CocoScore:
    result: AccuracyResult
    summary: str          # what pycocotools printed (loading, evaluation, its 12-line summary)


def detections_of(entries: Sequence[dict[str, Any]], images: Sequence[CocoImage], source: str = "the accuracy log"
                  ) -> tuple[list[dict[str, Any]], set[int], dict[str, int]]:
    """(pycocotools result dicts, the image ids seen, counts) from LoadGen accuracy entries, computed as
    accuracy-coco.py does (in float32 up to the final conversion to Python floats)."""
    detections: list[dict[str, Any]] = []
    image_ids: set[int] = set()
    seen: set[int] = set()
    no_results = mismatched = 0
    for entry in entries:
        index = int(entry["qsl_idx"])
        if index in seen:  # LoadGen may issue a sample more than once; accuracy-coco.py counts it once
            continue
        if not 0 <= index < len(images):
            raise UserError(f"{source}: qsl_idx {index} is outside the data set's {len(images)} images",
                            exit_code=EXIT_FAILURE)
        seen.add(index)
        image = images[index]
        data = np.frombuffer(bytes.fromhex(entry["data"]), np.float32)
        if len(data) < RECORD:
            image_ids.add(image.id)
            no_results += 1
            continue
        if len(data) % RECORD:
            raise UserError(f"{source}: the response of qsl_idx {index} holds {len(data)} float32 values, not "
                            f"records of {RECORD}", exit_code=EXIT_FAILURE)
        records = data.reshape(-1, RECORD)
        mismatched += int((records[:, 0].astype(np.int64) != index).sum())
        height, width = np.float32(image.height), np.float32(image.width)
        ymin, xmin = records[:, 1] * height, records[:, 2] * width
        ymax, xmax = records[:, 3] * height, records[:, 4] * width
        boxes = np.stack([xmin, ymin, xmax - xmin, ymax - ymin], axis=1).tolist()
        for box, score, label in zip(boxes, records[:, 5].tolist(), records[:, 6].astype(np.int64).tolist()):
            detections.append({"image_id": image.id, "category_id": label, "bbox": box, "score": score})
        image_ids.add(image.id)
    counts = {"entries": len(entries), "images": len(image_ids), "no_results": no_results,
              "dupes": len(entries) - len(seen), "mismatched": mismatched, "samples": len(seen)}
    return detections, image_ids, counts


def score_entries(entries: Sequence[dict[str, Any]], images: Sequence[CocoImage], annotations: Path,
                  source: str = "the accuracy log") -> CocoScore:
    """Score LoadGen accuracy entries against the annotation file; `images` is the QSL order."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    detections, image_ids, counts = detections_of(entries, images, source)
    chatter = io.StringIO()
    stats = np.zeros(12)
    with contextlib.redirect_stdout(chatter):
        ground_truth = COCO(str(annotations))
        if detections:   # accuracy-coco.py fails on a log without any detection; that scores 0 here
            evaluation = COCOeval(ground_truth, ground_truth.loadRes(detections), iouType="bbox")
            evaluation.params.imgIds = list(image_ids)
            evaluation.evaluate()
            evaluation.accumulate()
            evaluation.summarize()
            stats = np.asarray(evaluation.stats, dtype=np.float64)
    mean_ap, ap50 = 100.0 * float(stats[0]), 100.0 * float(stats[1])
    lines = [f"mAP={mean_ap:.3f}%", f"AP50={ap50:.3f}%",
             f"found {counts['entries']} results, {counts['images']} images, {counts['no_results']} images with no "
             f"results, ignored {counts['dupes']} dupes"]
    if counts["mismatched"]:
        lines.append(f"ERROR: {counts['mismatched']} records name another qsl_idx than their log entry")
    result = AccuracyResult(metrics=(Metric("mAP", mean_ap), Metric("AP50", ap50)), text="\n".join(lines),
                            samples=counts["samples"])
    return CocoScore(result, chatter.getvalue())


def score_accuracy_log(accuracy_log: Path, images: Sequence[CocoImage], annotations: Path) -> CocoScore:
    return score_entries(read_accuracy_entries(accuracy_log), images, annotations, str(accuracy_log))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m code.yolo.accuracy", description=__doc__.splitlines()[0])
    parser.add_argument("--mlperf-accuracy-file", required=True, type=Path, help="mlperf_log_accuracy.json")
    parser.add_argument("--coco-dir", required=True, type=Path,
                        help=f"data set folder holding {ANNOTATIONS.as_posix()} (its `images` are the QSL order)")
    parser.add_argument("--verbose", action="store_true", help="also print what pycocotools printed")
    args = parser.parse_args(argv)
    annotations = args.coco_dir / ANNOTATIONS
    try:
        score = score_accuracy_log(args.mlperf_accuracy_file, annotation_images(annotations), annotations)
    except (UserError, OSError, TypeError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_code", EXIT_FAILURE)
    if args.verbose:
        print(score.summary, end="")
    print(score.result.text)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
