"""tune: per selected benchmark and scenario, the engine layout that does best on this system (batch size,
instances x intra-op threads, for Server the batching window and largest batch), found with short LoadGen runs
(tuning/layouts.py says which candidates and how each is judged), confirmed by one run of the round's full length
with the value LoadGen sizes the run from (find_peak's confirmation), and written into the system's custom config
class with the measurement as a comment. A layout no full-length run rated VALID is never written.

Every run leaves a record in its folder under paths.tune_dir (tuning/trial_book.py): run again, the tune takes the
runs it finds there instead of measuring them again, and goes on where it stopped.
It holds the same locks as find_peak, for the same reasons.
"""
from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from ..common.benchmark_api import get_benchmark
from ..common.constants import Scenario
from ..common.errors import UserError
from ..common.fields import FIELDS
from ..common.harness.plan import format_duration
from ..common.fileio import write_atomically
from ..common.paths import TUNED_LAYOUT, shown_path
from ..common.tuning.config_edit import TUNE_MARKER, literal
from ..common.tuning.layouts import (Judge, Judged, Layout, knobs, planned_trials, server_failure, starting_layout,
                                     tune)
from ..common.tuning.search import ConfirmResult, Outcome, confirm, round_sig
from ..common.tuning.trial_book import RECORD, TrialBook
from ..common.tuning.trials import SEARCHED_FIELD, SHORT_SECONDS
from .find_peak import CONFIRM_ATTEMPTS, FindPeak, Found, Target, strategy, write_values

# The fields that define what runs: a record made with other values of these is not reused.
ENGINE_FIELDS = ("model", "dataset", "backend", "precision", "input_dtype", "harness_impl", "start_from_device")
STARTUP_S = 15        # a run's start (engine and samples loaded, warm-up), for the plan's estimate


class Tune(FindPeak):
    def run(self) -> int:
        if self.ctx.args.dry_run:     # the plan alone: nothing measured or written, so no lock to hold
            return self.handle()
        return super().run()

    def handle(self) -> int:
        ctx = self.ctx
        targets = self.selected_targets()
        pairs = list(targets)
        for benchmark, scenario in pairs:
            self._refuse_untunable(benchmark, scenario)
        for benchmark, scenario in pairs:
            if not ctx.args.dry_run:
                self.preflight(benchmark, scenario)
        found = [self._tune(benchmark, scenario, targets[(benchmark, scenario)]) for benchmark, scenario in pairs]
        ctx.log("\ntune:")
        for item in found:
            ctx.log(f"  {item.benchmark} {item.scenario.value}: {item.where}")
        if ctx.args.dry_run:
            ctx.log("Dry run: nothing was run or written.")
            return 0
        return 0 if all(item.value is not None for item in found) else 1

    def _refuse_untunable(self, benchmark: str, scenario: Scenario) -> None:
        """UserError (exit status 2) where the layouts tuned here would never reach the engine (a served harness):
        their measurements would be noise, and its winner written into custom.py a setting nothing reads."""
        from ..common.harness.selection import choose

        harness = choose(self.ctx.resolve(benchmark, scenario), self.ctx.args.workload.harness_type.value,
                         self.ctx.paths.build)
        why = harness.layout_tunable(self.ctx.args)
        if why is not None:
            raise UserError(f"make tune cannot tune {benchmark} {scenario.value} on the {harness.name} harness: "
                            f"{why}.")

    def _tune(self, benchmark: str, scenario: Scenario, target: Target) -> Found:
        ctx = self.ctx
        config = ctx.resolve(benchmark, scenario)
        backend, cores = config["backend"], ctx.system.info.cpu.cores
        field = SEARCHED_FIELD[scenario]
        kind = FIELDS[field].type
        plan = strategy(scenario, lambda line: ctx.log("  " + line))
        start = starting_layout(config, scenario, backend, cores)
        max_batch = get_benchmark(benchmark).models[config["model"]].max_batch_size   # yolo: one image a call
        stages = knobs(scenario, backend, cores, int(config.get("multi_stream_samples_per_query") or 8), max_batch)
        folder = ctx.paths.tune_dir(ctx.system.system_id, benchmark, scenario)
        book = TrialBook(folder)
        engine = {k: config[k] for k in ENGINE_FIELDS if k in config.values}

        fewest, most = planned_trials(scenario, start, stages)
        per_run = SHORT_SECONDS[scenario] + STARTUP_S
        full_s = ctx.rules.min_duration_ms / 1000 + STARTUP_S
        ctx.log(f"\n== tune {benchmark} {scenario.value} on {backend}, {cores} cores; runs in "
                f"{shown_path(folder, ctx.paths.repo)}")
        ctx.log(f"  from the configured layout {start.describe()}, {field} = {plan.unit(config[field])}")
        for number, stage in enumerate(stages, 1):
            ctx.log(f"  stage {number}, {stage.name}: {stage.values}")
        span = f"{fewest}" if fewest == most else f"{fewest} to {most}"
        total = format_duration(fewest * per_run) if fewest == most else \
            f"{format_duration(fewest * per_run)} to {format_duration(most * per_run)}"
        ctx.log(f"  plan: {span} short run{'s' if most != 1 else ''} of about {format_duration(per_run)} each "
                f"({total}), then the winner "
                f"confirmed at full length ({format_duration(full_s)} a run, up to {CONFIRM_ATTEMPTS} runs)")
        if book.recorded:
            ctx.log(f"  resuming: {book.recorded} run(s) recorded in {shown_path(folder, ctx.paths.repo)} are taken "
                    f"as they are (delete the folder to measure afresh)")
        for path in book.unreadable:
            ctx.log(f"  note: {shown_path(path, ctx.paths.repo)} is unreadable; that run is made again")
        if ctx.args.dry_run:
            return Found(benchmark, scenario, field, None, "dry run: the plan above")

        def measure(layout: Layout, value: float, short: bool) -> Outcome:
            fields: dict[str, Any] = {**layout.fields(), field: kind(value)}
            name = f"{'trial' if short else 'confirm'}-{layout.label}-{plan.label(value)}"
            return book.run({**engine, **fields, "short": short}, book.next_free(name),
                            lambda run_dir: self.run_one(benchmark, scenario, run_dir, fields, short=short))

        judge = Judge(scenario, float(config[field]), lambda line: ctx.log("  " + line), plan.unit)
        result = tune(lambda layout, value: measure(layout, value, True), start, stages, judge, ctx.log)
        if result.best is None:
            why = server_failure(result.judged, plan.unit) if scenario.server_like else ""
            return Found(benchmark, scenario, field, None, "nothing written: no layout completed a short run that "
                         "LoadGen's verdict accepts (see the trials above)" + (f"; {why}" if why else ""))
        best = result.best
        value = _searched_value(scenario, best, kind)
        ctx.log(f"  best: {best.layout.describe()} ({len(result.judged)} layouts judged, {book.reused} run(s) "
                f"reused); confirming with {field} = {plan.unit(value)} at full length ...")
        confirmed = confirm(lambda v: measure(best.layout, v, False), value, plan.step,
                            max_attempts=CONFIRM_ATTEMPTS, unit=plan.unit, log=lambda line: ctx.log("  " + line))
        if confirmed.value is None:
            return Found(benchmark, scenario, field, None,
                         f"nothing written: {best.layout.describe()} was not confirmed ({confirmed.stopped})")
        values: dict[str, Any] = {**best.layout.fields(), field: kind(confirmed.value)}
        written = ", ".join(f"{k} = {literal(v)}" for k, v in values.items())
        if target.not_writable:
            return Found(benchmark, scenario, field, confirmed.value, f"{written}; not written ({target.not_writable})")
        comment = tune_provenance(ctx, scenario, best, len(result.judged), confirmed, folder)
        for line in write_values(ctx, target, benchmark, scenario, values, comment, marker=TUNE_MARKER):
            ctx.log(f"  {line}")
        write_tuned_layout(ctx, folder, values, engine, best, len(result.judged), confirmed)
        return Found(benchmark, scenario, field, confirmed.value,
                     f"{written}; written to {shown_path(target.path, ctx.paths.repo)} (class {target.class_name})")


def _searched_value(scenario: Scenario, best: Judged, kind) -> float:
    """What the confirmation runs at: Server the highest rate held, Offline 1.1 x the samples/s measured (as
    find_peak sets it), SingleStream / MultiStream the percentile measured."""
    if scenario is Scenario.Offline or scenario.server_like:
        return float(best.value)
    return kind(round_sig(best.value))


def write_tuned_layout(ctx, folder: Path, values: dict[str, Any], engine: dict[str, Any], best: Judged,
                       judged: int, confirmed: ConfirmResult) -> Path:
    """paths.TUNED_LAYOUT in the tune folder: the layout written, the short run that chose it and the full-length
    run that confirmed it. Each run whose fields hold this layout carries it in its record (metadata.json's
    config.tuned_layout), and make report shows it."""
    repo = ctx.paths.repo
    last = confirmed.steps[-1].outcome

    def run(outcome) -> dict[str, Any]:
        return {"figure": outcome.describe(), "throughput": outcome.throughput, "latency_ns": outcome.latency_ns,
                "percentile": outcome.percentile, "run_dir": shown_path(Path(outcome.run_dir), repo)}

    record = {"tuned": dt.datetime.now().astimezone().isoformat(timespec="seconds"), "layout": values,
              "engine": engine, "layouts_judged": judged,
              "short_run": run(best.outcome) if best.outcome is not None else {},
              "confirmed": {**run(last), "valid": last.valid}}
    return write_atomically(folder / TUNED_LAYOUT, json.dumps(record, indent=1, default=str) + "\n")


def tune_provenance(ctx, scenario: Scenario, best: Judged, judged: int, confirmed: ConfirmResult,
                    folder: Path) -> list[str]:
    """The comment above the written layout: when, the short run's figure, the confirming run and its figure."""
    repo = ctx.paths.repo
    last = confirmed.steps[-1].outcome
    figure = last.describe() or "VALID"
    short = best.outcome.describe() if best.outcome is not None else ""
    given = {k: v for k, v in ctx.args.overrides.items() if k not in best.layout.fields()}
    fields = f", with {', '.join(f'{k}={v}' for k, v in sorted(given.items()))}" if given else ""
    return [f"on {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}{fields}: the best of {judged} layouts "
            f"in short runs ({short}).",
            f"Confirmed VALID at full length ({figure}) in",
            f"{shown_path(Path(last.run_dir), repo)};",
            f"every run's record ({RECORD}) is in {shown_path(folder, repo)}."]

