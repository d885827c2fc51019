#!/usr/bin/env python3
"""`make lock`: write requirements/<environment>.txt from the direct pins in pyproject.toml, and
requirements/uv.txt for the pinned uv, with uv's resolver: every package pinned, every file hash-checked.

The locks are universal (markers for every platform) and for Python 3.11, the version the toolkit targets.
A lock that exists keeps its versions wherever the pins allow (uv reads it as its preferences), so a changed pin
changes that package and what it needs, nothing else; --upgrade resolves every package afresh.
Needs the package registry. Standard library only.
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import envlock  # noqa: E402
from bootstrap_venv import ensure_uv  # noqa: E402

PYTHON_VERSION = "3.11"


def compile_lock(uv: Path, requirements: list[str], output: Path, env: "envlock.Environment | None" = None,
                 data: dict | None = None, upgrade: bool = False) -> None:
    """uv pip compile of `requirements` into `output`, headed by the digest of what it was made from (the pins,
    and a standalone environment's platform and exclusions). The versions `output` already pins are kept where
    the pins allow them, unless `upgrade`."""
    extra = envlock.settings(env, data) if env is not None else {}
    target = ["--python-platform", extra["platform"]] if extra.get("platform") else ["--universal"]
    links = [option for location in (envlock.find_links(env, data) if env is not None else [])
             for option in ("--find-links", location)]
    with tempfile.TemporaryDirectory() as work:
        excludes = []
        if extra.get("exclude"):
            listed = Path(work) / "excludes.txt"
            listed.write_text("\n".join(extra["exclude"]) + "\n")
            excludes = ["--excludes", str(listed)]
        # uv takes the pins of the file it writes to as preferences: a copy of the current lock.
        resolved = Path(work) / output.name
        if output.is_file() and not upgrade:
            shutil.copyfile(output, resolved)
        command = [str(uv), "pip", "compile", "--quiet", *target, "--generate-hashes", "--no-header",
                   "--python-version", PYTHON_VERSION, *links, *excludes, "--output-file", str(resolved), "-"]
        done = subprocess.run(command, input="\n".join(requirements) + "\n", capture_output=True, text=True,
                              check=False)
        if done.returncode != 0:
            sys.exit(f"lock: uv could not resolve {output.name}:\n{done.stderr}")
        locked = resolved.read_text()
    made_from = envlock.digest_inputs(env, data) if env is not None else requirements
    header = [f"{envlock.DIGEST_PREFIX}{envlock.pins_digest(made_from)}",
              "# Written by `make lock` (scripts/lock_env.py) from pyproject.toml; do not edit by hand.",
              f"# Direct pins: {', '.join(requirements)}"]
    output.write_text("\n".join(header) + "\n" + locked)
    print(f"wrote {output.relative_to(envlock.REPO)} ({len(envlock.locked_versions(output))} packages)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--environment", action="append", default=None,
                        help="lock only this environment (repeatable; default: uv and every environment)")
    parser.add_argument("--upgrade", action="store_true",
                        help="resolve every package afresh (default: keep the versions the locks pin where allowed)")
    args = parser.parse_args()
    wanted = [envlock.environment_named(name) for name in args.environment] if args.environment else None
    envlock.LOCK_DIR.mkdir(exist_ok=True)
    data = envlock.project()
    uv = ensure_uv()
    if uv is None:   # first lock ever, or requirements/uv.txt is being changed: the pinned uv without hashes
        target = envlock.UV_HOME
        if subprocess.call([sys.executable, "-m", "pip", "install", "--quiet", "--target", str(target),
                            f"uv=={envlock.uv_version(data)}"]) != 0:
            sys.exit("lock: uv could not be installed from the package registry")
        uv = envlock.uv_binary()
    if wanted is None:
        compile_lock(uv, [f"uv=={envlock.uv_version(data)}"], envlock.UV_LOCK, upgrade=args.upgrade)
    for env in wanted or envlock.ENVIRONMENTS:
        compile_lock(uv, envlock.pins(env, data), env.lock, env, data, upgrade=args.upgrade)
    return 0


if __name__ == "__main__":
    sys.exit(main())
