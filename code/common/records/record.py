"""RunRecord: what metadata.json holds, typed (schema 3), and how records of schemas 1 and 2 are read.

One frozen dataclass per part of the record; `RunRecord.from_dict` checks every value against its type, so a
reader never meets a field of the wrong type, and `as_dict` gives the JSON object. documentation/metadata.md
describes every field. File reading and writing live in metadata.py.
"""
from __future__ import annotations

import collections.abc
import dataclasses
import enum
import functools
import types
import typing
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping, Sequence

from ..config_registry import given_values
from ..constants import Scenario, TestMode, test_label
from .loadgen_log import Metric

SCHEMA_VERSION = 3
READABLE_SCHEMAS = (1, 2, 3)  # 1 and 2: earlier releases' records, converted on reading
COMPLETED, FAILED, INTERRUPTED = "completed", "failed", "interrupted"
STATUSES = (COMPLETED, FAILED, INTERRUPTED)
_STORED = "stored"            # dataclass field metadata: False for what is never written (where it was read)


@dataclass(frozen=True)
class SystemRecord:
    id: str
    known: bool = False
    description: str = ""
    system_type: str = ""
    hardware: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigRecord:
    """The resolved config: every field's value and where it came from (see config_registry)."""

    workload_setting: str
    fields: Mapping[str, Any]
    sources: Mapping[str, str]
    system_id: str = ""       # whose config class was taken: a nearest known system when this one has none
    config_class: str = ""
    match: str = ""
    # The benchmark's own defaults for the test's kind of run (the reference's values; config_registry): records
    # written before they were kept have none.
    benchmark_defaults: Mapping[str, Any] = field(default_factory=dict)
    # make tune's record of the layout the test ran (harness/first_run.tuned_layout): the layout, the short runs
    # that chose it and the full-length run that confirmed it; empty for a layout not tuned on this system.
    tuned_layout: Mapping[str, Any] = field(default_factory=dict)
    # An untuned layout chosen by a sweep of the engine (tuning/measured_layout.measured_layout): the fields it set
    # and why; empty where the layout was tuned, typed or configured.
    measured_layout: Mapping[str, Any] = field(default_factory=dict)

    def given(self) -> dict[str, Any]:
        """The fields the invocation set (typed, or filled in by the toolkit): what repeats the config."""
        return given_values(self.fields, self.sources)


@dataclass(frozen=True)
class EngineRecord:
    path: str
    manifest: Mapping[str, Any] = field(default_factory=dict)
    manifest_sha256: str = ""


@dataclass(frozen=True)
class DataRecord:
    """The preprocessed set a test read: its folder and the sha256 of its manifest.json, which records what the set
    was made from (and, for a set of one file per sample, every file's sha256)."""

    directory: str
    manifest_sha256: str = ""
    samples: int | None = None             # samples of the set read (before total_sample_count cuts them)
    published_samples: int | None = None   # samples of the published data set of that name

    @property
    def subset(self) -> str:
        """"a subset: N of the published M samples" where the set read is not the whole published set, else ""."""
        return subset_text(self.samples, self.published_samples)


def subset_text(samples: int | None, published: int | None) -> str:
    """How a set of `samples` that is not the `published` data set is labelled everywhere (plan, report, staging);
    "" for the published set, or where either count is not known."""
    if samples is None or not published or samples == published:
        return ""
    return f"a subset: {samples:,} of the published {published:,} samples"


@dataclass(frozen=True)
class AccuracyRecord:
    metric: str               # the metric the round's target applies to, e.g. "top-1 accuracy", "mAP"
    value: float
    text: str                 # the accuracy.txt content
    unit: str = "%"
    metrics: Mapping[str, float] = field(default_factory=dict)   # every metric the benchmark scored, by name
    samples: int | None = None           # distinct samples scored
    good: int | None = None              # records written before metrics were kept: correct samples of `total`
    total: int | None = None
    threshold: float | None = None       # closed division's target; None where accuracy is reported, not gated
    meets_target: bool | None = None


@dataclass(frozen=True)
class LoadGenRecord:
    version: str
    seeds: Mapping[str, int] = field(default_factory=dict)
    errors: tuple[str, ...] = ()
    warnings: int = 0
    effective: Mapping[str, Any] = field(default_factory=dict)   # the detail log's effective_* settings, unprefixed
    build: str = ""         # which LoadGen ran the test: the PyPI wheel, or the native core's build from the sdist


@dataclass(frozen=True)
class Durations:
    test_s: float                        # the LoadGen test, wall clock
    measured_s: float | None = None      # its measured part, from LoadGen's own figures


@dataclass(frozen=True)
class EndpointRecord:
    """One server a test sent its queries to (a Triton server, an LLM serving engine, ...): where it is, what it
    served and what it answered. A harness that runs in process has none."""

    host: str
    port: int
    protocol: str             # how the harness spoke to it: "grpc", "http"
    model: str = ""           # what it served, as requests name it
    engine_sha256: str = ""   # the sha256 of the engine it served, where the server tells it
    local: bool = False       # started by the test itself
    requests: int = 0         # requests it answered
    samples: int = 0          # samples in them
    transport: str = ""       # how requests carried their data (e.g. "grpc", "system shared memory")
    extras: Mapping[str, Any] = field(default_factory=dict)   # what only its kind of harness reports
    # The machine it ran on, its host name resolved when the test ran ("this machine", or the lowest address the
    # name resolved to): two spellings of one machine count once. Records written before it was kept have "".
    machine: str = ""

    @property
    def node(self) -> str:
        """The machine, as far as the record knows it: its resolved name, else the host as given."""
        return self.machine or self.host

    @property
    def address(self) -> str:
        """host:port, as people type it (an IPv6 host in brackets)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def split_address(address: str) -> tuple[str, int]:
    """`host:port` (an IPv6 host in brackets) -> (host, port); ValueError when it is not one."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"{address!r} is not host:port")
    return host.removeprefix("[").removesuffix("]"), int(port)


@dataclass(frozen=True)
class Filled:
    """A value the toolkit filled in where the user typed none, and why."""

    value: Any
    source: str


# Older versions of the Makefile passed these on every call, empty when the user set nothing; records of that time
# keep them among the typed flags.
MAKE_PLUMBING = ("--scratch_path=", "--log_dir=", "--submitter=")


def typed_flags(argv: Sequence[str]) -> tuple[str, ...]:
    """The flags of a command line as the user gave them: without --action and make's empty location flags."""
    typed: list[str] = []
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--action":
            next(arguments, None)   # its value
        elif not argument.startswith("--action=") and argument not in MAKE_PLUMBING:
            typed.append(argument)
    return tuple(typed)


@dataclass(frozen=True)
class Invocation:
    action: str = ""
    typed: tuple[str, ...] = ()                  # the flags as the user gave them
    filled_in: Mapping[str, Filled] = field(default_factory=dict)   # run flag or field -> what the toolkit set


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    """One LoadGen test. The outcome fields (durations ... log_sha256) are set only for a test that ran to its end."""

    status: str                          # completed, failed or interrupted
    error: str | None = None             # failed or interrupted: why
    benchmark: str
    model: str
    dataset: str
    division: str
    scenario: Scenario
    test_mode: TestMode
    purpose: str = "submission"          # submission, audit or bench: only submission runs are staged
    audit_test: str | None = None
    test_run: bool = False
    system: SystemRecord
    config: ConfigRecord
    engine: EngineRecord | None = None
    data: DataRecord | None = None       # records written before it existed have none
    invocation: Invocation = field(default_factory=Invocation)
    rules_version: str = ""
    log_dir: str
    started: str | None = None
    finished: str | None = None
    durations: Durations | None = None
    loadgen: LoadGenRecord | None = None
    metric: Metric | None = None         # PerformanceOnly
    result_validity: str | None = None   # PerformanceOnly: LoadGen's VALID or INVALID
    accuracy: AccuracyRecord | None = None   # AccuracyOnly
    valid: bool | None = None
    submittable: bool | None = None
    reasons: tuple[str, ...] = ()
    log_sha256: Mapping[str, str] = field(default_factory=dict)   # LoadGen log name -> sha256 as the test wrote it
    # PerformanceOnly LLM runs (not Offline): p99 time to first token and per output token, and their bounds, in ms.
    token_latencies: Mapping[str, float] = field(default_factory=dict)
    # A harness that sends queries to servers: each server (several: one or more per node).
    endpoints: tuple[EndpointRecord, ...] = ()
    # A harness whose own load generator ran the test instead of LoadGen (the MLCommons endpoints client): which one
    # (its version, commit, interpreter), the YAML it ran, its report folder, the gates applied and its figures.
    load_generator: Mapping[str, Any] = field(default_factory=dict)
    path: Path | None = field(default=None, compare=False, metadata={_STORED: False})   # where it was read

    @property
    def completed(self) -> bool:
        return self.status == COMPLETED

    @property
    def label(self) -> str:
        return test_label(self.benchmark, self.scenario.value, self.test_mode.value, self.audit_test)

    @property
    def nodes(self) -> int:
        """Machines that ran the inference: the distinct machines of its endpoints (several ports of one host, or
        two names of it, are one), else this one."""
        return max(1, len({endpoint.node for endpoint in self.endpoints}))

    def given_fields(self) -> dict[str, Any]:
        """The config fields this test's invocation set, typed or filled in: with the selection, they give the
        same resolved config again."""
        return self.config.given()

    def replace(self, **changes: Any) -> "RunRecord":
        return dataclasses.replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """The JSON object of metadata.json (schema SCHEMA_VERSION)."""
        return {"schema_version": SCHEMA_VERSION, **_plain(self)}

    @classmethod
    def from_dict(cls, data: Any, path: Path | None = None) -> "RunRecord":
        """The record in a JSON object of any readable schema; RecordProblem when it cannot be one."""
        if not isinstance(data, dict):
            raise RecordProblem("it holds no JSON object")
        version = data.get("schema_version")
        if version not in READABLE_SCHEMAS or isinstance(version, bool):
            raise RecordProblem(f"metadata schema {version!r}, this toolkit reads schemas "
                                f"{', '.join(map(str, READABLE_SCHEMAS))}")
        if version == 1:
            data = _from_schema_1(data)
        if version in (1, 2):
            data = _from_schema_2(data)
        record = _load(cls, data, "")
        if record.status not in STATUSES:
            raise RecordProblem(f"\"status\" is not one of {', '.join(STATUSES)}")
        return dataclasses.replace(record, path=Path(path)) if path is not None else record


class RecordProblem(ValueError):
    """Why a JSON object is not a run record (a sentence naming the field)."""


# -- schema 1 -------------------------------------------------------------------------------------------------
def _from_schema_1(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-1 record in schema 2's shape. Schema 1 kept the whole command line (`command_line`, make's
    empty location flags included) where schema 2 has `invocation`; it did not tell values the toolkit filled
    in from typed ones, so its config.sources say "command line" for both, and its invocation lists none."""
    converted = {name: value for name, value in data.items() if name != "command_line"}
    command_line = data.get("command_line")
    if isinstance(command_line, list) and all(isinstance(a, str) for a in command_line):
        argv = command_line[command_line.index("code.main") + 1:] if "code.main" in command_line else command_line
        action = next((a.split("=", 1)[1] for a in argv if a.startswith("--action=")), "")
        converted["invocation"] = {"action": action, "typed": list(typed_flags(argv))}
    return converted


# -- schema 2 -------------------------------------------------------------------------------------------------
SCHEMA_2_ENDPOINTS = "triton_endpoints"   # schema 2 kept servers only for its one harness that had them
SCHEMA_2_EXTRAS = ("engine", "max_batch_size", "server_version")   # what that harness alone reported of a server


def _from_schema_2(data: dict[str, Any]) -> dict[str, Any]:
    """A schema-2 record in schema 3's shape: its servers (each a gRPC server named by `url`, with the engine path,
    max batch size and version it reported) become `endpoints`, those three in `extras`."""
    converted = {name: value for name, value in data.items() if name != SCHEMA_2_ENDPOINTS}
    servers = data.get(SCHEMA_2_ENDPOINTS)
    if servers is None:
        return converted
    if not isinstance(servers, list):
        raise RecordProblem(f"\"{SCHEMA_2_ENDPOINTS}\" is not a list")
    converted["endpoints"] = [_schema_2_endpoint(server, f"{SCHEMA_2_ENDPOINTS}[{number}]")
                              for number, server in enumerate(servers)]
    return converted


def _schema_2_endpoint(server: Any, where: str) -> dict[str, Any]:
    if not isinstance(server, dict):
        raise RecordProblem(f"\"{where}\" is not an object")
    try:
        host, port = split_address(server["url"] if isinstance(server.get("url"), str) else "")
    except ValueError:
        raise RecordProblem(f"\"{where}.url\" is not host:port") from None
    general = {name: value for name, value in server.items() if name != "url" and name not in SCHEMA_2_EXTRAS}
    extras = {name: server[name] for name in SCHEMA_2_EXTRAS if name in server}
    return {"host": host, "port": port, "protocol": "grpc", **general, "extras": extras}


# -- typed loading and plain output ---------------------------------------------------------------------------
def load_part(cls: type, data: Any, where: str) -> Any:
    """One part of a record (SystemRecord, ConfigRecord, Invocation, ...) from its JSON object, checked."""
    return _load_dataclass(cls, data, where)


def _load(kind: Any, value: Any, where: str) -> Any:
    """`value` (from JSON) as `kind`, checked all the way down; RecordProblem naming the field otherwise."""
    origin = typing.get_origin(kind)
    if kind is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(kind):
            return None
        [inner] = [a for a in typing.get_args(kind) if a is not type(None)]
        return _load(inner, value, where)
    if dataclasses.is_dataclass(kind):
        return _load_dataclass(kind, value, where)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        if value not in {m.value for m in kind}:
            raise RecordProblem(f"\"{where}\" is not one of {', '.join(m.value for m in kind)}")
        return kind(value)
    if origin is collections.abc.Mapping:
        if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
            raise RecordProblem(f"\"{where}\" is not an object")
        item = typing.get_args(kind)[1]
        return MappingProxyType({k: _load(item, v, f"{where}.{k}") for k, v in value.items()})
    if origin is tuple:
        if not isinstance(value, list):
            raise RecordProblem(f"\"{where}\" is not a list")
        item = typing.get_args(kind)[0]
        return tuple(_load(item, v, f"{where}[{i}]") for i, v in enumerate(value))
    if kind in (int, float) and (not isinstance(value, (int, float)) or isinstance(value, bool)
                                 or kind is int and not isinstance(value, int)):
        raise RecordProblem(f"\"{where}\" is not {'an integer' if kind is int else 'a number'}")
    if kind in (str, bool) and not isinstance(value, kind):
        raise RecordProblem(f"\"{where}\" is not {'a string' if kind is str else 'true or false'}")
    if kind in (int, float, str, bool):
        return kind(value)
    raise TypeError(f"no JSON reading for {kind!r} ({where})")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _load_dataclass(cls: type, value: Any, where: str) -> Any:
    if not isinstance(value, dict):
        raise RecordProblem(f"\"{where}\" is not an object" if where else "it holds no JSON object")
    hints, given = _hints(cls), {}
    for spec in dataclasses.fields(cls):
        if not spec.metadata.get(_STORED, True):
            continue
        name = f"{where}.{spec.name}" if where else spec.name
        has_default = spec.default is not dataclasses.MISSING or spec.default_factory is not dataclasses.MISSING
        if value.get(spec.name) is None and has_default:
            continue   # absent or null: the default (null where the type allows it)
        if spec.name not in value:
            raise RecordProblem(f"\"{name}\" is missing")
        given[spec.name] = _load(hints[spec.name], value[spec.name], name)
    return cls(**given)


def _plain(value: Any) -> Any:
    """Dataclasses, mappings, tuples and enums as JSON values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {spec.name: _plain(getattr(value, spec.name)) for spec in dataclasses.fields(value)
                if spec.metadata.get(_STORED, True)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value
