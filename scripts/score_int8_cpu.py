"""Top-1 of the TensorRT INT8 model of a resnet50-benchmark model, scored on the CPU, for each calibration method.

The model TensorRT builds its INT8 plan from (tensorrt_onnx.prepare: symmetric Q/DQ) is run by ONNX Runtime with
every Q/DQ pair as written (tensorrt_onnx.cpu_reference_session), so no GPU is needed. With the MLPerf ResNet-50
and the full ImageNet validation set this is the check against the closed target, 75.70 % (99 % of 76.46 %):

    make download_model download_data preprocess_data BENCHMARKS=resnet50
    .venv/bin/python scripts/score_int8_cpu.py --model=resnet50_v1.5 --dataset=imagenet

It calibrates (or reuses the cache of) each method over the benchmark's calibration list (500 images), then scores
the FP32 model and each INT8 model over the whole preprocessed set, and prints one line each. --input_dtype=int8
also scores the model with an int8 input on the int8 form of the set (written when missing).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import MappingProxyType

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from code.common.config_registry import ConfigKey, ResolvedConfig  # noqa: E402
from code.common.constants import Scenario, WorkloadSetting  # noqa: E402
from code.common.engines.builder import ensure_calibration  # noqa: E402
from code.common.engines.calibration_ranges import METHODS  # noqa: E402
from code.common.engines.input_samples import preprocess_int8  # noqa: E402
from code.common.engines.tensorrt_onnx import cpu_reference_session, prepare  # noqa: E402
from code.common.paths import Paths  # noqa: E402
from code.resnet50 import models, preprocessing  # noqa: E402
from code.resnet50.benchmark import BENCHMARK  # noqa: E402
from configs.resnet50 import ResNet50Base  # noqa: E402

TARGET = 75.70   # the closed division's resnet50 bound: 99 % of the reference's 76.46 % top-1
CLOSED_MODEL = "resnet50_v1.5"


def _config(model: str, dataset: str, method: str, input_dtype: str) -> ResolvedConfig:
    values = {"model": model, "dataset": dataset, "backend": "tensorrt", "precision": "int8", "batch_size": 32,
              "calibration_images": ResNet50Base.calibration_images, "calibration_method": method,
              "input_dtype": input_dtype}
    return ResolvedConfig(ConfigKey("resnet50", Scenario.Offline, "cpu_scoring", WorkloadSetting()), __file__, "exact",
                          MappingProxyType(values), MappingProxyType({k: "command line" for k in values}))


def _top1(model: Path, samples, labels: np.ndarray) -> float:
    session = cpu_reference_session(model)
    name = session.get_inputs()[0].name
    found = []
    for first in range(0, len(samples), 100):
        batch = np.stack([samples.load(i) for i in range(first, min(first + 100, len(samples)))])
        found.append(session.run(None, {name: batch})[0].reshape(len(batch), -1).argmax(axis=1))
    return 100.0 * float((np.concatenate(found) == labels).mean())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="resnet50_v1.5")
    parser.add_argument("--dataset", default="imagenet")
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--input_dtype", default="fp32", choices=("fp32", "int8"))
    parser.add_argument("--scratch_path", default=None)
    args = parser.parse_args()
    paths = Paths.create(scratch=Path(args.scratch_path) if args.scratch_path else None)
    source = paths.model_file("resnet50", args.model)
    images = preprocessing.preprocessed(args.model, args.dataset, paths)
    labels = np.asarray(images.labels) + models.facts(args.model).label_offset
    work = paths.build / "score_int8_cpu"
    work.mkdir(parents=True, exist_ok=True)
    prepare(source, work / "fp32.onnx", "fp32")
    fp32 = _top1(work / "fp32.onnx", images, labels)
    print(f"{args.model} on {args.dataset} ({len(images)} images): fp32 {fp32:.2f} %")
    for method in args.methods.split(","):
        config = _config(args.model, args.dataset, method, args.input_dtype)
        started = time.perf_counter()
        cache = ensure_calibration(config, paths, BENCHMARK, lambda line: None)
        model = work / f"int8-{method}.onnx"
        prepare(source, model, "int8", cache)
        top1 = _top1(model, images, labels)
        line = f"  int8 {method}: {top1:.2f} %"
        if args.model == CLOSED_MODEL:
            line += f" ({'meets' if top1 >= TARGET else 'below'} the closed target {TARGET} %)"
        if args.input_dtype == "int8":
            int8_model = work / f"int8-{method}-int8-input.onnx"
            prepare(source, int8_model, "int8", cache, input_dtype="int8")
            quantized = preprocess_int8(BENCHMARK, config.values, paths, lambda line: None)
            line += f"; with int8 input {_top1(int8_model, quantized, labels):.2f} %"
        print(f"{line}; {time.perf_counter() - started:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
