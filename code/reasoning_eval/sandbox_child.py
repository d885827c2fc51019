"""The process that runs one model-written solution against its tests, started by code_runner.py as
`python -I sandbox_child.py RESULT_FD` (isolated: no PYTHONPATH, no user site, not even this file's folder on
sys.path, so it imports the standard library only), in a new session, in an empty temporary folder, under
resource limits. It reads its job, a JSON object, from stdin; writes its verdicts, a JSON object, to RESULT_FD
(a copy of its original stdout, which the solution cannot print into: fds 1 and 2 point at /dev/null once the
job is read and the limits set; what went wrong before that reaches code_runner.py on stderr).

It grades as LiveCodeBench's lcb_runner/evaluation/testing_util.py does (the deepseek-r1 and gpt-oss-120b
evaluation scripts call it): the solution is compiled after a prelude of star imports; functional tests call
the named method (of a `Solution()` instance when the code defines `class Solution`) with each test input's
lines read as JSON and compare the return value (a tuple read as a list) with the JSON output; stdin tests run
the code, with every statement but the imports moved into a function, against a stand-in stdin and compare the
printed lines, stripped, exactly or else as numbers (Decimal). The first failing test ends the run. Verdicts:
true = passed, false (functional) or -2 (stdin) wrong answer, -3 time limit (SIGALRM per test), -4 runtime or
compile error.

The functions LiveCodeBench disables before running a solution (its reliability_guard) are disabled here too,
so a solution that kills, forks, spawns or deletes fails as it does there; that guard is not a security
boundary, and neither is this process: the limits of code_runner.py (CPU, memory, files, a wall clock and a
killed process group) contain mistakes, not an attacker.
"""
import ast
import decimal
import io
import json
import os
import resource
import signal
import sys
from unittest import mock

RECURSION_LIMIT = 50000
INT_DIGITS_LIMIT = 50000
# The prelude LiveCodeBench puts before every solution: star imports of these modules, then plain imports.
STAR_IMPORTED = ("string", "re", "datetime", "collections", "heapq", "bisect", "copy", "math", "random",
                 "statistics", "itertools", "functools", "operator", "io", "sys", "json", "builtins", "typing")
PLAIN_IMPORTED = STAR_IMPORTED[:-2]           # all but builtins and typing
# What LiveCodeBench's reliability_guard sets to None before a solution runs.
DISABLED = {
    "os": ("kill", "system", "putenv", "remove", "removedirs", "rmdir", "fchdir", "setuid", "fork", "forkpty",
           "killpg", "rename", "renames", "truncate", "replace", "unlink", "fchmod", "fchown", "chmod", "chown",
           "chroot", "lchflags", "lchmod", "lchown", "getcwd", "chdir"),
    "shutil": ("rmtree", "move", "chown"),
    "subprocess": ("Popen",),
}
BLOCKED_MODULES = ("ipdb", "joblib", "resource", "psutil", "tkinter")
# Loaded in lcb_runner's process before its guard (testing_util imports numpy), so a solution may import it there:
# imported here before the guard too, where installed (importing it afterwards fails on the disabled os.putenv).
PRELOADED = ("numpy",)
MAIN_GUARD = "__name__ == '__main__'"
WRAPPER = "wrapped_function"
PASSED, WRONG, TIMED_OUT, FAILED = True, -2, -3, -4


class TimeoutException(Exception):
    """Raised by SIGALRM when a test runs past its time (its name is how the verdict is told apart)."""


def _alarm(signum, frame):
    raise TimeoutException


def prelude() -> str:
    lines = [f"from {name} import *" for name in STAR_IMPORTED]
    lines += [f"import {name}" for name in PLAIN_IMPORTED]
    lines.append(f"sys.setrecursionlimit({RECURSION_LIMIT})")
    return "\n".join(lines) + "\n"


def apply_limits(limits: dict) -> None:
    """The limits code_runner.py asks for, set on this process before any solution code runs."""
    pairs = ((resource.RLIMIT_CPU, limits.get("cpu_seconds")), (resource.RLIMIT_AS, limits.get("memory_bytes")),
             (resource.RLIMIT_FSIZE, limits.get("file_bytes")), (resource.RLIMIT_NPROC, limits.get("processes")),
             (resource.RLIMIT_CORE, 0))
    for which, value in pairs:
        if value is not None:
            resource.setrlimit(which, (int(value), int(value)))


def preload_modules() -> None:
    import importlib

    for name in PRELOADED:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def disable_destructive_functions() -> None:
    import builtins
    import shutil
    import subprocess

    modules = {"os": os, "shutil": shutil, "subprocess": subprocess}
    os.environ["OMP_NUM_THREADS"] = "1"
    for module, names in DISABLED.items():
        for name in names:
            setattr(modules[module], name, None)
    builtins.quit = None         # type: ignore[assignment]
    builtins.help = None         # type: ignore[assignment]
    for name in BLOCKED_MODULES:
        sys.modules[name] = None     # type: ignore[assignment]


def without_main_guard(code: str) -> str:
    """A final `if __name__ == '__main__':` block replaced by its body."""
    try:
        tree = ast.parse(code)
        last = tree.body[-1]
        if isinstance(last, ast.If) and ast.unparse(last.test).strip() == MAIN_GUARD:
            return ast.unparse(tree.body[:-1]) + "\n" + ast.unparse(last.body)  # type: ignore[arg-type]
    except Exception:
        pass
    return code


def as_function(code: str) -> str:
    """The prelude, the solution's top-level imports, then everything else inside `def wrapped_function():`."""
    try:
        tree = ast.parse(code)
        imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
        others = [s for s in tree.body if not isinstance(s, (ast.Import, ast.ImportFrom))]
        fields = dict(name=WRAPPER, args=ast.arguments(posonlyargs=[], args=[], kwonlyargs=[], kw_defaults=[],
                                                        defaults=[]),
                      body=others, decorator_list=[], lineno=-1)
        if "type_params" in ast.FunctionDef._fields:
            fields["type_params"] = []
        function = ast.FunctionDef(**fields)     # type: ignore[arg-type]
        return prelude() + "\n" + ast.unparse(imports) + "\n" + ast.unparse(function)  # type: ignore[arg-type]
    except Exception:
        return code


def compile_solution(code: str, seconds: float):
    """Run the module's code (under the time limit); the `Solution()` instance where there is one."""
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        namespace: dict = {"__name__": "tmp_sol", "__builtins__": __builtins__}
        exec(code, namespace)
        return namespace["Solution"]() if "class Solution" in code else namespace
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _member(compiled, name: str):
    return compiled.get(name) if isinstance(compiled, dict) else getattr(compiled, name, None)


def _failure(error: BaseException) -> int:
    return TIMED_OUT if "timeoutexception" in repr(error).lower() else FAILED


def run_functional(code: str, tests: list, method_name: str, seconds: float) -> list:
    compiled = compile_solution(prelude() + "\n\n" + code, seconds)
    method = _member(compiled, method_name)
    if method is None:
        return [FAILED]
    verdicts: list = []
    for test in tests:
        arguments = [json.loads(line) for line in test["input"].split("\n")]
        expected = json.loads(test["output"])
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            answer = method(*arguments)
            signal.setitimer(signal.ITIMER_REAL, 0)
        except Exception as error:
            signal.setitimer(signal.ITIMER_REAL, 0)
            return verdicts + [_failure(error)]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        if isinstance(answer, tuple):
            answer = list(answer)
        if answer != expected:
            return verdicts + [False]       # lcb_runner records the comparison itself here, not -2
        verdicts.append(PASSED)
    return verdicts


class _StdinBytes:
    def __init__(self, text: str) -> None:
        self.data = text.encode("utf-8")

    def read(self, *args):
        return self.data

    def readline(self, *args):
        return self.data.split(b"\n")[0] + b"\n"


class StandInStdin:
    """What a stdin test's solution reads from sys.stdin, as LiveCodeBench's stand-in behaves: read() gives it
    all, readline() line by line, readlines() the lines without their ends, .buffer the bytes; no iteration."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._lines = io.StringIO(text)
        self.buffer = _StdinBytes(text)

    def read(self, *args):
        return self.text

    def readline(self, *args):
        return self._lines.readline(*args)

    def readlines(self, *args):
        return self.text.split("\n")

    def __getattr__(self, name):
        return getattr(self._lines, name)


def _stripped_lines(text: str) -> list:
    return [line.strip() for line in text.strip().split("\n")]


def _as_decimals(line: str):
    try:
        return [decimal.Decimal(item) for item in line.split()]
    except Exception:
        return None


def output_matches(printed: str, expected: str) -> bool:
    """Line by line, stripped: equal, or the same numbers (Decimal) where both lines are numbers."""
    got, want = _stripped_lines(printed), _stripped_lines(expected)
    if len(got) != len(want):
        return False
    for got_line, want_line in zip(got, want):
        if got_line == want_line:
            continue
        got_numbers, want_numbers = _as_decimals(got_line), _as_decimals(want_line)
        if got_numbers is None or want_numbers is None or got_numbers != want_numbers:
            return False
    return True


def _call_with_stdin(function, text: str) -> None:
    stdin = StandInStdin(text)
    with mock.patch("builtins.open", mock.mock_open(read_data=text)), mock.patch("sys.stdin", stdin):
        try:
            function()
        except SystemExit:
            pass


def run_stdin(code: str, tests: list, seconds: float) -> list:
    compiled = compile_solution(as_function(without_main_guard(code)), seconds)
    function = _member(compiled, WRAPPER)
    if function is None:
        return [FAILED]
    verdicts: list = []
    for test in tests:
        captured = io.StringIO()
        real_stdout = sys.stdout
        sys.stdout = captured
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            _call_with_stdin(function, test["input"])
            signal.setitimer(signal.ITIMER_REAL, 0)
        except Exception as error:
            signal.setitimer(signal.ITIMER_REAL, 0)
            return verdicts + [_failure(error)]
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout = real_stdout
        if not output_matches(captured.getvalue(), test["output"]):
            return verdicts + [WRONG]
        verdicts.append(PASSED)
    return verdicts


def grade(job: dict) -> list:
    seconds = float(job["seconds_per_test"])
    try:
        if job.get("method"):
            return run_functional(job["code"], job["tests"], job["method"], seconds)
        return run_stdin(job["code"], job["tests"], seconds)
    except Exception:       # a compile error, or a module that ran out of time: LiveCodeBench's -4
        return [FAILED]


def main() -> None:
    result_fd = int(sys.argv[1])
    job = json.loads(sys.stdin.read())
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    sys.set_int_max_str_digits(INT_DIGITS_LIMIT)
    signal.signal(signal.SIGALRM, _alarm)
    apply_limits(job.get("limits", {}))
    preload_modules()
    os.dup2(devnull, 2)     # what the solution writes to stderr is nobody's (lcb_runner leaves it on the console)
    disable_destructive_functions()
    verdicts = grade(job)
    os.write(result_fd, json.dumps({"verdicts": verdicts}).encode())


if __name__ == "__main__":
    main()
