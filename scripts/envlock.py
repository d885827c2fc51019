"""The hash-locked dependency sets of every environment the toolkit creates, and the pinned uv that installs them.

Standard library only: the bootstrap imports this before any environment exists.

- requirements/<name>.txt: one lock per environment (`main`: the runtime and the tests; `tensorrt`: the same plus
  TensorRT, for NVIDIA GPU machines), written by `uv pip compile --universal --generate-hashes` from the direct
  pins in pyproject.toml: every package, transitive ones included, pinned with the sha256 of each of its files.
  The first line records the digest of the pins it was made from, so a lock that no longer matches
  pyproject.toml is detected without the network.
- A standalone environment (`triton`: Triton Inference Server's own, from PyPI's nvidia-pytriton, which pins
  numpy<2) does not build on the toolkit's dependencies: its pins are pyproject.toml's
  [tool.toolkit.environments.<name>] dependencies alone, and it lives in its own venv (.venv-<name>).
- A standalone environment may be for one platform (`platform`, a uv target such as x86_64-manylinux_2_28: the
  lock is then not universal), take wheels the registry lacks from `find-links` (the first location that exists
  or answers is used, at lock and install time alike; the lock's hashes decide what is installed), and leave out
  packages its pins pull in but it does not need (`exclude`): `vllm`, vLLM's CPU build.
- requirements/uv.txt: uv itself (the version in pyproject.toml's [tool.toolkit] uv), hash-pinned the same way.
"""
from __future__ import annotations

import hashlib
import operator
import platform
import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LOCK_DIR = REPO / "requirements"
UV_LOCK = LOCK_DIR / "uv.txt"
UV_HOME = REPO / "build" / "tools" / "uv"      # pip install --target: the uv binary lands in bin/
DIGEST_PREFIX = "# toolkit-pins-sha256: "
STAMP_NAME = ".toolkit-deps.sha256"   # in a venv: "<environment> <sha256 of the lock>" the bootstrap installed
PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;\\]+)(?:\s*;\s*([^\\]*?))?\s*\\?$")
# The one marker shape a universal lock writes here: `<variable> <op> '<value>'` (e.g. python_full_version < '3.12').
MARKER = re.compile(r"^(\w+)\s*(<=|>=|==|!=|<|>)\s*'([^']*)'$")
_OPERATORS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
              "!=": operator.ne}


@dataclass(frozen=True)
class Environment:
    name: str                  # requirements/<name>.txt
    extras: tuple[str, ...]    # pyproject extras on top of the dependencies
    standalone: bool = False   # pins from [tool.toolkit.environments.<name>] alone, in a venv of its own

    @property
    def lock(self) -> Path:
        return LOCK_DIR / f"{self.name}.txt"

    @property
    def venv(self) -> Path:
        """Where a standalone environment lives (the toolkit's own environments live in .venv)."""
        return REPO / (f".venv-{self.name}" if self.standalone else ".venv")


# Every environment the toolkit creates. The docker images install these same locks.
ENVIRONMENTS = (Environment("main", ("dev",)), Environment("tensorrt", ("dev", "tensorrt")),
                Environment("triton", (), standalone=True), Environment("vllm", (), standalone=True),
                Environment("diffusers", (), standalone=True), Environment("vbench", (), standalone=True))
TOOLKIT_ENVIRONMENTS = tuple(env for env in ENVIRONMENTS if not env.standalone)


def environment_for(extras: list[str]) -> Environment:
    """The toolkit environment holding `extras` (the smallest one that does)."""
    for env in TOOLKIT_ENVIRONMENTS:
        if set(extras) <= set(env.extras):
            return env
    known = ", ".join(f"{e.name} ({', '.join(e.extras)})" for e in TOOLKIT_ENVIRONMENTS)
    raise SystemExit(f"bootstrap: no locked environment holds the extras {', '.join(extras)}; locked: {known}")


def project() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def environment_named(name: str) -> Environment:
    for env in ENVIRONMENTS:
        if env.name == name:
            return env
    raise SystemExit(f"bootstrap: no locked environment '{name}'; locked: {', '.join(e.name for e in ENVIRONMENTS)}")


def pins(env: Environment, data: dict | None = None) -> list[str]:
    """The direct requirements of an environment, as pyproject.toml states them."""
    data = data or project()
    if env.standalone:
        return list(data["tool"]["toolkit"]["environments"][env.name]["dependencies"])
    optional = data["project"].get("optional-dependencies", {})
    return [*data["project"]["dependencies"], *(r for extra in env.extras for r in optional.get(extra, []))]


def settings(env: Environment, data: dict | None = None) -> dict:
    """[tool.toolkit.environments.<name>] of a standalone environment ({} for the toolkit's own)."""
    if not env.standalone:
        return {}
    return dict((data or project())["tool"]["toolkit"]["environments"][env.name])


def digest_inputs(env: Environment, data: dict | None = None) -> list[str]:
    """What a lock is made from: the pins, and the platform and excluded packages where the environment has them
    (a change to any of them makes the lock stale)."""
    data = data or project()
    extra = settings(env, data)
    platform_line = [f"# platform {extra['platform']}"] if extra.get("platform") else []
    return [*pins(env, data), *platform_line, *(f"# exclude {name}" for name in extra.get("exclude", ()))]


def find_links(env: Environment, data: dict | None = None, timeout_s: float = 5.0) -> list[str]:
    """The first of the environment's `find-links` locations that can be read here (a folder that exists, a URL
    that answers), as a one-item list; [] when it names none or none can be read (the installer then fails on
    the missing wheel, naming it)."""
    import urllib.request

    for location in settings(env, data).get("find-links", ()):
        if "://" not in location:
            if Path(location).is_dir():
                return [location]
            continue
        try:
            with urllib.request.urlopen(urllib.request.Request(location, method="HEAD"), timeout=timeout_s):
                return [location]
        except (OSError, ValueError):
            continue
    return []


def uv_version(data: dict | None = None) -> str:
    return (data or project())["tool"]["toolkit"]["uv"]


def pins_digest(requirements: list[str]) -> str:
    return hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()


def recorded_digest(lock: Path) -> str | None:
    first = lock.read_text().splitlines()[0] if lock.is_file() else ""
    return first[len(DIGEST_PREFIX):].strip() if first.startswith(DIGEST_PREFIX) else None


def locked_versions(lock: Path) -> dict[str, str]:
    """Package name (normalised) -> version a lock pins for this interpreter and platform (a universal lock may
    pin one package twice, under exclusive environment markers)."""
    found = {}
    for line in lock.read_text().splitlines():
        match = PIN.match(line)
        if match and marker_applies(match.group(3)):
            found[normalise(match.group(1))] = match.group(2)
    return found


def marker_applies(marker: str | None) -> bool:
    """Whether a pin's environment marker holds here: one comparison, or comparisons joined by `and` and `or`
    without parentheses (`and` binding tighter, as in PEP 508); a marker of another shape counts as holding."""
    if not marker or "(" in marker:
        return True
    return any(all(_comparison_applies(part) for part in alternative.split(" and "))
               for alternative in marker.split(" or "))


def _comparison_applies(marker: str) -> bool:
    match = MARKER.match(marker.strip())
    if match is None:
        return True
    variable, op, wanted = match.groups()
    here = {"python_full_version": platform.python_version(), "python_version": "%d.%d" % sys.version_info[:2],
            "sys_platform": sys.platform, "platform_system": platform.system(),
            "platform_machine": platform.machine()}.get(variable)
    if here is None:
        return True
    if variable.startswith("python"):
        return _OPERATORS[op](_version(here), _version(wanted))
    return _OPERATORS[op](here, wanted) if op in ("==", "!=") else True


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def installed_environment(venv: Path) -> tuple[Environment, str | None]:
    """The environment a venv's stamp names (main when it names none) and the lock digest it records."""
    stamp = venv / STAMP_NAME
    recorded = stamp.read_text().split() if stamp.is_file() else []
    env = next((e for e in ENVIRONMENTS if recorded[:1] == [e.name]), ENVIRONMENTS[0])
    return env, recorded[1] if len(recorded) > 1 and recorded[0] == env.name else None


def uv_binary() -> Path:
    return UV_HOME / "bin" / "uv"
