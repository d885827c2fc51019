"""An endpoints tree: a scenario folder of a run of the MLCommons endpoints client, as the v6.1 checker reads it
(submission_checker/loader.py: a scenario folder without LoadGen logs is an endpoints submission, read by
parsers/endpoints_parser.py):

    results/<system>/<benchmark>/<Scenario>/config.yaml                        the YAML the client ran (the seeds
                                                                                and min_duration_ms the checker reads)
    results/<system>/<benchmark>/<Scenario>/performance/result_summary.json    the performance run's report
    results/<system>/<benchmark>/<Scenario>/accuracy/accuracy_results.json     the accuracy run's report
    results/<system>/<benchmark>/<Scenario>/accuracy/<artefact folder>/        where the round asks one (wan's
                                                                                videos/: its audit videos and
                                                                                captions.txt), from the accuracy run
    results/<system>/<benchmark>/<Scenario>/audit/audit_<test>.json            the client's compliance audit where the
                                                                                round asks it of the benchmark (wan:
                                                                                TEST04), from the performance run
    results/<system>/<benchmark>/<Scenario>/measurements.json, README.md        as for every tree (the checker asks no
                                                                                user.conf of an endpoints tree)

The toolkit runs the two phases as two tests (PerformanceOnly, AccuracyOnly), each with a report folder of its own;
the tree takes config.yaml and performance/ from the performance run and accuracy/ from the accuracy run. Each file
is checked against the sha256 the run recorded (`load_generator.report_sha256`) before anything is copied: a missing
or edited report file stages nothing.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

from ..errors import EXIT_FAILURE, UserError
from ..fileio import copy_atomically, replace_dir, sha256_file
from ..paths import MEASUREMENTS_JSON, README, RUN_RECORD
from ..records.metadata import RunRecord
from ..records.reproduce import reproduce_command
from ..records.runs import Key, key_of

Log = Callable[[str], None]
CONFIG = "config.yaml"
PERFORMANCE = ("performance", "result_summary.json")
ACCURACY = ("accuracy", "accuracy_results.json")
MEASURED_FILES = (MEASUREMENTS_JSON, README)
ENDPOINTS_SYSTEM_SUFFIX = "_endpoints"
AUDIT = "audit"
# The v6.1 checker's ENDPOINTS_COMPLIANCE_MAPPING: the client's name of a compliance test; its
# compliance_endpoints_check asks <Scenario>/audit/audit_<name>.json (passed) of an endpoints tree of a model of
# models_TEST04 (wan) for TEST04 only.
CLIENT_AUDIT_TESTS = {"TEST04": "output_caching_test"}


def audit_files(compliance_tests) -> tuple[str, ...]:
    """The report files (audit/audit_<name>.json) of the client's audits a benchmark's tree must hold."""
    return tuple(f"{AUDIT}/audit_{CLIENT_AUDIT_TESTS[t]}.json" for t in compliance_tests if t in CLIENT_AUDIT_TESTS)


def is_endpoints_run(record: RunRecord | None) -> bool:
    return record is not None and bool(record.load_generator)


def tree_key(record: RunRecord) -> Key:
    """The tree a run goes into: its system, benchmark and scenario; for the client's run of a benchmark the round
    also has LoadGen trees of (qwen3-vl, wan-2.2), the system `<system>_endpoints`. The checker's loader takes a
    scenario folder for one kind or the other (LoadGen logs, else the client's reports), so the two trees of one
    machine live under two system descriptions, and neither overwrites the other."""
    from ..benchmark_api import endpoints_only, get_benchmark

    system, benchmark, scenario = key_of(record)
    if is_endpoints_run(record) and not endpoints_only(get_benchmark(benchmark)):
        system = endpoints_system_id(system)
    return system, benchmark, scenario


def endpoints_system_id(system_id: str) -> str:
    return system_id + ENDPOINTS_SYSTEM_SUFFIX


def described_system_id(tree_system_id: str) -> str:
    """The machine whose overrides describe a tree's system: itself, or the one of `<system>_endpoints`."""
    return tree_system_id.removesuffix(ENDPOINTS_SYSTEM_SUFFIX)


def endpoints_system_description(data: Mapping[str, Any]) -> dict[str, Any]:
    """The description of the `<system>_endpoints` system: the machine's, the load generator named in its name."""
    return {**data, "system_name": f"{data.get('system_name') or ''} with the MLCommons endpoints client".strip()}


def report_file(record: RunRecord, relative: str, label: str) -> Path:
    """The run's report file `relative`, checked against the sha256 its record keeps; UserError (exit 1) naming it
    when it is missing, unrecorded or changed."""
    report = Path(str(record.load_generator.get("report_dir") or Path(record.log_dir) / "report"))
    path = report / relative
    fix = f"restore the file or run the test again: {reproduce_command(record)}"
    expected = (record.load_generator.get("report_sha256") or {}).get(relative)
    if not path.is_file():
        raise UserError(f"{path} is missing, so {label} cannot be staged from {record.log_dir}; {fix}.",
                        exit_code=EXIT_FAILURE)
    if not isinstance(expected, str):
        raise UserError(f"{Path(record.log_dir) / RUN_RECORD} records no sha256 of {relative}, so {label} cannot be "
                        f"staged from {record.log_dir}; {fix}.", exit_code=EXIT_FAILURE)
    if sha256_file(path) != expected:
        raise UserError(f"{path} changed after the run (its sha256 is not the one {RUN_RECORD} recorded), so {label} "
                        f"is not staged from {record.log_dir}; {fix}.", exit_code=EXIT_FAILURE)
    return path


def artefact_folders(accuracy: RunRecord, artefacts: Mapping[str, tuple[str, ...]], label: str) -> dict[str, Path]:
    """The accuracy run's artefact folders (name -> folder), each holding the names its samples cover (names that are
    sample ids the run did not reach are not asked of a run of part of the data set) and captions.txt; UserError
    (exit 1) naming the first missing file."""
    samples = accuracy.accuracy.samples if accuracy.accuracy is not None else None
    found: dict[str, Path] = {}
    for folder, names in artefacts.items():
        source = Path(accuracy.log_dir) / folder
        wanted = [n for n in names if samples is None or not n.isdigit() or int(n) < samples]
        if not wanted and not source.is_dir():
            continue
        stems = {p.name.split(".")[0] for p in source.iterdir()} if source.is_dir() else set()
        missing = [n for n in (*wanted, "captions") if n not in stems]
        if missing:
            raise UserError(f"{source} lacks {', '.join(missing)} (the audit files accuracy/{folder}/ must hold), so "
                            f"{label} is not staged from {accuracy.log_dir}; run the accuracy test again: "
                            f"{reproduce_command(accuracy)}.", exit_code=EXIT_FAILURE)
        found[folder] = source
    return found


def passed_audit(record: RunRecord, relative: str, label: str) -> Path:
    """The performance run's audit verdict `relative`, checked as report_file does and passed; UserError (exit 1)
    saying what to run where it is missing or failed."""
    fix = (f"run the performance test again with the endpoints harness (its YAML's audit block runs the audit): "
           f"{reproduce_command(record)}")
    report = Path(str(record.load_generator.get("report_dir") or Path(record.log_dir) / "report"))
    if not (report / relative).is_file():
        raise UserError(f"{report / relative} is missing: the client ran no {Path(relative).stem.removeprefix('audit_')}"
                        f" audit in {record.log_dir}, which the round asks of {label}'s endpoints tree; {fix}.",
                        exit_code=EXIT_FAILURE)
    path = report_file(record, relative, label)
    try:
        verdict = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"{path} cannot be read ({error}), so {label} is not staged; {fix}.",
                        exit_code=EXIT_FAILURE) from None
    if not isinstance(verdict, dict) or verdict.get("passed") is not True:
        reason = verdict.get("reason") if isinstance(verdict, dict) else None
        raise UserError(f"{path} is a failed audit{f' ({reason})' if reason else ''}, so {label} is not staged; "
                        f"{fix}.", exit_code=EXIT_FAILURE)
    return path


def stage_endpoints_scenario(dest: Path, label: str, performance: RunRecord, accuracy: RunRecord | None,
                             measured: Path, log: Log, artefacts: Mapping[str, tuple[str, ...]] | None = None,
                             audits: tuple[str, ...] = ()) -> Path:
    """Stage the client's runs of one scenario into `dest` (see the module's docstring); `artefacts`: the rules'
    accuracy_artefacts (folder -> the names it holds); `audits`: the audit files the round asks (audit_files)."""
    missing = [name for name in MEASURED_FILES if not (measured / name).is_file()]
    if missing:
        raise UserError(f"{measured} is incomplete ({', '.join(missing)} missing): run `make generate_conf_files` "
                        f"first.", exit_code=EXIT_FAILURE)
    config = report_file(performance, CONFIG, label)
    summary = report_file(performance, "/".join(PERFORMANCE), label)
    results = report_file(accuracy, "/".join(ACCURACY), label) if accuracy is not None else None
    folders = artefact_folders(accuracy, artefacts or {}, label) if accuracy is not None else {}
    verdicts = {Path(relative).name: passed_audit(performance, relative, label) for relative in audits}
    replace_dir(dest / PERFORMANCE[0], {PERFORMANCE[1]: summary})
    if verdicts:
        replace_dir(dest / AUDIT, verdicts)
    if results is not None:
        replace_dir(dest / ACCURACY[0], {ACCURACY[1]: results, **folders})
    copy_atomically(config, dest / CONFIG)
    for name in MEASURED_FILES:
        copy_atomically(measured / name, dest / name)
    log(f"{label}: staged the endpoints client's performance run {performance.log_dir}"
        + (f" and accuracy run {accuracy.log_dir}" if accuracy is not None else "")
        + "".join(f" with its {name}/" for name in folders)
        + "".join(f" and its audit {name}" for name in verdicts))
    return dest
