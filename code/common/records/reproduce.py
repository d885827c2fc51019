"""The `make` command that repeats a run: one formatter, for run records and for resolved configs.

A record's command gives the same resolved config again: its benchmark and scenario, its workload setting
when not the default, --system_name when it was typed, every field the user typed or the toolkit filled in
(config.sources), --test_run, the test mode, and the compliance test of an audit run.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from ..config_registry import ResolvedConfig
from ..constants import AUDIT_ACTION, RUN_HARNESS_ACTION, TestMode, WorkloadSetting
from .record import RunRecord

FIRST_FIELDS = ("model", "dataset")   # what runs on what; the other fields follow by name
# How long LoadGen runs: a setting of runs alone, left out of the command of any other step (a short trial run's
# missing engine is built by the same generate_engines line as any other run's). Searches set these themselves.
RUN_LENGTH_FIELDS = ("min_duration", "min_query_count")


@dataclass(frozen=True)
class Selection:
    """What selects one resolved config (and test) again on the command line."""

    benchmark: str
    scenario: str
    workload_setting: str = WorkloadSetting().name
    fields: Mapping[str, Any] = field(default_factory=dict)   # every field the run was given
    system_name: str | None = None
    test_run: bool = False
    test_mode: str | None = None
    audit_test: str | None = None

    def run_args(self) -> str:
        args = [f"--benchmarks={self.benchmark}", f"--scenarios={self.scenario}"]
        if self.workload_setting != WorkloadSetting().name:
            args.append(f"--config_ver={self.workload_setting}")
        if self.system_name:
            args.append(f"--system_name={self.system_name}")
        names = [n for n in FIRST_FIELDS if n in self.fields] + sorted(n for n in self.fields if n not in FIRST_FIELDS)
        args += [f"--{name}={flag_text(self.fields[name])}" for name in names]
        if self.test_run:
            args.append("--test_run")
        if self.test_mode:
            args.append(f"--test_mode={self.test_mode}")
        if self.audit_test:
            args.append(f"--audit_test={self.audit_test}")
        return " ".join(args)

    def command(self, action: str) -> str:
        return f'make {action} RUN_ARGS="{self.run_args()}"'

    def without_test(self) -> "Selection":
        """The config alone, for steps that take no test mode (download_model, generate_engines, ...)."""
        return replace(self, test_mode=None, audit_test=None)

    def with_test_mode(self, mode: TestMode) -> "Selection":
        return replace(self, test_mode=mode.value)


def flag_text(value: Any) -> str:
    """A field's value as a flag gives it: true / false for booleans, the value as written otherwise."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def record_selection(record: RunRecord) -> Selection:
    typed_system = any(a.startswith("--system_name=") and a != "--system_name=" for a in record.invocation.typed)
    return Selection(benchmark=record.benchmark, scenario=record.scenario.value,
                     workload_setting=record.config.workload_setting, fields=record.given_fields(),
                     system_name=record.system.id if typed_system else None, test_run=record.test_run,
                     test_mode=record.test_mode.value, audit_test=record.audit_test)


def config_selection(config: ResolvedConfig, test_mode: TestMode | None = None, test_run: bool = False) -> Selection:
    return Selection(benchmark=config.benchmark, scenario=config.scenario.value,
                     workload_setting=config.workload.name, fields=config.given(), test_run=test_run,
                     test_mode=test_mode.value if test_mode is not None else None)


def reproduce_command(record: RunRecord, action: str | None = None) -> str:
    """The `make` line that runs this record's test again with the same resolved config: run_harness, or
    run_audit_harness for a compliance test, unless `action` names another."""
    return record_selection(record).command(action or (AUDIT_ACTION if record.audit_test else RUN_HARNESS_ACTION))


def config_command(action: str, config: ResolvedConfig, test_mode: TestMode | None = None,
                   test_run: bool = False) -> str:
    """The `make` line that selects this resolved config again for `action`."""
    selection = config_selection(config, test_mode, test_run)
    if action not in (RUN_HARNESS_ACTION, AUDIT_ACTION):
        selection = replace(selection, fields={k: v for k, v in selection.fields.items() if k not in RUN_LENGTH_FIELDS})
    return selection.command(action)
