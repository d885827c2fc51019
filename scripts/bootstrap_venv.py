#!/usr/bin/env python3
"""Create or refresh `.venv` from the pinned dependencies in pyproject.toml.

Idempotent: a stamp file records the hash of the requested packages, and an unchanged
list means nothing is installed. Uses only the standard library, so it runs before the
venv exists. Talks to nothing but the configured package registry.
"""
from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tomllib
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STAMP_NAME = ".toolkit-deps.sha256"


def requested_packages(extras: list[str]) -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    packages = list(project["dependencies"])
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            sys.exit(f"bootstrap: unknown extra '{extra}'; known: {', '.join(sorted(optional))}")
        packages += optional[extra]
    return packages


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extras", default="dev", help="comma list of pyproject extras to install (default: dev)")
    parser.add_argument("--venv", default=str(REPO / ".venv"), help="where the environment lives (default: .venv)")
    args = parser.parse_args()
    venv_dir = Path(args.venv).absolute()
    stamp = venv_dir / STAMP_NAME
    extras = [e for e in args.extras.split(",") if e]
    packages = requested_packages(extras)
    digest = hashlib.sha256("\n".join(sorted(packages)).encode()).hexdigest()

    python = venv_dir / "bin" / "python"
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        stamp.touch()  # newer than pyproject.toml again, so make stops asking
        return 0
    if sys.version_info < (3, 11):
        sys.exit(f"bootstrap: Python 3.11 or newer is required, this is {sys.version.split()[0]}")
    if not python.exists():
        print(f"Creating {venv_dir} with {sys.executable} ...", flush=True)
        venv.EnvBuilder(with_pip=True).create(venv_dir)
    print(f"Installing {len(packages)} pinned packages into {venv_dir} "
          f"(extras: {', '.join(extras) or 'none'}) ...", flush=True)
    command = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet", *packages]
    if subprocess.call(command) != 0:
        sys.exit("bootstrap: pip could not install the pinned packages (see the messages above); "
                 "the package registry must be reachable")
    stamp.write_text(digest + "\n")
    print(f"{venv_dir} is ready.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
