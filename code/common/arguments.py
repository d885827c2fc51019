"""Strict parsing of the command line (`--action=...` plus the user's RUN_ARGS).

Make passes RUN_ARGS as one argument, `--run_args=<text>`, which is split here into flags as a POSIX shell splits
words (quotes group words, nothing is expanded or run). Every config field of the catalogue is also a flag
(`--batch_size=64`, `--gpu_batch_size=64`), and so is every flag a harness plug-in declares (HarnessFlag), which
the plug-in of the harness type asked for parses: this module names no harness. An unknown flag, benchmark,
scenario, a badly typed value, or one setting given twice with different values (two spellings of a field, a flag
repeated, a make variable and the same flag in RUN_ARGS) raises UserError (exit status 2) naming the valid choices
or both values.
"""
from __future__ import annotations

import argparse
import dataclasses
import difflib
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from .constants import (AUDIT_ACTION, AccuracyTarget, HarnessType, PowerSetting, Scenario, TestMode,
                        WorkloadSetting, parse_config_ver)
from .errors import UserError
from .fields import (FIELDS, NVIDIA_NAMES_WITHOUT_COUNTERPART, SAFE_NAME_MAX_CHARS, SAFE_NAME_TEXT, alias_table,
                     is_safe_name)
from .harness.registry import declared_flags, harness_types
from .records.record import typed_flags

# Benchmark spellings users type -> toolkit benchmark name.
BENCHMARK_ALIASES = {"resnet": "resnet50", "resnet50": "resnet50", "bert": "bert", "bert-99": "bert",
                     "3d-unet": "3d-unet", "3dunet": "3d-unet", "yolo": "yolo",
                     "qwen3-vl": "qwen3-vl-235b-a22b", "wan-2.2": "wan-2.2-t2v-a14b"}
REPORT_ACTION = "report"
# Commands that run several LoadGen tests: they print their plan first, and take --dry_run and --resume.
MULTI_TEST_ACTIONS = ("run_harness", "run", AUDIT_ACTION)
DRY_RUN_ACTIONS = (*MULTI_TEST_ACTIONS, "tune")   # tune: its plan of trials, printed before any run
RESUMABLE_RETRIES = ("run_harness", "run")    # --retries: run_audit_harness has its field audit_retries
DEFAULT_RETRIES, MAX_RETRIES = 1, 10
# Actions that write into LOG_DIR or MLPERF_SCRATCH_PATH: a folder given for them must be writable before they start.
WRITES_LOG_DIR = frozenset({"run_harness", "run", "bench", "find_peak", "tune"})
WRITES_SCRATCH = frozenset({"prebuild", "link_dirs", "download_model", "download_data", "preprocess_data", "run"})


@dataclass(frozen=True)
class RunArgs:
    action: str
    benchmarks: tuple[str, ...]
    scenarios: tuple[Scenario, ...]
    workload: WorkloadSetting
    test_mode: TestMode
    test_run: bool
    system_name: str | None
    audit_test: str | None
    verbose: bool
    scratch_path: str | None
    log_dir: str | None
    submitter: str | None
    system_id: str | None
    yes: bool
    allow_test_runs: bool
    infer_scenarios: bool
    passphrase_file: str | None
    all_runs: bool                     # report: every run under build/logs, not only the newest LOG_DIR
    overrides: Mapping[str, Any]       # config fields given on the command line, or filled in (filled_in)
    explicit: frozenset[str]           # run flags the user gave (so defaults can be told apart)
    argv: tuple[str, ...]
    # Run flags and config fields the toolkit set, not the user -> why (e.g. "embedded default"). Resolved like
    # typed ones; recorded apart (config.sources, the record's invocation).
    filled_in: Mapping[str, str] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # Benchmarks whose only accuracy target differs from the workload's (with_only_accuracy_target) -> that target.
    benchmark_targets: Mapping[str, AccuracyTarget] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    dry_run: bool = False              # multi-test commands: print the plan and stop
    resume: bool = False               # multi-test commands: continue in the LOG_DIR of an interrupted one
    retries: int = DEFAULT_RETRIES     # with --resume: runs again of a test that is not VALID
    # --endpoints: the running servers a harness sends the inference to, one or more per node, as the plug-in of
    # the harness type parsed them; () = a local one started for each test. The plan and --resume compare them.
    endpoints: tuple[str, ...] = ()
    # The other flags the harness plug-ins declare (HarnessFlag), by name, as their plug-ins parsed them.
    harness_flags: Mapping[str, Any] = dataclasses.field(default_factory=lambda: MappingProxyType({}))
    # Config fields the toolkit filled in for one benchmark only (make run's embedded default: each benchmark's own
    # model and data set), under the source `filled_in` names; `overrides` win over them.
    benchmark_fields: Mapping[str, Mapping[str, Any]] = dataclasses.field(
        default_factory=lambda: MappingProxyType({}))


    def with_only_accuracy_target(self, targets: Mapping[str, Sequence[AccuracyTarget]]) -> "RunArgs":
        """These arguments with the accuracy target of each benchmark that lacks the one asked for and has only
        another (llama2-70b-99.9: 99.9 %), where the user named none (--accuracy_target, --config_ver): `workload_for`
        gives it. When every selected benchmark has that one target, it becomes the workload's."""
        if self.explicit & {"accuracy_target", "config_ver"}:
            return self
        own = {name: tuple(targets[name]) for name in self.benchmarks if name in targets}
        only = {name: found[0] for name, found in own.items()
                if self.workload.accuracy_target not in found and len(found) == 1}
        if not only:
            return self
        workload = self.workload
        if len(only) == len(self.benchmarks) and len(set(only.values())) == 1:
            workload = dataclasses.replace(workload, accuracy_target=next(iter(only.values())))
        return dataclasses.replace(self, workload=workload, benchmark_targets=MappingProxyType(only),
                                   filled_in=MappingProxyType({**self.filled_in, "accuracy_target": "benchmark"}))

    def workload_for(self, benchmark: str) -> WorkloadSetting:
        """The workload setting a benchmark's tests run under: the one asked for, with the benchmark's only
        accuracy target where it has no other (with_only_accuracy_target)."""
        target = self.benchmark_targets.get(benchmark)
        return dataclasses.replace(self.workload, accuracy_target=target) if target is not None else self.workload
    def fields_for(self, benchmark: str) -> Mapping[str, Any]:
        """The config fields given or filled in for `benchmark`: what its resolved configs take over."""
        return MappingProxyType({**self.benchmark_fields.get(benchmark, {}), **self.overrides})

    def invocation(self, mode: TestMode, benchmark: str) -> dict[str, Any]:
        """What the user typed, and what the toolkit filled in (`filled_in`), for the record of a test of
        `benchmark` in `mode`."""
        flags = {"benchmarks": ",".join(self.benchmarks), "scenarios": ",".join(s.value for s in self.scenarios),
                 "test_run": self.test_run, "test_mode": mode.value}
        fields = self.fields_for(benchmark)
        filled = {name: {"value": fields[name] if name in fields else flags.get(name),
                         "source": source} for name, source in self.filled_in.items()}
        return {"action": self.action, "typed": list(self.typed), "filled_in": filled}

    def fill_in_per_benchmark(self, source: str, fields: Mapping[str, Mapping[str, Any]]) -> "RunArgs":
        """Config fields set by the toolkit for each benchmark (benchmark -> fields), each recorded with `source`."""
        names = {name for per in fields.values() for name in per}
        merged = {b: MappingProxyType({**self.benchmark_fields.get(b, {}), **f}) for b, f in fields.items()}
        return dataclasses.replace(self, benchmark_fields=MappingProxyType({**self.benchmark_fields, **merged}),
                                   filled_in=MappingProxyType({**self.filled_in, **dict.fromkeys(names, source)}))

    def fill_in(self, source: str, fields: Mapping[str, Any] | None = None, **flags: Any) -> "RunArgs":
        """These config fields and run flags (benchmarks, scenarios, test_run, ...) set by the toolkit, each
        recorded with `source`; the caller decides whether what the user typed is kept."""
        fields = dict(fields or {})
        filled = {**self.filled_in, **dict.fromkeys([*fields, *flags], source)}
        return dataclasses.replace(self, **flags, overrides=MappingProxyType({**self.overrides, **fields}),
                                   filled_in=MappingProxyType(filled))

    @property
    def typed(self) -> tuple[str, ...]:
        """The flags as the user gave them (RUN_ARGS and make variables), without --action and make's empty
        location flags."""
        return typed_flags(self.argv)


RUN_ARGS_FLAG = "--run_args"   # the Makefile's one argument that holds RUN_ARGS as written
# The flags the Makefile passes for its variables other than RUN_ARGS, when they are set.
MAKE_VARIABLE_FLAGS = {"--scratch_path": "MLPERF_SCRATCH_PATH", "--log_dir": "LOG_DIR", "--submitter": "SUBMITTER",
                       "--benchmarks": "BENCHMARKS", "--system_name": "SYSTEM_NAME"}


def expand_run_args(argv: Sequence[str]) -> list[str]:
    """`argv` with each `--run_args=<text>` replaced by the flags of <text>, split as a POSIX shell splits words:
    quotes group words and are removed, a backslash escapes; `;`, `$(...)`, backquotes and the like stay text."""
    expanded: list[str] = []
    for argument in argv:
        if argument.startswith(f"{RUN_ARGS_FLAG}="):
            expanded += split_run_args(argument.split("=", 1)[1])
        else:
            expanded.append(argument)
    return expanded


def split_run_args(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as error:   # No closing quotation, No escaped character
        raise UserError(f"RUN_ARGS={text!r} cannot be split into flags: {str(error).lower()}. Close each quote, e.g. "
                        f"RUN_ARGS=\"--benchmarks=resnet50 --scenarios=offline,server\".") from None


class _Given(argparse.Action):
    """Stores a flag's value as argparse's `store` does, and keeps every spelling and value it was given under
    (argparse would keep the last silently), so that two different values for one setting can be refused."""

    def __call__(self, parser, namespace, values, option_string=None):
        namespace.__dict__.setdefault(GIVEN, {}).setdefault(self.dest, []).append((option_string, values))
        setattr(namespace, self.dest, values)


GIVEN = "_given"   # the namespace attribute _Given keeps: dest -> [(flag as typed, value), ...]


class _Parser(argparse.ArgumentParser):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.register("action", None, _Given)   # every plain flag below remembers how it was given

    def error(self, message: str):  # argparse would print usage and exit; we want one clear message
        raise UserError(f"{message}. {self.valid_flags_text()}")

    def on_off_flags(self) -> frozenset[str]:
        """The destinations of the flags that may stand alone (`--test_run` means `--test_run=true`)."""
        return frozenset(a.dest for a in self._actions if a.nargs == "?" and a.const == "true")

    def valid_flags_text(self) -> str:
        flags = sorted(o for a in self._actions for o in a.option_strings if o.startswith("--"))
        return f"Valid flags: {' '.join(flags)}"


def build_parser(actions: Sequence[str], benchmarks: Sequence[str]) -> _Parser:
    parser = _Parser(prog="python3 -m code.main", allow_abbrev=False, add_help=True,
                     description="MLPerf Inference toolkit. Usually run through make: make <target> RUN_ARGS=\"...\", "
                                 "which make passes as --run_args='...', split here as a shell splits words")
    run = parser.add_argument_group("run selection")
    run.add_argument("--action", required=True, help=f"what to do: {', '.join(actions)}")
    run.add_argument("--benchmarks", default=None,
                     help=f"comma list of benchmarks (default: all available): {', '.join(benchmarks)}")
    run.add_argument("--scenarios", default=None,
                     help=f"comma list, case-insensitive (default: all): {Scenario.choices_text()}")
    run.add_argument("--config_ver", default=None,
                     help=f"default, high_accuracy, maxq, high_accuracy_maxq, or a workload setting "
                          f"such as {WorkloadSetting().name}")
    run.add_argument("--accuracy_target", default=None, help=f"{AccuracyTarget.choices_text()} (or 99, 99.9)")
    run.add_argument("--harness_type", default=None, help=", ".join(harness_types()))
    run.add_argument("--power_setting", default=None, help=PowerSetting.choices_text())
    run.add_argument("--test_mode", default=None, help=f"{TestMode.choices_text()} (default PerformanceOnly)")
    run.add_argument("--test_run", "--fast", dest="test_run", nargs="?", const="true", default=None,
                     help="short run for a quick look; never valid for submission")
    run.add_argument("--system_name", default=None, help="use this system id instead of the detected one")
    run.add_argument("--audit_test", default=None, help="run only this compliance test (e.g. TEST01)")
    run.add_argument("--verbose", nargs="?", const="true", default=None, help="more output, tracebacks on errors")
    where = parser.add_argument_group("locations (usually set through make variables)")
    where.add_argument("--scratch_path", default=None, help="MLPERF_SCRATCH_PATH: data, models, preprocessed data")
    where.add_argument("--log_dir", default=None, help="LOG_DIR: where this invocation writes its logs")
    where.add_argument("--submitter", default=None, help="SUBMITTER: organisation name in the submission")
    submission = parser.add_argument_group("submission (stage_results ... pack_submission)")
    submission.add_argument("--allow_test_runs", nargs="?", const="true", default=None,
                            help="dry run: stage and check test runs too (reported as warnings)")
    submission.add_argument("--infer_scenarios", nargs="?", const="true", default=None,
                            help="stage_results on an edge system: fill a missing MultiStream folder from the "
                                 "SingleStream run, a missing Offline one from MultiStream or SingleStream, as the "
                                 "rules allow")
    submission.add_argument("--passphrase_file", default=None,
                            help="pack_submission: encrypt the tarball with the passphrase in this file")
    report = parser.add_argument_group("report")
    report.add_argument("--all", dest="all_runs", nargs="?", const="true", default=None,
                        help=f"make {REPORT_ACTION}: report every run under build/logs (and build/compliance_logs) "
                             f"instead of the newest LOG_DIR")
    multi = parser.add_argument_group(f"multi-test commands ({', '.join(MULTI_TEST_ACTIONS)})")
    multi.add_argument("--dry_run", nargs="?", const="true", default=None,
                       help="print the plan (each test, its expected duration and the disk it writes, the totals) "
                            "and stop: nothing is run, downloaded or written")
    multi.add_argument("--resume", nargs="?", const="true", default=None,
                       help="continue an interrupted command in its LOG_DIR (LOG_DIR=..., else the newest under "
                            "build/logs): a test with a VALID record there is skipped, an INVALID, failed or "
                            "interrupted one runs again into a retry folder beside the first; run_audit_harness "
                            "skips the tests whose verdict passed against the runs they are compared with")
    multi.add_argument("--retries", default=None,
                       help=f"with --resume ({', '.join(RESUMABLE_RETRIES)}): how many times a test that is not "
                            f"VALID runs again, {0} to {MAX_RETRIES} (default {DEFAULT_RETRIES})")
    custom = parser.add_argument_group("add_custom_system")
    custom.add_argument("--system_id", default=None, help="id of the system to add")
    custom.add_argument("--yes", nargs="?", const="true", default=None, help="do not ask; accept the defaults")
    harness = parser.add_argument_group("harness flags (each applies to the harness types named)")
    for name, owners in declared_flags().items():
        aliases = dict.fromkeys(f"--{a}" for _, flag in owners for a in flag.aliases)
        harness.add_argument(f"--{name}", *aliases, dest=f"{HARNESS_FLAG}{name}", default=None,
                             metavar=name.upper(),
                             help="; ".join(f"{_applies(plugin, flag)}: {flag.help}" for plugin, flag in owners))
    fields = parser.add_argument_group("config fields (override the config classes)")
    for name, spec in FIELDS.items():
        fields.add_argument(f"--{name}", *(f"--{a}" for a in spec.aliases), dest=f"field:{name}", default=None,
                            metavar=spec.type.__name__.upper(), help=_field_help(spec))
    return parser


def _applies(plugin, flag) -> str:
    """Where a harness flag applies, in words: its actions, else its plug-in's harness type."""
    if flag.actions:
        return ", ".join(f"make {action}" for action in flag.actions)
    return f"--harness_type={plugin.harness_type}"


def _field_help(spec) -> str:
    return f"{spec.description} ({spec.range_text})" if spec.type in (int, float) else spec.description


def _flag_bool(value: str | None, name: str) -> bool:
    if value is None:
        return False
    lowered = value.lower()
    if lowered in ("1", "true", "yes", "on", ""):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise UserError(f"--{name}={value}: expected true or false (or just --{name}).")


def _comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def parse_benchmarks(text: str | None, available: Sequence[str], in_rules: Sequence[str] = ()) -> tuple[str, ...]:
    if text is None:
        return tuple(available)
    chosen = []
    for item in _comma_list(text):
        name = BENCHMARK_ALIASES.get(item.lower(), item.lower())
        if name in in_rules and name not in available:
            raise UserError(f"Benchmark '{item}' is part of the rules round but this toolkit has no configs for it "
                            f"yet. Valid choices: {', '.join(available)}.")
        if name not in available:
            hint = difflib.get_close_matches(item.lower(), available, n=1)
            did_you_mean = f" Did you mean '{hint[0]}'?" if hint else ""
            raise UserError(f"Unknown benchmark '{item}'.{did_you_mean} Valid choices: {', '.join(available)}.")
        if name not in chosen:
            chosen.append(name)
    if not chosen:
        raise UserError(f"--benchmarks is empty. Valid choices: {', '.join(available)}.")
    return tuple(chosen)


def parse_scenarios(text: str | None) -> tuple[Scenario, ...]:
    if text is None:
        return tuple(Scenario)
    chosen: list[Scenario] = []
    for item in _comma_list(text):
        scenario = Scenario.parse(item, "scenario")
        if scenario not in chosen:
            chosen.append(scenario)
    if not chosen:
        raise UserError(f"--scenarios is empty. Valid choices: {Scenario.choices_text()}.")
    return tuple(chosen)


def _workload(ns: argparse.Namespace) -> WorkloadSetting:
    base = parse_config_ver(ns.config_ver) if ns.config_ver else WorkloadSetting()
    return WorkloadSetting(
        harness_type=_harness_type(ns.harness_type) if ns.harness_type else _harness_type(base.harness_type.value),
        accuracy_target=(AccuracyTarget.parse(ns.accuracy_target, "accuracy_target")
                         if ns.accuracy_target else base.accuracy_target),
        power_setting=PowerSetting.parse(ns.power_setting, "power_setting") if ns.power_setting else base.power_setting,
    )


def _refuse_nvidia_names_without_counterpart(argv: Sequence[str]) -> None:
    for token in argv:
        name = token[2:].split("=", 1)[0] if token.startswith("--") else ""
        if name in NVIDIA_NAMES_WITHOUT_COUNTERPART:
            raise UserError(f"--{name} is {NVIDIA_NAMES_WITHOUT_COUNTERPART[name]}. Leave it out.")


def _same_value(dest: str, flag: str, value: str, on_off: frozenset[str]) -> Any:
    """A flag's value as it counts for the setting: a config field's parsed value (08 is 8), an on/off flag's
    truth (`--test_run` is `--test_run=true`), any other flag's text as it is."""
    if dest.startswith("field:"):
        return FIELDS[dest.split(":", 1)[1]].parse(value)
    if dest.startswith(HARNESS_FLAG):
        return value
    if dest in on_off:
        return _flag_bool(value, flag.lstrip("-"))
    return value


def refuse_conflicting_values(given: Mapping[str, Sequence[tuple[str, str]]], on_off: frozenset[str],
                              from_make: frozenset[str] = frozenset()) -> None:
    """UserError when one setting was given different values: two spellings of one config field
    (`--batch_size=8 --gpu_batch_size=16`), a flag repeated, a make variable and its flag in RUN_ARGS.
    `on_off`: the flags that may be given without a value (`--test_run`); `from_make`: the flags make passed for
    its variables, ahead of RUN_ARGS."""
    for dest, occurrences in given.items():
        (first_flag, first), *others = occurrences
        counts = _same_value(dest, first_flag, first, on_off)
        other = next(((flag, value) for flag, value in others
                      if _same_value(dest, flag, value, on_off) != counts), None)
        if other is None:
            continue
        name = dest.split(":", 1)[1] if dest.startswith(("field:", HARNESS_FLAG)) else dest
        if first_flag in from_make:
            raise UserError(f"{MAKE_VARIABLE_FLAGS[first_flag]}={first} and {_typed(*other)} in RUN_ARGS both set "
                            f"{name}: give it once, with the value you mean.")
        raise UserError(f"{_typed(first_flag, first)} and {_typed(*other)} both set {name}: give it once, with the "
                        f"value you mean.")


def _typed(flag: str, value: str | None) -> str:
    return flag if value is None else f"{flag}={value}"


def _make_variable_flags(argv: Sequence[str]) -> frozenset[str]:
    """The flags of make variables in a command line make wrote (one with --run_args): those outside RUN_ARGS."""
    if not any(argument.startswith(f"{RUN_ARGS_FLAG}=") for argument in argv):
        return frozenset()
    return frozenset(flag for flag in (a.split("=", 1)[0] for a in argv) if flag in MAKE_VARIABLE_FLAGS)


def parse_run_args(argv: Sequence[str], actions: Sequence[str], benchmarks: Sequence[str],
                   rules_benchmarks: Sequence[str] = ()) -> RunArgs:
    from_make = _make_variable_flags(argv)
    argv = expand_run_args(argv)
    _refuse_nvidia_names_without_counterpart(argv)
    parser = build_parser(actions, benchmarks)
    # Unknown arguments are refused after the known ones are checked: a value cut at a space
    # (`--benchmarks=resnet50;touch x`) is then reported as the bad value it is, before the word left over.
    ns, unknown = parser.parse_known_args(list(argv))
    refuse_conflicting_values(getattr(ns, GIVEN, {}), parser.on_off_flags(), from_make)
    if ns.action not in actions:
        hint = difflib.get_close_matches(ns.action, actions, n=1)
        did_you_mean = f" Did you mean '{hint[0]}'?" if hint else ""
        raise UserError(f"Unknown action '{ns.action}'.{did_you_mean} Valid actions: {', '.join(actions)}.")
    overrides = {key.split(":", 1)[1]: FIELDS[key.split(":", 1)[1]].parse(value)
                 for key, value in vars(ns).items() if key.startswith("field:") and value is not None}
    explicit = frozenset(k.removeprefix(HARNESS_FLAG) for k, v in vars(ns).items()
                         if v is not None and not k.startswith("field:") and k != GIVEN)
    workload = _workload(ns)
    harness_flags = _harness_flags(ns, ns.action, workload.harness_type.value)
    empty_to_none = lambda v: v or None  # noqa: E731  (make passes empty variables as "--x=")
    args = RunArgs(
        action=ns.action,
        benchmarks=parse_benchmarks(ns.benchmarks, benchmarks, rules_benchmarks),
        scenarios=parse_scenarios(ns.scenarios),
        workload=workload,
        test_mode=TestMode.parse(ns.test_mode, "test_mode") if ns.test_mode else TestMode.PerformanceOnly,
        test_run=_flag_bool(ns.test_run, "test_run"),
        system_name=empty_to_none(ns.system_name),
        audit_test=empty_to_none(ns.audit_test),
        verbose=_flag_bool(ns.verbose, "verbose"),
        scratch_path=empty_to_none(ns.scratch_path),
        log_dir=empty_to_none(ns.log_dir),
        submitter=empty_to_none(ns.submitter),
        system_id=empty_to_none(ns.system_id),
        yes=_flag_bool(ns.yes, "yes"),
        allow_test_runs=_flag_bool(ns.allow_test_runs, "allow_test_runs"),
        infer_scenarios=_flag_bool(ns.infer_scenarios, "infer_scenarios"),
        passphrase_file=empty_to_none(ns.passphrase_file),
        all_runs=_flag_bool(ns.all_runs, "all"),
        overrides=MappingProxyType(overrides),
        explicit=explicit,
        argv=tuple(argv),
        dry_run=_flag_bool(ns.dry_run, "dry_run"),
        resume=_flag_bool(ns.resume, "resume"),
        retries=parse_retries(ns.retries),
        endpoints=harness_flags.pop(ENDPOINTS, ()),
        harness_flags=MappingProxyType(harness_flags),
    )
    check_run_args(args)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


HARNESS_FLAG = "harness:"     # the namespace prefix of the flags harness plug-ins declare
ENDPOINTS = "endpoints"         # the harness flag RunArgs keeps as `endpoints`


def _harness_type(text: str) -> HarnessType:
    """--harness_type as typed: a type that a registered harness plug-in serves."""
    harness = HarnessType.parse(text, "harness_type") if text.strip() else None
    if harness is None or harness.value not in harness_types():
        raise UserError(f"Unknown harness_type '{text}'. Valid choices: {', '.join(harness_types())}.")
    return harness


def _harness_flags(ns: argparse.Namespace, action: str | None, harness_type: str) -> dict[str, Any]:
    """The harness flags given (an empty one, as make passes unset variables, is not given), each parsed by the
    plug-in it applies to: one that declares it for `action`, else the plug-in of `harness_type`. UserError where it
    applies to neither, naming what it applies to."""
    parsed: dict[str, Any] = {}
    for name, owners in declared_flags().items():
        text = getattr(ns, f"{HARNESS_FLAG}{name}", None)
        if not text:
            continue
        owner = next((plugin for plugin, flag in owners if action in flag.actions), None) or \
            next((plugin for plugin, flag in owners if not flag.actions and plugin.harness_type == harness_type), None)
        if owner is not None:
            parsed[name] = owner.parse_flag(name, text)
            continue
        actions = [action for _, flag in owners for action in flag.actions]
        if actions:
            raise UserError(f"--{name} applies only to make {', '.join(dict.fromkeys(actions))}, not to {action}; "
                            f"drop it from RUN_ARGS.")
        types = list(dict.fromkeys(plugin.harness_type for plugin, _ in owners))
        raise UserError(f"--{name} is a flag of {' and of '.join(f'the {t} harness' for t in types)}: add "
                        f"{' or '.join(f'--harness_type={t}' for t in types)}, or drop --{name}.")
    return parsed


# -- checks of values that only make sense together, or that name files and folders -------------------------
def check_run_args(args: RunArgs) -> None:
    """Every check that needs no detected system, before anything starts: UserError (exit status 2)."""
    if args.submitter is not None:
        check_submitter(args.submitter)
    _check_audit_test(args)
    if args.all_runs and args.action != REPORT_ACTION:
        raise UserError(f"--all applies only to make {REPORT_ACTION}, not to {args.action}; drop it from RUN_ARGS.")
    _check_multi_test_flags(args)
    if args.log_dir is not None and args.action in WRITES_LOG_DIR:
        check_writable_folder(args.log_dir, "LOG_DIR", "--log_dir")
    if args.scratch_path is not None and args.action in WRITES_SCRATCH:
        check_writable_folder(args.scratch_path, "MLPERF_SCRATCH_PATH", "--scratch_path")
    if args.passphrase_file is not None:
        read_passphrase_file(args.passphrase_file)


def check_submitter(name: str) -> str:
    """SUBMITTER names a folder of the submission tree (and the tarball): a safe single folder name."""
    if not is_safe_name(name):
        raise UserError(f"SUBMITTER={name!r} is not a valid organisation name: it becomes a folder name, so use "
                        f"only {SAFE_NAME_TEXT}, at most {SAFE_NAME_MAX_CHARS} characters (e.g. SUBMITTER=MyOrg).")
    return name


def _check_audit_test(args: RunArgs) -> None:
    from .rules import get_round   # the round main.py runs with

    rules = get_round()
    if args.audit_test is not None and args.audit_test.upper() not in rules.compliance_tests:
        raise UserError(f"Unknown audit test '{args.audit_test}'. Valid choices for {rules.version}: "
                        f"{', '.join(rules.compliance_tests)}.")
    if args.audit_test is not None and args.action != AUDIT_ACTION:
        raise UserError(f"--audit_test={args.audit_test} applies only to make {AUDIT_ACTION}, not to "
                        f"{args.action}; drop it from RUN_ARGS or run make {AUDIT_ACTION}.")
    if args.action == AUDIT_ACTION and args.test_mode is TestMode.AccuracyOnly:
        raise UserError(f"--test_mode=AccuracyOnly does not apply to make {AUDIT_ACTION}: compliance tests are "
                        f"performance-mode runs compared with the submission's own runs; drop --test_mode.")


def parse_retries(text: str | None) -> int:
    """--retries: a whole number from 0 to MAX_RETRIES (DEFAULT_RETRIES when not given)."""
    if text is None:
        return DEFAULT_RETRIES
    if not text.strip().isdigit() or int(text) > MAX_RETRIES:
        raise UserError(f"--retries={text}: expected a whole number from 0 to {MAX_RETRIES} (how many times "
                        f"--resume runs a test again that is not VALID; default {DEFAULT_RETRIES}).")
    return int(text)


def _check_multi_test_flags(args: RunArgs) -> None:
    for flag, given, allowed in (("dry_run", args.dry_run, DRY_RUN_ACTIONS),
                                 ("resume", args.resume, MULTI_TEST_ACTIONS)):
        actions = f"{', '.join(allowed[:-1])} and {allowed[-1]}"
        if given and args.action not in allowed:
            raise UserError(f"--{flag} applies only to make {actions}, not to {args.action}; drop it from RUN_ARGS.")
    if "retries" in args.explicit and args.action == AUDIT_ACTION:
        raise UserError(f"--retries does not apply to make {AUDIT_ACTION}: a failed compliance test runs again "
                        f"up to audit_retries times (e.g. --audit_retries=2); drop --retries.")
    if "retries" in args.explicit and args.action not in RESUMABLE_RETRIES:
        raise UserError(f"--retries applies only to make {', '.join(RESUMABLE_RETRIES)} with --resume, not to "
                        f"{args.action}; drop it from RUN_ARGS.")
    if "retries" in args.explicit and not args.resume:
        raise UserError(f"--retries={args.retries} applies only with --resume (it says how many times a test "
                        f"that is not VALID runs again); add --resume or drop --retries.")


def check_writable_folder(text: str, variable: str, flag: str) -> Path:
    """A folder the action will write into: it exists as a folder, or can be created, and takes new files."""
    path = Path(text).expanduser().absolute()
    given = f"{variable}={text} ({flag})"
    fix = f"set {variable} to a folder you can write to"
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        what = "is a file" if existing == path else f"lies below {existing}, which is a file"
        raise UserError(f"{given} {what}, not a folder; {fix}.")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass   # an unnamed file where the platform allows it: nothing is left behind
    except OSError as error:
        raise UserError(f"{given} cannot be written: no file can be created in {existing} "
                        f"({error.strerror or error}); {fix}.") from None
    return path


def read_passphrase_file(text: str) -> str:
    """The passphrase in the file `text` (its text, stripped); UserError when it cannot be had."""
    path = Path(text).expanduser()
    fix = "give --passphrase_file a readable text file that holds the passphrase"
    if not path.is_file():
        state = "it is a folder" if path.is_dir() else "it does not exist"
        raise UserError(f"Cannot read the passphrase file {text} (--passphrase_file): {state}; {fix}.")
    try:
        passphrase = path.read_text().strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else "it is not text"
        raise UserError(f"Cannot read the passphrase file {text} (--passphrase_file): {reason}; {fix}.") from None
    if not passphrase:
        raise UserError(f"The passphrase file {text} (--passphrase_file) is empty; write the passphrase into it.")
    return passphrase


def field_flag_names() -> list[str]:
    return sorted(alias_table())
