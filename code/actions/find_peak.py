"""find_peak: per selected benchmark and scenario, the value of the setting that LoadGen sizes a run from, found
with short runs, confirmed by one run of full rules length, and written into this system's custom config class.

- Server, server_target_qps: the highest rate LoadGen rates VALID with the 99th percentile at most 90 % of the
  latency bound (search.find_highest: bracket, halving, edges run twice, the majority decides a contradiction).
- Offline, offline_expected_qps: LoadGen issues 1.1 x expected QPS x min_duration samples in its one query, so the
  query lasts min_duration only when the expected QPS is at least the real throughput / 1.1. The value is the
  measured samples/s x OFFLINE_MARGIN (search.settle).
- SingleStream / MultiStream, *_expected_latency_ns: LoadGen pre-generates queries for 2 x min_duration at the
  expected latency and ends the run early ("Ran out of generated queries", INVALID) when the real mean latency
  is below half of it. The value is the percentile LoadGen judges (90th, 99th), at most LATENCY_MEAN_CAP x the
  mean latency (search.settle).
A confirming run that is INVALID is followed by one at a safer value (lower QPS or latency, higher expected
Offline QPS), at most CONFIRM_ATTEMPTS runs; a value no full-length run rated VALID is never written.

It holds the configs lock and the measure lock (exclusively) from start to end (locks.py): a second find_peak, a
config writer such as add_custom_system, or a test run of this checkout stops at once instead of measuring beside
it, which would lower what both measure and write a wrong value into a config.
"""
from __future__ import annotations

import datetime as dt
import importlib.util
import inspect
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from ..common.config_registry import ConfigKey, ConfigRegistry, Registration
from ..common.constants import Scenario, TestMode
from ..common.errors import EXIT_FAILURE, UserError
from ..common.fields import FIELDS
from ..common.paths import shown_path
from ..common.fileio import write_atomically
from ..common.systems import KnownSystem, all_known_systems, read_custom_systems
from ..common.tuning.config_edit import MARKER, literal, set_class_field
from ..common.tuning.search import (ConfirmResult, Outcome, SearchResult, confirm, find_highest, round_sig,
                                    settle)
from ..common.records.reproduce import RUN_LENGTH_FIELDS
from ..common.tuning.trials import SEARCHED_FIELD, SHORT_RUNS
from ..common.harness.first_run import measured_layout
from .base import Handler
from .custom_system import append_config, class_name, hardware_description, render_custom_list, system_entry
from .locks import editing_configs, measuring
from .trial_runs import run_once, with_fields

SERVER_TOLERANCE = 0.05          # the bracket is narrowed until its width is at most 5 % of its low end
SERVER_LATENCY_MARGIN = 0.10     # a short run counts only with its p99 at most 90 % of the bound
SERVER_MAX_TRIALS = 16
SERVER_STEP_DOWN = 0.9           # a confirming run INVALID at x: the next one runs at 0.9 x
OFFLINE_MARGIN = 1.1             # expected QPS = 1.1 x measured: the query lasts min_duration up to 21 % faster
LATENCY_MEAN_CAP = 1.5           # expected latency <= 1.5 x mean: no running out up to 25 % faster
LATENCY_STEP_DOWN = 0.8
SETTLE_TOLERANCE = 0.05
SETTLE_MAX_TRIALS = 4
CONFIRM_ATTEMPTS = 3


@dataclass(frozen=True)
class Target:
    """Where a value found for one benchmark and scenario goes."""

    path: Path                       # configs/<benchmark>/<Scenario>/custom.py
    class_name: str
    parent: type | None = None       # the class is created from this parent first, as add_custom_system does
    registration: Registration = Registration()     # ... registered as the parent is
    register: KnownSystem | None = None   # the system is registered in custom_list.py first
    not_writable: str = ""           # why the value is printed instead of written


@dataclass(frozen=True)
class Strategy:
    """How one scenario's value is searched and confirmed."""

    search: Callable[[Callable[[float], Outcome], float], SearchResult]
    step: Callable[[float, Outcome], float | None]    # a safer value after an INVALID confirming run
    unit: Callable[[float], str]
    label: Callable[[float], str]                     # the value in a run folder's name


def _qps(value: float) -> str:
    return f"{value:g} QPS"


def _ms(value: float) -> str:
    return f"{value / 1e6:.3g} ms"


def strategy(scenario: Scenario, log: Callable[[str], None]) -> Strategy:
    if scenario.server_like:
        return Strategy(
            search=lambda trial, start: find_highest(trial, start, tolerance=SERVER_TOLERANCE,
                                                     latency_margin=SERVER_LATENCY_MARGIN,
                                                     max_trials=SERVER_MAX_TRIALS, unit=_qps, log=log),
            step=lambda value, _: round_sig(value * SERVER_STEP_DOWN), unit=_qps, label=lambda v: f"{v:g}qps")
    if scenario is Scenario.Offline:
        def propose(outcome: Outcome) -> float | None:
            return round_sig(outcome.throughput * OFFLINE_MARGIN) if outcome.throughput else None
        return Strategy(
            search=lambda trial, start: settle(trial, start, propose, safest=max, tolerance=SETTLE_TOLERANCE,
                                               max_trials=SETTLE_MAX_TRIALS, unit=_qps, log=log),
            step=lambda value, outcome: round_sig(max(value, outcome.throughput or 0) * OFFLINE_MARGIN),
            unit=_qps, label=lambda v: f"{v:g}qps")

    def propose_latency(outcome: Outcome) -> float | None:
        if not outcome.latency_ns or not outcome.mean_latency_ns:
            return None
        return int(round_sig(min(outcome.latency_ns, outcome.mean_latency_ns * LATENCY_MEAN_CAP)))
    return Strategy(
        search=lambda trial, start: settle(trial, start, propose_latency, safest=min, tolerance=SETTLE_TOLERANCE,
                                           max_trials=SETTLE_MAX_TRIALS, unit=_ms, log=log),
        step=lambda value, outcome: int(round_sig(min(value * LATENCY_STEP_DOWN,
                                                      propose_latency(outcome) or value))),
        unit=_ms, label=lambda v: f"{v / 1e6:.3g}ms")


@dataclass(frozen=True)
class Found:
    benchmark: str
    scenario: Scenario
    field: str
    value: float | None
    where: str          # what happened to it, in words


class FindPeak(Handler):
    def run(self) -> int:
        with editing_configs(self.ctx.paths), measuring(self.ctx.paths, alone=True):
            return super().run()

    def selected_targets(self) -> dict:
        """Each selected (benchmark, scenario) with its target, every check made before the first run."""
        self._refuse_run_lengths()
        self.ctx.refuse_unrunnable()     # performance runs of the scenarios the benchmarks have
        pairs = self.ctx.selected()
        if not pairs:
            raise UserError("Nothing selected has a config: choose --benchmarks and --scenarios that do "
                            "(make show_config lists them).")
        return {pair: plan_target(self.ctx, *pair) for pair in pairs}

    def handle(self) -> int:
        ctx = self.ctx
        targets = self.selected_targets()
        for benchmark, scenario in targets:
            self.preflight(benchmark, scenario)
        for (benchmark, scenario), target in targets.items():
            if target.not_writable:
                ctx.log(f"Note: {benchmark} {scenario.value}: {target.not_writable}")
        found = [self._find(benchmark, scenario, targets[(benchmark, scenario)]) for benchmark, scenario in targets]
        ctx.log("\nfind_peak:")
        for item in found:
            value = f"{item.field} = {literal(item.value)}" if item.value is not None \
                else f"{item.field}: nothing confirmed"
            ctx.log(f"  {item.benchmark} {item.scenario.value}: {value}; {item.where}")
        return 0 if all(item.value is not None for item in found) else 1

    def _refuse_run_lengths(self) -> None:
        given = [f"--{name}" for name in RUN_LENGTH_FIELDS if name in self.ctx.args.overrides]
        if self.ctx.args.test_run:
            given.append("--test_run")
        if given:
            raise UserError(f"find_peak sets the length of its runs itself (short search runs, then one run of the "
                            f"round's full length to confirm the value); drop {', '.join(given)} from RUN_ARGS.")

    # -- runs (a test replaces these two) ------------------------------------------------------------------
    def preflight(self, benchmark: str, scenario: Scenario) -> None:
        """Everything a run needs (model, data, engine) is there: checked before the first run starts."""
        from ..common.harness.runner import plan_test

        folder = self.ctx.paths.find_peak_dir(self.ctx.system.system_id, benchmark, scenario,
                                              root=self.ctx.paths.log_dir)   # named, not created
        plan_test(with_fields(self.ctx, (scenario,), True, SHORT_RUNS[scenario]), benchmark, scenario,
                  TestMode.PerformanceOnly, log_dir=folder / "preflight", purpose="bench")

    def run_one(self, benchmark: str, scenario: Scenario, run_dir: Path, fields: Mapping[str, Any],
                short: bool) -> Outcome:
        return run_once(self.ctx, benchmark, scenario, run_dir, fields, short=short)

    # -- one benchmark and scenario -------------------------------------------------------------------------
    def _find(self, benchmark: str, scenario: Scenario, target: Target) -> Found:
        from .layout_sweep import ensure_sweeps

        ctx = self.ctx
        ensure_sweeps(ctx, [(benchmark, scenario)])     # the layout a first run takes, where none is tuned
        config = ctx.resolve(benchmark, scenario)
        field = SEARCHED_FIELD[scenario]
        kind = FIELDS[field].type
        plan = strategy(scenario, ctx.log)
        folder = ctx.paths.find_peak_dir(ctx.system.system_id, benchmark, scenario)
        numbers = {"trial": itertools.count(1), "confirm": itertools.count(1)}
        # A layout a sweep of the engine chose where none is tuned (tuning/measured_layout.py) follows the target
        # rate; the value found belongs to the layout it was found with, so that layout is held in every run and
        # written with the value.
        held = dict(measured_layout(config).get("fields", {}))

        def runner(kind_of_run: str) -> Callable[[float], Outcome]:
            def run(value: float) -> Outcome:
                name = f"{kind_of_run}-{next(numbers[kind_of_run]):02d}-{plan.label(value)}"
                return self.run_one(benchmark, scenario, folder / name, {field: kind(value), **held},
                                    short=kind_of_run == "trial")
            return run

        ctx.log(f"\n== {benchmark} {scenario.value}: {field}, from {plan.unit(config[field])} "
                f"({config.sources[field]}); runs in {shown_path(folder, ctx.paths.repo)}")
        if held:
            ctx.log(f"  holding the layout measured on the engine ({', '.join(f'{k}={v}' for k, v in held.items())}: "
                    f"{measured_layout(config)['why']}); it is written with the value")
        searched = plan.search(runner("trial"), float(config[field]))
        ctx.log(f"  search: {searched.stopped}")
        if searched.value is None:
            return Found(benchmark, scenario, field, None, f"not written: {searched.stopped}")
        minutes = ctx.rules.min_duration_ms / 60_000
        ctx.log(f"  confirming {plan.unit(searched.value)} with one run of the round's full length "
                f"(at least {minutes:g} minutes) ...")
        confirmed = confirm(runner("confirm"), searched.value, plan.step, max_attempts=CONFIRM_ATTEMPTS,
                            unit=plan.unit, log=ctx.log)
        if confirmed.value is None:
            return Found(benchmark, scenario, field, None, f"not written: {confirmed.stopped}")
        value = kind(confirmed.value)
        comment = provenance(ctx, config, field, confirmed)
        if target.not_writable:
            return Found(benchmark, scenario, field, value, f"not written ({target.not_writable})")
        for line in write_values(ctx, target, benchmark, scenario, {**held, field: value}, comment):
            ctx.log(f"  {line}")
        return Found(benchmark, scenario, field, value,
                     f"written to {shown_path(target.path, ctx.paths.repo)} (class {target.class_name})")


def provenance(ctx, config, field: str, confirmed: ConfirmResult) -> list[str]:
    """The comment above a written value: when, from which runs, with which command-line fields."""
    repo = ctx.paths.repo
    given = {k: v for k, v in ctx.args.overrides.items() if k != field and k in config.values}
    fields = f", with {', '.join(f'{k}={v}' for k, v in sorted(given.items()))}" if given else ""
    run = confirmed.steps[-1].outcome.run_dir
    return [f"on {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}{fields}.",
            "Confirmed VALID by the full-length run in", f"{shown_path(Path(run), repo)};",
            "found by the short runs trial-* beside it."]


# -- where the value goes ---------------------------------------------------------------------------------------
def plan_target(ctx, benchmark: str, scenario: Scenario) -> Target:
    """The custom.py class of this system for the selection; created from the nearest system's class (and the
    system registered) when missing, as add_custom_system does."""
    system_id, workload = ctx.system.system_id, ctx.args.workload_for(benchmark)
    path = ctx.paths.custom_config_file(benchmark, scenario)
    own = ctx.registry.own(benchmark, scenario, system_id, workload)
    if own is not None:
        existing = own.config_class
        source = Path(inspect.getsourcefile(existing) or "")
        if source.resolve() != path.resolve():
            return Target(path, existing.__name__, not_writable=(
                f"the config of {system_id} is class {existing.__name__} in {shown_path(source, ctx.paths.repo)}, "
                f"a file of the project; find_peak writes only custom.py classes, so it prints the value to set "
                f"there"))
        return Target(path, existing.__name__)
    parent = ctx.registry.find(benchmark, scenario, ctx.system.candidates[1:], workload)
    registered = system_id in {s.id for s in all_known_systems()}
    entry = None if registered else system_entry(system_id, ctx.system.info, ctx.system.system_type,
                                                 hardware_description(ctx.system.info))
    return Target(path, class_name(system_id, parent.key.registration), parent=parent.config_class,
                  registration=parent.key.registration, register=entry)


def write_value(ctx, target: Target, benchmark: str, scenario: Scenario, field: str, value: float | int,
                comment: list[str]) -> list[str]:
    """Write `field = value` into the target class (see write_values)."""
    return write_values(ctx, target, benchmark, scenario, {field: value}, comment)


def write_values(ctx, target: Target, benchmark: str, scenario: Scenario, values: Mapping[str, float | int],
                 comment: list[str], marker: str = MARKER) -> list[str]:
    """Write `field = value` for each of `values` into the target class (creating it first when needed), the
    comment above the first, check that the registry loads it with those values, and say what was written. It
    holds the configs lock (a second writer stops at once), writes each file whole, and on any failure puts both
    files back as they were."""
    repo, system_id = ctx.paths.repo, ctx.system.system_id
    files = [target.path] + ([ctx.paths.custom_systems_file] if target.register else [])
    said = []
    with editing_configs(ctx.paths, files):
        if target.register is not None and not _listed(ctx.paths.custom_systems_file, system_id):
            registered = read_custom_systems(ctx.paths.custom_systems_file)   # as it is now, not at our start
            write_atomically(ctx.paths.custom_systems_file, render_custom_list((*registered, target.register)))
            said.append(f"this machine was not a registered system: registered it as {system_id} in "
                        f"{shown_path(ctx.paths.custom_systems_file, repo)}, as make add_custom_system does")
        if target.parent is not None and not _has_class(target.path, target.class_name):
            append_config(target.path, system_id, target.parent, scenario, target.registration)
            said.append(f"{system_id} had no custom {scenario.value} config: created class {target.class_name} "
                        f"(prefilled from {target.parent.__name__}) in {shown_path(target.path, repo)}")
        text = target.path.read_text()
        for number, (field, value) in enumerate(values.items()):
            text = set_class_field(text, target.class_name, field, value, comment if number == 0 else [],
                                   marker=marker)
        write_atomically(target.path, text)
        key = ConfigKey(benchmark, scenario, system_id, ctx.args.workload_for(benchmark))
        for field, value in values.items():
            check_loads(target.path, key, field, value)
    written = ", ".join(f"{field} = {literal(value)}" for field, value in values.items())
    said.append(f"wrote {written} into class {target.class_name} of {shown_path(target.path, repo)}; "
                f"check it with: make show_config RUN_ARGS=\"--benchmarks={benchmark} --scenarios={scenario.value}\"")
    return said


def _listed(custom_list: Path, system_id: str) -> bool:
    return custom_list.exists() and f"KnownSystem({system_id!r}," in custom_list.read_text()


def _has_class(path: Path, name: str) -> bool:
    return path.exists() and f"\nclass {name}(" in path.read_text()


_checks = itertools.count(1)


def check_loads(path: Path, key: ConfigKey, field: str, value: float | int) -> None:
    """Load `path` as a new module (the one imported earlier in this process may be stale) into a registry of
    its own, and check that `key` resolves `field` to `value`; UserError when not."""
    spec = importlib.util.spec_from_file_location(f"_find_peak_check_{next(_checks)}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    registry = ConfigRegistry()
    registry.add_module(module)
    if registry.own(key.benchmark, key.scenario, key.system_id, key.workload) is None:
        raise UserError(f"{path} does not register a config for {key} after writing; it was put back.",
                        exit_code=EXIT_FAILURE)
    resolved = registry.resolve(key.benchmark, key.scenario, [key.system_id], key.workload).values.get(field)
    if resolved != value:
        raise UserError(f"{path} gives {field} = {resolved!r} after writing {value!r}; it was put back.",
                        exit_code=EXIT_FAILURE)
