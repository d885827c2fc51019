"""The typed catalogue of every configuration knob.

Each field is declared once here. The catalogue drives command-line parsing (`--<name>=value`),
validation of the config classes under configs/, help text, and the stubs written by
`make add_custom_system`.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Callable, Iterator, Mapping

from .backends.registry import BACKENDS
from .constants import Scenario
from .errors import UserError

ALL_SCENARIOS = frozenset(Scenario)
# A name that becomes a folder or file name (submitter, model, data set): no path separators, no "..", not hidden.
SAFE_NAME = re.compile(r"^[A-Za-z0-9_+-][A-Za-z0-9._+-]*$")
SAFE_NAME_TEXT = "letters, digits and . _ + - (not starting with a dot, no '..')"
SAFE_NAME_MAX_CHARS = 100


def is_safe_name(text: str) -> bool:
    """Whether `text` can be used as one folder name: SAFE_NAME, no '..', at most SAFE_NAME_MAX_CHARS."""
    return bool(SAFE_NAME.match(text)) and ".." not in text and len(text) <= SAFE_NAME_MAX_CHARS


def _parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"expected true or false, got '{text}'")


_PARSERS: dict[type, Callable[[str], Any]] = {int: int, float: float, str: str, bool: _parse_bool}


@dataclass(frozen=True)
class Field:
    name: str
    type: type
    default: Any
    description: str
    scenarios: frozenset[Scenario] = ALL_SCENARIOS
    backends: frozenset[str] | None = None      # None: every backend
    generative: bool = False                     # applies to the benchmarks that generate tokens only (LLMs)
    choices: tuple[Any, ...] | None = None
    required: bool = False                       # the resolved config must hold a value
    aliases: tuple[str, ...] = ()                # other command-line spellings (NVIDIA names)
    minimum: float | None = None                 # numbers: the smallest value that means something
    maximum: float | None = None                 # numbers: the largest sane value

    def applies_to(self, scenario: Scenario, backend: str | None = None, benchmark: str | None = None) -> bool:
        if scenario not in self.scenarios:
            return False
        if self.generative and benchmark is not None and not _generates_tokens(benchmark):
            return False
        return self.backends is None or backend is None or backend in self.backends

    def parse(self, text: str) -> Any:
        """Convert a command-line string; raises UserError with the expected type or choices."""
        try:
            value = _PARSERS[self.type](text)
        except ValueError:
            raise UserError(f"{self.flags}={text}: expected {self.type_name}. {self.description}") from None
        return self.check(value, source=self.flags)

    def check(self, value: Any, source: str) -> Any:
        """Validate a value from a config class or the command line; ints are accepted as floats."""
        if self.type is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, self.type) or (self.type is int and isinstance(value, bool)):
            raise UserError(f"{source}: {self.name} must be {self.type_name}, got {value!r}.")
        if self.choices is not None and value not in self.choices:
            raise UserError(f"{source}: {self.name}={value!r} is not valid. "
                            f"Valid choices: {', '.join(map(str, self.choices))}.")
        if self.type is str and self.choices is None and not is_safe_name(value):
            raise UserError(f"{source}: {self.name}={value!r} is not a valid name: it names folders, so use only "
                            f"{SAFE_NAME_TEXT}, at most {SAFE_NAME_MAX_CHARS} characters.")
        if self.type in (int, float):
            self._check_range(value, source)
        return value

    def _check_range(self, value: float, source: str) -> None:
        if isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{source}: {self.name}={value!r} is not a finite number; {self.range_text}.")
        too_small = self.minimum is not None and value < self.minimum
        too_big = self.maximum is not None and value > self.maximum
        if too_small or too_big:
            raise UserError(f"{source}: {self.name}={value!r} {self.range_text}.")

    @property
    def range_text(self) -> str:
        """What values the field allows, e.g. `must be at least 1 and at most 65_536`."""
        parts = [f"at least {_number(self.minimum)}" if self.minimum is not None else "",
                 f"at most {_number(self.maximum)}" if self.maximum is not None else ""]
        allowed = " and ".join(p for p in parts if p)
        return f"must be {allowed}" if allowed else f"must be {self.type_name}"

    @property
    def flags(self) -> str:
        """The command-line spellings, e.g. `--batch_size/--gpu_batch_size`."""
        return "/".join(f"--{n}" for n in (self.name, *self.aliases))

    @property
    def type_name(self) -> str:
        return {int: "an integer", float: "a number", str: "a string", bool: "true or false"}[self.type]


def _number(value: float) -> str:
    """1, 0.001, 65_536: a bound as a person reads it (and as Python and the command line accept it)."""
    if float(value).is_integer():
        return f"{int(value):_}"
    return f"{value:g}"


def _fields(*fields: Field) -> Mapping[str, Field]:
    table = {f.name: f for f in fields}
    assert len(table) == len(fields), "duplicate field name in the catalogue"
    return MappingProxyType(table)


_OFFLINE = frozenset({Scenario.Offline})
_SERVER = frozenset({Scenario.Server, Scenario.Interactive})
_SS = frozenset({Scenario.SingleStream})
_MS = frozenset({Scenario.MultiStream})
_HOUR_NS = 3_600_000_000_000
_DAY_MS = 86_400_000

_CORE: Mapping[str, Field] = _fields(
    # What runs
    Field("model", str, None, "Model to run for the benchmark (e.g. resnet50_v1.5, mobilenet_v2).", required=True),
    Field("dataset", str, None, "Data set to run on (e.g. imagenet, imagenet_sample, foolbox20).", required=True),
    Field("backend", str, "onnxruntime", "Inference backend.", choices=BACKENDS),
    Field("precision", str, "fp32", "Numeric precision of the engine.", choices=("fp32", "fp16", "int8")),
    Field("batch_size", int, 1, "Samples per inference call of one backend instance.",
          aliases=("gpu_batch_size",), minimum=1, maximum=65_536),
    Field("instances", int, 1, "Backend instances (model copies, each with its own session and worker thread) "
          "run in parallel; NVIDIA's gpu_inference_streams. For TensorRT, instances per GPU: every visible GPU "
          "gets this many.",
          aliases=("gpu_inference_streams",), minimum=1, maximum=1024),
    Field("start_from_device", bool, False, "TensorRT: keep the performance set on every GPU (uploaded once when "
          "LoadGen loads it) and gather batches there, with no host copy per sample (NVIDIA's start_from_device); "
          "the run plan shows the GPU memory it takes. Runs on the python lwis harness (--harness_impl=python).",
          backends=frozenset({"tensorrt"})),
    Field("intra_op_threads", int, 0, "Threads per backend instance (0: cores divided by instances).",
          backends=frozenset({"onnxruntime"}), minimum=0, maximum=4096),
    Field("inter_op_threads", int, 1, "ONNX Runtime: threads that run independent operators of one call at once "
          "(1: operators one after another, ORT's sequential mode; more: its parallel mode). Pays only for graphs with "
          "parallel branches and spare cores.", backends=frozenset({"onnxruntime"}), minimum=1, maximum=4096),
    Field("intra_op_spinning", bool, True, "ONNX Runtime: intra-op threads spin between operators instead of "
          "sleeping (ORT's session.intra_op.allow_spinning). Spinning saves a wake-up per operator when the cores "
          "are free, but burns them between calls, against other instances and LoadGen's threads.",
          backends=frozenset({"onnxruntime"})),
    Field("workspace_size", int, 4 << 30, "Scratch memory TensorRT's builder may use (bytes).",
          backends=frozenset({"tensorrt"}), minimum=1 << 20, maximum=1 << 40),
    # Generation (the LLM benchmarks)
    Field("max_input_tokens", int, 0, "Prompt tokens at most: a longer article is cut to fit (0: no cap, as the "
          "reference). A capped run is for development: the cap is recorded in metadata.json and user.conf.",
          generative=True, minimum=0, maximum=1_000_000),
    Field("max_output_tokens", int, None, "Output tokens per sample at most (default: the benchmark's reference "
          "cap for the kind of run, e.g. 128 for llama3.1-8b, 32768 in gpt-oss-120b's accuracy runs and 10240 in "
          "its others; another value is a development cap, recorded like max_input_tokens).",
          generative=True, minimum=1, maximum=1_000_000),
    Field("use_guided_decoding", bool, False, "Serving engines: each answer constrained to the benchmark's JSON "
          "schema (the response_format of a chat request), as the reference's option of that name; off by "
          "default, as there. Only a benchmark whose reference defines a schema (qwen3-vl) has one: the others "
          "refuse it. Recorded in metadata.json with the other config fields.", generative=True),
    Field("prefill_batch", int, 1, "Waiting prompts prefilled together when sequences join the running batch "
          "(larger: more throughput; smaller: running sequences wait less per output token).",
          generative=True, minimum=1, maximum=65_536),
    Field("prefill_chunk_tokens", int, 0, "Chunked prefill: a joining prompt is prefilled this many tokens at a "
          "time, one chunk between two decode steps, so no running sequence waits for a whole prompt (0: whole "
          "prompts, as prefill_batch says). Smaller: steadier time per output token; larger: more throughput.",
          generative=True, minimum=0, maximum=1_000_000),
    Field("total_sample_count", int, None, "Samples of the data set LoadGen is given (default: all of it; the "
          "reference's --total-sample-count). Fewer is a development cap: accuracy is then scored on those only.",
          minimum=1, maximum=100_000_000),
    Field("calibration_images", int, 100, "Images in the INT8 calibration list.", minimum=1, maximum=1_000_000),
    Field("input_dtype", str, "fp32", "Type of the engine's inputs: int8 (TensorRT INT8 engines) quantizes the "
          "samples once in preprocessing with the calibrated input scale (a quarter of float32's bytes), as NVIDIA's "
          "ResNet-50 engines take them.", choices=("fp32", "int8")),
    Field("calibration_method", str, "minmax", "How INT8 activation ranges are computed from the calibration list: "
          "minmax (smallest and largest value), entropy (TensorRT's KL-divergence threshold), percentile "
          "(calibration_percentile of |x|).", choices=("minmax", "entropy", "percentile")),
    Field("calibration_percentile", float, None, "With calibration_method=percentile: the percentile of |x| taken as "
          "the range (default 99.999).", minimum=50.0, maximum=100.0),
    # LoadGen settings written to user.conf
    Field("offline_expected_qps", float, None, "Expected Offline throughput (samples/s); sizes the query.",
          scenarios=_OFFLINE, required=True, minimum=0.001, maximum=1e9),
    Field("server_target_qps", float, None, "Server arrival rate to sustain within the latency bound.",
          scenarios=_SERVER, required=True, minimum=0.001, maximum=1e9),
    Field("server_batch_timeout_us", int, 2000, "Longest wait to fill a Server batch (microseconds).",
          scenarios=_SERVER, minimum=0, maximum=60_000_000),
    Field("single_stream_expected_latency_ns", int, None, "Expected SingleStream latency (ns).",
          scenarios=_SS, required=True, minimum=1, maximum=_HOUR_NS),
    Field("multi_stream_expected_latency_ns", int, None, "Expected MultiStream latency per query (ns).",
          scenarios=_MS, required=True, minimum=1, maximum=_HOUR_NS),
    Field("multi_stream_samples_per_query", int, 8, "Samples per MultiStream query.", scenarios=_MS, minimum=1,
          maximum=65_536),
    Field("min_duration", int, None, "Override of LoadGen min_duration (ms); shorter runs are not valid "
          "for submission.", minimum=1, maximum=_DAY_MS),
    Field("min_query_count", int, None, "Override of LoadGen min_query_count.", minimum=1, maximum=1_000_000_000),
    Field("performance_sample_count_override", int, None, "Samples held in memory for performance runs "
          "(default: the benchmark's performance sample count, capped at the data set size).", minimum=1,
          maximum=100_000_000),
    # Compliance
    Field("audit_server_qps_scale", float, 0.92, "Server target QPS of compliance runs, as a fraction of "
          "server_target_qps.", scenarios=_SERVER, minimum=0.01, maximum=1.0),
    Field("audit_retries", int, 1, "Times a failed compliance test is run again.", minimum=0, maximum=10),
)


class _Catalogue(Mapping[str, Field]):
    """The whole catalogue: the fields above and those the harness plug-ins declare, gathered through their
    registry at first use (a plug-in registered later is seen at the next lookup; a name declared twice with two
    meanings is an error)."""

    def __init__(self, core: Mapping[str, Field]) -> None:
        self._core = core
        self._table: Mapping[str, Field] = core
        self._version: int | None = None

    def _current(self) -> Mapping[str, Field]:
        from .harness.registry import declared_fields

        version, fields = declared_fields()
        if version != self._version:
            table = dict(self._core)
            for f in fields:
                if f.name in table and table[f.name] != f:
                    raise ValueError(f"config field '{f.name}' is declared twice (by the catalogue and a plug-in)")
                table[f.name] = f
            self._table, self._version = MappingProxyType(table), version
        return self._table

    def __getitem__(self, name: str) -> Field:
        return self._current()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())


def _generates_tokens(benchmark: str) -> bool:
    from .benchmark_api import generates_tokens

    return generates_tokens(benchmark)


FIELDS: Mapping[str, Field] = _Catalogue(_CORE)


# NVIDIA's knob names that mean something this toolkit has no counterpart for: a flag or config attribute of that
# name gets this explanation rather than being taken for a knob it is not.
NVIDIA_NAMES_WITHOUT_COUNTERPART: Mapping[str, str] = MappingProxyType({
    "gpu_copy_streams": "in NVIDIA's harness the number of CUDA streams used for host-to-device copies per GPU; "
                        "here every TensorRT instance has one copy stream of its own, so there is nothing to set. "
                        "Parallel model instances are --instances (NVIDIA: gpu_inference_streams)",
})


def field(name: str) -> Field:
    try:
        return FIELDS[name]
    except KeyError:
        raise UserError(f"Unknown config field '{name}'. Known fields: {', '.join(FIELDS)}.") from None


def alias_table() -> dict[str, str]:
    """Command-line spelling -> field name, aliases included."""
    table = {name: name for name in FIELDS}
    for f in FIELDS.values():
        for alias in f.aliases:
            table[alias] = f.name
    return table
