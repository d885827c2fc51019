#!/usr/bin/env python3
"""Create or refresh `.venv` from the hash-locked dependency set (requirements/<environment>.txt).

The environment gets exactly the lock, every file checked against its sha256: with uv (itself pinned and
hash-checked in requirements/uv.txt, installed from the package registry into build/tools/uv) as
`uv pip sync`, which also removes whatever the lock does not hold; where uv cannot be had, with
`pip install --require-hashes --no-deps` of the same lock. Idempotent: a stamp records the sha256 of the lock
installed (and which environment), and an unchanged lock means nothing is done. A changed lock is installed
with every package reinstalled, so each one is checked against the lock's sha256 again: installers skip the
check for a package already installed at the locked version, which would record an edited lock (one that
cannot be installed anywhere else) as installed. Standard library only, so it runs before the venv exists.
TOOLKIT_INSTALLER=pip forces the pip path (uv the uv path, failing when uv cannot be had).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import envlock  # noqa: E402  (standard library only, beside this script)


def ensure_uv(quiet: bool = True) -> Path | None:
    """The pinned uv binary, installed hash-checked from requirements/uv.txt on first use; None if it cannot be
    had (no pip for this Python, no registry)."""
    binary = envlock.uv_binary()
    if not envlock.UV_LOCK.is_file():
        return None
    marker = envlock.UV_HOME / "installed-from.sha256"
    wanted = envlock.file_sha256(envlock.UV_LOCK)
    if binary.is_file() and marker.is_file() and marker.read_text().strip() == wanted:
        return binary
    target = envlock.UV_HOME.with_name(envlock.UV_HOME.name + ".tmp")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target, ignore_errors=True)
    command = [sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-deps",
               "--require-hashes", "--target", str(target), "-r", str(envlock.UV_LOCK)]
    done = subprocess.run(command, capture_output=quiet, text=True, check=False)
    if done.returncode != 0 or not (target / "bin" / "uv").is_file():
        shutil.rmtree(target, ignore_errors=True)
        return None
    (target / marker.name).write_text(wanted + "\n")
    shutil.rmtree(envlock.UV_HOME, ignore_errors=True)
    envlock.UV_HOME.parent.mkdir(parents=True, exist_ok=True)
    target.rename(envlock.UV_HOME)
    return binary


def install_with_uv(uv: Path, venv_dir: Path, lock: Path, extra: list[str] = ()) -> bool:
    python = venv_dir / "bin" / "python"
    reinstall = []
    if not python.exists():
        if subprocess.call([str(uv), "venv", "--quiet", "--python", sys.executable, str(venv_dir)]) != 0:
            return False
    else:
        reinstall = ["--reinstall"]   # every package checked against the lock's hashes, not only new ones
    return subprocess.call([str(uv), "pip", "sync", "--quiet", "--require-hashes", "--python", str(python),
                            *reinstall, *extra, str(lock)]) == 0


def install_with_pip(venv_dir: Path, lock: Path, extra: list[str] = ()) -> bool:
    python = venv_dir / "bin" / "python"
    reinstall = []
    if not python.exists():
        venv.EnvBuilder(with_pip=True).create(venv_dir)
    else:
        reinstall = ["--force-reinstall"]
        if subprocess.call([str(python), "-m", "pip", "--version"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL) != 0:
            subprocess.call([str(python), "-m", "ensurepip", "--default-pip"], stdout=subprocess.DEVNULL)
    return subprocess.call([str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet",
                            "--require-hashes", "--no-deps", *reinstall, *extra, "-r", str(lock)]) == 0


def install(venv_dir: Path, lock: Path, installer: str = "", extra: list[str] = ()) -> str:
    """Install `lock` into `venv_dir`; returns the installer used ("uv" or "pip"). Exits with a message on failure.
    An existing environment has every package reinstalled (and so checked against the lock's hashes)."""
    uv = None if installer == "pip" else ensure_uv()
    if installer == "uv" and uv is None:
        sys.exit("bootstrap: uv could not be installed from requirements/uv.txt (the package registry must be "
                 "reachable and this Python must have pip)")
    if uv is not None:
        if install_with_uv(uv, venv_dir, lock, list(extra)):
            return "uv"
        sys.exit(f"bootstrap: uv could not install {lock} (see the messages above); the package registry must "
                 f"be reachable")
    if install_with_pip(venv_dir, lock, list(extra)):
        return "pip"
    sys.exit(f"bootstrap: pip could not install {lock} (see the messages above); the package registry must be "
             f"reachable")


def is_current(venv_dir: Path, env: envlock.Environment, digest: str) -> bool:
    """Whether `venv_dir` holds `env` installed from the lock whose sha256 is `digest`: decided by content alone,
    so a lock touched but unchanged installs nothing, and one changed under an old time is installed."""
    installed, installed_digest = envlock.installed_environment(venv_dir)
    return (venv_dir / "bin" / "python").exists() and installed == env and installed_digest == digest


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default=None,
                        help="comma list of pyproject extras (default: the environment installed last, else dev)")
    parser.add_argument("--environment", default=None,
                        help="a standalone environment by name (triton), in its own venv unless --venv says where")
    parser.add_argument("--venv", default=None, help="where the environment lives (default: .venv)")
    args = parser.parse_args()
    if args.environment is not None:
        env = envlock.environment_named(args.environment)
        venv_dir = Path(args.venv or env.venv).absolute()
        installed, installed_digest = envlock.installed_environment(venv_dir)
    else:
        venv_dir = Path(args.venv or envlock.REPO / ".venv").absolute()
        installed, installed_digest = envlock.installed_environment(venv_dir)
        # Without --extras, keep what `make build` chose (the TensorRT environment on a GPU machine).
        env = installed if args.extras is None else envlock.environment_for([e for e in args.extras.split(",") if e])
    if not env.lock.is_file():
        sys.exit(f"bootstrap: {env.lock} is missing; run make lock")
    if sys.version_info < (3, 11):
        sys.exit(f"bootstrap: Python 3.11 or newer is required, this is {sys.version.split()[0]}")
    digest = envlock.file_sha256(env.lock)
    stamp = venv_dir / envlock.STAMP_NAME
    if is_current(venv_dir, env, digest):
        stamp.touch()  # newer than the lock again, so make's time check stops asking
        return 0
    print(f"Installing the locked environment {env.lock.relative_to(envlock.REPO)} into {venv_dir} ...", flush=True)
    # Wheels the registry lacks (vLLM's CPU build of torch) come from the environment's find-links.
    links = [option for location in envlock.find_links(env) for option in ("--find-links", location)]
    used = install(venv_dir, env.lock, os.environ.get("TOOLKIT_INSTALLER", ""), links)
    stamp.write_text(f"{env.name} {digest}\n")
    print(f"{venv_dir} is ready ({used}, lock sha256 {digest[:12]}).", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
