"""Checks of one results/<system>/<benchmark>/<Scenario> folder: LoadGen logs, accuracy, measurements, compliance.

Every number comes from the RulesRound; each problem is reported once, on the file concerned, with the fix.
What `allow_test_runs` relaxes (error -> warning): a run shorter than the round's min_duration_ms and what a
shortened run brings by itself (INVALID only for min duration / min query count / early stopping, a performance
sample count or closed Offline samples per query below the minimum, an accuracy run on part of the data set and
the accuracy it then scores). Never relaxed: LoadGen errors, seeds, scenario, latency-bound INVALID, missing or
untruncated files, compliance verdicts.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..constants import AccuracyTarget, Scenario
from ..harness.loadgen_log import ACCURACY, DETAIL, SUMMARY, LoadGenLog, read_detail
from ..rules.schema import BenchmarkRules, RulesRound

ERROR, WARNING = "error", "warning"
Report = Callable[[str, Path, str], None]   # (level, path, message)

# Field names from the round's submission checker (section 2 of the facts); the rules tables hold no list of them.
MEASUREMENTS_FIELDS = ("input_data_types", "retraining", "starting_weights_filename", "weight_data_types",
                       "weight_transformations")
ACCURACY_TXT = "accuracy.txt"
HASH_LINE = re.compile(r"^hash=[0-9a-fA-F]{64}$")
PASS_LINE = "TEST PASS"
# Validity flags a run fails merely by being shortened. The latency bound (result_perf_constraints_met) is not one.
SHORT_RUN_FLAGS = ("result_min_duration_met", "result_min_queries_met", "early_stopping_met")
CONSTRAINT_FLAG = "result_perf_constraints_met"


def is_empty(value: Any) -> bool:
    """Not filled in: missing, blank text or an empty list/object. A number, even 0, is not empty."""
    return value is None or (isinstance(value, str) and not value.strip()) or \
        (isinstance(value, (list, dict, tuple)) and not value)


def as_int(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError, OverflowError):
            return None


def read_json_object(report: Report, path: Path, fix: str) -> dict[str, Any] | None:
    """The JSON object in `path`, or None after reporting why it cannot be had."""
    if not path.is_file():
        report(ERROR, path, f"{path.name} is missing; {fix}.")
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        report(ERROR, path, f"{path.name} is not readable JSON ({exc}); {fix}.")
        return None
    if not isinstance(data, dict):
        report(ERROR, path, f"{path.name} holds a JSON {type(data).__name__}, not an object; {fix}.")
        return None
    return data


def harness_command(benchmark_key: str, scenario: Scenario, target: AccuracyTarget | None, several_targets: bool,
                    extra: str = "") -> str:
    accuracy = f" --accuracy_target={target.value}" if target is not None and several_targets else ""
    return f'make run_harness RUN_ARGS="--benchmarks={benchmark_key} --scenarios={scenario.value}{accuracy}{extra}"'


@dataclass(frozen=True)
class ScenarioContext:
    report: Report
    rules: RulesRound
    division: str
    folder: Path
    scenario: Scenario
    benchmark_key: str                  # toolkit benchmark name for make commands (the folder name if unknown)
    benchmark: BenchmarkRules | None    # None: a round model the toolkit's tables do not describe
    target: AccuracyTarget | None
    allow_test_runs: bool

    @property
    def closed(self) -> bool:
        return self.division == "closed"

    @property
    def relaxed(self) -> str:
        """Level of a finding that a shortened development run causes by itself."""
        return WARNING if self.allow_test_runs else ERROR

    def harness(self, extra: str = "") -> str:
        several = self.benchmark is not None and len(self.benchmark.submission_names) > 1
        return harness_command(self.benchmark_key, self.scenario, self.target, several, extra)

    def audit(self, test: str) -> str:
        return (f'make run_audit_harness RUN_ARGS="--benchmarks={self.benchmark_key} '
                f'--scenarios={self.scenario.value} --audit_test={test}"')


def check_scenario(ctx: ScenarioContext) -> None:
    perf_fix = f"run {ctx.harness()} then make stage_results"
    check_performance_run(ctx, ctx.folder / "performance" / "run_1", perf_fix)
    check_accuracy_run(ctx)
    check_measurements(ctx)
    check_compliance(ctx)


def _require(ctx: ScenarioContext, directory: Path, names: tuple[str, ...], fix: str) -> None:
    for name in names:
        if not (directory / name).is_file():
            ctx.report(ERROR, directory / name, f"{name} is missing; {fix}.")


def _read_log(ctx: ScenarioContext, directory: Path, fix: str) -> LoadGenLog | None:
    path = directory / DETAIL
    if not path.is_file():
        return None   # reported by _require
    try:
        log = read_detail(directory)
    except (OSError, ValueError) as exc:
        ctx.report(ERROR, path, f"{DETAIL} cannot be read ({exc}); {fix}.")
        return None
    if not log.values:
        ctx.report(ERROR, path, f"{DETAIL} holds no :::MLLOG records, so it is not a LoadGen log; {fix}.")
        return None
    return log


def _check_common(ctx: ScenarioContext, log: LoadGenLog, path: Path, fix: str) -> None:
    """What every LoadGen log must show: no errors, the folder's scenario."""
    num_errors = as_int(log.get("num_errors")) or 0
    if log.errors or num_errors:
        first = f" (first: {log.errors[0]})" if log.errors else ""
        ctx.report(ERROR, path, f"LoadGen logged {max(len(log.errors), num_errors)} error(s){first}; "
                                f"fix their cause and {fix}.")
    scenario = log.get("effective_scenario")
    if scenario != ctx.scenario.value:
        ctx.report(ERROR, path, f"effective_scenario is {scenario!r} but the folder is {ctx.scenario.value}; "
                                f"move the logs to the right scenario folder or {fix}.")


def check_performance_run(ctx: ScenarioContext, run_dir: Path, fix: str) -> None:
    """A performance run folder (the submission run or a TEST0x run): files, validity, seeds, duration, counts."""
    _require(ctx, run_dir, (SUMMARY, DETAIL), fix)
    log = _read_log(ctx, run_dir, fix)
    if log is None:
        return
    path, rules, bench = run_dir / DETAIL, ctx.rules, ctx.benchmark
    _check_common(ctx, log, path, fix)
    expected = dataclasses.asdict(rules.seeds)
    wrong = [name for name, seed in expected.items() if as_int(log.get(f"effective_{name}")) != seed]
    if wrong:
        verb = "differ" if len(wrong) > 1 else "differs"
        ctx.report(ERROR, path, f"{', '.join(wrong)} {verb} from the {rules.version} seeds; run with LoadGen "
                                f"{rules.loadgen_version} (its mlperf.conf carries them), set no seeds in user.conf, "
                                f"and {fix}.")
    duration = as_int(log.get("effective_min_duration_ms"))
    if duration is None or duration < rules.min_duration_ms:
        ctx.report(ctx.relaxed, path, f"effective_min_duration_ms is {duration}, below the round's "
                                      f"{rules.min_duration_ms}: a short run, not valid for submission; "
                                      f"drop --test_run and any min_duration override and {fix}.")
    _check_validity(ctx, log, path, fix)
    if bench is not None:
        count = as_int(log.get("effective_performance_sample_count"))
        if count is None or count < bench.performance_sample_count:
            ctx.report(ctx.relaxed, path, f"effective_performance_sample_count is {count}, below the benchmark's "
                                          f"{bench.performance_sample_count}; use the full data set, drop "
                                          f"performance_sample_count_override and {fix}.")
        minimum = bench.offline_min_samples
        if ctx.closed and ctx.scenario is Scenario.Offline and minimum is not None:
            per_query = as_int(log.get("effective_samples_per_query"))
            if per_query is None or per_query < minimum:
                ctx.report(ctx.relaxed, path, f"effective_samples_per_query is {per_query}, below the closed "
                                              f"Offline minimum of {minimum}; do not lower min_query_count and {fix}.")


def _check_validity(ctx: ScenarioContext, log: LoadGenLog, path: Path, fix: str) -> None:
    validity = log.get("result_validity")
    if validity == "VALID":
        return
    if validity is None:
        ctx.report(ERROR, path, f"the log has no result_validity, so the run did not finish; {fix}.")
        return
    failed = [flag for flag in (*SHORT_RUN_FLAGS, CONSTRAINT_FLAG) if log.get(flag) is False]
    # Only a run INVALID purely for being short is a development run that allow_test_runs lets through.
    shortened = bool(failed) and all(flag in SHORT_RUN_FLAGS for flag in failed)
    level = WARNING if ctx.allow_test_runs and shortened else ERROR
    reason = log.get("result_invalid_reason") or ", ".join(f"{flag} false" for flag in failed) or "no reason logged"
    ctx.report(level, path, f"result_validity is {validity} ({str(reason).strip()}); fix the cause and {fix}.")


def check_accuracy_run(ctx: ScenarioContext) -> None:
    acc, bench = ctx.folder / "accuracy", ctx.benchmark
    fix = f"run {ctx.harness(' --test_mode=AccuracyOnly')} then make stage_results"
    _require(ctx, acc, (SUMMARY, DETAIL, ACCURACY, ACCURACY_TXT), fix)
    log = _read_log(ctx, acc, fix)
    whole = True   # whether the run scored the whole data set (unknown counts as yes: missing log is reported)
    if log is not None:
        path = acc / DETAIL
        _check_common(ctx, log, path, fix)
        if log.test_mode != "AccuracyOnly":
            ctx.report(ERROR, path, f"effective_test_mode is {log.test_mode or None!r}, not AccuracyOnly; {fix}.")
        if bench is not None:
            count = as_int(log.get("effective_accuracy_sample_count")) or as_int(log.get("qsl_reported_total_count"))
            if count is None or count < bench.dataset_size:
                whole = False
                level = ERROR if ctx.closed and not ctx.allow_test_runs else WARNING
                ctx.report(level, path, f"the accuracy run covered {count} samples, not the whole data set of "
                                        f"{bench.dataset_size}; point the harness at the full data set and {fix}.")
    if (acc / ACCURACY_TXT).is_file():
        text = _read_text(ctx, acc / ACCURACY_TXT, fix)
        if text is not None:
            _check_accuracy_value(ctx, acc / ACCURACY_TXT, text, whole, fix)
            _check_hash(ctx, acc / ACCURACY_TXT, text)
    _check_size(ctx, acc / ACCURACY)


def _read_text(ctx: ScenarioContext, path: Path, fix: str) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        ctx.report(ERROR, path, f"{path.name} cannot be read ({exc}); {fix}.")
        return None


def _check_accuracy_value(ctx: ScenarioContext, path: Path, text: str, whole: bool, fix: str) -> None:
    bench = ctx.benchmark
    if bench is None:
        return
    pattern = re.compile(bench.accuracy_pattern)
    found = next((m for m in map(pattern.search, text.splitlines()) if m), None)
    if found is None:
        ctx.report(ERROR, path, f"{ACCURACY_TXT} holds no {bench.accuracy_metric} line matching the round's "
                                f"pattern; {fix}.")
        return
    try:
        value = float(found.group(1))
    except (IndexError, ValueError):
        ctx.report(ERROR, path, f"{ACCURACY_TXT} reports {found.group(0)!r}, which is not a number; {fix}.")
        return
    if not ctx.closed or ctx.target is None:
        return   # open division: the value is reported, not gated
    threshold = bench.accuracy_threshold(ctx.target)
    if value < threshold:
        # A score on part of the data set means little, so a development run only gets a warning for it.
        level = WARNING if ctx.allow_test_runs and not whole else ERROR
        ctx.report(level, path, f"{bench.accuracy_metric} {value:g} is below the closed-division target "
                                f"{threshold:.6g} ({ctx.target.percent_label} % of {bench.accuracy_reference:g}); "
                                f"fix the model or its calibration and {fix}.")


def _check_hash(ctx: ScenarioContext, path: Path, text: str) -> None:
    if not any(HASH_LINE.match(line.strip()) for line in text.splitlines()):
        ctx.report(ERROR, path, f"{ACCURACY_TXT} has no hash=<sha256> line of the full accuracy log; "
                                f"run make truncate_results.")


def _check_size(ctx: ScenarioContext, path: Path) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        return   # missing: reported by _require
    limit = ctx.rules.accuracy_log_max_bytes
    if size > limit:
        ctx.report(ERROR, path, f"{ACCURACY} is {size} bytes, over the {limit} bytes allowed; "
                                f"run make truncate_results.")


def check_measurements(ctx: ScenarioContext) -> None:
    fix = "run make generate_conf_files then make stage_results"
    data = read_json_object(ctx.report, ctx.folder / "measurements.json", fix)
    for name in MEASUREMENTS_FIELDS if data is not None else ():
        if data is not None and is_empty(data.get(name)):
            ctx.report(ERROR, ctx.folder / "measurements.json",
                       f"measurements.json has no {name}; fill it in (make generate_conf_files) and re-run "
                       f"make stage_results.")
    for name in ("user.conf", "README.md"):
        path = ctx.folder / name
        text = _read_text(ctx, path, fix) if path.is_file() else None
        if text is None or not text.strip():
            state = "empty" if path.is_file() else "missing"
            ctx.report(ERROR, path, f"{name} is {state}; {fix}.")


def _samples_accuracy(ctx: ScenarioContext, test: str) -> bool:
    """A test that samples responses into the accuracy log (TEST01) also has an accuracy verdict and log."""
    spec = ctx.rules.compliance_tests.get(test)
    return spec is not None and any("accuracy_log" in line for line in spec.audit_config)


def check_compliance(ctx: ScenarioContext) -> None:
    """Required in closed division; in open only the tests present are checked."""
    if ctx.benchmark is None:
        return
    for test in ctx.benchmark.compliance_tests:
        folder = ctx.folder / test
        fix = f"run {ctx.audit(test)} then make stage_compliance"
        if not folder.is_dir():
            if ctx.closed:
                ctx.report(ERROR, folder, f"compliance test folder {test}/ is missing; {fix}.")
            continue
        with_accuracy = _samples_accuracy(ctx, test)
        for verdict in ("verify_performance.txt",) + (("verify_accuracy.txt",) if with_accuracy else ()):
            _check_verdict(ctx, folder / verdict, fix)
        check_performance_run(ctx, folder / "performance" / "run_1", fix)
        if with_accuracy:
            acc = folder / "accuracy"
            _require(ctx, acc, (ACCURACY, ACCURACY_TXT), fix)
            _check_size(ctx, acc / ACCURACY)
            if (acc / ACCURACY_TXT).is_file():
                text = _read_text(ctx, acc / ACCURACY_TXT, fix)
                if text is not None:
                    _check_hash(ctx, acc / ACCURACY_TXT, text)


def _check_verdict(ctx: ScenarioContext, path: Path, fix: str) -> None:
    if not path.is_file():
        ctx.report(ERROR, path, f"{path.name} is missing; {fix}.")
        return
    text = _read_text(ctx, path, fix)
    if text is None:
        return
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or lines[-1] != PASS_LINE:
        last = lines[-1] if lines else "nothing"
        ctx.report(ERROR, path, f"{path.name} ends with {last!r}, not {PASS_LINE}; fix the cause of the failure "
                                f"and {fix}.")
