#!/usr/bin/env python3
"""Regenerate the type stubs in stubs/ from the real TensorRT and cuda-python bindings.

    python3 scripts/generate_stubs.py              # Python 3.11, a C compiler, PyPI reachable; under a minute
    python3 scripts/generate_stubs.py --keep-work  # keep the temporary directory for inspection

Neither TensorRT's libraries nor a GPU are needed. Everything is done in a temporary directory (deleted at the end)
with a throwaway virtual environment; nothing is installed into the project's .venv. Steps:

 1. A throwaway venv gets the stub tools and cuda-bindings, each pinned (TOOL_PINS).
 2. `pip download --no-deps` fetches the tensorrt-cu12-bindings wheel (TENSORRT_WHEEL) and it is unpacked. Its
    extension module tensorrt_bindings/tensorrt.so is linked against libnvinfer.so.11, libnvinfer_plugin.so.11 and
    libnvonnxparser.so.11 (TensorRT's libraries, hundreds of MB, not here), so it cannot be imported as is.
 3. Shim libraries with exactly those SONAMEs are compiled (SHIM_LIBRARIES): each exports only the symbols the
    extension module imports from that library, each a function returning 0 (NULL). They exist only so that the
    dynamic loader can resolve the module's imports and Python can import it for introspection; none of them is
    called while the module is imported and introspected, and they are never used by the toolkit or committed.
 4. pybind11-stubgen introspects `tensorrt_bindings` (its __init__.py runs, so the attributes it adds at import
    time, such as Logger.Severity and DataType.itemsize, are seen) and the result is post-processed
    (postprocess_tensorrt, rules T1-T10 documented there) into stubs/tensorrt/ (the package is named `tensorrt`,
    as the toolkit imports it).
 5. cuda.bindings.runtime and cuda.bindings.driver are Cython modules without .pyi files. mypy's stubgen, in
    inspection mode, is run on them (inside the throwaway venv, see inspect_cuda) with two additions: Cython
    functions are recognised as functions, and their signatures are read from the docstrings Cython embeds
    (first line: the parameters with their C types or Python annotations; numpydoc "Parameters", "Returns" and
    "Attributes" sections: the Python types). C1: a handle parameter (a stream, an event, a device pointer...)
    that the function's Cython source converts with `if p is None: ... else: int(cudaStream_t(p))` also
    accepts `int | None`, which the docstrings do not say. The pure-Python parts of cuda.bindings (CUDA_PY_MODULES) are
    stubbed by stubgen from their sources. The stubs keep every name and no docstrings: with docstrings
    runtime and driver would be 2.3 MB, without them about 380 kB.
 6. mypy (the pinned version) checks the generated stubs; what it reports that describes the bindings' real API
    rather than a defect of the text is silenced on its line (S1, STUB_IGNORABLE_CODES), anything else stops
    the script. A probe program (PROBE_SOURCE) using the signatures the toolkit relies on must type-check
    against the stubs with assert_type. Only then are stubs/tensorrt/ and stubs/cuda/ replaced.
"""
from __future__ import annotations

import argparse
import ast
import keyword
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STUBS = REPO / "stubs"

TENSORRT_WHEEL = "tensorrt-cu12-bindings==11.4.0.106"
CUDA_BINDINGS = "cuda-bindings==12.9.10"
# The tools of the throwaway venv. mypy is the project's version (pyproject.toml, optional-dependencies.dev);
# numpy and typing_extensions are there because the TensorRT bindings' signatures name their types.
TOOL_PINS = ["pybind11-stubgen==3.0.0", "mypy==2.4.1", "numpy==2.4.6", "typing_extensions==4.16.0", CUDA_BINDINGS]
WHEEL_PLATFORM = "manylinux_2_28_x86_64"
PYTHON_VERSION = "3.11"

# The symbols tensorrt.so imports from each TensorRT library (`nm -D --undefined-only tensorrt.so`); nothing else.
SHIM_LIBRARIES = {
    "libnvinfer.so.11": ["createInferBuilder_INTERNAL", "createInferRefitter_INTERNAL",
                         "createInferRuntime_INTERNAL", "getBuilderPluginRegistry", "getPluginRegistry"],
    "libnvinfer_plugin.so.11": ["initLibNvInferPlugins"],
    "libnvonnxparser.so.11": ["createNvOnnxParser_INTERNAL", "createNvOnnxParserRefitter_INTERNAL",
                              "getNvOnnxParserVersion"],
}

# pybind11 prints default values of enum type as `<DataType.FLOAT: 0>`; pybind11-stubgen needs to be told where
# each such enum lives (the module or class that contains it) to print them as expressions.
TENSORRT_ENUM_LOCATIONS = {
    "DataType": "tensorrt_bindings.tensorrt",
    "PluginFieldType": "tensorrt_bindings.tensorrt",
    "EngineStat": "tensorrt_bindings.tensorrt",
    "ExecutionContextAllocationStrategy": "tensorrt_bindings.tensorrt",
    "Severity": "tensorrt_bindings.tensorrt.ILogger",
}

# C++ types that the bindings expose under another Python name (the class is registered with a different name);
# raw C++ names found in signatures are otherwise mapped to the Python class of the same name, or to Any.
TENSORRT_CPP_ALIASES = {"IParserError": "ParserError"}

CUDA_MODULES = ["cuda.bindings.runtime", "cuda.bindings.driver"]  # Cython modules, stubbed by inspection
CUDA_PY_MODULES = ["cuda.bindings", "cuda.bindings._version", "cuda.bindings.utils", "cuda.bindings.utils._ptx_utils",
                   "cuda.bindings._internal", "cuda.bindings._internal._fast_enum"]  # stubbed from their sources

# Type-checked against the generated stubs with assert_type: the signatures the toolkit relies on are real.
PROBE_SOURCE = '''\
from typing import Any, assert_type

import tensorrt as trt
from cuda.bindings import runtime as cudart


def probe_tensorrt(logger: trt.ILogger, builder: trt.Builder, network: trt.INetworkDefinition,
                   config: trt.IBuilderConfig, runtime: trt.Runtime, engine: trt.ICudaEngine,
                   context: trt.IExecutionContext, parser: trt.OnnxParser) -> None:
    assert_type(trt.Builder(logger), trt.Builder)
    assert_type(trt.Logger(trt.Logger.WARNING), trt.Logger)
    assert_type(trt.Logger.Severity.ERROR, trt.ILogger.Severity)
    assert_type(builder.build_serialized_network(network, config), trt.IHostMemory)
    assert_type(bytes(builder.build_serialized_network(network, config)), bytes)
    assert_type(builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)),
                trt.INetworkDefinition)
    assert_type(builder.create_builder_config(), trt.IBuilderConfig)
    assert_type(config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, 1 << 30), None)
    assert_type(runtime.deserialize_cuda_engine(b"plan"), trt.ICudaEngine)
    assert_type(engine.num_io_tensors, int)
    assert_type(engine.get_tensor_name(0), str)
    assert_type(engine.get_tensor_mode("x"), trt.TensorIOMode)
    assert_type(engine.get_tensor_dtype("x"), trt.DataType)
    assert_type(engine.get_tensor_shape("x"), trt.Dims)
    assert_type(engine.create_execution_context(), trt.IExecutionContext)
    assert_type(context.set_tensor_address("x", 0), bool)
    assert_type(context.set_input_shape("x", (1, 3, 224, 224)), bool)
    assert_type(context.execute_async_v3(0), bool)
    assert_type(parser.parse(b"onnx"), bool)
    assert_type(parser.get_error(0), trt.ParserError)
    assert_type(trt.TensorIOMode.INPUT, trt.TensorIOMode)
    assert_type(trt.DataType.HALF, trt.DataType)
    assert_type(trt.nptype(trt.DataType.FLOAT), Any)
    assert_type(trt.__version__, str)


def probe_cuda(stream: cudart.cudaStream_t) -> None:
    assert_type(cudart.cudaGetDeviceCount(), tuple[cudart.cudaError_t, int])
    assert_type(cudart.cudaSetDevice(0), tuple[cudart.cudaError_t])
    assert_type(cudart.cudaGetDeviceProperties(0), tuple[cudart.cudaError_t, cudart.cudaDeviceProp])
    assert_type(cudart.cudaGetDeviceProperties(0)[1].name, bytes)
    assert_type(cudart.cudaGetDeviceProperties(0)[1].totalGlobalMem, int)
    assert_type(cudart.cudaStreamCreate(), tuple[cudart.cudaError_t, cudart.cudaStream_t])
    assert_type(cudart.cudaStreamCreateWithFlags(cudart.cudaStreamNonBlocking),
                tuple[cudart.cudaError_t, cudart.cudaStream_t])
    assert_type(cudart.cudaStreamSynchronize(stream), tuple[cudart.cudaError_t])
    assert_type(cudart.cudaStreamDestroy(stream), tuple[cudart.cudaError_t])
    assert_type(cudart.cudaMalloc(1024), tuple[cudart.cudaError_t, Any])
    assert_type(cudart.cudaFree(0), tuple[cudart.cudaError_t])
    assert_type(cudart.cudaMallocHost(1024), tuple[cudart.cudaError_t, Any])
    assert_type(cudart.cudaHostAlloc(1024, cudart.cudaHostAllocDefault), tuple[cudart.cudaError_t, Any])
    assert_type(cudart.cudaFreeHost(0), tuple[cudart.cudaError_t])
    assert_type(cudart.cudaMemcpyAsync(0, 0, 16, cudart.cudaMemcpyKind.cudaMemcpyHostToDevice, stream),
                tuple[cudart.cudaError_t])
    assert_type(cudart.cudaGetErrorString(cudart.cudaError_t.cudaSuccess), tuple[cudart.cudaError_t, bytes])
    assert_type(cudart.cudaDriverGetVersion(), tuple[cudart.cudaError_t, int])
    assert_type(cudart.cudaRuntimeGetVersion(), tuple[cudart.cudaError_t, int])
    assert_type(int(stream), int)
    assert_type(cudart.cudaStreamSynchronize(0), tuple[cudart.cudaError_t])
    assert_type(cudart.cudaMemcpyAsync(0, 0, 16, cudart.cudaMemcpyKind.cudaMemcpyDeviceToHost, None),
                tuple[cudart.cudaError_t])
'''


def log(message: str) -> None:
    print(f"generate_stubs: {message}", flush=True)


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(cmd, text=True, capture_output=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"generate_stubs: command failed ({result.returncode}): {' '.join(cmd)}\n"
                 f"{result.stdout}\n{result.stderr}")
    return result


def header(source: str, tool: str) -> str:
    return (f"# Generated by scripts/generate_stubs.py from {source} with {tool}; do not edit by hand:\n"
            f"# change the script and run `python3 scripts/generate_stubs.py` (see stubs/README.md).\n")


# ---------------------------------------------------------------------------------------------------------------
# Step 1-3: throwaway environment, the TensorRT wheel, the shim libraries
# ---------------------------------------------------------------------------------------------------------------

def make_venv(work: Path) -> Path:
    venv = work / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = venv / "bin" / "python"
    run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *TOOL_PINS])
    return python


def fetch_tensorrt_wheel(python: Path, work: Path) -> Path:
    download = work / "download"
    run([str(python), "-m", "pip", "download", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--only-binary=:all:", "--python-version", PYTHON_VERSION, "--platform", WHEEL_PLATFORM,
         "--dest", str(download), TENSORRT_WHEEL])
    wheels = sorted(download.glob("*.whl"))
    if len(wheels) != 1:
        sys.exit(f"generate_stubs: expected one wheel in {download}, found {wheels}")
    unpacked = work / "tensorrt_wheel"
    with zipfile.ZipFile(wheels[0]) as archive:
        archive.extractall(unpacked)
    return unpacked


def build_shims(work: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc") or shutil.which("g++")
    if compiler is None:
        sys.exit("generate_stubs: a C compiler (cc, gcc or g++) is needed to build the shim libraries")
    shims = work / "shims"
    shims.mkdir()
    for soname, symbols in SHIM_LIBRARIES.items():
        source = shims / (soname.split(".so")[0] + ".c")
        body = "\n".join(f"void *{symbol}(void) {{ return 0; }}" for symbol in symbols)
        source.write_text('#ifdef __cplusplus\nextern "C" {\n#endif\n' + body + '\n#ifdef __cplusplus\n}\n#endif\n')
        run([compiler, "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(shims / soname), str(source)])
    return shims


def check_shim_symbols(extension: Path) -> None:
    """The shims must cover every symbol the extension module takes from TensorRT's libraries (when nm exists)."""
    if shutil.which("nm") is None:
        return
    undefined = set(run(["nm", "-D", "--undefined-only", str(extension)]).stdout.split())
    ours = {symbol for symbols in SHIM_LIBRARIES.values() for symbol in symbols}
    theirs = {s for s in undefined if re.search(r"(Infer|OnnxParser|PluginRegistry|Plugins)", s) and "@" not in s}
    if theirs != ours:
        sys.exit(f"generate_stubs: tensorrt.so imports {sorted(theirs)}, SHIM_LIBRARIES has {sorted(ours)}")


# ---------------------------------------------------------------------------------------------------------------
# Step 4: TensorRT
# ---------------------------------------------------------------------------------------------------------------

def generate_tensorrt(python: Path, wheel: Path, shims: Path, work: Path) -> dict[str, str]:
    check_shim_symbols(wheel / "tensorrt_bindings" / "tensorrt.so")
    env = dict(os.environ, LD_LIBRARY_PATH=str(shims), PYTHONPATH=str(wheel), PYTHONNOUSERSITE="1")
    out = work / "pybind11_stubs"
    cmd = [str(python), "-m", "pybind11_stubgen", "--output-dir", str(out), "--print-invalid-expressions-as-is"]
    for enum, location in TENSORRT_ENUM_LOCATIONS.items():
        cmd += ["--enum-class-locations", f"{enum}:{location}"]
    result = run(cmd + ["tensorrt_bindings"], env=env, cwd=work)
    if "Enum-like str representations were found" in result.stderr:
        sys.exit(f"generate_stubs: TENSORRT_ENUM_LOCATIONS misses an enum:\n{result.stderr}")
    files = {name: (out / "tensorrt_bindings" / name).read_text(encoding="utf-8")
             for name in ("__init__.pyi", "tensorrt.pyi")}
    probe = run([str(python), str(Path(__file__).resolve()), "--buffer-classes", "tensorrt_bindings.tensorrt"], env=env,
                cwd=work)
    return postprocess_tensorrt(files, buffer_classes=probe.stdout.split())


def print_buffer_classes(module_name: str) -> None:
    """Runs in the throwaway venv (Python 3.11): the classes of `module_name` whose instances support the buffer
    protocol (pybind11's py::buffer_protocol()). Python 3.11 has no `__buffer__` to look at, so the type's
    tp_as_buffer->bf_getbuffer slot is read (CPython 3.11's PyTypeObject layout; checked on bytes and int)."""
    import ctypes
    import importlib
    import inspect

    def has_buffer(cls: type) -> bool:
        procs = ctypes.c_void_p.from_address(id(cls) + 160).value          # PyTypeObject.tp_as_buffer
        return procs is not None and ctypes.c_void_p.from_address(procs).value is not None   # ->bf_getbuffer
    if sys.version_info[:2] != (3, 11) or not (has_buffer(bytes) and has_buffer(memoryview)) or has_buffer(int):
        sys.exit("generate_stubs: the buffer-protocol probe needs CPython 3.11")
    module = importlib.import_module(module_name)
    print(" ".join(name for name, obj in vars(module).items() if inspect.isclass(obj) and has_buffer(obj)))


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` characters that are not inside brackets or quotes."""
    parts: list[str] = []
    current: list[str] = []
    depth, quote = 0, ""
    for ch in text:
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == sep and depth == 0:
            parts.append("".join(current))
            current = []
            continue
        current.append(ch)
    parts.append("".join(current))
    return [part for part in (p.strip() for p in parts) if part]


DEF_LINE = re.compile(r"^(?P<indent>\s*)def (?P<name>\w+)\((?P<params>.*)\)(?P<ret>\s*->.*)?:(?P<rest>.*)$")


def fix_def_line(line: str) -> str:
    """Rules T3-T5 on one `def` line (pybind11-stubgen writes each signature on one line)."""
    match = DEF_LINE.match(line)
    if not match:
        return line
    fixed, seen_default = [], False
    for param in split_top_level(match["params"]):
        if param in ("*", "/") or param.startswith("*"):
            fixed.append(param)
            continue
        name_ann, has_default, default = (s.strip() for s in param.partition("="))
        name, _, annotation = (s.strip() for s in name_ann.partition(":"))
        if keyword.iskeyword(name):                  # T3: `in` is a C++ parameter name, not a Python one
            name += "_"
        if has_default and default == "None" and annotation and not re.search(r"\bNone\b|Optional|Any", annotation):
            annotation += " | None"                  # T5: pybind11 defaults of None on non-Optional types
        if has_default and re.fullmatch(r"(['\"]).*\1", default) and annotation and "str" not in annotation:
            default = "..."                          # T5: pybind11 converts the string implicitly
        if has_default:
            seen_default = True
        elif seen_default:
            has_default, default = "=", "..."        # T4: a required parameter after one with a default
        text = name + (f": {annotation}" if annotation else "") + (f" = {default}" if has_default else "")
        fixed.append(text)
    return f"{match['indent']}def {match['name']}({', '.join(fixed)}){match['ret'] or ''}:{match['rest']}"


def postprocess_tensorrt(files: dict[str, str], buffer_classes: list[str]) -> dict[str, str]:
    """pybind11-stubgen's output of the TensorRT bindings, fixed so that mypy accepts it. The rules:

    T1. The package is renamed: `tensorrt_bindings` -> `tensorrt` (the name the toolkit imports; the tensorrt
        package of the tensorrt-cu12 distribution is these bindings).
    T2. Raw C++ type names that pybind11 left in docstring signatures (a type bound after the function that uses
        it, e.g. `nvinfer1::IBuilder`, `nvinfer1::v_1_0::IErrorRecorder`) become the Python class of the same
        name (or the one in TENSORRT_CPP_ALIASES); other C++ expressions (`detail::accessor<...>`) become Any.
        Only signature and annotation lines are touched, not docstrings.
    T3. Parameters named with a Python keyword (`in`) get a trailing underscore (they can only be passed by
        position anyway).
    T4. A required parameter that follows parameters with defaults (valid for pybind11, a syntax error in
        Python) gets the default `...`.
    T5. `x: T = None` becomes `x: T | None = None` (pybind11's None default on a non-Optional type), and a string
        default on a parameter whose type is not str (pybind11 converts it implicitly, e.g. to FallbackString)
        becomes `...`.
    T6. Module-level names that shadow builtins (`tensorrt.bool`, the DataType alias) make the builtin unusable
        in annotations of that module, so annotations that mean the builtin are written `builtins.bool`.
    T7. A nested class with the name of a nested class of a base class is dropped so that the base's class is
        inherited: `Logger.Severity` is `ILogger.Severity` at runtime (set in the package's __init__.py),
        pybind11-stubgen printed a copy of it.
    T8. Annotations of `self` are removed: pybind11 names the C++ class a method was bound on, which is not
        always the Python class or one of its bases (mypy rejects those); without one, `self` is the class.
    T9. A property without `self` (pybind11's static read-only property, e.g. IErrorRecorder.MAX_DESC_LENGTH)
        becomes a class variable: `MAX_DESC_LENGTH: typing.ClassVar[int]`.
    T10. Classes whose instances support the buffer protocol (IHostMemory: `bytes(plan)`, `file.write(plan)`)
        get `def __buffer__(self, flags: int, /) -> memoryview`, which is how a stub says so; pybind11-stubgen
        does not see it (see print_buffer_classes).
    Then S1 (in finish_stubs) applies to every stub.
    """
    classes = set(re.findall(r"^class (\w+)", files["tensorrt.pyi"], flags=re.MULTILINE))

    def cpp_name(match: re.Match) -> str:
        name = match.group(1)
        name = TENSORRT_CPP_ALIASES.get(name, name)
        return name if name in classes else "typing.Any"

    def signature_line(line: str) -> str:
        if not re.match(r"\s*(def |\w+: )", line):
            return line
        line = re.sub(r"\b(?:nvinfer1|nvonnxparser)::(?:\w+::)*(\w+)", cpp_name, line)           # T2
        line = re.sub(r"\b\w+::[\w:]+(?:<[^()\n]*?>)?", "typing.Any", line)                     # T2
        return fix_def_line(line)                                                               # T3-T5

    result = {}
    for filename, text in files.items():
        text = text.replace("tensorrt_bindings", "tensorrt")                                     # T1
        text = "\n".join(signature_line(line) for line in text.split("\n"))
        text = qualify_shadowed_builtins(text, ast.parse(text))                                 # T6
        text = drop_inherited_duplicate_classes(text, ast.parse(text))                          # T7
        text = drop_self_annotations(text, ast.parse(text))                                     # T8
        text = static_properties_as_class_variables(text, ast.parse(text))                      # T9
        if filename == "tensorrt.pyi":
            text = add_buffer_methods(text, ast.parse(text), buffer_classes)                    # T10
        ast.parse(text)
        result[filename] = header(TENSORRT_WHEEL, "pybind11-stubgen") + text
    return result


def add_buffer_methods(text: str, tree: ast.Module, buffer_classes: list[str]) -> str:
    lines = text.split("\n")
    targets = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name in buffer_classes]
    if len(targets) != len(set(buffer_classes)):
        sys.exit(f"generate_stubs: buffer classes {buffer_classes} not all found in the stub")
    for node in sorted(targets, key=lambda n: n.end_lineno or 0, reverse=True):
        lines.insert(node.end_lineno or 0, "    def __buffer__(self, flags: int, /) -> memoryview:\n        ...")
    return "\n".join(lines)


def drop_self_annotations(text: str, tree: ast.Module) -> str:
    lines = text.split("\n")
    spots = []
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            for node in cls.body:
                if isinstance(node, ast.FunctionDef) and node.args.args and node.args.args[0].arg == "self":
                    arg = node.args.args[0]
                    if arg.annotation is not None and arg.lineno == arg.end_lineno:
                        spots.append((arg.lineno, arg.col_offset, arg.end_col_offset))
    for lineno, start, end in sorted(spots, reverse=True):
        line = lines[lineno - 1]
        lines[lineno - 1] = line[:start] + "self" + line[end:]
    return "\n".join(lines)


def static_properties_as_class_variables(text: str, tree: ast.Module) -> str:
    lines = text.split("\n")
    spans = []
    for cls in ast.walk(tree):
        if isinstance(cls, ast.ClassDef):
            for node in cls.body:
                if isinstance(node, ast.FunctionDef) and not node.args.args and any(
                        isinstance(d, ast.Name) and d.id == "property" for d in node.decorator_list):
                    returns = ast.unparse(node.returns) if node.returns else "typing.Any"
                    start = min(d.lineno for d in node.decorator_list)
                    indent = " " * node.col_offset
                    spans.append((start, node.end_lineno, f"{indent}{node.name}: typing.ClassVar[{returns}]"))
    for start, end, replacement in sorted(spans, reverse=True):
        lines[start - 1:end] = [replacement]
    return "\n".join(lines)


def annotation_nodes(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None and arg.annotation is not None:
                    yield arg.annotation
            if node.returns is not None:
                yield node.returns
        elif isinstance(node, ast.AnnAssign):
            yield node.annotation


def qualify_shadowed_builtins(text: str, tree: ast.Module) -> str:
    import builtins
    shadowing = set()
    for node in tree.body:
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        shadowing |= {t.id for t in targets if isinstance(t, ast.Name) and hasattr(builtins, t.id)}
    if not shadowing:
        return text
    lines = text.split("\n")
    spots = sorted({(n.lineno, n.col_offset, n.id) for ann in annotation_nodes(tree) for n in ast.walk(ann)
                    if isinstance(n, ast.Name) and n.id in shadowing}, reverse=True)
    # A module-level `bool: DataType` keeps its target; only the annotation `DataType` side is walked.
    for lineno, col, name in spots:
        line = lines[lineno - 1]
        lines[lineno - 1] = line[:col] + "builtins." + line[col:]
    text = "\n".join(lines)
    return re.sub(r"^(from __future__ import annotations\n)", r"\1import builtins\n", text, count=1, flags=re.M)


def drop_inherited_duplicate_classes(text: str, tree: ast.Module) -> str:
    top = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}

    def nested(cls: ast.ClassDef) -> dict[str, ast.ClassDef]:
        return {n.name: n for n in cls.body if isinstance(n, ast.ClassDef)}

    drop = []
    for cls in top.values():
        for base in cls.bases:
            base_cls = top.get(base.id) if isinstance(base, ast.Name) else None
            if base_cls is None:
                continue
            inherited = nested(base_cls)
            drop += [(inner.lineno, inner.end_lineno) for name, inner in nested(cls).items() if name in inherited]
    lines = text.split("\n")
    for start, end in sorted(drop, reverse=True):
        del lines[start - 1:end]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------------------------
# Step 5: cuda-python (the inspection part runs inside the throwaway venv: `--inspect-cuda OUT`)
# ---------------------------------------------------------------------------------------------------------------

def generate_cuda(python: Path, work: Path) -> dict[str, str]:
    out = work / "cuda_stubs"
    env = dict(os.environ, PYTHONNOUSERSITE="1")
    run([str(python), str(Path(__file__).resolve()), "--inspect-cuda", str(out)], env=env, cwd=work)
    args = []
    for module in CUDA_PY_MODULES:
        args += ["-m", module]
    run([str(python.parent / "stubgen"), "--include-docstrings", "-o", str(out), *args], env=env, cwd=work)
    files = {}
    for path in sorted(out.rglob("*.pyi")):
        relative = path.relative_to(out).as_posix()
        files[relative] = path.read_text(encoding="utf-8")
    for relative in list(files):
        files[relative] = header(CUDA_BINDINGS, "mypy stubgen") + files[relative]
    files["cuda/__init__.pyi"] = header(CUDA_BINDINGS, "mypy stubgen") + \
        "# `cuda` is a namespace package at runtime; this stub only makes it a package for mypy.\n"
    return files


def module_path(module: str) -> str:
    return module.replace(".", "/") + ".pyi"


C_TYPES = {
    "int": "int", "unsigned int": "int", "size_t": "int", "ssize_t": "int", "long": "int", "unsigned long": "int",
    "long long": "int", "unsigned long long": "int", "short": "int", "unsigned short": "int", "char": "int",
    "unsigned char": "int", "signed char": "int", "void_ptr": "int", "intptr_t": "int", "uintptr_t": "int",
    "int32_t": "int", "uint32_t": "int", "int64_t": "int", "uint64_t": "int", "float": "float", "double": "float",
    "bint": "bool", "bool": "bool", "char *": "bytes", "const char *": "bytes",
}
PY_TYPES = {"int": "int", "float": "float", "bool": "bool", "bytes": "bytes", "str": "str", "Any": "typing.Any",
            "None": "None", "object": "object", "list": "list", "tuple": "tuple", "dict": "dict",
            "Optional": "typing.Optional", "Union": "typing.Union"}


def inspect_cuda(out: Path) -> None:
    """Runs in the throwaway venv: mypy's inspection stub generator, taught to read Cython functions."""
    import importlib
    import inspect

    from mypy.stubdoc import ArgSig, FunctionSig
    from mypy.stubgenc import InspectionStubGenerator
    from mypy.stubutil import SignatureGenerator

    modules = {name: importlib.import_module(name) for name in CUDA_MODULES}

    def resolve(name: str, home: str) -> str | None:
        """A class or enum named in a docstring, as a qualified name: the module's own first, then the others."""
        head, _, member = name.partition(".")
        for module_name in [home] + [m for m in CUDA_MODULES if m != home]:
            obj = getattr(modules[module_name], head, None)
            if inspect.isclass(obj):
                return f"{module_name}.{head}"
        return None

    def convert_doc_type(text: str, home: str) -> str:
        """A numpydoc type (`size_t`, `:py:obj:`~.CUstream` or :py:obj:`~.cudaStream_t``, `list[int]`) as Python."""
        text = text.strip()
        options = [part.strip() for part in re.split(r"\s+or\s+", text)]
        if len(options) > 1:
            return " | ".join(dict.fromkeys(convert_doc_type(option, home) for option in options))
        list_match = re.fullmatch(r"list\[(.*)\]", text)
        if list_match:
            return f"list[{convert_doc_type(list_match.group(1), home)}]"
        text = re.sub(r":py:obj:`~?\.?([\w.]+)(?:\(\))?`", r"\1", text)
        if text in C_TYPES:
            return C_TYPES[text]
        if text in PY_TYPES:
            return PY_TYPES[text]
        resolved = resolve(text, home)
        return resolved or "typing.Any"

    def convert_annotation(text: str, home: str) -> str:
        """A Python annotation from the embedded signature (Cython enforces it), names resolved, tuple[X]: X, ..."""
        tree = ast.parse(text, mode="eval")

        class Rewrite(ast.NodeTransformer):
            def visit_Name(self, node: ast.Name) -> ast.AST:
                name = PY_TYPES.get(node.id) or resolve(node.id, home) or "typing.Any"
                return ast.parse(name, mode="eval").body

            def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
                self.generic_visit(node)
                if isinstance(node.value, ast.Name) and node.value.id == "tuple" and not isinstance(
                        node.slice, ast.Tuple):
                    node.slice = ast.Tuple([node.slice, ast.Constant(...)], ast.Load())
                return node

        return ast.unparse(Rewrite().visit(tree.body))

    def numpydoc(doc: str, title: str) -> list[tuple[str | None, str]]:
        """(name, type) entries of a numpydoc section: `name : type` lines, or a bare `type` line."""
        lines = inspect.cleandoc(doc).split("\n")
        rule = re.compile(r"-{3,}")
        for i in range(len(lines) - 1):
            if lines[i].strip() == title and rule.fullmatch(lines[i + 1].strip()):
                entries: list[tuple[str | None, str]] = []
                for j in range(i + 2, len(lines)):
                    line = lines[j]
                    if line.strip() and j + 1 < len(lines) and rule.fullmatch(lines[j + 1].strip()):
                        break                                     # the next section's title
                    if line.strip() and not line[0].isspace():
                        name, sep, typ = line.partition(" : ")
                        entries.append((name.strip(), typ.strip()) if sep else (None, line.strip()))
                return entries
        return []

    def handle_conversions(module_name: str) -> dict[str, set[str]]:
        """Per function of the module's Cython source (the .pyx in the wheel): the parameters it converts as
        handles, `if p is None: 0 ... else: int(cudaStream_t(p))`, so that None and an int are accepted too."""
        pyx = Path(modules[module_name].__file__ or "").parent / (module_name.rsplit(".", 1)[1] + ".pyx")
        if not pyx.is_file():
            sys.exit(f"generate_stubs: {pyx} is missing; the handle rule (C1) reads it")
        source = pyx.read_text(encoding="utf-8")
        found: dict[str, set[str]] = {}
        starts = [m for m in re.finditer(r"^def (\w+)\((.*?)\):$", source, flags=re.MULTILINE | re.DOTALL)]
        for match, following in zip(starts, starts[1:] + [None]):
            body = source[match.end():following.start() if following else len(source)]
            for param in re.findall(r"\b(\w+)\b", match.group(2)):
                if re.search(rf"^\s+if {param} is None:$", body, flags=re.MULTILINE) and re.search(
                        rf"= int\(\w+\({param}\)\)$", body, flags=re.MULTILINE):
                    found.setdefault(match.group(1), set()).add(param)
        return found

    class CythonDocstringSignatures(SignatureGenerator):
        def __init__(self, home: str) -> None:
            self.home = home
            self.handles = handle_conversions(home)

        def get_function_sig(self, default_sig: FunctionSig, ctx) -> list[FunctionSig] | None:
            doc, owner = ctx.docstring, ctx.name
            constructor = ctx.name == "__init__" and ctx.class_info is not None
            if constructor:         # `ClassName(params)` heads the class docstring; else (*args, **kwargs)
                doc, owner = ctx.class_info.docstring, ctx.class_info.name
            first = inspect.cleandoc(doc or "").split("\n")[0].strip()
            match = re.fullmatch(rf"(?:[\w.]+\.)?{re.escape(owner)}\((.*)\)", first)
            if not match:
                if constructor:
                    return [FunctionSig("__init__", [ArgSig("self"), ArgSig("*args"), ArgSig("**kwargs")], "None")]
                return None
            documented = {name: typ for name, typ in numpydoc(doc, "Parameters") if name}
            args, seen_default = [], False
            for param in split_top_level(match.group(1)):
                if param in ("*", "/") or param.startswith("*"):
                    args.append(ArgSig(param))
                    continue
                head, equals, _ = (s.strip() for s in param.partition("="))
                declaration, colon, annotation = (s.strip() for s in head.partition(":"))
                declaration = re.sub(r"\s+not\s+None$", "", declaration)
                parts = re.fullmatch(r"(?P<ctype>.*?[\s*])?(?P<name>\w+)", declaration)
                if parts is None:
                    return None
                name = parts["name"]
                ctype = re.sub(r"\s*\*", " *", parts["ctype"].strip()) if parts["ctype"] else None
                if name == "self" and ctx.class_info is not None:
                    args.append(ArgSig("self"))
                    continue
                if annotation:
                    typ = convert_annotation(annotation, self.home)
                elif name in documented:
                    typ = convert_doc_type(documented[name], self.home)
                elif ctype:
                    typ = C_TYPES.get(ctype, "typing.Any")
                else:
                    typ = None
                if typ and ctx.class_info is None and name in self.handles.get(ctx.name, ()):
                    typ += " | int | None"                       # C1: see handle_conversions
                seen_default = seen_default or bool(equals)
                args.append(ArgSig(name, typ, default=seen_default))
            returns = numpydoc(doc, "Returns")
            ret = None
            if returns:
                types = [convert_doc_type(typ, self.home) for _, typ in returns]
                error = returns[0][1].split(".")[0]
                if error in ("cudaError_t", "CUresult"):
                    types[0] = resolve(error, self.home) or "typing.Any"
                    ret = f"tuple[{', '.join(types)}]"
                elif len(types) == 1:
                    ret = types[0]
                else:
                    ret = f"tuple[{', '.join(types)}]"
            return [FunctionSig(ctx.name, args, "None" if constructor else ret)]

        def get_property_type(self, default_type: str | None, ctx) -> str | None:
            if ctx.class_info is None or not ctx.class_info.docstring:
                return None
            for name, typ in numpydoc(ctx.class_info.docstring, "Attributes"):
                if name == ctx.name:
                    return convert_doc_type(typ, self.home)
            return None

    class CythonStubGenerator(InspectionStubGenerator):
        def is_function(self, obj: object) -> bool:
            return super().is_function(obj) or type(obj).__name__ == "cython_function_or_method"

        def is_skipped_attribute(self, attr: str) -> bool:
            return super().is_skipped_attribute(attr) or attr.startswith("__pyx") or attr in (
                "__reduce_cython__", "__setstate_cython__", "__test__")

        def is_classmethod(self, class_info, name: str, obj: object) -> bool:
            # Cython types have a builtin __new__ and no __init__: stubgen prints __new__ as __init__, an instance
            # method, not a classmethod.
            return name != "__new__" and super().is_classmethod(class_info, name, obj)

        def get_sig_generators(self) -> list[SignatureGenerator]:
            return [CythonDocstringSignatures(self.module.__name__), *super().get_sig_generators()]

    known = ["cuda", "cuda.bindings", *CUDA_MODULES, "cuda.bindings._internal", "cuda.bindings._internal._fast_enum"]
    for name in CUDA_MODULES:
        generator = CythonStubGenerator(name, known, include_docstrings=False)
        generator.generate_module()
        target = out / module_path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(generator.output(), encoding="utf-8")


# ---------------------------------------------------------------------------------------------------------------
# Step 6: checks, and writing stubs/
# ---------------------------------------------------------------------------------------------------------------

# S1. What mypy still reports in the stubs and describes the bindings' real API rather than a defect of the
# generated text is silenced on its line with `# type: ignore[code]`, as typeshed does, for these codes only:
STUB_IGNORABLE_CODES = {
    "override": "a subclass method whose signature differs from the base class's (pybind11 classes do that: "
                "IPluginV2DynamicExt.get_workspace_size, the __eq__ overloads of pybind11 enums)",
    "overload-cannot-match": "pybind11 overloads that mypy cannot tell apart (str and a class built from str)",
    "assignment": "an attribute retyped in a subclass (IActivationLayer.type is an ActivationType, ILayer.type a "
                  "LayerType) and `__hash__: ClassVar[None] = None` of unhashable classes",
}
MYPY_ERROR = re.compile(r"^(?P<path>[^:]+):(?P<line>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[a-z-]+)\])?$")


def mypy(python: Path, stubs: Path, work: Path, targets: list[str]) -> list[re.Match]:
    env = dict(os.environ, MYPYPATH=str(stubs), PYTHONNOUSERSITE="1")
    cmd = [str(python), "-m", "mypy", "--python-version", PYTHON_VERSION, "--no-incremental", "--cache-dir",
           str(work / "mypy_cache"), "--no-error-summary", "--show-error-codes", "--no-pretty", *targets]
    result = subprocess.run(cmd, text=True, capture_output=True, env=env, cwd=stubs)
    errors = [m for m in map(MYPY_ERROR.match, result.stdout.splitlines()) if m]
    if result.returncode not in (0, 1) or (result.returncode == 1 and not errors):
        sys.exit(f"generate_stubs: mypy failed:\n{result.stdout}{result.stderr}")
    return errors


def finish_stubs(python: Path, files: dict[str, str], work: Path) -> dict[str, str]:
    """S1, then the checks: no mypy error left in the stubs, and PROBE_SOURCE type-checks against them."""
    staged = work / "stubs"
    write_stubs(files, staged)
    ignores: dict[tuple[str, int], set[str]] = {}
    for error in mypy(python, staged, work, ["-p", "tensorrt", "-p", "cuda"]):
        if error["code"] in STUB_IGNORABLE_CODES and error["path"] in files:
            ignores.setdefault((error["path"], int(error["line"])), set()).add(error["code"])
    for (path, line), codes in ignores.items():
        lines = files[path].split("\n")
        lines[line - 1] += f"  # type: ignore[{', '.join(sorted(codes))}]"
        files[path] = "\n".join(lines)
    shutil.rmtree(staged)
    write_stubs(files, staged)
    left = mypy(python, staged, work, ["-p", "tensorrt", "-p", "cuda"])
    probe = work / "probe.py"
    probe.write_text(PROBE_SOURCE, encoding="utf-8")
    left += mypy(python, staged, work, [str(probe)])
    if left:
        sys.exit("generate_stubs: mypy errors left:\n" + "\n".join(m.group(0) for m in left))
    log(f"S1: {len(ignores)} lines got a type: ignore comment; the stubs and the probe type-check cleanly")
    return files


def write_stubs(files: dict[str, str], target: Path) -> None:
    for relative, text in files.items():
        path = target / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.rstrip("\n") + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--keep-work", action="store_true", help="keep the temporary directory and print its path")
    parser.add_argument("--inspect-cuda", metavar="OUT", help=argparse.SUPPRESS)
    parser.add_argument("--buffer-classes", metavar="MODULE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.buffer_classes:
        print_buffer_classes(args.buffer_classes)
        return
    if args.inspect_cuda:
        inspect_cuda(Path(args.inspect_cuda))
        return
    if f"{sys.version_info.major}.{sys.version_info.minor}" != PYTHON_VERSION:
        sys.exit(f"generate_stubs: run with Python {PYTHON_VERSION} (the bindings wheels are cp311)")
    work = Path(tempfile.mkdtemp(prefix="generate_stubs-"))
    try:
        log(f"throwaway venv with {', '.join(TOOL_PINS)}")
        python = make_venv(work)
        log(f"downloading {TENSORRT_WHEEL}, building the shim libraries")
        wheel = fetch_tensorrt_wheel(python, work)
        shims = build_shims(work)
        log("pybind11-stubgen on tensorrt_bindings")
        files = {f"tensorrt/{name}": text for name, text in generate_tensorrt(python, wheel, shims, work).items()}
        log("mypy stubgen (inspection) on cuda.bindings")
        files.update(generate_cuda(python, work))
        log("checking the stubs with mypy")
        files = finish_stubs(python, files, work)
        for old in ("tensorrt", "cuda"):
            shutil.rmtree(STUBS / old, ignore_errors=True)
        write_stubs(files, STUBS)
        for relative in sorted(files):
            log(f"wrote stubs/{relative} ({(STUBS / relative).stat().st_size} bytes)")
    finally:
        if args.keep_work:
            log(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
