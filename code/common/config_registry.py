"""Per-system config classes: registration, validation at load, and resolution to an immutable config.

A config class under `configs/<benchmark>/<Scenario>/` states only what differs from its base:

    @register("H100_SXM_80GBx1")
    class H100_SXM_80GBx1(OfflineGPUBase):
        batch_size = 2048
        offline_expected_qps = 90000

A class is registered for a system, an accuracy target and a power setting (NVIDIA's workload setting without its
harness type), and applies to every harness type; a system that tunes for one harness registers a class for it
too (`@register(GENERIC_CPU, harness="openai")`), which overrides the other for that harness. So a new harness runs
on the configs there are, and the resolved config still names the whole workload setting (lwis_k_99_MaxP).

Registration only tags the class; a `ConfigRegistry` collects tagged classes when it loads a
configs module, so nothing global is mutated at import time and tests can build their own registry.
"""
from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import math
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, ModuleType
from typing import Any, Iterable, Mapping

from .constants import AccuracyTarget, HarnessType, PowerSetting, Scenario, TestMode, WorkloadSetting
from .errors import UserError
from .paths import config_package
from .fields import FIELDS, NVIDIA_NAMES_WITHOUT_COUNTERPART, Field
from .user_files import import_user_module

_REGISTRATIONS = "_toolkit_registrations"
_CLASS_ONLY = frozenset({"benchmark", "scenario"})

# Where a resolved value came from (ResolvedConfig.sources). A value the invocation set is the user's typing
# (COMMAND_LINE) or a value the toolkit filled in for it, under a source of its own (RunArgs.filled_in).
COMMAND_LINE = "command line"
CONFIG_CLASS = "config class"
BENCHMARK_DEFAULT = "benchmark default"     # the benchmark's own default (a closed model's reference cap)
FIELD_DEFAULT = "default"


# The start of the source of a layout value a sweep of the engine chose where none was tuned (tuning/measured_layout):
# still a default, so a command that repeats the run does not pin it.
UNTUNED = f"{FIELD_DEFAULT} (untuned: "


def fallback_source(why: str) -> str:
    """The source of a default that could not be used as it is (the harness implementation that cannot run here):
    still the field's default, so a command that repeats the run never asks for the value taken instead."""
    return f"{FIELD_DEFAULT} (python fallback: {why})"


def set_by_invocation(source: str) -> bool:
    """Whether a value with this source was set for the run (typed, or filled in by the toolkit) rather than
    taken from the config classes or the field catalogue (a default may say why it is what it is: "default (...)"):
    such values must be given again to repeat the run."""
    return not (source.startswith(CONFIG_CLASS) or source.startswith(BENCHMARK_DEFAULT) or source == FIELD_DEFAULT
                or source.startswith(f"{FIELD_DEFAULT} ("))


def given_values(values: Mapping[str, Any], sources: Mapping[str, str]) -> dict[str, Any]:
    """The values the invocation set (typed or filled in by the toolkit), by name: what repeats the config."""
    return {name: values[name] for name, source in sources.items() if name in values and set_by_invocation(source)}


class BenchmarkConfig:
    """Root of every config class. Subclasses set `benchmark`, `scenario` and field values."""

    benchmark: str = ""
    scenario: Scenario | None = None


@dataclass(frozen=True)
class PerCore:
    """A value that scales with the number of CPU cores of the machine (e.g. expected throughput)."""

    per_core: float

    def resolve(self, cores: int, field_type: type) -> Any:
        value = self.per_core * max(1, cores)
        return field_type(round(value)) if field_type is int else float(value)


@dataclass(frozen=True)
class ByTestMode:
    """A benchmark default that the reference sets per kind of run: `accuracy` in AccuracyOnly runs, `performance`
    in every other (performance runs, and the compliance tests, which run in performance mode)."""

    performance: Any
    accuracy: Any

    def value(self, mode: TestMode | None) -> Any:
        return self.accuracy if mode is TestMode.AccuracyOnly else self.performance

    def source(self, mode: TestMode | None) -> str:
        """The source as show_config prints it: the mode the value is for, and the other mode's value when the
        config is resolved for no test in particular."""
        if mode is None:
            return f"{BENCHMARK_DEFAULT}, for performance runs; {self.accuracy!r} in accuracy runs"
        return f"{BENCHMARK_DEFAULT}, for {'accuracy' if mode is TestMode.AccuracyOnly else 'performance'} runs"


def benchmark_default(value: Any, mode: TestMode | None) -> tuple[Any, str]:
    """(value, source) of a benchmark default for a test of `mode` (None: no test in particular)."""
    if isinstance(value, ByTestMode):
        return value.value(mode), value.source(mode)
    return value, BENCHMARK_DEFAULT


@dataclass(frozen=True, order=True)
class ConfigKey:
    benchmark: str
    scenario: Scenario
    system_id: str
    workload: WorkloadSetting

    def __str__(self) -> str:
        return f"({self.benchmark}, {self.scenario.value}, {self.system_id}, {self.workload.name})"


EVERY_HARNESS = ""      # Registration.harness of a class that applies to every harness type


@dataclass(frozen=True, order=True)
class Registration:
    """What a config class is registered for, beside its system: an accuracy target and a power setting, for every
    harness type (`harness` EVERY_HARNESS) or for one that the system tunes for."""

    accuracy_target: AccuracyTarget = AccuracyTarget.k_99
    power_setting: PowerSetting = PowerSetting.MaxP
    harness: str = EVERY_HARNESS

    @classmethod
    def of(cls, workload: WorkloadSetting) -> "Registration":
        """The registration for exactly `workload`, its harness type included."""
        return cls(workload.accuracy_target, workload.power_setting, workload.harness_type.value)

    def serves(self, workload: WorkloadSetting, own_harness: bool) -> bool:
        """Whether a class so registered is a config of `workload`: one of its harness (`own_harness`), or one of
        every harness."""
        return (self.accuracy_target, self.power_setting) == (workload.accuracy_target, workload.power_setting) \
            and self.harness == (workload.harness_type.value if own_harness else EVERY_HARNESS)

    @property
    def name(self) -> str:
        """As refusals list it: NVIDIA's workload setting name, or its last two parts for every harness."""
        parts = f"{self.accuracy_target.value}_{self.power_setting.value}"
        return f"{self.harness}_{parts}" if self.harness else f"{parts} (every harness)"

    def register_arguments(self) -> str:
        """The arguments of `@register(system_id...)` after the system id that register this (config writers)."""
        given = [f"harness={self.harness!r}" if self.harness else "",
                 f"accuracy_target={self.accuracy_target.value!r}" if self.accuracy_target != AccuracyTarget.k_99
                 else "",
                 f"power_setting={self.power_setting.value!r}" if self.power_setting != PowerSetting.MaxP else ""]
        return "".join(f", {argument}" for argument in given if argument)


def register(system_id: str, workload: WorkloadSetting | None = None, *, harness: str | None = None,
             accuracy_target: AccuracyTarget | str = AccuracyTarget.k_99,
             power_setting: PowerSetting | str = PowerSetting.MaxP):
    """Class decorator: this class is the config of `system_id` at `accuracy_target` and `power_setting` (default
    k_99, MaxP: NVIDIA's `default`), for every harness type, or for `harness` alone where the system tunes for it.
    A `workload` (WorkloadSetting, NVIDIA's form) registers the class for that workload setting, its harness type
    alone."""

    if workload is not None:
        registration = Registration.of(workload)
    else:
        registration = Registration(AccuracyTarget.parse(accuracy_target, "accuracy_target"),
                                    PowerSetting.parse(power_setting, "power_setting"),
                                    HarnessType.parse(harness).value if harness else EVERY_HARNESS)

    def decorate(cls: type) -> type:
        own = cls.__dict__.get(_REGISTRATIONS, ())
        setattr(cls, _REGISTRATIONS, (*own, (system_id, registration)))
        return cls

    return decorate


def _where(cls: type) -> str:
    try:
        source = Path(inspect.getsourcefile(cls) or "?")
        try:
            source = source.resolve().relative_to(Path.cwd())
        except ValueError:
            pass
    except TypeError:
        source = Path("?")
    return f"{source}: class {cls.__name__}"


def class_values(cls: type) -> dict[str, Any]:
    """Field values a config class sets itself or inherits from its bases (most derived wins)."""
    values: dict[str, Any] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BenchmarkConfig)) or klass is BenchmarkConfig:
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in _CLASS_ONLY or callable(value) \
                    or isinstance(value, (staticmethod, classmethod, property)):
                continue
            values[name] = value
    return values


def validate_class(cls: type) -> None:
    """Unknown fields, badly typed values, fields of another scenario, missing required fields."""
    where = _where(cls)
    if not cls.benchmark or not isinstance(cls.scenario, Scenario):
        raise UserError(f"{where} must set `benchmark` and `scenario` (inherit them from the scenario base).")
    values = class_values(cls)
    for name, value in values.items():
        spec = FIELDS.get(name)
        if spec is None and name in NVIDIA_NAMES_WITHOUT_COUNTERPART:
            raise UserError(f"{where} sets '{name}': that is {NVIDIA_NAMES_WITHOUT_COUNTERPART[name]}. Remove it.")
        if spec is None:
            hint = difflib.get_close_matches(name, FIELDS, n=1)
            suggestion = f" Did you mean '{hint[0]}'?" if hint else ""
            raise UserError(f"{where} sets unknown field '{name}'.{suggestion} Fields are declared in "
                            f"code/common/fields.py.")
        if not spec.applies_to(cls.scenario):
            raise UserError(f"{where} sets '{name}', which does not apply to the {cls.scenario.value} scenario.")
        if not spec.applies_to(cls.scenario, benchmark=cls.benchmark):
            raise UserError(f"{where} sets '{name}', which applies to the benchmarks that generate tokens only, "
                            f"not to {cls.benchmark}.")
        if isinstance(value, PerCore):
            _check_per_core(spec, value, where)
        elif value is not None:
            spec.check(value, source=where)
    backend = values.get("backend", FIELDS["backend"].default)
    missing = [f.name for f in FIELDS.values()
               if f.required and f.applies_to(cls.scenario, backend, cls.benchmark)
               and values.get(f.name, f.default) is None]
    if missing:
        raise UserError(f"{where} is missing required field(s): {', '.join(missing)}.")


def _check_per_core(spec: Field, value: PerCore, where: str) -> None:
    per_core = value.per_core
    if spec.type not in (int, float) or isinstance(per_core, bool) or not isinstance(per_core, (int, float)) \
            or not math.isfinite(per_core) or per_core <= 0:
        raise UserError(f"{where}: {spec.name}=PerCore({per_core!r}) is not valid; PerCore takes a positive, "
                        f"finite number per core, for a numeric field.")


@dataclass(frozen=True)
class ResolvedConfig:
    """The config of one (benchmark, scenario) run. Immutable; derived values are properties."""

    key: ConfigKey
    source_class: str                 # file and class the values came from
    match: str                        # how the system was matched ("exact" or "nearest ...")
    values: Mapping[str, Any]
    sources: Mapping[str, str]        # field -> "command line" | "config class" | "benchmark default" | "default" |
    #                                   what filled it in
    # The benchmark's own defaults for this config's kind of run (the reference's values), whatever won: a run at
    # them is a reference run, and two runs of different kinds that are both at theirs compute alike.
    benchmark_defaults: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def given(self) -> dict[str, Any]:
        """The fields the invocation set (typed or filled in by the toolkit), by name."""
        return given_values(self.values, self.sources)

    def __getitem__(self, name: str) -> Any:
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    @property
    def benchmark(self) -> str:
        return self.key.benchmark

    @property
    def scenario(self) -> Scenario:
        return self.key.scenario

    @property
    def workload(self) -> WorkloadSetting:
        return self.key.workload

    def as_dict(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark, "scenario": self.scenario.value, "system_id": self.key.system_id,
            "workload_setting": self.workload.name, "config_class": self.source_class, "match": self.match,
            "fields": dict(self.values), "sources": dict(self.sources),
            "benchmark_defaults": dict(self.benchmark_defaults),
        }


def _fix(module: str) -> str:
    """How to repair a config module that does not load: custom.py is the user's, the others the project's."""
    if module.endswith(".custom"):
        return ("repair it (make add_custom_system and make find_peak write its classes; the edits are yours), or "
                "move it aside and register the system again with make add_custom_system")
    return "repair it, or undo its local edits with git checkout"


def _config_spec(module: str):
    """The import spec of a config module, None when there is none. The packages above it are imported first, so
    one that does not load is named (finding a module's spec runs the packages above it)."""
    parent = module.rpartition(".")[0]
    if parent:
        spec = _config_spec(parent)
        if spec is None:
            return None
        import_user_module(parent, Path(spec.origin or parent), _fix(parent))
    try:
        return importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return None


@dataclass(frozen=True, order=True)
class RegistryKey:
    """Where a config class is kept: its benchmark, scenario, system and registration."""

    benchmark: str
    scenario: Scenario
    system_id: str
    registration: Registration

    def __str__(self) -> str:
        return f"({self.benchmark}, {self.scenario.value}, {self.system_id}, {self.registration.name})"


@dataclass(frozen=True)
class Found:
    """The config class of a workload: the key it is registered under, and the class."""

    key: RegistryKey
    config_class: type


@dataclass
class ConfigRegistry:
    """Config classes keyed by (benchmark, scenario, system id, registration)."""

    entries: dict[RegistryKey, type] = field(default_factory=dict)

    # -- loading ---------------------------------------------------------------------------------
    @classmethod
    def load(cls, benchmarks: Iterable[str], package: str = "configs") -> "ConfigRegistry":
        """Import `configs.<benchmark>.<Scenario>` (and its `custom` module) for each benchmark."""
        registry = cls()
        for benchmark in benchmarks:
            for scenario in Scenario:
                name = f"{package}.{config_package(benchmark)}.{scenario.value}"
                for module in (name, f"{name}.custom"):
                    spec = _config_spec(module)
                    if spec is None:
                        break      # no scenario module, so no custom one
                    registry.add_module(import_user_module(module, Path(spec.origin or module), _fix(module)))
        return registry

    def add_module(self, module: ModuleType) -> None:
        for value in vars(module).values():
            if inspect.isclass(value) and value.__module__ == module.__name__ and _REGISTRATIONS in vars(value):
                for system_id, registration in vars(value)[_REGISTRATIONS]:
                    self.add(value, system_id, registration)

    def add(self, config_class: type, system_id: str, registration: Registration | WorkloadSetting) -> None:
        """Keep `config_class` as the config of `system_id` for `registration` (a WorkloadSetting: for exactly it)."""
        validate_class(config_class)
        if isinstance(registration, WorkloadSetting):
            registration = Registration.of(registration)
        key = RegistryKey(config_class.benchmark, config_class.scenario, system_id, registration)
        if key in self.entries and self.entries[key] is not config_class:
            raise UserError(f"Duplicate config for {key}: {_where(self.entries[key])} and {_where(config_class)}. "
                            f"Remove one of them or register it under another workload setting.")
        self.entries[key] = config_class

    # -- queries ---------------------------------------------------------------------------------
    def systems_for(self, benchmark: str, scenario: Scenario) -> list[str]:
        return sorted({k.system_id for k in self.entries if (k.benchmark, k.scenario) == (benchmark, scenario)})

    def registrations_for(self, benchmark: str, scenario: Scenario, system_id: str) -> list[Registration]:
        return sorted(k.registration for k in self.entries
                      if (k.benchmark, k.scenario, k.system_id) == (benchmark, scenario, system_id))

    def own(self, benchmark: str, scenario: Scenario, system_id: str, workload: WorkloadSetting) -> Found | None:
        """The config class of `workload` registered for `system_id` itself: the one for its harness type, else the
        one for every harness; None when the system has neither."""
        for own_harness in (True, False):
            for key, config_class in self.entries.items():
                if (key.benchmark, key.scenario, key.system_id) == (benchmark, scenario, system_id) \
                        and key.registration.serves(workload, own_harness):
                    return Found(key, config_class)
        return None

    def find(self, benchmark: str, scenario: Scenario, candidates: Iterable[str],
             workload: WorkloadSetting) -> Found:
        """The config of `workload` on the first candidate system that has one (exact id, then the nearest): the
        class the system registers for the workload's harness type, else its class for every harness."""
        candidates = list(candidates)
        for system_id in candidates:
            found = self.own(benchmark, scenario, system_id, workload)
            if found is not None:
                return found
        for system_id in candidates:
            others = self.registrations_for(benchmark, scenario, system_id)
            if others:
                raise UserError(
                    f"{benchmark} {scenario.value} has no '{workload.name}' config for system {system_id}. "
                    f"Registered workload settings: {', '.join(r.name for r in others)}.")
        raise UserError(
            f"No config for {benchmark} {scenario.value} on any of: {', '.join(candidates)}. "
            f"Systems with one: {', '.join(self.systems_for(benchmark, scenario)) or 'none'}. "
            f"Run `make add_custom_system` to add this machine.")

    def lookup(self, benchmark: str, scenario: Scenario, candidates: Iterable[str],
               workload: WorkloadSetting) -> tuple[ConfigKey, type]:
        """(the key of the resolved config: the system found and `workload`, the class) of `find`."""
        found = self.find(benchmark, scenario, candidates, workload)
        return ConfigKey(benchmark, scenario, found.key.system_id, workload), found.config_class

    def resolve(self, benchmark: str, scenario: Scenario, candidates: Iterable[str], workload: WorkloadSetting,
                overrides: Mapping[str, Any] | None = None, cpu_cores: int = 1,
                override_sources: Mapping[str, str] | None = None,
                benchmark_defaults: Mapping[str, Any] | None = None, mode: TestMode | None = None) -> ResolvedConfig:
        """Precedence: command line > config class > the benchmark's own defaults > field default. Overrides for
        fields that do not apply to this scenario are ignored (one command line may drive several scenarios).
        `override_sources` names where an override came from when the user did not type it (e.g. "embedded
        default"); it changes the recorded source, never the precedence. `benchmark_defaults` may hold ByTestMode
        values, taken for `mode` (None: a config for no test in particular, e.g. show_config)."""
        candidates = list(candidates)
        key, config_class = self.lookup(benchmark, scenario, candidates, workload)
        from_class = class_values(config_class)
        backend = (overrides or {}).get("backend", from_class.get("backend", FIELDS["backend"].default))
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        own: dict[str, tuple[Any, str]] = {name: benchmark_default(value, mode)
                                           for name, value in (benchmark_defaults or {}).items()}
        for name, spec in FIELDS.items():
            if not spec.applies_to(scenario, backend, benchmark):
                continue
            if overrides and name in overrides:
                values[name], sources[name] = overrides[name], (override_sources or {}).get(name, COMMAND_LINE)
            elif name in from_class:
                values[name], sources[name] = resolve_value(spec, from_class[name], cpu_cores), CONFIG_CLASS
                if isinstance(from_class[name], PerCore):
                    sources[name] = f"{CONFIG_CLASS} ({from_class[name].per_core:g} per core x {cpu_cores} cores)"
                    spec.check(values[name], source=f"{_where(config_class)} ({sources[name]})")
            elif name in own:
                values[name], sources[name] = own[name]
                spec.check(values[name], source=f"{benchmark}'s {sources[name]}")
            else:
                values[name], sources[name] = spec.default, FIELD_DEFAULT
        missing = [n for n, spec in FIELDS.items() if n in values and spec.required and values[n] is None]
        if missing:
            raise UserError(f"{_where(config_class)} leaves required field(s) unset: {', '.join(missing)}.")
        match = "exact" if key.system_id == candidates[0] else f"nearest known system {key.system_id}"
        return ResolvedConfig(key=key, source_class=_where(config_class), match=match,
                              values=MappingProxyType(values), sources=MappingProxyType(sources),
                              benchmark_defaults=MappingProxyType({name: value for name, (value, _) in own.items()
                                                                   if name in values}))


def resolve_value(spec: Field, value: Any, cpu_cores: int) -> Any:
    """A field's value for a machine of `cpu_cores` cores: PerCore values scaled and typed, others as they are."""
    return value.resolve(cpu_cores, spec.type) if isinstance(value, PerCore) else value
