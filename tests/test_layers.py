"""The layers of the toolkit, read from the source with `ast`: no module imports a layer above its own, no two
modules import each other (directly or round a longer cycle), a benchmark package is imported by nothing but
itself (benchmarks are found through their registry), and the core names no benchmark, backend or harness.

Every import counts: at module level, inside a function, under `if TYPE_CHECKING:`. The tables below are data:
a new module goes into the layer its folder or name gives it, and a new exception must name why it exists.
"""
from __future__ import annotations

import ast
import fnmatch
from collections import defaultdict
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# Bottom to top: a module imports only modules of its own layer and of the layers below. A module's layer is the
# one of the most specific pattern that matches its path (a file name before a folder pattern, a longer one first).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("foundation", ("code/__init__.py", "code/common/__init__.py", "code/common/errors.py",
                    "code/common/constants.py", "code/common/paths.py", "code/common/disk_full.py",
                    "code/common/fileio.py", "code/common/integrity.py", "code/common/locking.py",
                    "code/common/user_files.py", "code/common/environment_lock.py", "code/common/registry_fetch.py",
                    "code/common/torch_checkpoint.py", "code/common/registry.py",
                    "code/common/shared_samples.py", "code/common/processes.py")),
    ("fields, rules, systems", ("code/common/fields.py", "code/common/config_registry.py", "code/common/rules/*",
                                "code/common/systems/*")),
    ("records", ("code/common/records/*",)),
    # The registries and what a plug-in implements or is handed: benchmark, backend and harness interfaces, the
    # token generation protocols and the prompts they take, the harness base (sample library, system under test,
    # progress, run spec).
    ("registries and plug-in interfaces", (
        "code/common/benchmark_api.py", "code/common/named_inputs.py", "code/common/generation.py",
        "code/common/answers.py", "code/common/queued_engine.py",
        "code/common/prompts.py",
        "code/common/decoder_graph.py", "code/common/model_files.py", "code/common/preprocessed_store.py",
        "code/common/backends/__init__.py", "code/common/backends/base.py",
        "code/common/backends/registry.py", "code/common/engines/__init__.py", "code/common/engines/manifest.py",
        "code/common/engines/external_data.py", "code/common/harness/registry.py", "code/common/harness/base.py",
        "code/common/harness/sut.py", "code/common/harness/qsl.py", "code/common/harness/progress.py",
        "code/common/harness/spec.py")),
    ("plug-ins", ("code/*/benchmark.py", "code/resnet50/*", "code/yolo/*", "code/llama3_1_8b/*",
                  "code/llama2_70b/*", "code/deepseek_r1/*", "code/gpt_oss_120b/*", "code/qwen3_vl/*", "code/qwen3_6/*",
                  "code/whisper/*", "code/wan/*",
                  # shared by the LLM benchmarks: the substitute model, tokenizers, prompt sets, ROUGE (code/llm),
                  # and the task benchmarks' base (code/llm_tasks)
                  "code/llm/*", "code/llm_tasks/*",
                  "code/common/backends/*", "code/common/engines/*", "code/common/native/*", "code/common/triton/*",
                  "code/common/serving/*", "code/common/endpoints_client/*",
                  "code/common/harness/native_sut.py", "code/common/harness/triton_sut.py",
                  "code/common/harness/triton_system.py", "code/common/harness/llm_sut.py",
                  "code/common/harness/llm_baseline.py", "code/common/harness/batching_engine.py",
                  "code/common/harness/plugins/*", "code/common/serving/*",
                  "code/common/harness/serving_system.py",
                  # shared by the reasoning benchmarks (gpt-oss-120b, deepseek-r1): their accuracy scoring
                  "code/reasoning_eval/*")),
    ("run orchestration", ("code/common/harness/*", "code/common/arguments.py")),
    ("submission, audit, report, tuning", ("code/common/submission/*", "code/common/audit/*",
                                           "code/common/report/*", "code/common/tuning/*")),
    # code/docker: the container targets, on the host's python3 before any environment exists (standard library
    # and the foundation alone: tests/test_docker_workflow.py runs them without site packages).
    ("actions", ("code/actions/*", "code/docker/*")),
    ("main", ("code/main.py", "code/docker/__main__.py")),
)

# Imports of a higher layer that the code still has, each with why and what removes it: (importer, imported).
UPWARD_EXCEPTIONS: dict[tuple[str, str], str] = {
    ("code/common/fields.py", "code/common/backends/registry.py"):
        "the backend field's choices are the registry's names; the backends' own fields move onto their plug-ins "
        "with the generic registry",
    ("code/common/fields.py", "code/common/harness/registry.py"):
        "the catalogue gathers the fields the harness plug-ins declare, through their registry, at first use",
    ("code/common/fields.py", "code/common/benchmark_api.py"):
        "a generation field applies to the benchmarks whose declaration says they generate tokens",
}

# The benchmark packages: each is reached through the benchmark registry (benchmark_api.get_benchmark), never
# imported by another module.
BENCHMARK_PACKAGES = ("code/resnet50", "code/yolo", "code/llama3_1_8b", "code/llama2_70b", "code/deepseek_r1",
                      "code/gpt_oss_120b", "code/qwen3_vl", "code/whisper", "code/wan")
BENCHMARK_IMPORT_EXCEPTIONS: dict[tuple[str, str], str] = {}

# Cycles the code still has, each a frozenset of the modules in it, with why.
CYCLE_EXCEPTIONS: dict[frozenset[str], str] = {
    frozenset({"code/common/fields.py", "code/common/harness/registry.py"}):
        "the catalogue gathers the harness plug-ins' fields at first use (the upward exception above); the registry "
        "names Field in its type hints only (TYPE_CHECKING)",
}

# Packages of one layer that import each other one way only: (importer, imported) -> why. The other way round, the
# imported package reaches the importer only through the plug-in interfaces (registry, base), a lower layer.
ONE_WAY_PACKAGES: dict[tuple[str, str], str] = {
    ("code/common/backends", "code/common/engines"):
        "a backend plug-in builds through engines/ (ONNX preparation, calibration, ONNX Runtime session options) and "
        "keeps its own builder beside its runner; engines/ picks a backend through the registry, never imports one",
}

# The core: what every benchmark, backend and harness goes through, which names none of them in its code (string
# literals and identifiers, imports included; comments and docstrings may).
CORE = ("code/common/records/*", "code/common/submission/*", "code/common/audit/*",
        "code/common/harness/registry.py", "code/common/harness/base.py", "code/common/harness/sut.py",
        "code/common/harness/qsl.py", "code/common/harness/progress.py", "code/common/harness/spec.py",
        "code/common/harness/plan.py", "code/common/harness/planned.py", "code/common/harness/resume.py",
        "code/common/harness/child.py", "code/common/harness/runner.py", "code/common/processes.py",
        "code/common/harness/claim.py", "code/common/harness/settings.py")
PLUG_IN_NAMES = {
    "benchmark": ("resnet", "yolo", "llama", "mobilenet", "nanodet", "smollm", "retinanet", "bert", "dlrm",
                  "gptj", "mixtral", "deepseek", "whisper", "stable_diffusion", "stable-diffusion", "qwen3", "smolvlm",
                  "wan-2", "wan_2", "t2v", "vbench"),
    "backend": ("onnxruntime", "tensorrt"),
    # Harness types, and the modules of today's harness implementations.
    "harness": ("triton", "lwis", "native_sut", "llm_sut", "llm_baseline"),
}
# Names the core still has, each with why and what removes it: (module, name) -> why.
NAMING_EXCEPTIONS: dict[tuple[str, str], str] = {
    # The run record reads schema 2, whose one harness with servers had a field of its own.
    ("code/common/records/record.py", "triton"): "schema 2's field triton_endpoints, read to convert old records",
    # The software stack of a system description lists the backends' packages; a backend plug-in declares them.
    ("code/common/submission/system_json.py", "onnxruntime"): "SOFTWARE_PACKAGES: ONNX Runtime's packages",
    ("code/common/submission/system_json.py", "tensorrt"): "SOFTWARE_PACKAGES: TensorRT's package",
}


@dataclass(frozen=True)
class Module:
    path: str                     # relative to the repository, e.g. code/common/paths.py
    tree: ast.Module

    @property
    def package(self) -> tuple[str, ...]:
        """The package a relative import starts from: the folder of the file (a package's own for __init__.py)."""
        return tuple(self.path.split("/")[:-1])


@cache
def modules() -> dict[str, Module]:
    found = {}
    for path in sorted((REPO / "code").rglob("*.py")):
        rel = path.relative_to(REPO).as_posix()
        found[rel] = Module(rel, ast.parse(path.read_text(encoding="utf-8"), rel))
    return found


def _module_file(dotted: str) -> str | None:
    """The file of a module or package named `code.x.y`; None when it is not one of the toolkit's."""
    base = dotted.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if candidate in modules():
            return candidate
    return None


def imports(module: Module) -> set[str]:
    """The toolkit modules `module` imports anywhere in its code (resolved to files)."""
    found = set()
    for node in ast.walk(module.tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.package[:len(module.package) - node.level + 1]
                parent = ".".join([*base, *([node.module] if node.module else [])])
            else:
                parent = node.module or ""
            targets = [f"{parent}.{alias.name}" for alias in node.names if _module_file(f"{parent}.{alias.name}")]
            targets = targets if targets and len(targets) == len(node.names) else [parent, *targets]
        else:
            continue
        for target in targets:
            while target and _module_file(target) is None and "." in target:
                target = target.rsplit(".", 1)[0]     # an attribute imported from a module: the module
            file = _module_file(target) if target.startswith("code") else None
            if file is not None and file != module.path:
                found.add(file)
    return found


def _specificity(pattern: str) -> tuple[bool, int]:
    return "*" not in pattern, len(pattern)


def layer_of(path: str) -> int:
    matches = [(_specificity(pattern), number) for number, (_, patterns) in enumerate(LAYERS)
               for pattern in patterns if fnmatch.fnmatchcase(path, pattern)]
    assert matches, f"{path} is in no layer: add it to LAYERS in {Path(__file__).name}"
    return max(matches)[1]


def in_core(path: str) -> bool:
    return any(fnmatch.fnmatchcase(path, pattern) for pattern in CORE)


def test_every_module_has_a_layer():
    for path in modules():
        layer_of(path)


def test_no_module_imports_a_higher_layer():
    found = {}
    for path, module in modules().items():
        for imported in imports(module):
            if layer_of(imported) > layer_of(path):
                found[(path, imported)] = f"{path} ({LAYERS[layer_of(path)][0]}) imports {imported} " \
                                          f"({LAYERS[layer_of(imported)][0]})"
    unexpected = [why for key, why in found.items() if key not in UPWARD_EXCEPTIONS]
    assert not unexpected, "\n".join(unexpected)
    stale = [key for key in UPWARD_EXCEPTIONS if key not in found]
    assert not stale, f"exceptions no longer needed, remove them from UPWARD_EXCEPTIONS: {stale}"


def test_a_benchmark_package_is_imported_by_itself_alone():
    found = set()
    for path, module in modules().items():
        for imported in imports(module):
            owner = next((p for p in BENCHMARK_PACKAGES if imported.startswith(p + "/")), None)
            if owner is not None and not path.startswith(owner + "/"):
                found.add((path, imported))
    unexpected = sorted(found - set(BENCHMARK_IMPORT_EXCEPTIONS))
    assert not unexpected, f"modules importing a benchmark package (use its registry): {unexpected}"
    stale = sorted(set(BENCHMARK_IMPORT_EXCEPTIONS) - found)
    assert not stale, f"exceptions no longer needed, remove them from BENCHMARK_IMPORT_EXCEPTIONS: {stale}"


def _cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(frozenset(component))
    return components


def test_the_cycle_finder_finds_a_cycle_round_three_modules():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [frozenset({"a", "b", "c"})]


def test_no_import_cycle():
    graph = defaultdict(set, {path: imports(module) for path, module in modules().items()})
    found = _cycles(graph)
    unexpected = [sorted(cycle) for cycle in found if cycle not in CYCLE_EXCEPTIONS]
    assert not unexpected, f"import cycles: {unexpected}"
    stale = [sorted(cycle) for cycle in CYCLE_EXCEPTIONS if cycle not in found]
    assert not stale, f"cycles no longer there, remove them from CYCLE_EXCEPTIONS: {stale}"


def test_one_way_packages_are_imported_one_way():
    interfaces = next(n for n, (name, _) in enumerate(LAYERS) if name == "registries and plug-in interfaces")
    found = []
    for (importer, imported), _why in ONE_WAY_PACKAGES.items():
        for path, module in modules().items():
            if path.startswith(imported + "/"):
                found += [f"{path} imports {target}" for target in sorted(imports(module))
                          if target.startswith(importer + "/") and layer_of(target) > interfaces]
    assert not found, "imports against a one-way package pair (ONE_WAY_PACKAGES):\n" + "\n".join(found)


def _docstrings(tree: ast.Module) -> set[int]:
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, kinds) and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}


def code_words(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, text) of every identifier, imported name and string literal outside docstrings."""
    docstrings, words = _docstrings(tree), []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            words.append((line, node.value))
        elif isinstance(node, ast.Name):
            words.append((line, node.id))
        elif isinstance(node, ast.Attribute):
            words.append((line, node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            words.append((line, node.name))
        elif isinstance(node, ast.arg):
            words.append((line, node.arg))
        elif isinstance(node, ast.keyword) and node.arg:
            words.append((line, node.arg))
        elif isinstance(node, ast.alias):
            words += [(line, node.name), *([(line, node.asname)] if node.asname else [])]
        elif isinstance(node, ast.ImportFrom) and node.module:
            words.append((line, node.module))
    return words


def test_code_words_leave_comments_and_docstrings_out():
    tree = ast.parse('"""triton"""\nimport tensorrt as trt  # lwis\ndef f(yolo):\n    """resnet"""\n'
                     '    return g(x=f"{llama}onnxruntime")\n')
    assert sorted({w for _, w in code_words(tree)}) == ["f", "g", "llama", "onnxruntime", "tensorrt", "trt", "x",
                                                        "yolo"]


def test_the_core_names_no_benchmark_backend_or_harness():
    found: dict[tuple[str, str], list[str]] = defaultdict(list)
    for path, module in modules().items():
        if not in_core(path):
            continue
        for line, word in code_words(module.tree):
            for kind, names in PLUG_IN_NAMES.items():
                for name in names:
                    if name in word.lower():
                        found[(path, name)].append(f"{path}:{line}: {kind} {name!r} in {word[:60]!r}")
    unexpected = [hit for key, hits in found.items() if key not in NAMING_EXCEPTIONS for hit in hits]
    assert not unexpected, "\n".join(unexpected)
    stale = [key for key in NAMING_EXCEPTIONS if key not in found]
    assert not stale, f"exceptions no longer needed, remove them from NAMING_EXCEPTIONS: {stale}"


def test_the_command_line_parser_names_no_harness():
    """arguments.py takes --harness_type and every harness flag from the harness plug-ins (HarnessFlag): it names no
    harness type, harness module or serving engine in its code."""
    names = (*PLUG_IN_NAMES["harness"], "openai", "serving", "vllm")
    found = [f"{line}: {word}" for line, word in code_words(modules()["code/common/arguments.py"].tree)
             for name in names if name in word.lower()]
    assert not found, "\n".join(found)


# Names a module of code/common calls a benchmark object by; getattr/hasattr on one of them is a probe of a member the
# interface should declare (benchmark_api.Benchmark, GenerativeBenchmark).
BENCHMARK_NAMES = ("benchmark", "bench")


def _probed(call: ast.Call) -> str | None:
    """The object a getattr/hasattr call probes, as written (`run.benchmark`), where it names a benchmark."""
    if not (isinstance(call.func, ast.Name) and call.func.id in ("getattr", "hasattr") and call.args):
        return None
    target = ast.unparse(call.args[0])
    return target if target.rsplit(".", 1)[-1] in BENCHMARK_NAMES else None


def test_the_common_code_asks_a_benchmark_never_probes_it():
    """The harnesses ask the benchmark interface for what they need: no getattr/hasattr of a benchmark's member in
    code/common (a member a benchmark may lack is declared with its default instead)."""
    found = [f"{path}:{node.lineno}: {ast.unparse(node)}" for path, module in modules().items()
             if path.startswith("code/common/") for node in ast.walk(module.tree)
             if isinstance(node, ast.Call) and _probed(node)]
    assert not found, "\n".join(found)
    assert _probed(ast.parse("getattr(run.benchmark, 'tokenizer', None)").body[0].value) == "run.benchmark"


def test_no_module_reaches_into_the_serving_clients_private_members():
    """The serving client's dispatcher (client.py) and transport (transport.py) are used through their public
    members alone: the worker processes and the benches call the transport and the client as the harness does."""
    owners = {"code/common/serving/client.py": ("client",), "code/common/serving/transport.py": ("transport",)}
    found = [f"{path}:{node.lineno}: {ast.unparse(node)}" for path, module in modules().items()
             for node in ast.walk(module.tree)
             if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
             and isinstance(node.value, (ast.Name, ast.Attribute))
             and ast.unparse(node.value).rsplit(".", 1)[-1] in {"client", "transport"}
             and path not in owners]
    assert not found, "\n".join(found)
