"""Top-1 accuracy of an mlperf_log_accuracy.json, scored as MLPerf's accuracy-imagenet.py does.

Each log entry's `data` is the upper-case hex of one response; its first element (of `dtype`) minus
`label_offset` is the predicted label. Entries repeating a `qsl_idx` are skipped (first one counts).

    python -m code.resnet50.accuracy --mlperf-accuracy-file mlperf_log_accuracy.json --val-map val_map.txt \
        [--label-offset 1] [--dtype int32]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from ..common.benchmark_api import AccuracyResult, Metric
from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.records.loadgen_log import read_accuracy_entries

METRIC = "top-1 accuracy"


def score_accuracy_log(accuracy_log: Path, labels: np.ndarray, label_offset: int,
                       dtype: np.dtype | type = np.int32) -> AccuracyResult:
    entries = read_accuracy_entries(accuracy_log)
    dtype = np.dtype(dtype)
    seen: set[int] = set()
    good = 0
    for entry in entries:
        index = int(entry["qsl_idx"])
        if index in seen:  # LoadGen may issue a sample more than once; accuracy-imagenet.py counts it once
            continue
        if not 0 <= index < len(labels):
            raise UserError(f"{accuracy_log}: qsl_idx {index} is outside the data set's {len(labels)} samples",
                            exit_code=EXIT_FAILURE)
        seen.add(index)
        response = np.frombuffer(bytes.fromhex(entry["data"]), dtype)
        if response.size == 0:
            raise UserError(f"{accuracy_log}: empty response for qsl_idx {index}", exit_code=EXIT_FAILURE)
        if int(response[0]) - label_offset == int(labels[index]):
            good += 1
    total = len(seen)
    value = 100.0 * good / total if total else 0.0
    return AccuracyResult(metrics=(Metric(METRIC, value),), samples=total,
                          text=f"accuracy={value:.3f}%, good={good}, total={total}")


def main(argv: list[str] | None = None) -> int:
    from .datasets import parse_val_map

    parser = argparse.ArgumentParser(prog="python -m code.resnet50.accuracy", description=__doc__.splitlines()[0])
    parser.add_argument("--mlperf-accuracy-file", required=True, type=Path, help="mlperf_log_accuracy.json")
    parser.add_argument("--val-map", required=True, type=Path, help="`<file> <label>` lines in QSL order")
    parser.add_argument("--label-offset", type=int, default=0, help="subtracted from each response (1 for models "
                        "whose class 0 is background, e.g. the MLPerf ResNet50 ONNX)")
    parser.add_argument("--dtype", default="int32", help="numpy dtype of the responses (default int32)")
    args = parser.parse_args(argv)
    try:
        labels = np.array([label for _, label in parse_val_map(args.val_map)], dtype=np.int64)
        result = score_accuracy_log(args.mlperf_accuracy_file, labels, args.label_offset, np.dtype(args.dtype))
    except (UserError, OSError, TypeError) as error:
        print(f"error: {error}", file=sys.stderr)
        return getattr(error, "exit_code", EXIT_FAILURE)
    print(result.text)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
