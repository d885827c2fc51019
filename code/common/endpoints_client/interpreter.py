"""A Python the endpoints client runs on (its pyproject says requires-python >= 3.12).

Candidates, in order: MLCOMMONS_ENDPOINTS_PYTHON where the user names one; the versions pyenv keeps (called by their
path: pyenv's bare `python3.12` is a shim that fails where no version is selected); `python3.12`, `python3.13` and
`python3.14` on PATH; what `uv python find` finds. Each is run once and counts only where it runs and reports a
version >= 3.12: a name on PATH is not a Python that runs.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Mapping

from ..errors import EXIT_BAD_INPUT, UserError

MINIMUM = (3, 12)
OVERRIDE = "MLCOMMONS_ENDPOINTS_PYTHON"
ON_PATH = ("python3.12", "python3.13", "python3.14")
PROBE = "import sys, platform; print(sys.executable); print(platform.python_version())"
PROBE_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Interpreter:
    path: Path            # the executable as it reports itself (sys.executable)
    version: str          # e.g. "3.12.1"
    found_by: str         # where it came from, for the run's record: "pyenv", "PATH", "uv", OVERRIDE

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return version_tuple(self.version)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def probe(executable: str | Path, found_by: str) -> Interpreter | None:
    """The interpreter at `executable` where it runs and is >= 3.12; None otherwise."""
    try:
        done = subprocess.run([str(executable), "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S,
                              check=False, env={k: v for k, v in os.environ.items()
                                                if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")})
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2 or version_tuple(lines[1]) < MINIMUM:
        return None
    return Interpreter(Path(lines[0]), lines[1], found_by)


def pyenv_root(env: Mapping[str, str]) -> Path | None:
    if env.get("PYENV_ROOT"):
        return Path(env["PYENV_ROOT"])
    pyenv = shutil.which("pyenv", path=env.get("PATH"))
    if pyenv is None:
        default = Path.home() / ".pyenv"
        return default if default.is_dir() else None
    try:
        done = subprocess.run([pyenv, "root"], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def pyenv_candidates(root: Path | None) -> list[Path]:
    """pyenv's CPython versions >= 3.12, oldest first (3.12 is the version the client is written and tested for)."""
    if root is None or not (root / "versions").is_dir():
        return []
    found = []
    for folder in (root / "versions").iterdir():
        if re.fullmatch(r"\d+\.\d+\.\d+", folder.name) and version_tuple(folder.name) >= MINIMUM:
            major_minor = ".".join(folder.name.split(".")[:2])
            executable = folder / "bin" / f"python{major_minor}"
            if executable.is_file():
                found.append((version_tuple(folder.name), executable))
    return [path for _, path in sorted(found)]


def uv_candidate(uv: Path | None) -> list[Path]:
    if uv is None:
        return []
    try:
        done = subprocess.run([str(uv), "python", "find", "--no-project", f">={MINIMUM[0]}.{MINIMUM[1]}"],
                              capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    return [Path(done.stdout.strip())] if done.returncode == 0 and done.stdout.strip() else []


def candidates(env: Mapping[str, str], uv: Path | None) -> Iterable[tuple[Path | str, str]]:
    """(executable, where it came from), in the order they are tried; lazily, so that the first that runs ends it."""
    if env.get(OVERRIDE):
        yield env[OVERRIDE], OVERRIDE
        return
    for path in pyenv_candidates(pyenv_root(env)):
        yield path, "pyenv"
    for name in ON_PATH:
        found = shutil.which(name, path=env.get("PATH"))
        if found:
            yield found, "PATH"
    for path in uv_candidate(uv):
        yield path, "uv"


def find_interpreter(env: Mapping[str, str] | None = None, uv: Path | None = None,
                     run: Callable[[str | Path, str], Interpreter | None] = probe) -> Interpreter:
    """The first candidate that runs and is >= 3.12; UserError (exit 2) saying what to install otherwise."""
    env = os.environ if env is None else env
    tried = []
    for executable, found_by in candidates(env, uv):
        interpreter = run(executable, found_by)
        if interpreter is not None:
            return interpreter
        tried.append(str(executable))
    if env.get(OVERRIDE):
        raise UserError(f"{OVERRIDE}={env[OVERRIDE]} is not a Python >= 3.12 that runs; point it at one (for example "
                        f"$(pyenv root)/versions/3.12.1/bin/python3.12) or unset it.", exit_code=EXIT_BAD_INPUT)
    looked = f" (tried {', '.join(tried)})" if tried else ""
    raise UserError(f"The MLCommons endpoints client needs Python >= 3.12 and none runs here{looked}: install one "
                    f"(`pyenv install 3.12` or `uv python install 3.12`), or set {OVERRIDE} to its path.",
                    exit_code=EXIT_BAD_INPUT)
