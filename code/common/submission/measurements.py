"""generate_conf_files: measurements/<system>/<benchmark>/<Scenario>/ and documentation/calibration.md,
written from the runs that make up the submission (their metadata.json) and the benchmark's model facts."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..benchmark_api import Benchmark
from ..constants import TestMode, WorkloadSetting
from ..errors import EXIT_FAILURE, UserError
from ..fileio import write_atomically
from ..records.metadata import RunRecord
from ..records.reproduce import record_selection, reproduce_command
from ..paths import MEASUREMENTS_JSON, README, USER_CONF, Paths
from ..rules import BenchmarkRules

_DTYPES = {"float32": "fp32", "float16": "fp16", "int8": "int8", "uint8": "uint8", "int64": "int64"}
# The keys the round's checkers require in measurements.json (SYSTEM_IMP_REQUIRED_FILES). Each must be truthy:
# `not value` is "missing meaningful value" in both checkers, so `"retraining": false` or "" is rejected.
MEASUREMENTS_FIELDS = ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                       "weight_transformations")


def submission_benchmark(rules: BenchmarkRules, record: RunRecord) -> str:
    return rules.submission_name(WorkloadSetting.from_name(record.config.workload_setting).accuracy_target)


def _yes_no(value: Any) -> str:
    """retraining as the checkers need it: a non-empty string ("no" where the model facts say nothing or false)."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value).strip() if value is not None and str(value).strip() else "no"


def _manifest(record: RunRecord) -> dict[str, Any]:
    return dict(record.engine.manifest) if record.engine is not None else {}


def measurements(record: RunRecord, benchmark: Benchmark) -> dict[str, str]:
    """measurements.json of one result: every field of MEASUREMENTS_FIELDS, a non-empty string."""
    fields = record.config.fields
    model = benchmark.models[fields["model"]]
    calibration = _manifest(record).get("calibration")
    transformations = model.weight_transformations
    if fields["precision"] == "int8":
        how = f" on {calibration['count']} {calibration['dataset']} images" if calibration else ""
        transformations += f"; INT8 static quantization (ONNX Runtime QDQ, per-channel weights){how}"
    values = {
        "input_data_types": ",".join(_DTYPES.get(i.dtype, i.dtype) for i in model.inputs),
        "retraining": _yes_no(model.retraining),
        "starting_weights_filename": model.starting_weights_filename,
        "weight_data_types": fields["precision"],
        "weight_transformations": transformations,
    }
    problems = measurements_problems(values)
    if problems:
        raise UserError(f"measurements.json of {record.benchmark} {record.scenario.value} (model "
                        f"{fields['model']}) would be rejected by the checkers: {'; '.join(problems)}; fill the "
                        f"model's facts in code/{record.benchmark}/ and run make generate_conf_files again.",
                        exit_code=EXIT_FAILURE)
    return values


def measurements_problems(values: dict[str, Any]) -> list[str]:
    """Why the checkers would reject these measurements.json values: a field missing or not a non-empty string
    (they test `not value`, so "", false, 0 and [] fail; "no" and "none" pass)."""
    problems = []
    for name in MEASUREMENTS_FIELDS:
        value = values.get(name)
        if name not in values:
            problems.append(f"{name} is missing")
        elif not isinstance(value, str) or not value.strip():
            problems.append(f"{name} is {json.dumps(value)}, which must be a non-empty string")
    return problems


def readme(record: RunRecord) -> str:
    """The README of a staged result: the commands that make the run again, from this record."""
    config = record_selection(record).without_test()
    fields = record.config.fields
    loadgen = f"LoadGen {record.loadgen.version if record.loadgen is not None else '?'}"
    if record.load_generator:
        client = record.load_generator
        loadgen = (f"the MLCommons endpoints client {client.get('client_version', '?')} "
                   f"({str(client.get('commit', '?'))[:8]}) as the load generator")
    subset = record.data.subset if record.data is not None else ""
    return "\n".join([
        f"# {record.benchmark} {record.scenario.value} on {record.system.id}",
        "",
        f"Model `{fields['model']}` ({record.division} division) on data set `{fields['dataset']}`, backend "
        f"{_manifest(record).get('runtime_version', '?')}, {fields['precision']}, {loadgen}.",
        *(["", f"The data set was {subset}: the figures are that part's, not the whole set's."] if subset else []),
        "",
        "From the repository root (`src/` of this submission), with the data in MLPERF_SCRATCH_PATH:",
        "",
        "```",
        "make prebuild build",
        config.command("download_model download_data preprocess_data"),
        config.command("generate_engines"),
        *(config.with_test_mode(mode).command("run_harness") for mode in TestMode),
        config.command("run_audit_harness"),
        "```",
        "",
    ])


def _run_user_conf(record: RunRecord) -> str:
    """The user.conf the run was made with; UserError naming it and the command that makes the run again."""
    path = Path(record.log_dir) / USER_CONF
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        why = error.strerror if isinstance(error, OSError) and error.strerror else "not UTF-8 text"
        raise UserError(f"{path} cannot be read ({why}), so the run in {record.log_dir} cannot be described; "
                        f"restore it or run the test again: {reproduce_command(record)}",
                        exit_code=EXIT_FAILURE) from None


def write_measurements(paths: Paths, record: RunRecord, rules: BenchmarkRules, benchmark: Benchmark,
                       system_id: str | None = None) -> Path:
    """measurements/ of the run, under `system_id` (the tree's system; the run's where None)."""
    folder = paths.measurements_dir(system_id or record.system.id, submission_benchmark(rules, record),
                                    record.scenario)
    write_atomically(folder / MEASUREMENTS_JSON, json.dumps(measurements(record, benchmark), indent=2) + "\n")
    if not record.load_generator:     # an endpoints client's run has no LoadGen user.conf; its tree asks none
        write_atomically(folder / USER_CONF, _run_user_conf(record))
    write_atomically(folder / README, readme(record))
    return folder


def calibration_markdown(records: list[RunRecord]) -> str:
    lines = ["# Calibration", "",
             "Generated by `make generate_conf_files` from the engines of the submitted runs.", ""]
    for record in records:
        fields = record.config.fields
        calibration = _manifest(record).get("calibration")
        where = f"{record.system.id} {record.benchmark} {record.scenario.value} ({fields['model']})"
        if fields["precision"] != "int8" or not calibration:
            lines.append(f"- {where}: {fields['precision']}, no calibration: the weights and activations keep "
                         f"their trained {fields['precision']} values.")
            continue
        lines.append(f"- {where}: INT8 with ONNX Runtime static quantization (QDQ format, per-channel symmetric "
                     f"int8 weights, uint8 activations). Activation ranges: {calibration.get('method', '?')} "
                     f"over {calibration['count']} images of the calibration list of `{calibration['dataset']}` "
                     f"(cache sha256 {calibration.get('cache_sha256', '?')[:16]}...). No retraining.")
    return "\n".join(lines) + "\n"
