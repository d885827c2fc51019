"""The harness plug-in point: how queries reach an engine, chosen by `--harness_type` (and, where one harness type
has several implementations, by `harness_impl`).

A harness plug-in declares, in one class of its own module:
- `name` (its registry key), the `harness_type` it serves, its `implementation` among that type's (the value of
  `harness_impl` that names it), and whether it serves benchmarks that generate tokens (`generates_tokens`);
- its config `fields` (added to the field catalogue: fields.py gathers them through this registry);
- its command-line `flags` beyond them (HarnessFlag: `--endpoints` of the harnesses that send inference to running
  servers), which it checks and parses itself (`parse_flag`); arguments.py adds them to the parser and names no
  harness;
- whether it needs a local engine file (`needs_engine`);
- `why_not`: why it cannot run a test here (None when it can), which decides the implementation of a test;
- `preflight`: before any test starts, why the environment cannot run it and what fixes it;
- the environment `make build` and `make run` make for it, and its rows of `make build`'s table;
- `create`: the factory of its system under test and sample library, in the test's own process;
- the figures `make bench` measures for it, where it has its own.
Its system under test derives from base.SUTBase (counters, error capture, empty completions, progress, LoadGen
construct/destroy) and writes only how issued samples reach its engine; its endpoints go into the run's record.

The run planner, the child process, `make build` and `make bench` ask this registry and never name a harness;
which plug-in runs a given test is decided in selection.py.
Adding a harness is adding its module and registering it (a new harness type needs no config of its own: a config
class registered without a harness applies to every harness, config_registry.py):
`HARNESSES.register(name, "module:Class")` from the plug-in's own module, or one line in the table of the toolkit's
own, code/common/harness/plugins/__init__.py (documentation/harness.md, "Adding a harness").
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from ..registry import Registry

if TYPE_CHECKING:
    from ..benchmark_api import Benchmark, PreprocessedSet
    from ..constants import TestMode
    from ..fields import Field
    from ..generation import GenerationSettings
    from ..paths import Paths
    from .spec import RunSpec
    from .base import QSLBase, SUTBase

IMPL_FIELD = "harness_impl"


@dataclass(frozen=True)
class Selection:
    """What decides whether an implementation can run a test."""

    benchmark: str
    model: str
    generates_tokens: bool
    harness_type: str          # the --harness_type value
    build_root: Path           # the build folder (compiled parts, e.g. the native core)
    # The command makes what the harness needs before its first test (make run: make_environment), so a part
    # that is missing but can be made here does not rule the implementation out.
    environment_made: bool = False


@dataclass(frozen=True)
class HarnessFlag:
    """A command-line flag a harness plug-in owns, beside its config fields. It applies where the harness type asked
    for (--harness_type) is the plug-in's; one with `actions` applies to those actions alone, whatever the harness
    type (make serve_llm's --engine). Several plug-ins may declare one flag (--endpoints): the plug-in of the harness
    type asked for parses it."""

    name: str                         # --<name>
    help: str
    aliases: tuple[str, ...] = ()     # other spellings (--triton_endpoints)
    actions: tuple[str, ...] = ()


@dataclass(frozen=True)
class HarnessRun:
    """What a harness's factory gets, in the test's own process."""

    spec: "RunSpec"
    benchmark: "Benchmark"
    samples: "PreprocessedSet"            # cut to total_sample_count where the config caps it
    paths: "Paths"
    log_dir: Path
    generation: "GenerationSettings | None"   # how to generate, for a benchmark that generates tokens

    @property
    def fields(self) -> dict[str, Any]:
        return self.spec.fields


class HarnessPlugin:
    """Base of harness plug-ins: the defaults of a harness that needs nothing beyond this environment."""

    name: str
    harness_type: str
    implementation: str = "python"
    generates_tokens: bool = False
    needs_engine: bool = True
    fields: tuple["Field", ...] = ()
    flags: tuple[HarnessFlag, ...] = ()
    description: str = ""

    def why_not(self, selection: Selection) -> str | None:
        """Why this implementation cannot run the test (None: it can). Asked only of the implementations of the
        test's harness type and kind; an implementation asked for by name is asked too, whatever it serves."""
        return None

    def layout_tunable(self, args) -> str | None:
        """Why make tune's layouts (batch size, instances x threads, Server batching) would never reach the engine
        this harness runs the model on (None: they do, as in process, where the toolkit loads the engine)."""
        return None

    def parse_flag(self, name: str, text: str) -> Any:
        """The value of this harness's flag `name` as typed (`text`, never empty); UserError (exit status 2) saying
        what is wrong with it."""
        return text

    def preflight(self, fields, args, paths: "Paths") -> None:
        """Before any test starts: UserError saying why this environment cannot run the test and what fixes it
        (the make target), where it cannot."""

    def check_model(self, benchmark, fields, paths: "Paths") -> None:
        """Before any test starts, for a harness that needs no engine file: UserError where the model files its
        test would load are missing or changed since they were made (an engine file is checked by its manifest)."""

    def needs_environment(self, args, for_run: bool) -> bool:
        """Whether `make build` (for_run False) or `make run` (True) makes an environment for this harness."""
        return False

    def make_environment(self, ctx) -> None:
        """Make (or check, when up to date) what this harness needs beyond .venv."""

    def notices(self, ctx) -> list[str]:
        """Console lines before a run's plan: what the selected tests run on that is not what was wanted (a default
        that fell back), why, and what fixes it."""
        return []

    def capabilities(self, ctx) -> list[tuple[str, str, str]]:
        """Rows of `make build`'s table: (component, version or state, details)."""
        return []

    def run_options(self, args, paths: "Paths") -> dict[str, Any]:
        """What the test's process needs from the invocation (kept in its run spec), e.g. endpoints."""
        return {}

    def prepare_process(self, spec: "RunSpec") -> None:
        """In the test's process, before anything imports LoadGen (RuntimeError or ImportError: it cannot start)."""

    def loadgen_build(self, spec: "RunSpec") -> str:
        """Which LoadGen the test runs on, in words, for its record."""
        import importlib.metadata

        return f"wheel: mlcommons-loadgen {importlib.metadata.version('mlcommons-loadgen')}"

    def prepare_model(self, config, paths: "Paths", log) -> str:
        """`make generate_engines` for a harness that needs no engine file (needs_engine False): make what stands in
        for one (e.g. the model folder a local server loads); a sentence saying what is ready."""
        return "no engine needed"

    def interrupted(self) -> None:
        """A stop signal or a vanished parent ends the test's process: release what must not outlive it (e.g. a
        local server). Runs in a signal handler: no waiting, nothing new imported."""

    def create(self, run: HarnessRun) -> tuple["SUTBase", "QSLBase"]:
        """The started system under test and its sample library."""
        raise NotImplementedError

    # A harness whose own load generator runs the test instead of LoadGen (the MLCommons endpoints client): the
    # test's process calls `run_own_test` instead of `create` and LoadGen.
    own_load_generator: bool = False

    def run_own_test(self, spec: "RunSpec", benchmark: "Benchmark", paths: "Paths", log_dir: Path) -> dict[str, Any]:
        """Run the test with the harness's own load generator; the outcome fields of its record (durations, metric
        or accuracy, valid, submittable, reasons, endpoints, load_generator). An exception fails the test."""
        raise NotImplementedError

    def plan_own_test(self, benchmark: "Benchmark", fields: Mapping[str, Any], mode: "TestMode", test_run: bool,
                      earlier: Any, min_duration_s: float, latency_field: str,
                      earlier_accuracy: Any = None, *, scenario: str = "") -> "OwnEstimate | None":
        """The plan's estimate of a test its own load generator runs, from what that load generator will do and
        `earlier`, the newest earlier performance run of the same computation (planned.EarlierRun, or None; for an
        accuracy test also `earlier_accuracy`, the newest earlier accuracy run), else the config's `latency_field`
        ("" where `scenario` has none: its expected or target rate then); None: estimated as a LoadGen test."""
        return None

    # `make bench`'s figures of this harness where it has its own, instead of the in-process ones (b) to (e):
    # "module:function" of `(bench, ctx, benchmark_name) -> figures`, imported when bench runs.
    bench_figures: str | None = None
    # Figures `make bench` adds beside its overhead probe (a), e.g. a compiled core's ceiling: "module:function" of
    # `(bench, ctx) -> figures`.
    overhead_figures: str | None = None


@dataclass(frozen=True)
class OwnEstimate:
    """A harness's estimate of a test its own load generator runs (HarnessPlugin.plan_own_test)."""

    queries: int
    seconds: float
    per_query_s: float
    measured: bool                   # the time per query comes from an earlier run (else from the config)
    basis: str                       # the time per query and where it comes from
    load_generator: str              # e.g. "the MLCommons endpoints client"
    notes: tuple[str, ...] = ()      # what else the estimate rests on


# name -> "module:Class", each class instantiated on first use; the toolkit's own are listed in their package
# (code/common/harness/plugins/__init__.py), in the order of choice among the implementations of one harness type.
HARNESSES: "Registry[HarnessPlugin]" = Registry("harness", make=lambda cls: cls(),
                                                entries_from="code.common.harness.plugins:TOOLKIT_HARNESSES")


_declared: tuple[int, list["Field"]] = (-1, [])


def declared_fields() -> tuple[int, list["Field"]]:
    """(the registry's version, the config fields the harnesses declare, each once): fields.py's catalogue adds
    them."""
    global _declared
    if _declared[0] != HARNESSES.version:
        fields = {id(f): f for plugin in HARNESSES.loaded() for f in plugin.fields}
        _declared = (HARNESSES.version, list(fields.values()))
    return _declared


def parse_port(text: str, flag: str) -> int:
    """A TCP port flag's value (`--<flag>=<text>`); UserError when it is none."""
    if not text.isdigit() or not 0 < int(text) < 65536:
        from ..errors import UserError

        raise UserError(f"--{flag}={text} is not a TCP port (1 to 65535).")
    return int(text)


def declared_flags() -> dict[str, list[tuple[HarnessPlugin, HarnessFlag]]]:
    """Flag name -> the plug-ins that declare it, with their declarations, in registration order."""
    flags: dict[str, list[tuple[HarnessPlugin, HarnessFlag]]] = {}
    for plugin in HARNESSES.loaded():
        for flag in plugin.flags:
            flags.setdefault(flag.name, []).append((plugin, flag))
    return flags


def harness_types() -> tuple[str, ...]:
    """The harness types the registered plug-ins serve, in registration order."""
    return tuple(dict.fromkeys(p.harness_type for p in HARNESSES.loaded()))


def own_load_generator_type() -> str | None:
    """The harness type whose plug-in brings its own load generator (HarnessPlugin.own_load_generator: the endpoints
    client's); None where no such plug-in is registered."""
    return next((p.harness_type for p in HARNESSES.loaded() if p.own_load_generator), None)


def of_type(harness_type: str, generates_tokens: bool | None = None) -> list[HarnessPlugin]:
    """The plug-ins serving `harness_type` (and, unless None, benchmarks that generate tokens or not), in order."""
    return [p for p in HARNESSES.loaded() if p.harness_type == harness_type
            and (generates_tokens is None or p.generates_tokens == generates_tokens)]
