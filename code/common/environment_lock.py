"""The locked environment this toolkit runs in: which lock it was installed from, and what differs from it.

The lock format and its paths belong to scripts/envlock.py (standard library, used by the bootstrap before any
environment exists); this module loads it from there rather than restating it.
"""
from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType

from .paths import REPO_ROOT

# Installed by the bootstrap or by Python itself, never part of a lock.
INSTALLER_PACKAGES = frozenset({"pip", "setuptools", "wheel", "uv"})


@lru_cache(maxsize=1)
def envlock() -> ModuleType:
    path = REPO_ROOT / "scripts" / "envlock.py"
    spec = importlib.util.spec_from_file_location("toolkit_envlock", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module   # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    return module


@dataclass(frozen=True)
class LockState:
    name: str                   # environment name (main, tensorrt)
    lock: Path
    digest: str                 # sha256 of the lock file
    installed_from: str | None  # sha256 the venv's stamp records (None: no stamp, installed by hand)
    differences: tuple[str, ...]

    @property
    def short(self) -> str:
        return f"requirements/{self.lock.name} sha256 {self.digest[:12]}"


def installed_versions() -> dict[str, str]:
    mod = envlock()
    return {mod.normalise(d.metadata["Name"]): d.version for d in importlib.metadata.distributions()
            if d.metadata["Name"]}


def differences(locked: dict[str, str], installed: dict[str, str]) -> list[str]:
    """One line per package whose installed version is not the locked one (or that the lock does not hold)."""
    lines = []
    for name, version in sorted(locked.items()):
        have = installed.get(name)
        if have is None:
            continue   # a package for another platform (the lock is universal)
        if have != version:
            lines.append(f"{name} {have} is installed, the lock says {version}")
    for name in sorted(set(installed) - set(locked) - INSTALLER_PACKAGES):
        lines.append(f"{name} {installed[name]} is installed but not in the lock")
    return lines


def lock_state(venv: Path, installed: dict[str, str] | None = None) -> LockState:
    """The environment `venv` was installed as (its stamp; main when there is none) and how it differs."""
    mod = envlock()
    env, installed_from = mod.installed_environment(venv)
    if not env.lock.is_file():
        return LockState(env.name, env.lock, "missing", installed_from, (f"{env.lock} is missing: run make lock",))
    digest = mod.file_sha256(env.lock)
    found = differences(mod.locked_versions(env.lock), installed_versions() if installed is None else installed)
    return LockState(env.name, env.lock, digest, installed_from, tuple(found))
