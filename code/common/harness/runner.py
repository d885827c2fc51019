"""The parent side of the harness: plan each LoadGen test, run it in a child process, report it.

A stop signal (Ctrl-C, or SIGTERM/SIGHUP raised as KeyboardInterrupt by code.main) is forwarded to the child,
the test is recorded as interrupted (so staging never takes it for a result) and the interrupt propagates; a
parent that dies without a chance to forward anything takes the child with it (processes.py). A child that
dies without a record gets a `failed` one. Only a compliance test hands LoadGen an audit.config; every other
test refuses a run folder that holds one. A test that failed because the disk filled stops the command (exit
status 1, the record's sentence): the tests after it would find the disk as full.
"""
from __future__ import annotations

import errno
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

from ..benchmark_api import generative, get_benchmark, samples_for_run
from ..constants import Scenario, TestMode
from ..disk_full import DiskFull, disk_full_cause, disk_full_sentence, is_disk_full_sentence, looks_full, why
from ..errors import EXIT_FAILURE, UserError, choose
from ..paths import AUDIT_CONFIG, RUN_RECORD
from ..processes import signal_name, start_in_group, stop_group, watch_pipe
from .claim import claim_run_dir, refuse_used_run_dir
from ..records.metadata import FAILED, INTERRUPTED, RunRecord, read_metadata, write_metadata
from .settings import performance_sample_count, samples_responses, user_conf_lines
from .spec import RunSpec

CHILD = "code.common.harness.child"
STOP_GRACE_S = 10             # how long a stopped child may take to write its record before SIGKILL


def plan_test(ctx, benchmark_name: str, scenario: Scenario, mode: TestMode, log_dir: Path | None = None,
              audit_test: str | None = None, audit_config: list[str] | None = None,
              qps_scale: float = 1.0, purpose: str = "submission") -> RunSpec:
    """Resolve and check everything a test needs before any process starts."""
    from .engine_build import locate_engine
    from ..engines.input_samples import engine_samples
    from ..preprocessed_store import set_identity
    from .first_run import measured_layout, tuned_layout
    from .subset import checked_subset
    from .selection import choose, refuse_served_only

    config = ctx.resolve(benchmark_name, scenario, mode)
    fields = config.values
    benchmark, model_spec, rules = check_selection(ctx, benchmark_name, fields)
    harness = choose(config, ctx.args.workload.harness_type.value, ctx.paths.build)
    refuse_served_only(harness, model_spec)
    harness.preflight(fields, ctx.args, ctx.paths)
    model, dataset = fields["model"], fields["dataset"]
    prepared, published, _ = checked_subset(ctx, benchmark, model_spec, fields)
    target = ctx.args.workload_for(benchmark_name).accuracy_target
    samples = samples_for_run(engine_samples(benchmark, fields, ctx.paths),   # int8 form for input_dtype=int8
                              mode is TestMode.AccuracyOnly, audit_test)
    if harness.needs_engine:
        engine = locate_engine(config, ctx.system.system_id, ctx.paths, benchmark)
        manifest = json.loads(ctx.paths.engine_manifest(engine).read_text())
    else:
        harness.check_model(benchmark, fields, ctx.paths)
        engine, manifest = "", {}
    run_dir = log_dir or ctx.paths.run_log_dir(ctx.system.system_id, benchmark_name, scenario, mode)
    refuse_taken_run_dir(run_dir, ctx.paths.log_dir, audit=bool(audit_config))
    loadgen_model = rules.loadgen_model_for(scenario)
    tuned = tuned_layout(ctx.paths.tune_dir(ctx.system.system_id, benchmark_name, scenario), fields)
    return RunSpec(
        benchmark=benchmark_name, model=model, dataset=dataset, division=model_spec.division,
        scenario=scenario.value, test_mode=mode.value, loadgen_model=loadgen_model, log_dir=str(run_dir),
        scratch=str(ctx.paths.scratch), engine=str(engine), engine_manifest=manifest,
        config={**config.as_dict(), "tuned_layout": tuned, "measured_layout": measured_layout(config)},
        system={"id": ctx.system.system_id, "known": ctx.system.is_known, "description": ctx.system.describe(),
                "system_type": ctx.system.system_type.value, "hardware": ctx.system.info.as_dict()},
        user_conf=user_conf_lines(loadgen_model, scenario, fields, rules, len(samples), ctx.args.test_run, qps_scale,
                                  samples_responses(ctx.rules, rules, audit_test)),
        performance_sample_count=performance_sample_count(fields, rules, len(samples)),
        cpu_cores=ctx.system.info.cpu.cores, test_run=ctx.args.test_run, rules_version=ctx.rules.version,
        accuracy_threshold=rules.accuracy_threshold(target, scenario) if model_spec.division == "closed" else None,
        accuracy_target=target.value if model_spec.division == "closed" else None,
        invocation=ctx.args.invocation(mode, benchmark_name), purpose="audit" if audit_test else purpose,
        audit_test=audit_test, audit_config=list(audit_config or []),
        harness=harness.name, harness_options=harness.run_options(ctx.args, ctx.paths),
        data={**set_identity(samples.directory), "samples": prepared, "published_samples": published},
    )


def check_selection(ctx, benchmark_name: str, fields: Mapping[str, Any]):
    """(benchmark, model spec, benchmark rules) of a test; UserError when its model, data set or accuracy target
    is not one the benchmark has. Needs nothing on disk, so a plan checks it before anything is downloaded."""
    benchmark = get_benchmark(benchmark_name)
    model, dataset = fields["model"], fields["dataset"]
    choose(benchmark.models, model, "model", benchmark_name)
    choose(benchmark.datasets, dataset, "data set", benchmark_name)
    limit, batch_size = benchmark.models[model].max_batch_size, fields.get("batch_size")
    if limit is not None and batch_size is not None and int(batch_size) > limit:
        raise UserError(f"{model} takes at most {limit} sample(s) per call, so batch_size={batch_size} cannot run; "
                        f"use --batch_size={limit} (more instances, --instances, give it parallelism).")
    if fields.get("use_guided_decoding") and (not benchmark.generates_tokens
                                              or generative(benchmark).guided_response_format is None):
        raise UserError(f"--use_guided_decoding: {benchmark_name}'s reference defines no JSON schema for its answers, "
                        f"so there is nothing to guide them to; drop the flag.")
    refuse_loadgen_for_endpoints_only(benchmark, ctx.args.workload.harness_type.value)
    rules = ctx.rules.benchmark(benchmark_name)
    target = ctx.args.workload_for(benchmark_name).accuracy_target
    if target not in rules.accuracy_targets:
        raise UserError(f"{benchmark_name} has no {target.percent_label} % accuracy target in {ctx.rules.version}; "
                        f"valid: {', '.join(t.value for t in rules.accuracy_targets)}.")
    return benchmark, benchmark.models[model], rules


def refuse_loadgen_for_endpoints_only(benchmark, harness_type: str) -> None:
    """A benchmark the round runs on its own load generator only (GenerativeBenchmark.endpoints_only) is refused by
    LoadGen's harnesses before anything is downloaded, naming the harness type that runs it."""
    from ..benchmark_api import endpoints_only
    from .registry import of_type, own_load_generator_type

    if not endpoints_only(benchmark) or any(p.own_load_generator for p in of_type(harness_type)):
        return
    raise UserError(f"{benchmark.name} runs on the MLCommons endpoints client only (the round has no LoadGen result "
                    f"of it): add --harness_type={own_load_generator_type() or '?'} (documentation/endpoints.md).")


def refuse_taken_run_dir(run_dir: Path, log_root: Path, audit: bool = False) -> None:
    """Stop before anything starts when `run_dir` cannot take this test: it holds a result, an audit.config lies
    on its way (except for a compliance test, which writes its own), or another run has it."""
    if (run_dir / RUN_RECORD).exists():
        raise UserError(f"{run_dir} already holds a result; results are never overwritten. Use another LOG_DIR "
                        f"(the default is a new timestamped folder), or add --resume to continue in this one.")
    if not audit:
        refuse_stray_audit_config(run_dir, log_root)
    refuse_used_run_dir(run_dir)


def refuse_stray_audit_config(run_dir: Path, log_root: Path) -> None:
    """A test other than a compliance test never starts where an audit.config lies (its run folder, or a folder
    between it and LOG_DIR): LoadGen is never handed that file, but whoever left it expects a compliance run."""
    folders = [run_dir, *(p for p in run_dir.parents if p.is_relative_to(log_root))] \
        if run_dir.is_relative_to(log_root) else [run_dir]
    for stray in (folder / AUDIT_CONFIG for folder in folders):
        if stray.exists():
            raise UserError(f"{stray} is left from another run: only run_audit_harness hands LoadGen an "
                            f"audit.config, which it writes itself. Remove the file or use another LOG_DIR; "
                            f"nothing was run.", exit_code=EXIT_FAILURE)


def run_test(spec: RunSpec, repo: Path, log: Callable[[str], None] = print,
             child_module: str = CHILD) -> RunRecord:
    """Run one planned test in a child process (`child_module`, run with -m) and return its metadata record."""
    run_dir = claim_run_dir(Path(spec.log_dir))   # exclusively: two runs never share a folder
    try:
        spec_path = spec.save(run_dir / "run_spec.json")
    except OSError as error:
        if disk_full_cause(error) is None:
            raise
        raise DiskFull(run_dir, why(error), context=f"{spec.label} did not start: ") from None
    log(f"\n=== {spec.label} ({spec.model} on {spec.dataset}) -> {run_dir}")
    child_end, parent_end = watch_pipe()   # the child sees end-of-file when this process ends
    try:
        # The child asks for its own signal when this process dies (processes.ChildGuard), none is set here.
        child = start_in_group([sys.executable, "-m", child_module, str(spec_path), str(child_end)], cwd=repo,
                               pass_fds=(child_end,), death_signal=None)
    except BaseException:
        os.close(parent_end)
        raise
    finally:
        os.close(child_end)
    try:
        returncode = child.wait()
    except KeyboardInterrupt as stop:
        signum = getattr(stop, "signum", signal.SIGINT)
        stop_group(child, signum, STOP_GRACE_S)
        if spec.audit_config:
            (run_dir / AUDIT_CONFIG).unlink(missing_ok=True)
        how = "the user (Ctrl-C)" if signum == signal.SIGINT else signal_name(signum)
        try:
            _record_if_missing(spec, run_dir, INTERRUPTED, f"interrupted by {how}")
        except DiskFull as full:
            log(str(full))       # said, and the stop goes on as a stop
        raise
    finally:
        os.close(parent_end)
    metadata = run_dir / RUN_RECORD
    if not metadata.exists():
        error = f"the harness process ended with status {returncode} without writing {RUN_RECORD}"
        if looks_full(run_dir):
            error = disk_full_sentence(run_dir, f"{os.strerror(errno.ENOSPC)}: {error}")
        _record_if_missing(spec, run_dir, FAILED, error)
    record = read_metadata(metadata)
    if is_disk_full_sentence(record.error):
        raise UserError(f"{spec.label} failed, as its record {metadata} says: {record.error}", exit_code=EXIT_FAILURE)
    return record


def _record_if_missing(spec: RunSpec, run_dir: Path, status: str, error: str) -> None:
    from .child import base_record

    path = run_dir / RUN_RECORD
    if path.exists() and (status == FAILED or read_metadata(path).completed):
        return  # the child's own record says more
    try:
        write_metadata(run_dir, base_record(spec, status, error=error))
    except OSError as problem:
        if disk_full_cause(problem) is None:
            raise
        raise DiskFull(run_dir, why(problem), context=f"{spec.label} has no record ({RUN_RECORD} could not be "
                                                      f"written), so the run counts for nothing and is never staged: "
                                                      ) from None


def summary_line(record: RunRecord) -> str:
    label = record.label
    if not record.completed:
        return f"{label}: {record.status.upper()}: {record.error or ''}"
    if record.test_mode is TestMode.AccuracyOnly and record.accuracy is not None:
        accuracy = record.accuracy
        if accuracy.threshold is None:
            gate = f"{record.division} division: reported, not gated"
        else:
            gate = f"target {accuracy.threshold:.3f}: {'met' if accuracy.meets_target else 'NOT MET'}"
        if len(accuracy.metrics) > 1:   # several figures (an LLM's ROUGE and GEN_LEN): each by name
            shown = ", ".join(f"{name} {value:g}" for name, value in accuracy.metrics.items())
            return f"{label}: {shown} ({gate})"
        lines = [line.strip() for line in accuracy.text.splitlines() if line.strip()]
        return f"{label}: {'; '.join(lines)} ({gate})"
    metric = record.metric
    figure = f"{metric.value:.2f} {metric.unit}" if metric is not None else "nan"
    validity = "VALID" if record.valid else "INVALID"
    tokens = record.token_latencies
    latencies = "".join(f", {name} p99 {tokens[f'{key}_p99_ms']:.0f} ms" + (
        f" (bound {tokens[f'{key}_bound_ms']:.0f} ms)" if tokens.get(f"{key}_bound_ms") else "")
        for name, key in (("TTFT", "ttft"), ("TPOT", "tpot"), ("latency", "e2e")) if f"{key}_p99_ms" in tokens)
    return f"{label}: {figure} ({metric.name if metric is not None else 'no metric'}){latencies}, {validity}"
