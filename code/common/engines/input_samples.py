"""Which preprocessed set an engine reads: the float set, or for an INT8 TensorRT engine with `input_dtype=int8` its
int8 form (engines/int8_input.py), quantized with the calibrated scale of the model's input.

`make preprocess_data` writes the int8 form after the float set (calibrating first when the cache is missing);
the harness opens it by the same rule, so the scale the samples were quantized with is the scale the engine
dequantizes with: both come from one calibration cache, and a set made with another scale reads as stale.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ..benchmark_api import Benchmark, Log, PreprocessedSet, TensorSpec
from ..errors import EXIT_FAILURE, UserError
from ..paths import Paths
from .calibration_ranges import CalibrationChoice
from .int8_input import input_scale


def wants_int8_input(fields: Mapping[str, Any]) -> bool:
    """Whether the engine of these config values takes int8 inputs (TensorRT, INT8, input_dtype=int8)."""
    if str(fields.get("input_dtype") or "fp32") != "int8":
        return False
    if fields.get("backend") != "tensorrt" or fields.get("precision") != "int8":
        raise UserError(f"input_dtype=int8 is for TensorRT INT8 engines (--backend=tensorrt --precision=int8), not "
                        f"--backend={fields.get('backend')} --precision={fields.get('precision')}.")
    return True


def engine_inputs(benchmark: Benchmark, fields: Mapping[str, Any]) -> tuple[TensorSpec, ...]:
    """The model's inputs as the engine of these config values takes them: int8 for input_dtype=int8."""
    inputs = tuple(benchmark.models[fields["model"]].inputs)
    if not wants_int8_input(fields):
        return inputs
    return tuple(dataclasses.replace(spec, dtype="int8") for spec in inputs)


def int8_scale(benchmark: Benchmark, fields: Mapping[str, Any], paths: Paths) -> float:
    """The calibrated scale of the model's one input, from this config's calibration cache."""
    inputs = benchmark.models[fields["model"]].inputs
    if len(inputs) != 1:
        raise UserError(f"input_dtype=int8 takes models of one input; {fields['model']} has {len(inputs)}.",
                        exit_code=EXIT_FAILURE)
    cache = paths.calibration_cache(benchmark.name, fields["model"], fields["dataset"],
                                    int(fields["calibration_images"]), CalibrationChoice.of(fields).file_suffix)
    if not cache.is_file():
        raise UserError(f"The int8 inputs are quantized with the calibrated input scale, and {cache} is missing. "
                        f"Run make calibrate RUN_ARGS=\"--benchmarks={benchmark.name}\" (with the same "
                        "calibration settings).", exit_code=EXIT_FAILURE)
    return input_scale(cache, inputs[0].name)


def engine_samples(benchmark: Benchmark, fields: Mapping[str, Any], paths: Paths) -> PreprocessedSet:
    """The preprocessed set the engine of these config values reads (see above)."""
    model, dataset = fields["model"], fields["dataset"]
    if not wants_int8_input(fields):
        return benchmark.preprocessed(model, dataset, paths)
    return benchmark.int8_preprocessing().preprocessed_int8(model, dataset, paths, int8_scale(benchmark, fields, paths))


def preprocess_int8(benchmark: Benchmark, fields: Mapping[str, Any], paths: Paths, log: Log) -> PreprocessedSet:
    """Write (or reuse) the int8 form of the preprocessed set for these config values."""
    module = benchmark.int8_preprocessing()
    scale = int8_scale(benchmark, fields, paths)
    log(f"{benchmark.name}: int8 inputs, quantized with the calibrated input scale {scale:.6g}")
    return module.preprocess_int8(fields["model"], fields["dataset"], paths, scale, log)
