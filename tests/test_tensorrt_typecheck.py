"""The toolkit's TensorRT and CUDA modules, type-checked without a GPU, and the TensorRT names they use.

- The modules under code/ that import `tensorrt` or `cuda.bindings` are type-checked by mypy against stubs/
  (generated from the real TensorRT 11.4 and cuda-python 12.9 bindings by scripts/generate_stubs.py), with
  check_untyped_defs. Only errors located in those modules count.
- In the same mypy run, the plugin tests/mypy_tensorrt_names.py records every qualified `tensorrt.*` name those
  modules use (calls, methods, attributes, enum members), and names mypy reports as missing from the stub are
  added. Every used name that tests/data/tensorrt_api_names.txt lists must exist in TensorRT 10.16 and 11.4,
  unless a checked module declares it version-guarded in a module-level tuple
  `VERSION_GUARDED_TENSORRT_NAMES = ("BuilderFlag.FP16", ...)` (read from the source, not imported); such names
  are also exempt from mypy's "has no attribute" errors. Used names the file does not list are printed.
- Small generated modules show that the names check reports a violation and passes shared names.
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mypy import api as mypy_api

REPO = Path(__file__).resolve().parents[1]
CODE = REPO / "code"
STUBS = REPO / "stubs"
PLUGIN = Path(__file__).resolve().with_name("mypy_tensorrt_names.py")
NAMES_FILE = Path(__file__).resolve().parent / "data" / "tensorrt_api_names.txt"
REQUIRED_VERSIONS = ("10.16", "11.4")
GUARD_VARIABLE = "VERSION_GUARDED_TENSORRT_NAMES"

IMPORTS_BINDINGS = re.compile(
    r"^[ \t]*(?:import[ \t]+(?:[\w.]+[ \t]*(?:as[ \t]+\w+[ \t]*)?,[ \t]*)*(?:tensorrt|cuda\.bindings)\b"
    r"|from[ \t]+(?:tensorrt|cuda\.bindings)(?:\.[\w.]+)?[ \t]+import\b"
    r"|from[ \t]+cuda[ \t]+import[ \t(]+(?:[\w \t,]*,[ \t]*)?bindings\b)", re.MULTILINE)
MYPY_LINE = re.compile(r"^(?P<path>.+?):(?P<line>\d+): (?P<severity>error|note): (?P<message>.*)$")
MISSING_ATTRIBUTE = re.compile(r'^"(?:type\[)?(?P<cls>\w+)\]?" has no attribute "(?P<attr>\w+)"')
MISSING_MODULE_ATTRIBUTE = re.compile(r'^Module (?:"tensorrt(?:\.tensorrt)?" )?has no attribute "(?P<attr>\w+)"')
FACT_LINE = re.compile(r"^(?P<name>[A-Za-z_][\w.]*)\s+(?P<versions>(?:\d+(?:\.\d+)*:(?:YES|NO)\s*)+)$")

# Typed uses of TensorRT names that every version in REQUIRED_VERSIONS has: the plugin must see each of them
# (method calls on typed objects, constructors, enum members, properties read and written, plain attributes).
SHARED_SAMPLE = '''\
from typing import assert_type

import tensorrt as trt


def build(logger: trt.ILogger, builder: trt.Builder) -> bytes:
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED))
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30)
    config.builder_optimization_level = 3
    plan = builder.build_serialized_network(network, config)
    assert_type(plan, trt.IHostMemory)
    return bytes(plan)


def run(runtime: trt.Runtime, plan: bytes, stream: int) -> int:
    engine = runtime.deserialize_cuda_engine(plan)
    inputs = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)
              if engine.get_tensor_mode(engine.get_tensor_name(i)) == trt.TensorIOMode.INPUT]
    context = engine.create_execution_context()
    assert_type(context.execute_async_v3(stream), bool)
    logger = trt.Logger(trt.Logger.WARNING)
    return len(inputs) + int(logger.min_severity) + len(trt.Builder(logger).__class__.__name__)
'''
SHARED_SAMPLE_NAMES = {
    "Builder", "Builder.create_network", "NetworkDefinitionCreationFlag.STRONGLY_TYPED",
    "Builder.create_builder_config", "IBuilderConfig.set_memory_pool_limit", "MemoryPoolType.WORKSPACE",
    "IBuilderConfig.builder_optimization_level", "Builder.build_serialized_network",
    "Runtime.deserialize_cuda_engine", "ICudaEngine.get_tensor_name", "ICudaEngine.num_io_tensors",
    "ICudaEngine.get_tensor_mode", "TensorIOMode.INPUT", "ICudaEngine.create_execution_context",
    "IExecutionContext.execute_async_v3", "Logger", "Logger.WARNING", "Logger.min_severity",
}
# BuilderFlag.FP16 is gone in 11.4, ICudaEngine.max_batch_size in 10.16, IInt8Calibrator in 11.4; INT8 is
# declared version-guarded, so it is not reported.
VIOLATING_SAMPLE = '''\
import tensorrt as trt

VERSION_GUARDED_TENSORRT_NAMES = ("BuilderFlag.INT8",)


def configure(config: trt.IBuilderConfig, engine: trt.ICudaEngine) -> int:
    config.set_flag(trt.BuilderFlag.FP16)
    config.set_flag(trt.BuilderFlag.INT8)
    calibrator = trt.IInt8Calibrator
    return engine.max_batch_size + config.max_aux_streams + len(str(calibrator))
'''


@dataclass
class MypyRun:
    """One mypy run: its errors (with their notes) per file, and the recorded uses of tensorrt names."""
    files: list[Path]
    errors: dict[Path, list[tuple[int, str]]] = field(default_factory=dict)
    notes: dict[tuple[Path, int], list[str]] = field(default_factory=dict)
    uses: list[tuple[str, Path, int]] = field(default_factory=list)
    output: str = ""
    status: int = 0

    @property
    def blocked(self) -> bool:
        return self.status == 2 or "errors prevented further checking" in self.output


def toolkit_modules() -> list[Path]:
    return sorted(path for path in CODE.rglob("*.py")
                  if IMPORTS_BINDINGS.search(path.read_text(encoding="utf-8", errors="replace")))


def run_mypy(files: list[Path], work: Path) -> MypyRun:
    """mypy with the stubs and the names plugin; no cache is written into the repository."""
    for stub in ("tensorrt/__init__.pyi", "tensorrt/tensorrt.pyi", "cuda/bindings/runtime.pyi"):
        assert (STUBS / stub).is_file(), f"stubs/{stub} is missing: run `python3 scripts/generate_stubs.py`"
    record = work / "tensorrt_names.tsv"
    record.write_text("")
    config = work / "mypy.ini"
    config.write_text(
        "[mypy]\n"
        "python_version = 3.11\n"
        f"mypy_path = {STUBS}\n"
        "follow_imports = silent\n"
        "check_untyped_defs = True\n"
        "ignore_missing_imports = True\n"      # other third-party modules; not the bindings (below)
        "incremental = False\n"                # every run type-checks everything, so the plugin sees every use
        f"cache_dir = {work / 'mypy_cache'}\n"
        "show_absolute_path = True\n"
        "show_error_codes = True\n"
        "hide_error_context = True\n"
        "pretty = False\n"
        f"plugins = {PLUGIN}\n"
        "[mypy-tensorrt.*]\nignore_missing_imports = False\n"
        "[mypy-cuda.*]\nignore_missing_imports = False\n"
        f"[mypy_tensorrt_names]\noutput = {record}\n", encoding="utf-8")
    stdout, stderr, status = mypy_api.run(["--config-file", str(config), *map(str, files)])
    result = MypyRun(files=[f.resolve() for f in files], output=stdout + stderr, status=status)
    last_error: tuple[Path, int] | None = None
    for line in stdout.splitlines():
        match = MYPY_LINE.match(line)
        if not match:
            continue
        path, lineno = Path(match["path"]).resolve(), int(match["line"])
        if match["severity"] == "error":
            result.errors.setdefault(path, []).append((lineno, match["message"]))
            last_error = (path, lineno)
        elif last_error is not None:
            result.notes.setdefault(last_error, []).append(f"{path.name}:{lineno}: note: {match['message']}")
    for line in record.read_text(encoding="utf-8").splitlines():
        fullname, where, number = line.split("\t")
        result.uses.append((fullname, Path(where).resolve(), int(number)))
    return result


def shown(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else path.name


def short_name(fullname: str) -> str | None:
    """`tensorrt.tensorrt.Builder.build_serialized_network` or `tensorrt.Builder...` -> `Builder...`; None for
    dunder methods (`TensorIOMode.__eq__`), which the names file does not list."""
    name = fullname.removeprefix("tensorrt.")
    name = name.removeprefix("tensorrt.")
    if any(part.startswith("__") and part.endswith("__") for part in name.split(".")):
        return None
    return name


def stub_classes() -> set[str]:
    tree = ast.parse((STUBS / "tensorrt" / "tensorrt.pyi").read_text(encoding="utf-8"))
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def parse(source: str) -> ast.Module:
    """A module's syntax tree; an empty one if it does not parse (mypy reports that in the type-check test)."""
    try:
        return ast.parse(source)
    except SyntaxError:
        return ast.Module(body=[], type_ignores=[])


def tensorrt_aliases(source: str) -> set[str]:
    """The names a module binds to the tensorrt module (`import tensorrt as trt` -> trt)."""
    aliases = set()
    for node in ast.walk(parse(source)):
        if isinstance(node, ast.Import):
            aliases |= {alias.asname or alias.name for alias in node.names if alias.name == "tensorrt"}
    return aliases


def missing_names(run: MypyRun, path: Path, classes: set[str]) -> list[tuple[str, int]]:
    """tensorrt names that mypy reports as missing from the stub in `path` (they reach no plugin hook)."""
    found = []
    source_lines = path.read_text(encoding="utf-8").splitlines()
    aliases = tensorrt_aliases("\n".join(source_lines))
    for lineno, message in run.errors.get(path, []):
        if not message.endswith("[attr-defined]"):
            continue
        match = MISSING_ATTRIBUTE.match(message)
        if match and match["cls"] in classes:
            found.append((f"{match['cls']}.{match['attr']}", lineno))
            continue
        match = MISSING_MODULE_ATTRIBUTE.match(message)
        if match:
            text = source_lines[lineno - 1] if lineno <= len(source_lines) else ""
            named = message.startswith('Module "tensorrt')
            if named or any(re.search(rf"\b{re.escape(a)}\.{match['attr']}\b", text) for a in aliases):
                found.append((match["attr"], lineno))
    return found


def guarded_names(path: Path) -> set[str]:
    """The module-level VERSION_GUARDED_TENSORRT_NAMES tuple of a module, read with ast."""
    names: set[str] = set()
    for node in parse(path.read_text(encoding="utf-8")).body:
        if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
            continue
        targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
        if any(isinstance(t, ast.Name) and t.id == GUARD_VARIABLE for t in targets):
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                value = ast.unparse(node.value)
            assert isinstance(value, tuple) and all(isinstance(v, str) and re.fullmatch(r"[A-Za-z_][\w.]*", v)
                                                    for v in value), \
                f"{path}: {GUARD_VARIABLE} must be a tuple of names like 'BuilderFlag.FP16', not {value!r}"
            names |= {v.removeprefix("tensorrt.") for v in value}
    return names


def load_facts() -> dict[str, dict[str, bool]]:
    facts: dict[str, dict[str, bool]] = {}
    lines = NAMES_FILE.read_text(encoding="utf-8").splitlines()
    assert lines and lines[0].startswith("#"), f"{NAMES_FILE} lost its header line"
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.startswith("#"):
            continue
        match = FACT_LINE.match(line.strip())
        assert match, f"{NAMES_FILE}:{number}: cannot read {line!r}"
        versions = dict(item.split(":") for item in match["versions"].split())
        assert set(REQUIRED_VERSIONS) <= set(versions), f"{NAMES_FILE}:{number}: no {REQUIRED_VERSIONS} columns"
        facts[match["name"]] = {version: flag == "YES" for version, flag in versions.items()}
    assert len(facts) > 100, f"{NAMES_FILE}: only {len(facts)} names"
    return facts


@dataclass
class NamesReport:
    used: dict[str, list[str]]               # name -> "file:line" of each use
    violations: dict[str, list[str]]         # used, listed, missing in a required version, not guarded
    uncovered: list[str]                     # used, not listed in the names file
    guarded: set[str]


def names_report(run: MypyRun, modules: list[Path]) -> NamesReport:
    facts, classes = load_facts(), stub_classes()
    modules = [m.resolve() for m in modules]
    used: dict[str, list[str]] = {}
    for fullname, path, lineno in run.uses:
        name = short_name(fullname)
        if name and path in modules:
            used.setdefault(name, []).append(f"{shown(path)}:{lineno}")
    for path in modules:
        for name, lineno in missing_names(run, path, classes):
            used.setdefault(name, []).append(f"{shown(path)}:{lineno}")
    guarded = set().union(*(guarded_names(path) for path in modules)) if modules else set()
    violations = {name: where for name, where in used.items()
                  if name in facts and name not in guarded
                  and not all(facts[name][version] for version in REQUIRED_VERSIONS)}
    uncovered = sorted(name for name in used if name not in facts)
    return NamesReport(used=used, violations=violations, uncovered=uncovered, guarded=guarded)


def format_violations(report: NamesReport) -> str:
    facts = load_facts()
    lines = []
    for name, where in sorted(report.violations.items()):
        versions = " ".join(f"{v}:{'YES' if facts[name][v] else 'NO'}" for v in REQUIRED_VERSIONS)
        lines.append(f"  {name} ({versions}) used at {', '.join(sorted(set(where)))}")
    return "\n".join(lines)


def module_errors(run: MypyRun, path: Path, guarded: set[str], classes: set[str]) -> list[str]:
    """mypy's errors in `path`, with their notes, less "has no attribute" errors on version-guarded names."""
    exempt = {lineno for name, lineno in missing_names(run, path, classes) if name in guarded}
    lines = []
    for lineno, message in run.errors.get(path, []):
        if lineno in exempt and message.endswith("[attr-defined]"):
            continue
        lines.append(f"{shown(path)}:{lineno}: {message}")
        lines += [f"    {note}" for note in run.notes.get((path, lineno), [])]
    return lines


# ---------------------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def modules() -> list[Path]:
    found = toolkit_modules()
    if not found:
        pytest.skip("no module under code/ imports tensorrt or cuda.bindings yet: nothing to type-check")
    return found


@pytest.fixture(scope="module")
def toolkit_run(modules: list[Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[MypyRun, Path]:
    """One mypy run over the toolkit's modules and a canary module (SHARED_SAMPLE) that shows the plugin works."""
    work = tmp_path_factory.mktemp("tensorrt_typecheck")
    canary = work / "tensorrt_names_canary.py"
    canary.write_text(SHARED_SAMPLE, encoding="utf-8")
    return run_mypy([*modules, canary], work), canary.resolve()


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[MypyRun, Path, Path]:
    work = tmp_path_factory.mktemp("tensorrt_names_samples")
    shared, violating = work / "shared_names_sample.py", work / "violating_names_sample.py"
    shared.write_text(SHARED_SAMPLE, encoding="utf-8")
    violating.write_text(VIOLATING_SAMPLE, encoding="utf-8")
    return run_mypy([shared, violating], work), shared.resolve(), violating.resolve()


def test_finds_the_toolkit_modules_that_import_the_bindings(modules: list[Path]) -> None:
    assert modules, "no module under code/ imports tensorrt or cuda.bindings"
    print("\nchecked modules:", ", ".join(shown(m) for m in modules))


def test_toolkit_modules_typecheck_against_the_stubs(modules: list[Path], toolkit_run) -> None:
    run, _ = toolkit_run
    classes = stub_classes()
    guarded = set().union(*(guarded_names(path) for path in modules))
    errors = [line for path in modules for line in module_errors(run, path.resolve(), guarded, classes)]
    count = sum(1 for line in errors if not line.startswith(" "))
    assert not errors, (f"mypy (against stubs/: TensorRT 11.4, cuda-python 12.9) found {count} error(s) in the "
                        "TensorRT/CUDA modules:\n" + "\n".join(errors))


def test_toolkit_tensorrt_names_exist_in_10_16_and_11_4(modules: list[Path], toolkit_run) -> None:
    run, canary = toolkit_run
    assert not run.blocked, f"mypy stopped before type-checking (see the type-check test):\n{run.output[-3000:]}"
    seen_in_canary = {short_name(f) for f, path, _ in run.uses if path == canary}
    assert SHARED_SAMPLE_NAMES <= seen_in_canary, \
        f"the names plugin did not record {sorted(SHARED_SAMPLE_NAMES - seen_in_canary)}: it is not working"
    report = names_report(run, modules)
    print(f"\n{len(report.used)} tensorrt name(s) used by {len(modules)} module(s); version-guarded: "
          f"{sorted(report.guarded) or 'none'}")
    print("used names that tests/data/tensorrt_api_names.txt does not cover:", report.uncovered or "none")
    importing = [m for m in modules if tensorrt_aliases(m.read_text(encoding="utf-8"))]
    if importing and not report.used:
        print("note: these modules import tensorrt but mypy saw no use of a tensorrt name in them (are the objects "
              "typed Any?):", ", ".join(shown(m) for m in importing))
    assert not report.violations, ("TensorRT names used by the toolkit that are missing in a required version "
                                   "(declare them in VERSION_GUARDED_TENSORRT_NAMES if the code handles both):\n"
                                   + format_violations(report))


def test_names_check_reports_names_missing_from_a_version(sample_run) -> None:
    run, _, violating = sample_run
    report = names_report(run, [violating])
    assert set(report.violations) == {"BuilderFlag.FP16", "ICudaEngine.max_batch_size", "IInt8Calibrator"}, \
        format_violations(report)
    assert report.guarded == {"BuilderFlag.INT8"} and "BuilderFlag.INT8" in report.used
    assert {"IBuilderConfig.set_flag", "IBuilderConfig.max_aux_streams"} <= set(report.used)
    errors = module_errors(run, violating, report.guarded, stub_classes())
    assert any('"FP16"' in line for line in errors) and not any('"INT8"' in line for line in errors), errors


def test_names_check_passes_shared_names(sample_run) -> None:
    run, shared, _ = sample_run
    assert not run.errors.get(shared), run.output
    report = names_report(run, [shared])
    assert SHARED_SAMPLE_NAMES <= set(report.used), sorted(SHARED_SAMPLE_NAMES - set(report.used))
    assert not report.violations, format_violations(report)
    assert "Logger.min_severity" in report.uncovered and not set(report.uncovered) & set(load_facts())
