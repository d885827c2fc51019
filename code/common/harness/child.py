"""One LoadGen test in a process of its own: `python3 -m code.common.harness.child <run_spec.json>`.

Writes LoadGen's logs, user.conf, accuracy.txt (AccuracyOnly) and, last, metadata.json into the run folder.
Exit status 0 when the test ran to its end (VALID or not), 1 when it failed, 128 + N when signal N stopped it
and 129 when the process that started it went away (see processes.py); a stopped test is `interrupted`.
The optional second argument is the read end of the parent's watch pipe.

A test whose LoadGen logs did not reach their end (loadgen_log.cut_logs) is never `completed`. When the disk
holding the run folder fills (a write of ours fails with ENOSPC or EDQUOT, or LoadGen's logs are cut and the
disk has no room left), the test is recorded `failed` with disk_full's sentence; the record has space set aside
for it from the start (metadata.reserve_record_space).

LoadGen reads an audit.config only from the path it is given: a compliance test's own file, written into the
run folder from the run spec; every other test gives it no path at all, so a stray file is never read.
"""
from __future__ import annotations

import datetime as dt
import errno
import hashlib
import importlib.metadata
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

from ..benchmark_api import get_benchmark, samples_for_run
from ..constants import AccuracyTarget, Scenario, TestMode
from ..disk_full import disk_full_cause, disk_full_sentence, folder_of, looks_full, why
from ..errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK
from ..fileio import write_atomically
from ..paths import ACCURACY_LOG, ACCURACY_TXT, AUDIT_CONFIG, HARNESS_ERROR, USER_CONF, Paths
from ..processes import ChildGuard
from ..rules import get_round
from ..records.computation import development_caps
from ..records.loadgen_log import cut_logs, read_detail
from ..records.metadata import (COMPLETED, FAILED, INTERRUPTED, AccuracyRecord, ConfigRecord, DataRecord, Durations,
                       EngineRecord, Invocation, LoadGenRecord, RunRecord, SystemRecord, log_digests,
                       reserve_record_space, write_metadata)
from ..records.record import EndpointRecord, load_part
from .registry import HARNESSES, HarnessRun
from .progress import Progress
from .qsl import first_samples
from .settings import test_settings, write_user_conf
from .spec import RunSpec
from ..records.verdict import explain

NO_AUDIT_CONFIG = ""   # LoadGen opens the path it is given; an empty one never opens, so no file is read


class LogsCut(RuntimeError):
    """LoadGen's logs did not reach their end: the test is no result, whatever they say."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__(f"LoadGen's logs are incomplete ({'; '.join(problems)}), so the test is no result")
        self.problems = problems


def audit_config_path(spec: RunSpec) -> Path | None:
    """Where a compliance test's audit.config goes (inside its run folder); None for every other test."""
    return Path(spec.log_dir) / AUDIT_CONFIG if spec.audit_config else None


def base_record(spec: RunSpec, status: str, **outcome: Any) -> RunRecord:
    """The record of this test: the fields every metadata.json has, whatever the outcome, and `outcome`."""
    manifest_sha256 = hashlib.sha256(json.dumps(spec.engine_manifest, sort_keys=True).encode()).hexdigest()
    return RunRecord(
        status=status, benchmark=spec.benchmark, model=spec.model, dataset=spec.dataset, division=spec.division,
        scenario=spec.scenario_enum, test_mode=spec.mode_enum, purpose=spec.purpose, audit_test=spec.audit_test,
        test_run=spec.test_run, system=load_part(SystemRecord, spec.system, "system"),
        config=load_part(ConfigRecord, spec.config, "config"),
        engine=EngineRecord(path=spec.engine, manifest=spec.engine_manifest, manifest_sha256=manifest_sha256),
        data=load_part(DataRecord, spec.data, "data") if spec.data else None,
        invocation=load_part(Invocation, spec.invocation, "invocation"), rules_version=spec.rules_version,
        log_dir=spec.log_dir, **outcome)


def _system_under_test(spec: RunSpec, plugin, benchmark, samples, paths: Paths, log_dir: Path):
    """(SUT, QSL) of the test, made by its harness plug-in. The data set is cut to total_sample_count where the config
    caps it."""
    from .settings import effective_dataset_size

    fields = spec.fields
    samples = first_samples(samples, effective_dataset_size(fields, len(samples)))
    return plugin.create(HarnessRun(spec, benchmark, samples, paths, log_dir,
                                    benchmark.generation(spec.model, fields, paths)))


def _now() -> str:
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


def _record_stop(spec: RunSpec, started: str) -> Callable[[str], None]:
    """What a stop signal or a vanished parent leaves behind: an `interrupted` record, no audit.config, nothing the
    harness started (e.g. a local server)."""
    def on_stop(reason: str) -> None:
        plugin = HARNESSES.if_loaded(spec.harness)     # never an import in a signal handler
        if plugin is not None:
            plugin.interrupted()
        audit_path = audit_config_path(spec)
        if audit_path is not None:
            audit_path.unlink(missing_ok=True)
        write_metadata(Path(spec.log_dir), base_record(spec, INTERRUPTED, error=reason, started=started,
                                                        finished=_now()))
        print(f"{spec.label}: interrupted: {reason}.", file=sys.stderr)
    return on_stop


def run(spec: RunSpec, parent_fd: int | None = None) -> int:
    log_dir = Path(spec.log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    started = _now()
    guard = ChildGuard(_record_stop(spec, started), parent_fd).start()
    try:
        reserve_record_space(log_dir)
    except OSError as error:
        if disk_full_cause(error) is None:
            raise
        status, record = EXIT_FAILURE, base_record(spec, FAILED, started=started,
                                                   error=disk_full_sentence(log_dir, why(error)))
    else:
        status, record = _run_test(spec, log_dir, started)
    record = record.replace(finished=_now())
    if record.completed and guard.parent_gone():
        record = record.replace(status=INTERRUPTED, error="the toolkit process that started the test went away "
                                                          "before its result was recorded")
        status = EXIT_FAILURE
    written: list[bool] = []
    guard.finish(lambda: written.append(_write_record(spec, log_dir, record)))
    return status if not written or written[0] else EXIT_FAILURE


def _write_record(spec: RunSpec, log_dir: Path, record: RunRecord) -> bool:
    """Write the test's record; False, after one line saying so, when the disk is too full even for that (the
    parent then says what it can)."""
    try:
        write_metadata(log_dir, record)
    except OSError as error:
        if disk_full_cause(error) is None:
            raise
        print(f"{spec.label}: its record could not be written: {disk_full_sentence(log_dir, why(error))}",
              file=sys.stderr)
        return False
    return True


def _run_test(spec: RunSpec, log_dir: Path, started: str) -> tuple[int, RunRecord]:
    """The test itself: (exit status, its record)."""
    plugin = HARNESSES.get(spec.harness)
    if plugin.own_load_generator:
        return _run_own(spec, plugin, log_dir, started)
    try:
        plugin.prepare_process(spec)     # before anything imports LoadGen
    except (RuntimeError, ImportError) as error:
        return EXIT_FAILURE, base_record(spec, FAILED, started=started,
                                         error=f"the {plugin.name} harness cannot start: {error}")
    import mlperf_loadgen as lg

    benchmark = get_benchmark(spec.benchmark)
    paths = Paths.create(scratch=spec.scratch, log_dir=log_dir)
    sut = None
    try:
        from ..engines.input_samples import engine_samples

        fields = {**spec.config.get("fields", {}), "model": spec.model, "dataset": spec.dataset}
        samples = samples_for_run(engine_samples(benchmark, fields, paths),   # int8 form for input_dtype=int8
                                  spec.mode_enum is TestMode.AccuracyOnly, spec.audit_test)
        sut, qsl = _system_under_test(spec, plugin, benchmark, samples, paths, log_dir)
        user_conf = write_user_conf(log_dir / USER_CONF, spec.user_conf)
        settings = test_settings(user_conf, spec.loadgen_model, spec.scenario_enum, spec.mode_enum)
        audit_path = audit_config_path(spec)   # explicit: LoadGen never looks in the working directory
        if audit_path is not None:
            write_atomically(audit_path, "\n".join(spec.audit_config) + "\n")
        log_settings = lg.LogSettings()
        log_settings.log_output.outdir = str(log_dir)
        log_settings.log_output.copy_summary_to_stdout = False
        log_settings.enable_trace = False
        lg_sut, lg_qsl = sut.construct(), qsl.construct()
        counts = lambda: (sut.counters.progress, sut.counters.issued)  # noqa: E731  (moves batch by batch)
        min_duration = settings.min_duration_ms / 1000
        min_samples = None if spec.scenario_enum is Scenario.Offline else settings.min_query_count * (
            settings.multi_stream_samples_per_query if spec.scenario_enum is Scenario.MultiStream else 1)
        t0 = time.monotonic()
        try:
            with Progress(spec.label, counts, min_duration, min_samples):
                lg.StartTestWithLogSettings(lg_sut, lg_qsl, settings, log_settings,
                                            str(audit_path) if audit_path is not None else NO_AUDIT_CONFIG)
        finally:
            seconds = time.monotonic() - t0
            sut.stop()
            sut.destroy(lg_sut)
            qsl.destroy(lg_qsl)
            if audit_path is not None:
                audit_path.unlink(missing_ok=True)
        if sut.error is not None:
            raise RuntimeError(f"the inference failed during the run: {type(sut.error).__name__}: {sut.error}") \
                from sut.error
        cut = cut_logs(log_dir, spec.mode_enum is TestMode.PerformanceOnly)
        if cut:
            raise LogsCut(cut)
        outcome = _results(spec, plugin, benchmark, paths, log_dir, seconds)
        return EXIT_OK, base_record(spec, COMPLETED, started=started, log_sha256=log_digests(log_dir),
                                    endpoints=_endpoints(sut), **outcome)
    except Exception as error:  # noqa: BLE001  recorded in metadata.json; the logs are kept
        return EXIT_FAILURE, base_record(spec, FAILED, started=started, error=_failure(error, log_dir),
                                         endpoints=_endpoints(sut))
    finally:
        _close(spec, sut)


def _run_own(spec: RunSpec, plugin, log_dir: Path, started: str) -> tuple[int, RunRecord]:
    """A test whose harness brings its own load generator (HarnessPlugin.own_load_generator): the harness runs it
    and gives the outcome fields of its record; a failure is recorded as every test's is."""
    paths = Paths.create(scratch=spec.scratch, log_dir=log_dir)
    try:
        outcome = plugin.run_own_test(spec, get_benchmark(spec.benchmark), paths, log_dir)
    except Exception as error:  # noqa: BLE001  recorded in metadata.json; the logs are kept
        return EXIT_FAILURE, base_record(spec, FAILED, started=started, error=_failure(error, log_dir))
    return EXIT_OK, base_record(spec, COMPLETED, started=started, **outcome)


def _close(spec: RunSpec, sut) -> None:
    """Free what the test ran on (its backend instances: GPU memory, sessions), whatever the outcome; a failure to
    is said on stderr and does not change the test's result."""
    if sut is None:
        return
    try:
        sut.close()
    except Exception as error:  # noqa: BLE001  the result is recorded already
        print(f"{spec.label}: freeing its backend instances failed: {type(error).__name__}: {error}",
              file=sys.stderr)


def _failure(error: Exception, log_dir: Path) -> str:
    """Why the test failed, as its record says it: a full disk in one sentence (nothing more is written), any
    other failure by its exception, with the traceback in harness_error.txt."""
    full = disk_full_cause(error)
    if full is not None:
        return disk_full_sentence(folder_of(full, [log_dir]) or log_dir, why(full))
    if isinstance(error, LogsCut) and looks_full(log_dir):
        return disk_full_sentence(log_dir, f"{os.strerror(errno.ENOSPC)}: LoadGen's logs were cut, "
                                           f"{', '.join(error.problems)}")
    try:
        write_atomically(log_dir / HARNESS_ERROR, traceback.format_exc())
    except OSError:
        pass     # the record says why; the traceback is a help, not the result
    return f"{type(error).__name__}: {error}"


def _endpoints(sut) -> tuple:
    """The servers the test's inference ran on, as its record keeps them (none for a harness in this process), each
    with the machine its host name resolves to."""
    from ..serving.machines import machine_key

    records = sut.endpoint_records() if sut else []
    return tuple(load_part(EndpointRecord, {**r, "machine": machine_key(str(r["host"]))}, "endpoints")
                 for r in records)


def _results(spec: RunSpec, plugin, benchmark, paths: Paths, log_dir: Path, seconds: float) -> dict[str, Any]:
    """The outcome fields of a completed test's record. A closed-division run that does not generate as the
    reference does (a development cap) is never submittable, whatever LoadGen and the scorer say."""
    log = read_detail(log_dir)
    result: dict[str, Any] = {
        "loadgen": LoadGenRecord(
            version=str(log.get("loadgen_version", importlib.metadata.version("mlcommons-loadgen"))),
            seeds=log.seeds, errors=log.errors, warnings=len(log.warnings),
            effective={k[len("effective_"):]: v for k, v in log.values.items() if k.startswith("effective_")},
            build=plugin.loadgen_build(spec)),
        "durations": Durations(test_s=round(seconds, 3), measured_s=log.run_duration_s),
    }
    if spec.mode_enum is TestMode.PerformanceOnly:
        rules = get_round(spec.rules_version).benchmark(spec.benchmark)
        verdict = explain(log, spec.fields, spec.test_run, token_limits=rules.token_limits(spec.scenario_enum),
                          run_scenario=spec.scenario_enum)
        result |= {"metric": log.metric(rules.latency_unit), "result_validity": log.get("result_validity"),
                   "token_latencies": _token_latencies(log),
                   "valid": verdict.valid, "submittable": verdict.submittable, "reasons": tuple(verdict.reasons)}
    else:
        accuracy = benchmark.score(spec.model, spec.dataset, log_dir / ACCURACY_LOG, paths)
        write_atomically(log_dir / ACCURACY_TXT, accuracy.text.rstrip("\n") + "\n")
        meets = _meets_target(spec, accuracy)
        result |= {"accuracy": AccuracyRecord(metric=accuracy.metric, value=accuracy.value, text=accuracy.text,
                                              unit=accuracy.metrics[0].unit, samples=accuracy.samples,
                                              metrics={m.name: m.value for m in accuracy.metrics},
                                              threshold=spec.accuracy_threshold, meets_target=meets),
                   "valid": log.errors == (), "submittable": log.errors == () and not spec.test_run,
                   "reasons": tuple(f"LoadGen reported an error: {e}" for e in log.errors)}
    caps = development_caps(spec.fields, spec.config.get("benchmark_defaults") or {}) \
        if spec.division == "closed" else []
    if caps:
        result |= {"submittable": False, "reasons": (*result["reasons"], *caps)}
    return result


def _meets_target(spec: RunSpec, accuracy) -> bool | None:
    """Closed division: every metric within the round's bounds for the accuracy target (the headline metric alone
    for a benchmark of one metric; ROUGE1/2/L/Lsum and GEN_LEN for an LLM); None where nothing is gated."""
    if spec.accuracy_threshold is None:
        return None
    if spec.accuracy_target is None:
        return accuracy.value >= spec.accuracy_threshold
    bounds = get_round(spec.rules_version).benchmark(spec.benchmark).accuracy_bounds(
        AccuracyTarget(spec.accuracy_target), spec.scenario_enum)
    values = [next((v for v in (accuracy.get(b.name), accuracy.get(b.key)) if v is not None), None) for b in bounds]
    return all(value is not None and bound.within(value) for bound, value in zip(bounds, values))


def _token_latencies(log) -> dict[str, float]:
    """An LLM server-like or SingleStream run's p99 TTFT / TPOT and their bounds in ms (empty for other runs)."""
    figures = log.token_latencies()
    if figures is None:
        # A server-like run without token latencies: its bound is the end-to-end p99 latency.
        p99, bound = (log.values.get(key) for key in ("result_99.00_percentile_latency_ns",
                                                       "effective_target_latency_ns"))
        if log.scenario is not Scenario.Server or not isinstance(p99, (int, float)) or not p99:
            return {}
        return {"e2e_p99_ms": round(p99 / 1e6, 3), **({"e2e_bound_ms": round(bound / 1e6, 3)}
                                                         if isinstance(bound, (int, float)) and bound else {})}
    named = {"ttft_p99_ms": figures.ttft_p99_ns, "tpot_p99_ms": figures.tpot_p99_ns,
             "ttft_bound_ms": figures.ttft_bound_ns, "tpot_bound_ms": figures.tpot_bound_ns}
    return {name: round(ns / 1e6, 3) for name, ns in named.items() if ns is not None}


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or len(argv) == 2 and not argv[1].isdigit():
        print("usage: python3 -m code.common.harness.child <run_spec.json> [<watch pipe fd>]", file=sys.stderr)
        return EXIT_BAD_INPUT
    return run(RunSpec.load(Path(argv[0])), int(argv[1]) if len(argv) == 2 else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
