"""A first TensorRT run is sized from this machine, not from NVIDIA's published figures.

The shipped GPU configs carry NVIDIA's expected QPS (resnet50 H100: 90,000 Offline, 77,000 Server). LoadGen sizes
an Offline run as 1.1 x expected QPS x 600 s of samples, so a machine that does a fifth of that runs for an hour
instead of eleven minutes, and a Server target above what it sustains is INVALID after its full length. So before
a full-length PerformanceOnly TensorRT run in Offline or Server whose figure is still the shipped one (a config
class outside the user's custom.py, not typed on the command line):

- with no measurement on this system (an earlier completed performance run of the same speed-defining fields, as
  plan.find_measurement finds it), the run is refused with the commands that measure, each minutes: a `--test_run`
  (LoadGen's about 10 s of work at the expected figure: the warm-up probe) or `make find_peak`, which measures and
  writes the value into this system's custom.py;
- with one, Offline is refused with the measured figure to pass (or find_peak to write it), Server with find_peak
  (an Offline-like throughput says nothing of the latency bound).

A `--test_run` (the probe itself), AccuracyOnly (one pass over the data set, the time set by it, not by the figure),
other backends (their configs' figures are per core of this machine), a config of another backend run with
--backend=tensorrt (its figure is not NVIDIA's), other scenarios, a value typed on the
command line (`--offline_expected_qps=90000` accepts NVIDIA's figure knowingly) and a value in custom.py
(find_peak's or the user's) all run as configured.
"""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..constants import Scenario, TestMode
from ..records.reproduce import FIRST_FIELDS, flag_text

QPS_FIELDS = {Scenario.Offline: "offline_expected_qps", Scenario.Server: "server_target_qps"}
CHECKED_BACKENDS = ("tensorrt",)
CUSTOM_CONFIG = "custom.py"     # the user's configs: add_custom_system's stubs and find_peak's measured values

SHIPPED, OWN, TYPED = "shipped config", "custom config", "command line"
OTHER_BACKEND = "shipped config of another backend"   # e.g. a CPU config run with --backend=tensorrt


@dataclass(frozen=True)
class FirstRunCheck:
    """What decides whether a test may run on its configured figure."""

    benchmark: str
    scenario: Scenario
    backend: str
    test_mode: TestMode
    test_run: bool
    field: str | None               # QPS_FIELDS[scenario]; None for other scenarios
    value: float | None
    origin: str                     # SHIPPED, OWN, TYPED, or another source (e.g. "embedded default")
    measured: float | None = None   # samples/s of an earlier performance run on this system, same speed fields
    measured_where: str = ""        # its folder


def refusal(check: FirstRunCheck) -> str | None:
    """Why the test must not run on its figure, with the commands that measure it; None when it may run."""
    if (check.backend not in CHECKED_BACKENDS or check.field is None or check.test_run
            or check.test_mode is not TestMode.PerformanceOnly or check.origin != SHIPPED):
        return None
    scenario = check.scenario.value.lower()
    probe = (f'make run_harness RUN_ARGS="--benchmarks={check.benchmark} --scenarios=offline '
             f'--test_mode=PerformanceOnly --test_run"')
    peak = f'make find_peak RUN_ARGS="--benchmarks={check.benchmark} --scenarios={scenario}"'
    head = (f"{check.benchmark} {check.scenario.value} on TensorRT: {check.field}={check.value:g} is the shipped "
            "config's figure (NVIDIA's, for their machine and harness), not a measurement of this one; a "
            f"full-length run sized by it can take hours{' and end INVALID' if scenario == 'server' else ''}.")
    if check.measured is None:
        return (f"{head} Measure first (minutes): {probe} (a warm-up probe; its samples/s sizes the next runs), or "
                f"{peak} (finds the value and writes it into this system's custom.py). To run on the shipped "
                f"figure anyway, give it: --{check.field}={check.value:g}.")
    if check.scenario is Scenario.Offline:
        return (f"{head} This system measured {check.measured:.5g} samples/s ({check.measured_where}): run with "
                f"--{check.field}={check.measured:.5g}, or {peak} to write a confirmed value into custom.py.")
    return (f"{head} The Server target must hold the latency bound, which only a Server search measures: {peak}. "
            f"To run on the shipped figure anyway, give it: --{check.field}={check.value:g}.")


def origin_of(config_class: type, field: str, source: str) -> str:
    """SHIPPED when the config class is a TensorRT config (NVIDIA's) and its value of `field` is set by a class
    outside any custom.py (inherited or not); OWN when a custom.py class sets it; OTHER_BACKEND for a class of
    another backend (its figure was not written for TensorRT, e.g. a CPU config's per-core figure); otherwise
    `source` itself (command line, default, ...)."""
    from ..config_registry import CONFIG_CLASS

    if not source.startswith(CONFIG_CLASS):
        return TYPED if source == "command line" else source
    if getattr(config_class, "backend", None) not in CHECKED_BACKENDS:   # the class's own (or inherited) backend
        return OTHER_BACKEND
    for cls in inspect.getmro(config_class):
        if field in vars(cls):
            try:
                where = Path(inspect.getsourcefile(cls) or "")
            except TypeError:
                return SHIPPED
            return OWN if where.name == CUSTOM_CONFIG else SHIPPED
    return SHIPPED


# -- the engine layout: tuned on this system or not ---------------------------------------------------------------
# The fields make tune chooses. A run whose layout is still a shipped config's (set by no custom.py class and not
# typed) runs as configured, and its plan says so with the command that measures one.
LAYOUT_FIELDS = ("batch_size", "instances", "intra_op_threads", "server_batch_timeout_us", "intra_op_spinning",
                 "inter_op_threads")
TUNED_BACKENDS = ("onnxruntime", "tensorrt")
TUNED_SCENARIOS = (Scenario.Offline, Scenario.Server, Scenario.SingleStream, Scenario.MultiStream)


def _tune_record(tune_folder: Path) -> dict[str, Any]:
    """paths.TUNED_LAYOUT in `tune_folder` with its layout and engine as dicts; empty when absent or unreadable."""
    from ..paths import TUNED_LAYOUT

    try:
        record = json.loads((Path(tune_folder) / TUNED_LAYOUT).read_text())
        record["layout"], record["engine"] = dict(record["layout"]), dict(record.get("engine") or {})
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    return record


def _holds_tuned_layout(record: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    return all(fields.get(name) == value for name, value in record["layout"].items() if name in LAYOUT_FIELDS)


def tuned_layout(tune_folder: Path, fields: Mapping[str, Any]) -> dict[str, Any]:
    """make tune's record of the layout it wrote for one benchmark and scenario (paths.TUNED_LAYOUT in
    `tune_folder`: the layout, the short runs that chose it and the full-length run that confirmed it), when the
    run's `fields` hold that layout on the same engine; else empty (never tuned, tuned for another layout, or a
    record that does not read)."""
    record = _tune_record(tune_folder)
    if not record or not _holds_tuned_layout(record, fields):
        return {}
    return record if all(fields.get(name) == value for name, value in record["engine"].items()) else {}


def measured_layout(config) -> dict[str, Any]:
    """What a run record keeps of a layout a sweep of the engine chose (metadata.json's config.measured_layout,
    tuning/measured_layout.py): the fields it set and why; empty where the layout was tuned, typed or configured."""
    from ..config_registry import UNTUNED

    fields = {name: config[name] for name, source in config.sources.items() if source.startswith(UNTUNED)}
    if not fields:
        return {}
    why = next(source for source in config.sources.values() if source.startswith(UNTUNED))
    return {"fields": fields, "why": why[len(UNTUNED):-1]}


def other_engine_note(benchmark: str, scenario: Scenario, tune_folder: Path, fields: Mapping[str, Any]) -> str | None:
    """A line for the plan when a run holds the layout make tune wrote but runs another engine than the one it was
    measured on (another precision, model, data set, backend): the layout and the figure written with it (Server's
    target QPS, Offline's expected QPS) are that engine's, and a Server target above what this one holds is INVALID
    after the run's full length. None otherwise."""
    record = _tune_record(tune_folder)
    if not record or not _holds_tuned_layout(record, fields):
        return None
    differ = {name: value for name, value in record["engine"].items() if fields.get(name) != value}
    if not differ:
        return None
    tuned = ", ".join(f"{name}={value}" for name, value in differ.items())
    here = ", ".join(f"{name}={fields.get(name)}" for name in differ)
    figures = ", ".join(f"{name}={value}" for name, value in record["layout"].items() if name not in LAYOUT_FIELDS)
    # What runs on what (model, data set) is given with the fields that differ, so the line tunes this very engine.
    flags = " ".join(f"--{name}={flag_text(fields.get(name))}" for name in dict.fromkeys((*FIRST_FIELDS, *differ))
                     if fields.get(name) is not None)
    again = " ".join(f"--{name}={flag_text(value)}" for name, value in differ.items())
    return (f"Note: {benchmark} {scenario.value} runs the layout make tune wrote into custom.py "
            f"({figures or 'its layout'}), measured with {tuned}; this run has {here}, another engine. Run with "
            f"{again} for the tuned one, or measure this one: make tune RUN_ARGS=\"--benchmarks={benchmark} "
            f"--scenarios={scenario.value.lower()} {flags}\".")


# The fields that say which engine runs on what: typed, they are repeated in a make tune line of the plan.
ENGINE_FLAGS = (*FIRST_FIELDS, "backend", "precision", "input_dtype")


def typed_engine_flags(values: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    """The ENGINE_FLAGS the invocation set, as flags (--model=mobilenet_v2 --dataset=imagenet_sample)."""
    from ..config_registry import set_by_invocation

    return " ".join(f"--{name}={flag_text(values[name])}" for name in ENGINE_FLAGS
                    if name in values and set_by_invocation(sources.get(name, "")))


def set_in_custom_config(config_class: type, field: str) -> bool:
    """Whether the class that gives `config_class` its `field` (itself or a parent) is in a custom.py."""
    for cls in inspect.getmro(config_class):
        if field in vars(cls):
            try:
                return Path(inspect.getsourcefile(cls) or "").name == CUSTOM_CONFIG
            except TypeError:
                return False
    return False


def untuned_layout_note(benchmark: str, scenario: Scenario, backend: str, test_mode: TestMode, test_run: bool,
                        config_class: type | None, sources: dict[str, str], layout: dict,
                        engine_flags: str = "") -> str | None:
    """A line for the plan when a performance test's layout was tuned nowhere (no custom.py class sets a layout
    field, none typed on the command line): the layout a sweep of its engine chose and why (a test run too, whose
    figure it sets), or that it runs the configured one; None otherwise. `engine_flags`: the flags typed that say
    which engine runs on what (--model=..., --dataset=...), repeated in the make tune line so that it tunes this
    very engine."""
    from ..config_registry import UNTUNED

    if backend not in TUNED_BACKENDS or scenario not in TUNED_SCENARIOS or test_mode is not TestMode.PerformanceOnly:
        return None
    fields = [f for f in LAYOUT_FIELDS if f in sources]
    typed = f" {engine_flags}" if engine_flags else ""
    tune = f"make tune RUN_ARGS=\"--benchmarks={benchmark} --scenarios={scenario.value.lower()}{typed}\""
    measured = [f for f in fields if sources[f].startswith(UNTUNED)]
    if measured:
        shown = ", ".join(f"{f}={layout[f]}" for f in measured)
        return (f"Note: {benchmark} {scenario.value} runs {shown}, chosen where no layout is tuned on this system: "
                f"{sources[measured[0]][len(UNTUNED):-1]} ({tune}).")
    if test_run:
        return None
    if any(sources[f] == "command line" for f in fields):
        return None
    if config_class is not None and any(set_in_custom_config(config_class, f) for f in fields):
        return None
    shown = ", ".join(f"{f}={layout[f]}" for f in fields if f in layout)
    return (f"Note: {benchmark} {scenario.value} runs the configured layout ({shown}), not one tuned on this system; "
            f"{tune} measures the candidates and writes the best into custom.py.")
