"""The endpoints client's environment (.venv-endpoints), made from the user's checkout of mlcommons/endpoints.

    client = ensure_environment(paths, extras=("bfcl",))    # a ClientEnvironment: what the run's record keeps
    subprocess.run([*client.command, "validate-yaml", "--config", yaml_path])

The checkout is the one MLCOMMONS_ENDPOINTS_DIR names (the client is not on PyPI). It must be at a commit the
toolkit knows (CLIENT_COMMITS): the endpoints track requires the unmodified client, and its YAML schema changes
between commits. Every package comes from the checkout's own uv.lock, exported with its sha256 digests and installed
by uv with --require-hashes (`uv pip sync`: the environment holds the lock and nothing else); the client itself is
then built from the checkout, without dependencies. A stamp in the environment records the interpreter, the
client's version, the checkout's commit and the lock's sha256: an unchanged stamp means nothing is installed again.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Callable, Mapping

from ..errors import EXIT_BAD_INPUT, EXIT_FAILURE, UserError
from ..paths import REPO_ROOT
from .interpreter import Interpreter, find_interpreter

CHECKOUT_VARIABLE = "MLCOMMONS_ENDPOINTS_DIR"
REPOSITORY = "https://github.com/mlcommons/endpoints"
DISTRIBUTION = "inference-endpoint"
CONSOLE_SCRIPT = "inference-endpoint"
STAMP = "endpoints-client.json"
# The commits of the client the toolkit drives, and what each is the round's reference for.
CLIENT_COMMITS: Mapping[str, str] = {
    "ea3327530376fef63d706f4105612e17c2c80a8d": "v6.1: qwen3.6-27b (examples/11_Edge_Agentic_Example), wan-2.2 "
                                                "and qwen3-vl",
}
# Commits of the round the toolkit knows and cannot drive, with why: refused by name rather than as unknown.
REFUSED_COMMITS: Mapping[str, str] = {
    "381d13bbd27d6d52306813a51dc4e44295222d7e": "the commit the qwen3-vl reference pins; its settings schema forbids "
                                                "keys the YAML needs (service_ready_timeout_s, warmup, drain), so "
                                                "it cannot run a test",
}
DEFAULT_COMMIT = "ea3327530376fef63d706f4105612e17c2c80a8d"
BFCL_EXTRA = "bfcl"       # bfcl-eval, which builds and scores the BFCL v4 accuracy set (qwen3.6-27b)


@dataclass(frozen=True)
class Checkout:
    folder: Path
    commit: str
    modified: bool          # tracked files differ from the commit: not the unmodified client
    lock_sha256: str        # of its uv.lock


@dataclass(frozen=True)
class ClientEnvironment:
    """What a run on the client records of it (the run's record keeps it as it is)."""

    venv: str
    interpreter: str
    python_version: str
    interpreter_found_by: str
    client_version: str
    commit: str
    checkout: str
    modified: bool
    extras: tuple[str, ...]
    lock_sha256: str

    @property
    def command(self) -> list[str]:
        """The client's console script, as a child process runs it."""
        return [str(Path(self.venv) / "bin" / CONSOLE_SCRIPT)]

    def as_dict(self) -> dict:
        return {**asdict(self), "extras": list(self.extras)}

    @classmethod
    def from_dict(cls, data: Mapping) -> "ClientEnvironment":
        return cls(**{**data, "extras": tuple(data["extras"])})


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"{folder} is not a git checkout of {REPOSITORY} (git {' '.join(args)}: "
                        f"{done.stderr.strip() or done.returncode}); clone it there.", exit_code=EXIT_BAD_INPUT)
    return done.stdout.strip()


def find_checkout(env: Mapping[str, str] | None = None,
                  commits: Mapping[str, str] = CLIENT_COMMITS) -> Checkout:
    """The checkout MLCOMMONS_ENDPOINTS_DIR names, at one of `commits`; UserError (exit 2) saying what to get."""
    env = os.environ if env is None else env
    get = (f"git clone {REPOSITORY} ~/endpoints && git -C ~/endpoints checkout {DEFAULT_COMMIT[:8]}, then "
           f"export {CHECKOUT_VARIABLE}=~/endpoints")
    if not env.get(CHECKOUT_VARIABLE):
        raise UserError(f"The MLCommons endpoints client is not on PyPI and {CHECKOUT_VARIABLE} is not set: {get}.",
                        exit_code=EXIT_BAD_INPUT)
    folder = Path(env[CHECKOUT_VARIABLE]).expanduser().resolve()
    pyproject = folder / "pyproject.toml"
    if not pyproject.is_file() or f'name = "{DISTRIBUTION}"' not in pyproject.read_text(errors="replace") \
            or not (folder / "uv.lock").is_file():
        raise UserError(f"{CHECKOUT_VARIABLE}={folder} is not a checkout of {REPOSITORY} (no pyproject.toml of "
                        f"{DISTRIBUTION} with its uv.lock there): {get}.", exit_code=EXIT_BAD_INPUT)
    commit = _git(folder, "rev-parse", "HEAD")
    if commit in REFUSED_COMMITS:
        raise UserError(f"The endpoints checkout {folder} is at {commit[:8]}, {REFUSED_COMMITS[commit]}: "
                        f"git -C {folder} checkout {DEFAULT_COMMIT[:8]}.", exit_code=EXIT_BAD_INPUT)
    if commit not in commits:
        known = "; ".join(f"{c[:8]} ({why})" for c, why in commits.items())
        raise UserError(f"The endpoints checkout {folder} is at {commit[:8]}, a commit this toolkit does not drive; "
                        f"check out one it does: git -C {folder} checkout {DEFAULT_COMMIT[:8]} ({known}).",
                        exit_code=EXIT_BAD_INPUT)
    modified = bool(_git(folder, "status", "--porcelain", "--untracked-files=no"))
    return Checkout(folder, commit, modified, hashlib.sha256((folder / "uv.lock").read_bytes()).hexdigest())


@lru_cache(maxsize=1)
def _bootstrap():
    path = REPO_ROOT / "scripts" / "bootstrap_venv.py"
    spec = importlib.util.spec_from_file_location("toolkit_bootstrap_venv", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def uv_binary() -> Path:
    """The toolkit's pinned uv (build/tools/uv, hash-checked from requirements/uv.txt), installed on first use."""
    uv = _bootstrap().ensure_uv()
    if uv is None:
        raise UserError("uv, which installs the endpoints client's locked packages, could not be installed from "
                        "requirements/uv.txt (the package registry must be reachable).", exit_code=EXIT_FAILURE)
    return Path(uv)


def read_stamp(venv: Path) -> ClientEnvironment | None:
    """The environment's record where its stamp is there, readable and its console script present; None else."""
    try:
        record = ClientEnvironment.from_dict(json.loads((Path(venv) / STAMP).read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return record if Path(record.command[0]).is_file() else None


def require_environment(venv: Path) -> ClientEnvironment:
    """The made environment's record; UserError (exit 2) naming the command that makes it otherwise."""
    record = read_stamp(venv)
    if record is None:
        raise UserError(f"The MLCommons endpoints client is not installed in {venv}: set {CHECKOUT_VARIABLE} to your "
                        f"checkout of {REPOSITORY} and run make build RUN_ARGS=\"--harness_type=endpoints\".",
                        exit_code=EXIT_BAD_INPUT)
    return record


def _run(command: list[str], what: str, log: Callable[[str], None], cwd: Path | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    done = subprocess.run(command, capture_output=True, text=True, check=False, cwd=cwd, env=env)
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise UserError(f"{what} failed (status {done.returncode}): {' '.join(command)}\n{tail}",
                        exit_code=EXIT_FAILURE)
    return done.stdout


def install(checkout: Checkout, interpreter: Interpreter, venv: Path, extras: tuple[str, ...], uv: Path,
            log: Callable[[str], None] = print) -> ClientEnvironment:
    """Make `venv` on `interpreter`: the checkout's locked packages (with `extras`), hash-checked, then the client
    built from the checkout without dependencies; the stamp written last."""
    venv = Path(venv)
    (venv / STAMP).unlink(missing_ok=True)          # a half-made environment is never taken for a made one
    log(f"installing the MLCommons endpoints client ({checkout.commit[:8]}{', extras ' + ','.join(extras) if extras else ''}) "
        f"into {venv} on Python {interpreter.version} ({interpreter.path}); minutes the first time")
    with tempfile.TemporaryDirectory(prefix="endpoints-lock-") as scratch:
        requirements = Path(scratch) / "requirements.txt"
        _run([str(uv), "export", "--frozen", "--project", str(checkout.folder), "--no-emit-project", "--no-dev",
              "--no-header", "--format", "requirements-txt", *[f"--extra={e}" for e in extras],
              "--output-file", str(requirements), "--quiet"], "Exporting the checkout's uv.lock", log)
        python = venv / "bin" / "python"
        if not python.exists():
            _run([str(uv), "venv", "--quiet", "--python", str(interpreter.path), str(venv)],
                 f"Making {venv}", log)
        if any(line.strip() and not line.lstrip().startswith("#") for line in requirements.read_text().splitlines()):
            _run([str(uv), "pip", "sync", "--quiet", "--require-hashes", "--python", str(python),
                  str(requirements)], "Installing the client's locked packages (hash-checked)", log)
        _run([str(uv), "pip", "install", "--quiet", "--no-deps", "--reinstall-package", DISTRIBUTION,
              "--python", str(python), str(checkout.folder)], "Installing the client from its checkout", log)
    version = _run([str(python), "-c", f"import importlib.metadata as m; print(m.version({DISTRIBUTION!r}))"],
                   "Reading the client's version", log).strip()
    record = ClientEnvironment(venv=str(venv), interpreter=str(interpreter.path), python_version=interpreter.version,
                               interpreter_found_by=interpreter.found_by, client_version=version,
                               commit=checkout.commit, checkout=str(checkout.folder), modified=checkout.modified,
                               extras=tuple(extras), lock_sha256=checkout.lock_sha256)
    if not Path(record.command[0]).is_file():
        raise UserError(f"The client installed into {venv} has no {CONSOLE_SCRIPT} command; the checkout "
                        f"{checkout.folder} is not the client this toolkit drives.", exit_code=EXIT_FAILURE)
    (venv / STAMP).write_text(json.dumps(record.as_dict(), indent=2) + "\n")
    return record


def ensure_environment(venv: Path, extras: tuple[str, ...] = (), env: Mapping[str, str] | None = None,
                       log: Callable[[str], None] = print, uv: Path | None = None,
                       commits: Mapping[str, str] = CLIENT_COMMITS) -> ClientEnvironment:
    """The client's environment for the checkout MLCOMMONS_ENDPOINTS_DIR names, made where missing or made from
    another commit, lock, interpreter or set of extras (a superset of `extras` already installed is kept)."""
    checkout = find_checkout(env, commits)
    current = read_stamp(venv)
    if current is not None and current.commit == checkout.commit and current.lock_sha256 == checkout.lock_sha256 \
            and current.checkout == str(checkout.folder) and set(extras) <= set(current.extras) \
            and Path(current.interpreter).is_file() and not checkout.modified:
        return current
    uv = uv or uv_binary()
    interpreter = find_interpreter(env, uv)
    wanted = tuple(sorted(set(extras) | set(current.extras if current else ())))
    return install(checkout, interpreter, Path(venv), wanted, uv, log)


def environment_row(venv: Path) -> tuple[str, str, str]:
    """`make build`'s row for the client."""
    record = read_stamp(venv)
    if record is None:
        return ("MLCommons endpoints client", "not installed",
                f"Python >= 3.12 and a checkout of {REPOSITORY} at {CHECKOUT_VARIABLE}: "
                f'make build RUN_ARGS="--harness_type=endpoints"')
    modified = ", modified checkout" if record.modified else ""
    return ("MLCommons endpoints client", f"inference-endpoint {record.client_version} ({record.commit[:8]})",
            f"in {Path(venv).name}, Python {record.python_version}{modified}")
