"""generate_engines and calibrate: ResolvedConfig -> engine file + manifest; and where the harness finds it.

An engine is rebuilt only when its manifest differs from the inputs it would be built from now (model bytes,
backend, precision, batch size where the backend's engine depends on it, device and GPU model, runtime version,
calibration cache, builder version), or when the file
on disk no longer has the size and sha256 the manifest recorded when it was written (truncated, replaced). The
engine file is replaced atomically and the manifest is written last, so an interrupted build reads as stale,
never current.
"""
from __future__ import annotations

import errno
import hashlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from ..backends.registry import BackendPlugin, BuildRequest, Hardware, get_plugin
from ..benchmark_api import Benchmark, Log
from ..config_registry import ResolvedConfig
from ..disk_full import disk_full_message, disk_full_sentence, looks_full
from ..errors import EXIT_FAILURE, UserError, choose
from ..fields import FIELDS
from ..paths import Paths
from ..fileio import sha256_file
from ..model_files import verified_model
from ..named_inputs import named_sample, stack_batch
from ..preprocessed_store import set_identity
from ..records.reproduce import config_command
from ..engines.manifest import BUILDER_VERSION, CalibrationInfo, EngineManifest, engine_problem
from ..engines import onnxruntime_builder as ort_builder
from ..engines.calibration_ranges import CalibrationChoice, compute_ranges

CALIBRATION_BATCH = 10   # samples per calibration inference: bounds the calibrator's memory


def _plugin(config: ResolvedConfig) -> BackendPlugin:
    return get_plugin(config["backend"])


def engine_batch_size(config: ResolvedConfig) -> int | None:
    """The batch size the engine is built for, or None when the backend's engine serves any batch size."""
    return int(config["batch_size"]) if _plugin(config).batch_specific else None


@dataclass(frozen=True)
class EngineResult:
    path: Path
    manifest: EngineManifest
    rebuilt: bool


def engine_path(config: ResolvedConfig, system_id: str, paths: Paths, device: str) -> Path:
    return paths.engine_file(system_id, config.benchmark, config.scenario, device, engine_batch_size(config),
                             config["precision"], config.workload, _plugin(config).engine_extension)


def require_model(config: ResolvedConfig, paths: Paths) -> tuple[Path, str]:
    """The model file and its sha256, as `make download_model` made it (model_files.verified_model)."""
    return verified_model(config.benchmark, config["model"], paths)


def _unreadable_model(config: ResolvedConfig, model: Path, error: Exception) -> UserError:
    return UserError(f"{model} is not a readable ONNX model ({error}): remove it and fetch it again with make "
                     f'download_model RUN_ARGS="--benchmarks={config.benchmark} --model={config["model"]}"',
                     exit_code=EXIT_FAILURE)


def _check_decoder_precision(config: ResolvedConfig, benchmark: Benchmark) -> bool:
    """Whether the model is an LLM decoder; UserError for a precision its engines are not built in."""
    decoder = choose(benchmark.models, config["model"], "model", config.benchmark).decoder
    if decoder and config["precision"] != "fp32":
        raise UserError(f"{config['model']} engines are fp32 here (--precision=fp32): its decoder graph is the fp32 "
                        f"reference, and int8/int4 weights measured slower or less accurate on CPUs.",
                        exit_code=EXIT_FAILURE)
    return decoder


def _require_runtime(config: ResolvedConfig) -> str:
    """The backend's runtime version; UserError first when the runtime is missing or cannot build the precision."""
    plugin = _plugin(config)
    version = plugin.runtime_version()
    plugin.check_precision(config["precision"])
    return version


def _expected_manifest(config: ResolvedConfig, model_digest: str, runtime_version: str, hardware: Hardware,
                       cache: Path | None) -> EngineManifest:
    plugin = _plugin(config)
    calibration = None
    if config["precision"] == "int8":
        digest = sha256_file(cache) if cache is not None and cache.is_file() else "missing"
        calibration = CalibrationInfo(config["dataset"], int(config["calibration_images"]),
                                      CalibrationChoice.of(config).label, digest)
    return EngineManifest(
        benchmark=config.benchmark, model=config["model"], model_sha256=model_digest,
        backend=config["backend"], precision=config["precision"], batch_size=engine_batch_size(config),
        device=hardware.device, runtime_version=runtime_version, opt_level=plugin.opt_level,
        quantization=_quantization(plugin, config) if calibration else None, calibration=calibration,
        gpu_name=hardware.gpu_name, compute_capability=hardware.compute_capability)


def _quantization(plugin: BackendPlugin, config: ResolvedConfig) -> str:
    """The plug-in's quantization recipe, and how the engine's inputs come (an int8 input changes the engine)."""
    recipe = plugin.quantization(config["precision"])
    return recipe if input_dtype(config) == "fp32" else f"{recipe}; int8 inputs, calibrated scales"


def input_dtype(config: ResolvedConfig) -> str:
    """The engine's input type: "int8" only where the config asks for it on an INT8 engine of a backend that takes
    it (TensorRT); otherwise "fp32"."""
    asked = str(config.get("input_dtype") or "fp32")
    if asked == "int8" and config["backend"] != "tensorrt":
        raise UserError(f"input_dtype=int8 is for TensorRT INT8 engines, not --backend={config['backend']}.")
    return asked


def _calibration_cache(config: ResolvedConfig, paths: Paths) -> Path:
    return paths.calibration_cache(config.benchmark, config["model"], config["dataset"],
                                   int(config["calibration_images"]), CalibrationChoice.of(config).file_suffix)


# -- calibration -------------------------------------------------------------------------------------

def _calibration_samples(config: ResolvedConfig, paths: Paths, benchmark: Benchmark) -> list[dict[str, np.ndarray]]:
    """The calibration samples, each {input name: array}, as the benchmark's calibration_samples gives them (one
    sample at a time; a single-input model's also as one array, or a batch of them)."""
    model, dataset, count = config["model"], config["dataset"], int(config["calibration_images"])
    inputs = choose(benchmark.models, model, "model", config.benchmark).inputs
    samples: list[dict[str, np.ndarray]] = []
    for sample in benchmark.calibration_samples(model, dataset, count, paths):
        if len(inputs) == 1 and not isinstance(sample, Mapping) and np.ndim(sample) == len(inputs[0].shape) + 1:
            samples.extend(named_sample(one, inputs) for one in np.asarray(sample))   # a batch
        else:
            samples.append(named_sample(sample, inputs))
    if not samples:
        raise UserError(f"The calibration list of {dataset} for {model} is empty.", exit_code=EXIT_FAILURE)
    return samples


def _samples_sha256(samples: list[dict[str, np.ndarray]]) -> str:
    digest = hashlib.sha256()
    for sample in samples:
        for array in sample.values():     # the model's input order
            digest.update(f"{array.dtype.str}{array.shape}".encode())
            digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()


def _samples_source(config: ResolvedConfig, paths: Paths) -> str:
    """What the calibration samples were read from: the sha256 of the preprocessed set's manifest (which records
    the set's own sources, e.g. the data set's list), "" where the benchmark keeps no such set."""
    directory = paths.preprocessed_dir(config.benchmark, config["model"], config["dataset"])
    return set_identity(directory)["manifest_sha256"]


def calibration_source_problem(config: ResolvedConfig, paths: Paths, model_digest: str) -> str | None:
    """Why the INT8 calibration cache of this config was computed from another model or other calibration
    samples than there are now (a sentence naming the cache and `make calibrate`), or None. Cheap: digests the
    toolkit already has, no sample is read."""
    cache = _calibration_cache(config, paths)
    recorded = ort_builder.calibration_cache_inputs(cache)
    if recorded is None:
        return None
    changed = []
    if recorded.get("model_sha256") != model_digest:
        changed.append("the model")
    source = _samples_source(config, paths)
    if "samples_source_sha256" in recorded and recorded["samples_source_sha256"] != source:
        changed.append(f"the calibration samples (the preprocessed set in "
                       f"{paths.preprocessed_dir(config.benchmark, config['model'], config['dataset'])})")
    if not changed:
        return None
    return (f"The calibration cache {cache} was computed from another {' and '.join(changed)} than there is now. "
            f"Run {config_command('calibrate', config)}, then {config_command('generate_engines', config)} builds "
            f"the engine again from it.")


def _ensure_calibration(config: ResolvedConfig, paths: Paths, benchmark: Benchmark, log: Log,
                        force: bool) -> Path:
    """The calibration cache, recomputed unless it exists and was computed from exactly these inputs."""
    cache = _calibration_cache(config, paths)
    model, model_digest = require_model(config, paths)
    samples = _calibration_samples(config, paths, benchmark)
    choice = CalibrationChoice.of(config)
    inputs: dict[str, Any] = {
        "benchmark": config.benchmark, "model": config["model"], "model_sha256": model_digest,
        "dataset": config["dataset"], "count": int(config["calibration_images"]), "samples": len(samples),
        "samples_sha256": _samples_sha256(samples), "samples_source_sha256": _samples_source(config, paths),
        "method": choice.label,
        "runtime_version": ort_builder.runtime_version(), "builder_version": BUILDER_VERSION,
    }
    if not force and ort_builder.calibration_cache_inputs(cache) == inputs:
        log(f"calibration cache up to date: {cache}")
        return cache
    log(f"calibrating {config['model']} on {len(samples)} {config['dataset']} samples "
        f"({choice.label}) ...")
    model_inputs = benchmark.models[config["model"]].inputs

    def batches() -> Iterator[dict[str, np.ndarray]]:
        return (stack_batch(samples[i:i + CALIBRATION_BATCH], model_inputs)
                for i in range(0, len(samples), CALIBRATION_BATCH))
    with tempfile.TemporaryDirectory(prefix="calibrate.") as work:
        try:
            prepared = ort_builder.prepare_model(model, Path(work), for_quantization=True)
        except ort_builder.UnreadableModel as error:
            raise _unreadable_model(config, model, error) from None
        ranges = compute_ranges(prepared, batches, choice)
    ort_builder.write_calibration_cache(cache, ranges, inputs)
    log(f"calibration cache written: {cache}")
    return cache


def ensure_calibration(config: ResolvedConfig, paths: Paths, benchmark: Benchmark, log: Log) -> Path:
    """The INT8 calibration cache of this config, computed only when missing or computed from other inputs."""
    return _ensure_calibration(config, paths, benchmark, log, force=False)


def calibrate(config: ResolvedConfig, paths: Paths, benchmark: Benchmark, log: Log) -> Path:
    """Recompute the INT8 calibration cache of this config's model, data set and count (`make calibrate`)."""
    return _ensure_calibration(config, paths, benchmark, log, force=True)


# -- engines -----------------------------------------------------------------------------------------

def build_engine(config: ResolvedConfig, system_id: str, paths: Paths, benchmark: Benchmark, log: Log,
                 force: bool = False) -> EngineResult:
    """Build the engine of this config unless an engine built from the same inputs is already there."""
    runtime_version = _require_runtime(config)   # a missing runtime or unsupported precision first
    decoder = _check_decoder_precision(config, benchmark)
    plugin = _plugin(config)
    hardware = plugin.hardware()
    model, model_digest = require_model(config, paths)
    cache = _ensure_calibration(config, paths, benchmark, log, force=False) if config["precision"] == "int8" \
        else None
    expected = _expected_manifest(config, model_digest, runtime_version, hardware, cache)
    engine = engine_path(config, system_id, paths, hardware.device)
    manifest_path = paths.engine_manifest(engine)
    problem = f"a rebuild of {engine} was asked for" if force else engine_problem(engine, manifest_path, expected)
    if problem is None:
        log(f"engine up to date: {engine}")
        return EngineResult(engine, EngineManifest.read(manifest_path) or expected, rebuilt=False)
    if engine.exists() or manifest_path.exists():
        log(f"rebuilding: {problem}")
    batch = engine_batch_size(config)
    where = hardware.device if hardware.gpu_name is None else f"{hardware.gpu_name}, sm {hardware.compute_capability}"
    log(f"building {config['precision']} {plugin.name} engine for {config['model']} "
        f"({f'batch {batch}' if batch else 'any batch size'}, {where}) ...")
    manifest_path.unlink(missing_ok=True)     # from here until the manifest is written, the engine is stale
    engine.parent.mkdir(parents=True, exist_ok=True)
    timing_cache = None if hardware.gpu_name is None else \
        paths.timing_cache(runtime_version, hardware.gpu_name, hardware.compute_capability or "?")
    request = BuildRequest(model=model, engine=engine, precision=config["precision"],
                           batch_size=int(config["batch_size"]), hardware=hardware, calibration_cache=cache,
                           workspace_bytes=int(config.get("workspace_size") or FIELDS["workspace_size"].default),
                           timing_cache=timing_cache, log=log, decoder=decoder, input_dtype=input_dtype(config))
    try:
        plugin.build(request)
    except ort_builder.UnreadableModel as error:
        raise _unreadable_model(config, model, error) from None
    except Exception as error:
        _disk_full_while_building(error, engine)
        raise
    written = expected.of_engine(engine)
    written.write(manifest_path)
    log(f"engine written: {engine}")
    return EngineResult(engine, written, rebuilt=True)


def _disk_full_while_building(error: Exception, engine: Path) -> None:
    """A runtime that cannot write the engine (or its work files) raises its own error (ONNX Runtime:
    "Protobuf serialization failed"): where the engine's disk or the temporary folder's is full, say that."""
    folders = (engine.parent, Path(tempfile.gettempdir()))
    message = disk_full_message(error, folders)
    full = next((folder for folder in folders if looks_full(folder)), None)
    if message is None and full is not None:
        message = disk_full_sentence(full, f"{os.strerror(errno.ENOSPC)}: building the engine failed with "
                                           f"{type(error).__name__}")
    if message is not None:
        raise UserError(message, exit_code=EXIT_FAILURE) from error


def locate_engine(config: ResolvedConfig, system_id: str, paths: Paths, benchmark: Benchmark) -> Path:
    """The engine the harness must load; UserError naming `make generate_engines` when missing or stale."""
    runtime_version = _require_runtime(config)
    hardware = _plugin(config).hardware()
    engine = engine_path(config, system_id, paths, hardware.device)
    command = config_command("generate_engines", config)
    _, model_digest = require_model(config, paths)
    cache = _calibration_cache(config, paths) if config["precision"] == "int8" else None
    if cache is not None:
        stale = calibration_source_problem(config, paths, model_digest)
        if stale is not None:
            raise UserError(stale, exit_code=EXIT_FAILURE)
    expected = _expected_manifest(config, model_digest, runtime_version, hardware, cache)
    reason = engine_problem(engine, paths.engine_manifest(engine), expected)
    if reason is None:
        return engine
    raise UserError(f"No current engine for {config.benchmark} {config.scenario.value}: {reason}. "
                    f"Build it with: {command}", exit_code=EXIT_FAILURE)
