"""Build the native harness core: LoadGen 6.0.17 from its sdist (pinned by sha256) and native/, with CMake.

The PyPI wheel of LoadGen hides its C++ symbols, so a separate extension cannot complete samples into it. The
sdist holds LoadGen's C++ sources, its Python bindings and generated/version_generated.cc; built as one shared
library with both Python modules linked to it (LoadGen's `mlperf_loadgen` and the toolkit's `toolkit_native`),
one LoadGen instance serves the Python side and the C++ SUT, and runs log the wheel's loadgen_version and git
fields (the file is used as shipped, never regenerated). Measured: a build takes about 30 s on 2 cores.

Output: build/native/lib/{libloadgen.so, mlperf_loadgen*.so, toolkit_native*.so, toolkit_native.pyi} and a stamp
naming what it was built from and the digest of every file the build wrote; a build whose sources (all of native/)
and compiler flags are unchanged and whose files are as written is not redone (a deleted, truncated or changed file
means rebuild). Both are decided by content (sha256), never by modification times. Which C++ backends the core holds is CMake's choice (native/CMakeLists.txt: one option each).
"""
from __future__ import annotations

import functools
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ..fileio import sha256_file, write_atomically
from ..integrity import FileDigest, problem
from ..locking import waiting_lock
from ..paths import REPO_ROOT

LOADGEN_SDIST = "mlcommons_loadgen-6.0.17.tar.gz"
LOADGEN_SDIST_SHA256 = "a2e85d09e3cc0c606f89bfe1fbf97537c8b5b238ae0afbd923ad9c710fcf2ca8"
LOADGEN_REQUIREMENT = "mlcommons-loadgen==6.0.17"
SOURCE_DIR = REPO_ROOT / "native"
STAMP = "built-from.json"
BUILD_LOCK = ".native-build.lock"     # in the build folder: one build of the core at a time


@dataclass(frozen=True)
class NativeBuild:
    lib: Path          # the folder holding the modules: first on sys.path of a native harness test
    built_now: bool


class NativeUnavailable(RuntimeError):
    """Why the native core cannot be built here (no compiler, no cmake, no sdist), in words."""


def build_dir(build_root: Path) -> Path:
    return build_root / "native"


def lib_dir(build_root: Path) -> Path:
    """The folder of the built modules: first on sys.path of a native harness test."""
    return build_dir(build_root) / "lib"


def not_ready(build_root: Path) -> str | None:
    """Why the native core cannot serve a test now (not built, or built from other sources); None when it can."""
    lib = lib_dir(build_root)
    try:
        stamp = json.loads((lib / STAMP).read_text())
    except (OSError, ValueError):
        return "the native core is not built (`make build` builds it)"
    if not isinstance(stamp, dict) or stamp.get("fingerprint") != _fingerprint():
        return "the native core was built from other sources than these (`make build` rebuilds it)"
    files = stamp.get("files")
    if not isinstance(files, dict) or not files:
        return "the native core's build records no digests of its files (`make build` rebuilds it)"
    for name, entry in files.items():
        digest = FileDigest.from_dict(entry)
        why = "has no readable digest" if digest is None else _content_problem(lib / name, digest)
        if why is not None:
            return f"the native core's {lib / name} {why} (`make build` rebuilds it)"
    return None


def _content_problem(path: Path, recorded: FileDigest) -> str | None:
    """Why `path` does not hold the bytes the build wrote, decided by its sha256 whatever its time says (a file
    changed under its old time is found; one touched but unchanged is not rebuilt). Asked for every config a
    command resolves, so a file is hashed again only when its inode or change time (which no one sets back) moved."""
    try:
        stat = path.stat()
    except OSError:
        return "is missing"
    return _hashed_problem(str(path), stat.st_ino, stat.st_size, stat.st_ctime_ns, recorded)


@functools.lru_cache(maxsize=64)
def _hashed_problem(path: str, inode: int, size: int, changed_ns: int, recorded: FileDigest) -> str | None:
    return problem(Path(path), recorded, always_hash=True)


def tools_missing() -> list[str]:
    return [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]


def cannot_build() -> str | None:
    """Why the core cannot be built here (no compiler, cmake or pybind11), known without building; None when it
    can be tried (the LoadGen sdist is still to be fetched)."""
    import importlib.util

    missing = tools_missing()
    if missing:
        return f"{' and '.join(missing)} not found"
    if importlib.util.find_spec("pybind11") is None:
        return "pybind11 is not installed in this environment"
    return None


def fetch_sdist(cache: Path) -> Path:
    """The LoadGen sdist in `cache`, downloaded once from the package registry and checked against its sha256."""
    sdist = cache / LOADGEN_SDIST
    if not sdist.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
                               "--disable-pip-version-check", "--quiet", LOADGEN_REQUIREMENT, "-d", str(cache)],
                              capture_output=True, text=True, check=False)
        if done.returncode != 0 or not sdist.is_file():
            raise NativeUnavailable(f"the LoadGen sdist ({LOADGEN_REQUIREMENT}) could not be downloaded: "
                                    f"{(done.stderr or done.stdout).strip()[-300:]}")
    digest = sha256_file(sdist)
    if digest != LOADGEN_SDIST_SHA256:
        sdist.unlink()
        raise NativeUnavailable(f"{sdist} has sha256 {digest}, not the pinned {LOADGEN_SDIST_SHA256}: removed")
    return sdist


def _unpack(sdist: Path, dest: Path) -> Path:
    """The sdist's top folder under `dest` (members outside it are refused)."""
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(dest, filter="data")
        else:   # Python 3.11.0-3.11.3 (Debian bookworm's 3.11.2) has no extraction filters: the same refusal by hand
            _refuse_escaping_members(archive, dest, sdist)
            archive.extractall(dest)
    [top] = [p for p in dest.iterdir() if p.is_dir()]
    return top


def _refuse_escaping_members(archive: tarfile.TarFile, dest: Path, sdist: Path) -> None:
    """What the "data" extraction filter refuses: a member or link target outside `dest`, a device or pipe."""
    root = dest.resolve()
    for member in archive.getmembers():
        target = (root / member.name).resolve()
        linked = (target.parent / member.linkname).resolve() if member.issym() else \
            (root / member.linkname).resolve() if member.islnk() else target
        if not (target.is_relative_to(root) and linked.is_relative_to(root)) or member.isdev() or member.isfifo():
            raise NativeUnavailable(f"{sdist} holds {member.name!r}, which would land outside {dest} or is not a "
                                    f"file: refused")


@functools.cache
def _fingerprint() -> str:
    """What a build is made from (the sdist, native/, this Python): read once per process, as every config
    resolution asks whether the core is ready."""
    digest = hashlib.sha256(LOADGEN_SDIST_SHA256.encode())
    for path in sorted(SOURCE_DIR.rglob("*")):
        if path.is_file():
            digest.update(path.relative_to(SOURCE_DIR).as_posix().encode())
            digest.update(path.read_bytes())
    digest.update(sys.version.encode())
    return digest.hexdigest()


def build_native(build_root: Path, cache: Path, log=print, jobs: int = 2) -> NativeBuild:
    """Build (or find up to date) the native core under build_root/native; NativeUnavailable when it cannot be."""
    why = cannot_build()
    if why is not None:
        raise NativeUnavailable(why)
    # One build at a time in a checkout: a second process (a test run beside make run) waits, then finds it built.
    with waiting_lock(build_root / BUILD_LOCK, "the native core's build", log):
        return _build(build_root, cache, log, jobs)


def _build(build_root: Path, cache: Path, log, jobs: int) -> NativeBuild:
    import pybind11
    root, lib = build_dir(build_root), lib_dir(build_root)
    why = not_ready(build_root)
    if why is None:
        return NativeBuild(lib, built_now=False)
    if (lib / STAMP).exists():
        log(f"rebuilding: {why.partition(' (`make build`')[0]}")
    (lib / STAMP).unlink(missing_ok=True)   # from here until the build ends, the core reads as not built
    sdist = fetch_sdist(cache)
    loadgen = _unpack(sdist, root / "src")
    cmake_dir = root / "cmake"
    shutil.rmtree(cmake_dir, ignore_errors=True)
    shutil.rmtree(lib, ignore_errors=True)     # every file installed anew: none kept because its time looks current
    log(f"building the native harness core (LoadGen from {sdist.name}, native/) ...")
    steps = [["cmake", "-S", str(SOURCE_DIR), "-B", str(cmake_dir), f"-DLOADGEN_DIR={loadgen}",
              f"-Dpybind11_DIR={pybind11.get_cmake_dir()}", f"-DPython_EXECUTABLE={sys.executable}",
              "-DCMAKE_BUILD_TYPE=Release"],
             ["cmake", "--build", str(cmake_dir), "-j", str(jobs)],
             ["cmake", "--install", str(cmake_dir), "--prefix", str(lib)]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise NativeUnavailable(f"`{' '.join(step[:2])}` failed:\n{(done.stdout + done.stderr).strip()[-2000:]}")
    files = {p.name: FileDigest.of(p).to_dict() for p in sorted(lib.iterdir()) if p.is_file() and p.name != STAMP}
    write_atomically(lib / STAMP, json.dumps({"fingerprint": _fingerprint(), "sdist": sdist.name,
                                              "sdist_sha256": LOADGEN_SDIST_SHA256, "files": files},
                                             indent=2) + "\n")
    return NativeBuild(lib, built_now=True)
