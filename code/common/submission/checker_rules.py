"""Checks of one results/<system>/<benchmark>/<Scenario> folder: LoadGen logs, accuracy, measurements, compliance.

Each check mirrors one of the round's official checkers (tools/submission/submission_checker/ "main.py" and
submission_checker_old.py "old", `--version v6.1`); a finding is an error when either of them rejects the
tree, so a tree the toolkit passes passes both. The docstring of each check names the official code it follows.
Every number comes from the RulesRound; each problem is reported once, on the file concerned, with the fix.

What `allow_test_runs` relaxes (error -> warning): what a shortened development run brings by itself (min
duration, min query count and early stopping, a performance sample count or Offline samples per query below
the minimum, an accuracy run on part of the data set and the accuracy it then scores). Never relaxed: LoadGen
errors, seeds, scenario, latency bounds (token latencies included), missing or untruncated files, compliance
verdicts.

LLM results (benchmarks with token latencies) are held to what both checkers ask of them: token latencies
measured, the tokens-per-second figure logged, each ROUGE score at its target and the generated length within
its bounds, TTFT and TPOT p99 strictly below the folder scenario's bounds (an Interactive folder holds LoadGen's
Server logs, and the old checker holds it to Interactive's bounds, main.py to Server's looser ones: the stricter
counts), and TEST06's three checks passed.
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..audit.verdicts import IGNORED_FILES, TEST06_ACCURACY_LOG, listed, verdict_problems
from ..constants import AccuracyTarget, Scenario, SystemType
from ..paths import (ACCURACY_LOG, ACCURACY_TXT, DETAIL_LOG, MEASUREMENTS_JSON, README, SUMMARY_LOG, USER_CONF,
                     accuracy_dir, performance_run_dir)
from ..records.loadgen_log import TOKEN_RESULT_FIELDS, LoadGenLog, read_detail
from ..rules.schema import BenchmarkRules, RulesRound
from .measurements import MEASUREMENTS_FIELDS

ERROR, WARNING = "error", "warning"
Report = Callable[[str, Path, str], None]   # (level, path, message)

HASH_LINE = re.compile(r"^hash=([\w\d]+)$")
# Files the old checker allows in performance/run_1 and accuracy/ (it refuses anything else).
PERFORMANCE_FILES = frozenset({SUMMARY_LOG, DETAIL_LOG})
PERFORMANCE_OPTIONAL = frozenset({ACCURACY_LOG}) | IGNORED_FILES
ACCURACY_FILES = frozenset({SUMMARY_LOG, DETAIL_LOG, ACCURACY_LOG, ACCURACY_TXT})
# Validity flags a run fails merely by being shortened. The latency bound (result_perf_constraints_met) is not one.
SHORT_RUN_FLAGS = ("result_min_duration_met", "result_min_queries_met", "early_stopping_met")
CONSTRAINT_FLAG = "result_perf_constraints_met"
EARLY_STOPPING_SCENARIOS = (Scenario.SingleStream, Scenario.MultiStream, Scenario.Server)
# The figure each checker converts to a number first, per logged scenario (RESULT_FIELD_NEW of v6.1); a log
# without it fails both (float(None)).
RESULT_FIELDS = {Scenario.Offline: "result_samples_per_second", Scenario.SingleStream: "early_stopping_latency_ss",
                 Scenario.MultiStream: "early_stopping_latency_ms", Scenario.Server: "result_completed_samples_per_sec"}


def is_falsy(value: Any) -> bool:
    """What the checkers call not filled in: `not value` (so "", 0, false, [] and null; the string "0" is fine)."""
    return not value


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
    system_type: SystemType | None = None

    @property
    def closed(self) -> bool:
        return self.division in ("closed", "network")

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

    def inferable(self, logged: Scenario) -> bool:
        """main.py inferred_check: an edge system may fill this folder with the logs of `logged`."""
        return (self.system_type is not None and self.system_type.includes_edge
                and (logged, self.scenario) in self.rules.inferable_scenarios)

    def logs_belong(self, logged: Scenario) -> bool:
        """Whether logs of `logged` are this folder's own run: the same scenario, or Server in an Interactive
        folder (LoadGen runs Interactive as Server; both checkers accept that pair)."""
        return logged is self.scenario.loadgen


def check_scenario(ctx: ScenarioContext) -> None:
    perf_fix = f"run {ctx.harness()} then make stage_results"
    check_performance_run(ctx, performance_run_dir(ctx.folder), perf_fix)
    check_accuracy_run(ctx)
    check_measurements(ctx)
    check_compliance(ctx)


def _require(ctx: ScenarioContext, directory: Path, names: frozenset[str], fix: str,
             optional: frozenset[str] = frozenset()) -> None:
    """The files of a log folder: each required one present, nothing else (the old checker's exact file sets)."""
    for name in sorted(names):
        if not (directory / name).is_file():
            ctx.report(ERROR, directory / name, f"{name} is missing; {fix}.")
    extra = listed(directory) - names - optional
    if directory.is_dir() and extra:
        ctx.report(ERROR, directory, f"{directory.name}/ holds {', '.join(sorted(extra))}, which the official "
                                     f"checker does not allow there; remove it (make export_submission writes "
                                     f"only the allowed files).")


def _read_log(ctx: ScenarioContext, directory: Path, fix: str) -> LoadGenLog | None:
    path = directory / DETAIL_LOG
    if not path.is_file():
        return None   # reported by _require
    try:
        log = read_detail(directory)
    except (OSError, ValueError) as exc:
        ctx.report(ERROR, path, f"{DETAIL_LOG} cannot be read ({exc}); {fix}.")
        return None
    if not log.values:
        ctx.report(ERROR, path, f"{DETAIL_LOG} holds no :::MLLOG records, so it is not a LoadGen log; {fix}.")
        return None
    return log


def _check_errors(ctx: ScenarioContext, log: LoadGenLog, path: Path, fix: str) -> None:
    """Both checkers refuse a log with LoadGen errors (old: every log; main.py: the accuracy log)."""
    num_errors = as_int(log.get("num_errors")) or 0
    if log.errors or num_errors:
        first = f" (first: {log.errors[0]})" if log.errors else ""
        ctx.report(ERROR, path, f"LoadGen logged {max(len(log.errors), num_errors)} error(s){first}; "
                                f"fix their cause and {fix}.")


def _logged_scenario(ctx: ScenarioContext, log: LoadGenLog, path: Path, fix: str, level: str) -> Scenario | None:
    """The scenario of the log; a mismatch with the folder is reported unless the rules allow the inference."""
    raw = log.get("effective_scenario")
    try:
        logged = Scenario(raw)
    except ValueError:
        ctx.report(ERROR, path, f"effective_scenario is {raw!r} but the folder is {ctx.scenario.value}; "
                                f"move the logs to the right scenario folder or {fix}.")
        return None
    if not ctx.logs_belong(logged) and not ctx.inferable(logged):
        ctx.report(level, path, f"effective_scenario is {logged.value} but the folder is {ctx.scenario.value}, and "
                                f"the round infers a {ctx.scenario.value} result from {logged.value} logs only for "
                                f"a system whose type includes edge (MultiStream from SingleStream, Offline from "
                                f"SingleStream or MultiStream); move the logs to the right scenario folder or {fix}.")
    return logged


def check_performance_run(ctx: ScenarioContext, run_dir: Path, fix: str) -> None:
    """A performance run folder (the submission run or a TEST0x run): PerformanceCheck of main.py and
    check_performance_dir of the old checker."""
    _require(ctx, run_dir, PERFORMANCE_FILES, fix, PERFORMANCE_OPTIONAL)
    log = _read_log(ctx, run_dir, fix)
    if log is None:
        return
    path, rules, bench = run_dir / DETAIL_LOG, ctx.rules, ctx.benchmark
    _check_errors(ctx, log, path, fix)
    logged = _logged_scenario(ctx, log, path, fix, ERROR)
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
    if logged is not None:
        _check_latency(ctx, log, logged, path, fix)
    if logged is not None and bench is not None and bench.uses_token_latencies:
        _check_token_run(ctx, log, logged, path, fix)
    if bench is not None and bench.equal_issue and log.get("effective_sample_concatenate_permutation") is not True:
        ctx.report(ERROR, path, f"effective_sample_concatenate_permutation is "
                                f"{log.get('effective_sample_concatenate_permutation')!r}: the old checker asks "
                                f"equal-issue mode of this benchmark (LoadGen's mlperf.conf sets it; drop any "
                                f"sample_concatenate_permutation override) and {fix}.")
    if bench is not None:
        count = as_int(log.get("effective_performance_sample_count"))
        if count is None or count < bench.performance_sample_count:
            ctx.report(ctx.relaxed, path, f"effective_performance_sample_count is {count}, below the benchmark's "
                                          f"{bench.performance_sample_count}; use the full data set, drop "
                                          f"performance_sample_count_override and {fix}.")
        minimum = bench.offline_min_samples
        # main.py checks this in the closed division, the old checker in every division.
        if logged is Scenario.Offline and minimum is not None:
            per_query = as_int(log.get("effective_samples_per_query"))
            if per_query is None or per_query < minimum:
                ctx.report(ctx.relaxed, path, f"effective_samples_per_query is {per_query}, below the Offline "
                                              f"minimum of {minimum} (the old checker asks it in the open division "
                                              f"too); do not lower min_query_count and {fix}.")


def _check_validity(ctx: ScenarioContext, log: LoadGenLog, path: Path, fix: str) -> None:
    """The old checker requires result_validity VALID (main.py reads early_stopping_met instead, below)."""
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


def _check_latency(ctx: ScenarioContext, log: LoadGenLog, logged: Scenario, path: Path, fix: str) -> None:
    """main.py latency_check: early stopping met (SS, MS, Server), the Server bound the run was set up with,
    and the figure an inferred MultiStream result is computed from."""
    if logged in EARLY_STOPPING_SCENARIOS and log.get("early_stopping_met") is not True and \
            log.get("result_validity") == "VALID":
        ctx.report(ctx.relaxed, path, f"early_stopping_met is {log.get('early_stopping_met')!r} although the run "
                                      f"is VALID; main.py refuses it: {fix}.")
    bench = ctx.benchmark
    limit_ms = bench.server_latency_ms if bench is not None else None
    if bench is not None and ctx.scenario is Scenario.Interactive and bench.interactive_latency_ms is not None:
        limit_ms = bench.interactive_latency_ms       # main.py's latency-constraint of the Interactive folder
    if logged is Scenario.Server and bench is not None and limit_ms is not None:
        bound = int(limit_ms * 1e6)
        target = as_int(log.get("effective_target_latency_ns"))
        if target is None or target > bound:
            ctx.report(ERROR, path, f"effective_target_latency_ns is {target}, above the round's {ctx.scenario.value} "
                                    f"bound of {bound} ns; set no target_latency above {limit_ms:g} ms in "
                                    f"user.conf and {fix}.")
    if logged is Scenario.SingleStream and ctx.scenario is Scenario.MultiStream:
        if not float(log.get("early_stopping_latency_ms") or 0) > 0:
            ctx.report(ctx.relaxed, path, f"the SingleStream run logged no 99th-percentile early stopping estimate "
                                          f"(too few queries), so no MultiStream result can be inferred from it; "
                                          f"run MultiStream itself or a longer SingleStream and {fix}.")


def _check_token_run(ctx: ScenarioContext, log: LoadGenLog, logged: Scenario, path: Path, fix: str) -> None:
    """An LLM run: main.py llm_check and get_performance_metric_check, the old checker's extra_check_llm and
    get_performance_metric."""
    bench = ctx.benchmark
    assert bench is not None
    if not log.uses_token_latencies:
        ctx.report(ERROR, path, f"requested_use_token_latencies is not logged as true: LoadGen did not measure "
                                f"time to first token and time per output token, and the checkers refuse an LLM run "
                                f"without them; keep mlperf.conf's use_token_latencies = 1 (set none in user.conf), "
                                f"report each first token to LoadGen, and {fix}.")
        return
    for key in dict.fromkeys((RESULT_FIELDS.get(logged), TOKEN_RESULT_FIELDS.get(logged))):
        value = log.get(key) if key else None
        if key and (isinstance(value, bool) or not isinstance(value, (int, float))):
            ctx.report(ERROR, path, f"{key} is {value!r}, not a number: the checkers read the {logged.value} result "
                                    f"from it and fail without it; report every response's token count to LoadGen "
                                    f"and {fix}.")
    limits = bench.token_limits(ctx.scenario)
    tokens = log.token_latencies()
    if limits is None or tokens is None:
        return
    for what, observed, bound, knob in (
            ("time to first token", tokens.ttft_p99_ns, limits.ttft_ns, "lower server_target_qps"),
            ("time per output token", tokens.tpot_p99_ns, limits.tpot_ns,
             "lower batch_size or prefill_batch, set or lower prefill_chunk_tokens, or lower "
             "server_target_qps")):
        if observed is None:
            ctx.report(ERROR, path, f"the log has no 99th percentile {what}, which the checkers hold to the "
                                    f"{ctx.scenario.value} bound; report each first token to LoadGen and {fix}.")
        elif observed >= bound:
            note = " (main.py holds an Interactive folder to Server's looser bounds; the old checker to these)" \
                if ctx.scenario is Scenario.Interactive else ""
            ctx.report(ERROR, path, f"99th percentile {what} is {observed / 1e6:g} ms, not below the "
                                    f"{ctx.scenario.value} bound of {bound / 1e6:g} ms{note}; {knob}, and {fix}.")


def check_accuracy_run(ctx: ScenarioContext) -> None:
    """main.py AccuracyCheck (pattern, hash, data set coverage, json size, errors) and the old checker's
    check_accuracy_dir (exact file set, a pattern match even in open)."""
    acc, bench = accuracy_dir(ctx.folder), ctx.benchmark
    fix = f"run {ctx.harness(' --test_mode=AccuracyOnly')} then make stage_results"
    artefacts = dict(bench.accuracy_artefacts) if bench is not None else {}
    _require(ctx, acc, ACCURACY_FILES, fix, frozenset(artefacts))
    log = _read_log(ctx, acc, fix)
    whole = True   # whether the run scored the whole data set (unknown counts as yes: missing log is reported)
    if log is not None:
        path = acc / DETAIL_LOG
        _check_errors(ctx, log, path, fix)
        _logged_scenario(ctx, log, path, fix, WARNING)   # neither checker compares it; a mix-up is still worth a word
        if log.test_mode != "AccuracyOnly":
            ctx.report(ERROR, path, f"effective_test_mode is {log.test_mode or None!r}, not AccuracyOnly; {fix}.")
        if bench is not None:
            # main.py dataset_check, every division: the first of these keys present must equal the data set size.
            key = "effective_accuracy_sample_count" if log.get("effective_accuracy_sample_count") is not None \
                else "qsl_reported_total_count"
            count = as_int(log.get(key))
            expected = bench.accuracy_samples_for(ctx.scenario)
            if count != expected:
                whole = False
                ctx.report(ctx.relaxed, path, f"the accuracy run covered {count} samples ({key}), not the whole "
                                              f"data set of {expected}; point the harness at the full "
                                              f"data set and {fix}.")
    if (acc / ACCURACY_TXT).is_file():
        text = _read_text(ctx, acc / ACCURACY_TXT, fix)
        if text is not None:
            _check_accuracy_value(ctx, acc / ACCURACY_TXT, text, whole, fix)
            _check_hash(ctx, acc / ACCURACY_TXT, text, ERROR if ctx.closed else WARNING)
    _check_size(ctx, acc / ACCURACY_LOG, ERROR)
    for folder, names in artefacts.items():
        if acc.is_dir():    # a missing accuracy folder is reported above
            check_artefacts(ctx, acc / folder, names, whole, fix)


def check_artefacts(ctx: ScenarioContext, folder: Path, names: tuple[str, ...], whole: bool, fix: str) -> None:
    """main.py extra_files_check (both divisions): each named file (any extension) and a captions file in the
    folder. An accuracy run of part of the data set has not made them all: a development run gets a warning."""
    stems = {p.name.split(".")[0] for p in folder.iterdir()} if folder.is_dir() else set()
    missing = [n for n in (*names, "captions") if n not in stems]
    if missing:
        what = "it is missing" if not folder.is_dir() else f"it lacks {', '.join(missing)}"
        ctx.report(ctx.relaxed if not whole else ERROR, folder,
                   f"the checkers ask accuracy/{folder.name}/ to hold {', '.join(names)} and captions.txt, and "
                   f"{what}; an accuracy run of the whole data set writes them: {fix}.")


def _read_text(ctx: ScenarioContext, path: Path, fix: str) -> str | None:
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        ctx.report(ERROR, path, f"{path.name} cannot be read ({exc}); {fix}.")
        return None


def _check_accuracy_value(ctx: ScenarioContext, path: Path, text: str, whole: bool, fix: str) -> None:
    """Each line against the round's pattern of every metric (re.match): at least one match of one metric (old,
    every division); in closed every metric matched (both), every match at or above its target and, where the
    round sets one (an LLM's generated length), at or below its upper limit (both)."""
    bench = ctx.benchmark
    if bench is None:
        return
    bounds = bench.accuracy_bounds(ctx.target or bench.accuracy_targets[0], ctx.scenario)
    values: dict[str, list[float]] = {bound.name: [] for bound in bounds}
    for line in text.splitlines():
        for bound in bounds:
            found = re.match(bound.pattern, line)
            if found:
                try:
                    values[bound.name].append(float(found.group(1)))
                except (IndexError, ValueError):
                    pass
    names = " / ".join(bound.name for bound in bounds) if bench.accuracy_metrics else bench.accuracy_metric
    if not any(values.values()):
        # Its first line says why where the run could not score (a benchmark whose scorer is not at hand).
        said = next((line.strip() for line in text.splitlines() if line.strip()), "")
        said = f" (it says: {said[:300]})" if said and not HASH_LINE.match(said) else ""
        ctx.report(ERROR, path, f"{ACCURACY_TXT} holds no {names} line matching the round's pattern{said}, so "
                                f"this is no valid result; {fix}.")
        return
    if not ctx.closed or ctx.target is None:
        return   # open division: the value is reported, not gated
    missing = [bound.name for bound in bounds if not values[bound.name]]
    if missing:
        ctx.report(ERROR, path, f"{ACCURACY_TXT} has no {', '.join(missing)} value, and the checkers need every one "
                                f"of {names} in the closed division; score the run with the benchmark's accuracy "
                                f"script and {fix}.")
    problems = []
    for bound in bounds:
        read = values[bound.name]
        label = bound.name if bench.accuracy_metrics else bench.accuracy_metric
        if read and min(read) < bound.minimum:
            share = f"{ctx.target.percent_label} %" if bound.minimum == bound.reference * ctx.target.fraction \
                else f"{bound.minimum / bound.reference * 100:g} %"
            problems.append(f"{label} {min(read):.10g} is below the closed-division target {bound.minimum:.10g} "
                            f"({share} of {bound.reference:.10g})")
        if read and bound.maximum is not None and max(read) > bound.maximum:
            problems.append(f"{label} {max(read):.10g} is above the upper limit {bound.maximum:.10g} "
                            f"({bound.maximum / bound.reference * 100:g} % of {bound.reference:.10g})")
    if problems:
        # A score on part of the data set means little, so a development run only gets a warning for it.
        level = WARNING if ctx.allow_test_runs and not whole else ERROR
        ctx.report(level, path, f"{'; '.join(problems)}; fix the model or its calibration and {fix}.")


def _check_hash(ctx: ScenarioContext, path: Path, text: str, level: str) -> None:
    if not any(HASH_LINE.match(line) for line in text.splitlines()):
        ctx.report(level, path, f"{ACCURACY_TXT} has no hash=<sha256> line of the full accuracy log; "
                                f"run make truncate_results.")


def _check_size(ctx: ScenarioContext, path: Path, level: str) -> None:
    try:
        size = path.stat().st_size
    except OSError:
        return   # missing: reported by _require
    limit = ctx.rules.accuracy_log_max_bytes
    if size > limit:
        ctx.report(level, path, f"{ACCURACY_LOG} is {size} bytes, over the {limit} bytes allowed; "
                                f"run make truncate_results.")


def check_measurements(ctx: ScenarioContext, user_conf: bool = True) -> None:
    """MeasurementsCheck / check_measurement_dir: measurements.json with truthy fields, user.conf (not of an
    endpoints tree) and README.md not empty."""
    fix = "run make generate_conf_files then make stage_results"
    data = read_json_object(ctx.report, ctx.folder / MEASUREMENTS_JSON, fix)
    for name in MEASUREMENTS_FIELDS if data is not None else ():
        if data is not None and is_falsy(data.get(name)):
            state = "has no" if data.get(name) in (None, "") else f"has {data.get(name)!r}, which the checkers read " \
                                                                  f"as no value, for"
            ctx.report(ERROR, ctx.folder / MEASUREMENTS_JSON,
                       f"{MEASUREMENTS_JSON} {state} {name}; fill it in (make generate_conf_files) and re-run "
                       f"make stage_results.")
    for name in (USER_CONF, README) if user_conf else (README,):   # SYSTEM_IMP_REQUIRED_FILES of the checkers
        path = ctx.folder / name
        text = _read_text(ctx, path, fix) if path.is_file() else None
        if text is None or not text.strip():
            state = "empty" if path.is_file() else "missing"
            ctx.report(ERROR, path, f"{name} is {state}; {fix}.")


def check_compliance(ctx: ScenarioContext) -> None:
    """ComplianceCheck / check_compliance_dir: closed division only (both checkers skip open). Each test's
    verdicts (audit.verdicts) and, for a test that compares performance, its performance run, checked as the
    submission run is. A test the toolkit runs but the checkers do not ask of the benchmark (TEST06 of
    llama3.1-8b-edge) gets warnings only."""
    if ctx.benchmark is None:
        return
    if not ctx.closed:
        return   # the checkers read no TEST0x/ in the open division, whatever it holds
    for test in ctx.benchmark.compliance_tests:
        folder = ctx.folder / test
        fix = f"run {ctx.audit(test)} then make stage_compliance"
        required = test in ctx.benchmark.checked_compliance_tests
        if not folder.is_dir():
            if required:
                ctx.report(ERROR, folder, f"compliance test folder {test}/ is missing; {fix}.")
            continue
        spec = ctx.rules.compliance_tests[test]
        level, note = (ERROR, "") if required else \
            (WARNING, f" (the official checkers do not ask {test} of this benchmark, so it does not fail the tree)")
        for path, problem in verdict_problems(folder, spec, ctx.benchmark, ctx.target, ctx.rules):
            ctx.report(level, path, f"{problem}{note}; fix the cause of the failure and {fix}.")
        if spec.compares_performance and required:
            check_performance_run(ctx, performance_run_dir(folder), fix)
        if spec.checks_output_tokens and not (folder / TEST06_ACCURACY_LOG).is_file():
            ctx.report(WARNING, folder / TEST06_ACCURACY_LOG,
                       f"{test}/{TEST06_ACCURACY_LOG.as_posix()} is missing: the checkers do not read it, but "
                       f"run_verification.py lays out the sampled responses there for reviewers; {fix}.")
        if spec.samples_accuracy and accuracy_dir(folder).is_dir():
            acc = accuracy_dir(folder)
            if (acc / ACCURACY_TXT).is_file():
                text = _read_text(ctx, acc / ACCURACY_TXT, fix)
                if text is not None:
                    _check_hash(ctx, acc / ACCURACY_TXT, text, WARNING)
            _check_size(ctx, acc / ACCURACY_LOG, WARNING)
