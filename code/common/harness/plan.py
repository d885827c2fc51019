"""The plan of a multi-test command (run_harness, run, run_audit_harness): each LoadGen test it will run, how long
it is expected to take and how much it writes, and the totals. Printed before the first test starts; `--dry_run`
prints it and stops; a plan whose logs would not fit the free space of their file system stops the command
before anything runs.

The length of a test is LoadGen's (6.0.17: loadgen/test_settings_internal.cc, loadgen.cc) applied to the user.conf
the test gets (settings.user_conf_lines, which shortens test runs) over the round's defaults (rules tables):
- Offline issues one query of max(min_query_count, int(1.1 x min_duration x target_qps)) samples;
- SingleStream and MultiStream issue queries, one at a time, until both min_duration and min_query_count are
  reached, from a list pre-generated for max(min_query_count, 2 x min_duration x target_qps) queries;
- Server issues max(min_query_count, min_duration x target_qps) queries at target_qps;
- AccuracyOnly issues every sample of the data set once.
A compliance test's audit.config overrides user.conf as it does in LoadGen (TEST06: 100 queries, no min_duration).
The speed is the newest earlier run of the same system, benchmark, scenario and speed-defining fields when there
is one ("measured"), else the config's expected QPS or latency ("from config"). An LLM's measured figure is
tokens per second (Offline, Server); the plan counts samples, so it divides by the tokens a sample generates at
most, the run's max_output_tokens (by default the benchmark's reference cap: llama3.1-8b's 128). The reference's summaries nearly fill it (its GEN_LEN,
8,167,644 characters over 13,368 samples, is 611 characters a summary, what 128 tokens of English at 4 to 5
characters a token make), it is known before any run, and where outputs end earlier the plan errs on the long
side, never promising less time than a test takes. Disk: each test's small logs (detail and summary logs,
user.conf, run_spec.json, metadata.json) and its accuracy log, where LoadGen writes each logged response as hex
(two characters a byte) in a JSON entry: every sample in AccuracyOnly, a sampled share of them in TEST01's
performance run, none otherwise. The engine does not change any of it.
A test whose harness brings its own load generator (the endpoints client) is estimated by that harness from what
it will issue (HarnessPlugin.plan_own_test, endpoints_client/plan.py), not as LoadGen's.
"""
from __future__ import annotations

import dataclasses
import math
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..constants import Scenario, TestMode
from ..disk_full import existing_folder, format_bytes
from ..errors import EXIT_FAILURE, UserError
from ..rules import BenchmarkRules, RulesRound
from ..records.metadata import COMPLETED
from .planned import LOADGEN, EarlierRun, PlannedTest, Speed, earlier_runs, format_duration
from .resume import AskedFor, find_attempts, refuse_other_settings, resume_test
from .settings import STREAM_LATENCY_FIELDS

MEASURED, FROM_CONFIG = "measured", "from config"
OFFLINE_SLACK = 1.1          # kSlack of test_settings_internal.cc: Offline's query covers 1.1 x min_duration
STREAM_GENERATED = 2         # GenerateQueries: SingleStream/MultiStream queries for 2 x min_duration
SMALL_LOGS_BYTES = 64 * 1024   # detail (~30 KB) and summary logs, user.conf, run_spec.json, metadata.json
# `{ "seq_id" : , "qsl_idx" : , "data" : "" },` and a line break: an accuracy-log entry less its numbers and hex.
ACCURACY_ENTRY_BYTES = 44
ACCURACY_LOG_FRAME_BYTES = 4     # "[", "]" and line breaks around the entries
# Config fields that change the speed of a test: an earlier run is its measurement only when they all agree.
SPEED_FIELDS = ("model", "backend", "harness_impl", "precision", "batch_size", "instances", "intra_op_threads",
                "intra_op_spinning", "inter_op_threads", "start_from_device", "multi_stream_samples_per_query",
                "max_input_tokens", "max_output_tokens", "prefill_batch", "prefill_chunk_tokens")
# Speed fields a record may lack (made before they existed, or of a backend without them): the value it ran with.
SPEED_FIELD_DEFAULTS = {"intra_op_spinning": True, "inter_op_threads": 1}
TOKENS_PER_S = "tokens/s"          # the unit of an LLM's Offline and Server figure
OUTPUT_TOKENS_FIELD = "max_output_tokens"   # the tokens a sample generates at most
# The keys of user.conf and audit.config that size a test (LoadGen's names, after `<model>.<Scenario>.`).
SIZING_KEYS = ("target_qps", "target_latency", "min_duration", "min_query_count", "samples_per_query",
               "performance_issue_unique")


def _speed_value(fields: Mapping[str, Any], name: str) -> Any:
    return fields.get(name, SPEED_FIELD_DEFAULTS.get(name))


def find_measurement(runs: Sequence[EarlierRun], system_id: str, benchmark: str, scenario: Scenario,
                     fields: Mapping[str, Any], mode: TestMode = TestMode.PerformanceOnly) -> EarlierRun | None:
    """The newest completed performance run (not a compliance or bench run) of the same system, benchmark,
    scenario and speed-defining fields, with a figure; VALID or not, its speed is real. `mode` AccuracyOnly: the
    newest such accuracy run with a measured part (a client test's)."""
    measured = (lambda r: (r.metric or 0) > 0) if mode is TestMode.PerformanceOnly else \
        (lambda r: (r.measured_s or 0) > 0 and (r.accuracy_samples or 0) > 0)
    same = [r for r in runs if r.status == COMPLETED and r.test_mode == mode.value
            and r.audit_test is None and r.purpose == "submission" and r.system_id == system_id
            and r.benchmark == benchmark and r.scenario == scenario.value and measured(r)
            and all(_speed_value(r.fields, name) == _speed_value(fields, name) for name in SPEED_FIELDS)]
    return max(same, key=lambda r: r.finished, default=None)


# -- LoadGen's settings and speed ------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadGenSettings:
    """The settings that size a test, as LoadGen reads them (round defaults, then user.conf)."""

    min_duration_s: float
    min_query_count: int
    target_qps: float           # queries per second: Offline and Server as set, SS/MS 1 / target latency
    samples_per_query: int = 1  # MultiStream's; 1 elsewhere (Offline's one query is sized by `estimate`)
    # audit.config's performance_issue_unique (TEST07, TEST09): each loaded sample issued once, so a test issues no
    # more samples than the data set holds, whatever min_query_count asks.
    issue_unique: bool = False


def loadgen_settings(scenario: Scenario, user_conf: Sequence[str], rules_round: RulesRound,
                     rules: BenchmarkRules) -> LoadGenSettings:
    """From the lines of user.conf (`<model>.<Scenario>.<key> = <value>`), and of an audit.config after them (a
    later line wins, as audit.config overrides user.conf in LoadGen), over the round's defaults."""
    values: dict[str, float] = {}
    for line in user_conf:
        key, _, value = line.partition("=")
        name = key.strip().rsplit(".", 1)[-1]
        if not line.lstrip().startswith("#") and name in SIZING_KEYS:
            values[name] = float(value)
    default_count = rules.offline_min_samples if scenario is Scenario.Offline and rules.offline_min_samples \
        else rules_round.min_query_count.get(scenario, 1)
    if scenario is Scenario.Offline or scenario.server_like:
        target_qps = values["target_qps"]
    else:
        target_qps = 1000.0 / values["target_latency"]     # target_latency is in ms
    return LoadGenSettings(
        min_duration_s=values.get("min_duration", rules_round.min_duration_ms) / 1000,
        min_query_count=int(values.get("min_query_count", default_count)),
        target_qps=target_qps,
        samples_per_query=int(values.get("samples_per_query", 1)) if scenario is Scenario.MultiStream else 1,
        issue_unique=bool(values.get("performance_issue_unique", 0)))


def config_speed(scenario: Scenario, fields: Mapping[str, Any], settings: LoadGenSettings) -> Speed:
    if scenario is Scenario.Offline:
        return Speed(settings.target_qps, FROM_CONFIG, f"offline_expected_qps={settings.target_qps:g}")
    if scenario.server_like:
        return Speed(settings.target_qps, FROM_CONFIG, f"server target {settings.target_qps:g} QPS")
    # The config's latency, not user.conf's target_latency: a test run may lower that one (more queries generated)
    name = STREAM_LATENCY_FIELDS[scenario]
    per_query_s = fields[name] / 1e9
    return Speed(settings.samples_per_query / per_query_s, FROM_CONFIG,
                 f"{name}={fields[name]}, {_query_time(per_query_s)} per query")


def _query_time(seconds: float) -> str:
    """A query's time as people read it: ms under a second, seconds from there (a video takes minutes)."""
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def measured_speed(scenario: Scenario, run: EarlierRun, settings: LoadGenSettings) -> Speed | None:
    """The speed an earlier run measured; None when its figure cannot be read as samples/s (tokens/s of a run
    without max_output_tokens)."""
    where = f"in {run.folder}"
    if scenario is Scenario.Offline or scenario.server_like:
        if run.metric_unit != TOKENS_PER_S:
            return Speed(float(run.metric), MEASURED, f"{run.metric:.4g} samples/s {where}")
        tokens = run.fields.get(OUTPUT_TOKENS_FIELD)
        if not tokens:
            return None
        return Speed(float(run.metric) / tokens, MEASURED, f"{run.metric:.4g} tokens/s {where}, at most {tokens} "
                                                           f"output tokens a sample ({OUTPUT_TOKENS_FIELD})")
    # The scenario's latency percentile (a little pessimistic), in ms or, where the checker reports the benchmark's
    # latency in seconds (BenchmarkRules.latency_unit), in s.
    seconds = run.metric_unit == "s"
    per_query_s = float(run.metric) / (1 if seconds else 1000)
    return Speed(settings.samples_per_query / per_query_s, MEASURED,
                 f"{run.metric:.4g} {'s' if seconds else 'ms'} per query {where}")


def estimate(scenario: Scenario, mode: TestMode, settings: LoadGenSettings, speed: Speed, dataset_size: int,
             response_bytes: int, sampling_target: int | None = None) -> tuple[int, int, float, int]:
    """(queries, samples, seconds, logged responses) of one test; `sampling_target`: TEST01's
    accuracy_log_sampling_target, whose responses a performance run logs."""
    spq = settings.samples_per_query
    if mode is TestMode.AccuracyOnly:
        rate = min(speed.samples_per_s, settings.target_qps) if scenario.server_like else speed.samples_per_s
        queries = 1 if scenario is Scenario.Offline else math.ceil(dataset_size / spq)
        return queries, dataset_size, dataset_size / rate, dataset_size
    if scenario is Scenario.Offline:
        samples = max(settings.min_query_count, int(OFFLINE_SLACK * settings.min_duration_s * settings.target_qps))
        if settings.issue_unique:
            samples = min(samples, dataset_size)
        queries, seconds = 1, samples / speed.samples_per_s
    elif scenario.server_like:
        queries = max(settings.min_query_count, math.ceil(settings.min_duration_s * settings.target_qps))
        if settings.issue_unique:
            queries = min(queries, dataset_size)
        samples, seconds = queries, queries / min(settings.target_qps, speed.samples_per_s)   # or falls behind
    else:
        rate = speed.samples_per_s / spq     # queries per second, one at a time
        generated = max(settings.min_query_count, int(STREAM_GENERATED * settings.min_duration_s * settings.target_qps))
        queries = min(generated, max(settings.min_query_count, math.ceil(settings.min_duration_s * rate)))
        samples, seconds = queries * spq, queries / rate
    logged = sampled_responses(scenario, settings, samples, sampling_target) if sampling_target else 0
    return queries, samples, seconds, logged


def equal_issue_padded(scenario: Scenario, queries: int, samples: int, seconds: float,
                       loaded: int) -> tuple[int, int, float]:
    """(queries, samples, seconds) of a performance test in equal-issue mode (mlperf.conf's
    sample_concatenate_permutation, e.g. the LLMs): LoadGen (loadgen.cc GenerateQueries) pads Offline's query, and
    the other scenarios' query count, up to a multiple of the loaded performance sample set."""
    padded = math.ceil(samples / loaded) * loaded if loaded > 0 else samples
    if padded == samples:
        return queries, samples, seconds
    scale = padded / samples
    return (queries if scenario is Scenario.Offline else math.ceil(queries * scale)), padded, seconds * scale


def sampled_responses(scenario: Scenario, settings: LoadGenSettings, samples: int, sampling_target: int) -> int:
    """Responses a performance run logs with accuracy_log_sampling_target: LoadGen (loadgen.cc IssueQueries) logs
    each with probability target / expected samples, expected = max(target_qps x min_duration (x samples per
    query), min_query_count x samples per query; Offline: its query's samples)."""
    spq = 1 if scenario is Scenario.Offline else settings.samples_per_query
    minimum = samples if scenario is Scenario.Offline else settings.min_query_count * spq
    expected = max(int(settings.target_qps * settings.min_duration_s) * spq, minimum, 1)
    return min(samples, round(sampling_target * samples / expected))


def accuracy_log_bytes(entries: int, dataset_size: int, response_bytes: int) -> int:
    """mlperf_log_accuracy.json of `entries` responses: each `{ "seq_id" : n, "qsl_idx" : i, "data" : "<hex>" }`
    (digits counted at their widest)."""
    if entries <= 0:
        return ACCURACY_LOG_FRAME_BYTES
    digits = len(str(max(entries - 1, 0))) + len(str(max(dataset_size - 1, 0)))
    return ACCURACY_LOG_FRAME_BYTES + entries * (ACCURACY_ENTRY_BYTES + digits + 2 * response_bytes)


def dataset_size(benchmark, dataset: str, rules: BenchmarkRules) -> int:
    """Samples of the data set, known before it is downloaded; the round's size where the plug-in declares none."""
    declared = benchmark.datasets[dataset].sample_count
    return int(declared) if declared else rules.dataset_size


def response_bytes(benchmark, model: str) -> int:
    """Bytes of one sample's response in the accuracy log (before LoadGen writes them as hex)."""
    response = benchmark.response
    records = benchmark.models[model].typical_response_records
    return int(records * response.record_bytes if records is not None and response.variable else response.typical_bytes)


def plan_entry(ctx, benchmark_name: str, scenario: Scenario, mode: TestMode, runs: Sequence[EarlierRun], *,
               audit_test: str | None = None, qps_scale: float = 1.0, folder: Path | None = None,
               copies: int = 1) -> PlannedTest:
    """The estimate of one test as `ctx` would run it. `copies`: how many times its logs are kept (a compliance
    test's verdict folder holds a second copy)."""
    from .runner import check_selection
    from .settings import effective_dataset_size, performance_sample_count, samples_responses, user_conf_lines
    from .subset import checked_subset

    config = ctx.resolve(benchmark_name, scenario, mode)
    fields = config.values
    benchmark, model_spec, rules = check_selection(ctx, benchmark_name, fields)
    own = own_estimate(ctx, config, benchmark, scenario, mode, runs)
    if own is not None:
        speed = Speed(1 / own.per_query_s, MEASURED if own.measured else FROM_CONFIG, own.basis)
        return PlannedTest(benchmark_name, scenario, mode, audit_test, own.queries, own.queries, own.seconds, 0,
                           copies * SMALL_LOGS_BYTES, speed, folder=folder, load_generator=own.load_generator,
                           basis=own.notes)
    prepared, _, subset = checked_subset(ctx, benchmark, model_spec, fields)
    size = effective_dataset_size(fields, prepared or dataset_size(benchmark, fields["dataset"], rules))
    user_conf = user_conf_lines(rules.loadgen_model_for(scenario), scenario, fields, rules, size, ctx.args.test_run,
                                qps_scale, samples_responses(ctx.rules, rules, audit_test))
    audit_lines = ctx.rules.compliance_tests[audit_test].audit_config if audit_test else ()
    settings = loadgen_settings(scenario, [*user_conf, *audit_lines], ctx.rules, rules)
    measurement = find_measurement(runs, ctx.system.system_id, benchmark_name, scenario, fields)
    refuse_unmeasured_figure(ctx, config, mode, audit_test, measurement)
    speed = (measured_speed(scenario, measurement, settings) if measurement else None) or \
        config_speed(scenario, fields, settings)
    sampling = ctx.rules.compliance_tests[audit_test].sampling_target(rules) if audit_test else None
    response = response_bytes(benchmark, fields["model"])
    queries, samples, seconds, logged = estimate(scenario, mode, settings, speed, size, sampling_target=sampling,
                                                 response_bytes=response)
    if rules.equal_issue and mode is TestMode.PerformanceOnly and \
            not any("sample_concatenate_permutation = 0" in line for line in audit_lines):
        queries, samples, seconds = equal_issue_padded(scenario, queries, samples, seconds,
                                                       performance_sample_count(fields, rules, size))
    disk = copies * (SMALL_LOGS_BYTES + accuracy_log_bytes(logged, size, response))
    on_device = device_set(benchmark, fields, performance_sample_count(fields, rules, size)) \
        if fields.get("start_from_device") else None
    return PlannedTest(benchmark_name, scenario, mode, audit_test, queries, samples, seconds, logged, disk, speed,
                       folder=folder, device_set=on_device,
                       subset=f"{fields['dataset']} is {subset}: the figures are this part's" if subset else None)


def own_estimate(ctx, config, benchmark, scenario: Scenario, mode: TestMode, runs: Sequence[EarlierRun]):
    """The estimate of a harness whose own load generator runs the test (the endpoints client), from what it will
    do and the newest earlier run of the same computation; None for a LoadGen test."""
    from ..errors import UserError
    from .selection import choose

    try:
        harness = choose(config, ctx.args.workload.harness_type.value, ctx.paths.build)
    except UserError:
        return None     # no harness can run it: the test's own preflight says why
    if not harness.own_load_generator:
        return None
    earlier = find_measurement(runs, ctx.system.system_id, benchmark.name, scenario, config.values)
    accuracy = find_measurement(runs, ctx.system.system_id, benchmark.name, scenario, config.values,
                                TestMode.AccuracyOnly) if mode is TestMode.AccuracyOnly else None
    return harness.plan_own_test(benchmark, config.values, mode, bool(ctx.args.test_run), earlier,
                                 ctx.rules.min_duration_ms / 1000, STREAM_LATENCY_FIELDS.get(scenario, ""), accuracy,
                                 scenario=scenario.value)


def device_set(benchmark, fields: Mapping[str, Any], samples: int) -> tuple[int, int]:
    """(samples, bytes) of the performance set a GPU holds with start_from_device: every input of every sample
    LoadGen loads, as the preprocessed set stores it (inputs of varying shape at their largest bucket)."""
    import numpy as np

    sample_bytes = 0
    for spec in benchmark.models[fields["model"]].inputs:
        sizes = [size if size is not None else max(spec.padding.buckets) if spec.padding and spec.padding.buckets
                 else 0 for size in spec.shape]
        sample_bytes += int(np.prod(sizes, dtype=np.int64)) * np.dtype(spec.dtype).itemsize
    return samples, samples * sample_bytes


def refuse_unmeasured_figure(ctx, config, mode: TestMode, audit_test: str | None,
                             measurement: EarlierRun | None) -> None:
    """UserError when a test would run on the shipped config's QPS figure (NVIDIA's) without a measurement of this
    machine (first_run.py says which tests and backends, and the commands that measure)."""
    from .first_run import QPS_FIELDS, FirstRunCheck, origin_of, refusal

    field = QPS_FIELDS.get(config.scenario)
    if field is None or audit_test is not None:
        return
    _, config_class = ctx.registry.lookup(config.benchmark, config.scenario, [config.key.system_id],
                                          config.key.workload)
    measured = None
    if measurement is not None and measurement.metric_unit != TOKENS_PER_S:
        measured = float(measurement.metric)
    check = FirstRunCheck(config.benchmark, config.scenario, config["backend"], mode, bool(ctx.args.test_run), field,
                          config[field], origin_of(config_class, field, config.sources[field]), measured,
                          str(measurement.folder) if measurement is not None else "")
    reason = refusal(check)
    if reason is not None:
        raise UserError(reason)


def plan_harness(ctx, selection: Sequence[tuple[str, Scenario, TestMode]]) -> Plan:
    """The plan of run_harness and run: one test per (benchmark, scenario, test mode) in LOG_DIR. With --resume,
    what LOG_DIR holds of a test decides whether it is skipped, runs, or runs again into a retry folder."""
    from ..records.metadata import skipped_line
    from .first_run import measured_layout

    paths, unreadable = ctx.paths, {}

    def skipped(path: Path, reason: str) -> None:
        unreadable[Path(path).parent.resolve()] = reason
        ctx.log(skipped_line(path, reason))

    runs = earlier_runs([paths.logs_root, paths.log_dir], skipped)
    tests, made_otherwise = [], []
    for benchmark, scenario, mode in selection:
        folder = None if paths.log_dir_is_default else \
            paths.run_log_dir(ctx.system.system_id, benchmark, scenario, mode)
        test = plan_entry(ctx, benchmark, scenario, mode, runs, folder=folder)
        if ctx.args.resume and folder is not None:
            config = ctx.resolve(benchmark, scenario, mode)
            asked = AskedFor.of(config.values, ctx.args.test_run, config.workload.name, ctx.args.endpoints,
                                untuned=measured_layout(config).get("fields", ()))
            attempts = find_attempts(folder, runs, unreadable, asked)
            if attempts.other_settings is not None:
                made_otherwise.append(f"{test.label} in {attempts.other_settings}")
            test = resume_test(test, attempts, ctx.args.retries)
        elif ctx.args.resume:    # nothing to resume: a first attempt, run again like any under --resume
            test = dataclasses.replace(test, retries_left=ctx.args.retries)
        tests.append(test)
    refuse_other_settings(paths.log_dir, made_otherwise)
    new = "a new folder, created when the first test starts" if paths.log_dir_is_default else ""
    return Plan(tuple(tests), paths.log_dir, new, notes=untuned_notes(ctx, selection))


def untuned_notes(ctx, selection: Sequence[tuple[str, Scenario, TestMode]]) -> tuple[str, ...]:
    """One note per benchmark and scenario whose performance test runs a layout tuned nowhere, or the layout make
    tune wrote on another engine than it was measured on (first_run.py)."""
    from .first_run import LAYOUT_FIELDS, other_engine_note, typed_engine_flags, untuned_layout_note

    notes: dict[tuple[str, Scenario], str] = {}
    for benchmark, scenario, mode in selection:
        if (benchmark, scenario) in notes:
            continue
        config = ctx.resolve(benchmark, scenario, mode)
        if not _layout_tunable(ctx, config):
            continue     # a served harness: the layout never reaches the engine, make tune does not apply
        found = ctx.registry.lookup(benchmark, scenario, [config.key.system_id], config.key.workload)
        note = untuned_layout_note(benchmark, scenario, config["backend"], mode, bool(ctx.args.test_run),
                                   found[1] if found else None,
                                   {f: config.sources[f] for f in LAYOUT_FIELDS if f in config.sources},
                                   {f: config[f] for f in LAYOUT_FIELDS if f in config.values},
                                   typed_engine_flags(config.values, config.sources))
        if note is None and mode is TestMode.PerformanceOnly:
            note = other_engine_note(benchmark, scenario, ctx.paths.tune_dir(ctx.system.system_id, benchmark, scenario),
                                     dict(config.values))
        if note:
            notes[(benchmark, scenario)] = note
    return tuple(notes.values())


def _layout_tunable(ctx, config) -> bool:
    """Whether make tune's layouts reach the engine of this test's harness (not a served one's)."""
    from ..errors import UserError
    from .selection import choose

    try:
        harness = choose(config, ctx.args.workload.harness_type.value, ctx.paths.build)
    except UserError:
        return True     # no harness can run it: the test's own preflight says why
    return harness.layout_tunable(ctx.args) is None


# -- the whole plan ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    tests: tuple[PlannedTest, ...]
    where: Path                   # the folder the logs go to (its file system is checked for space)
    where_note: str = ""          # e.g. "a new LOG_DIR, created when the first test starts"
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def to_run(self) -> tuple[PlannedTest, ...]:
        return tuple(t for t in self.tests if not t.skip)

    @property
    def duration_s(self) -> float:
        return sum(t.duration_s for t in self.to_run)

    @property
    def disk_bytes(self) -> int:
        return sum(t.disk_bytes for t in self.to_run)

    def lines(self, free_bytes: int | None = None) -> list[str]:
        where = f"{self.where} ({self.where_note})" if self.where_note else str(self.where)
        lines = [f"Plan: {len(self.tests)} test{'s' if len(self.tests) != 1 else ''}, logs in {where}", *self.notes]
        for test in self.tests:
            lines += test.lines()
        skipped = len(self.tests) - len(self.to_run)
        free = f" ({format_bytes(free_bytes)} free there)" if free_bytes is not None else ""
        loadgen = all(t.load_generator == LOADGEN for t in self.to_run)
        what = "LoadGen tests (plus each test's start-up: engine and samples loaded, warm-up)" if loadgen else \
            "tests (their start-up as each says)"
        lines.append(f"Total: {len(self.to_run)} to run{f', {skipped} skipped' if skipped else ''}; about "
                     f"{format_duration(self.duration_s)} of {what}, {format_bytes(self.disk_bytes)} of logs{free}.")
        return lines


def free_space(path: Path) -> int:
    """Free bytes of the file system `path` will be on."""
    return shutil.disk_usage(existing_folder(path)).free


def space_problem(plan: Plan, free_bytes: int) -> str | None:
    """Why the plan's logs would not fit `free_bytes`, the free space of their file system; None when they fit."""
    if plan.disk_bytes <= free_bytes:
        return None
    return (f"The plan writes about {format_bytes(plan.disk_bytes)} of logs into {plan.where}, but its file system "
            f"({existing_folder(plan.where)}) has only {format_bytes(free_bytes)} free. Free some space, or set "
            f"LOG_DIR to a folder on a larger disk")


def check_free_space(plan: Plan, free_bytes: int | None = None) -> None:
    """UserError (exit 1) when the plan's logs would not fit the free space of their file system (measured when
    `free_bytes` is None)."""
    problem = space_problem(plan, free_space(plan.where) if free_bytes is None else free_bytes)
    if problem:
        raise UserError(f"{problem}; nothing was run.", exit_code=EXIT_FAILURE)


def announce(plan: Plan, dry_run: bool, log: Callable[[str], None], free_bytes: int) -> bool:
    """Print the plan; False for a dry run, which ends there. UserError (exit 1) before anything starts when the
    logs would not fit `free_bytes`, the free space of their file system."""
    for line in plan.lines(free_bytes):
        log(line)
    if dry_run:
        problem = space_problem(plan, free_bytes)
        log("Dry run: nothing was run, downloaded or written." + (f"\nNote: {problem}." if problem else ""))
        return False
    check_free_space(plan, free_bytes)
    return True
