"""A local Triton Inference Server: the `tritonserver` binary of PyPI's nvidia-pytriton, run from .venv-triton.

Facts it is built on (nvidia-pytriton 0.7.0, Triton 2.51.0):
- The wheel bundles the server and its python backend, with a backend stub per Python version; the stub of the
  Triton environment's Python goes into a backend folder of our own (build/triton/backends/python), as PyTriton
  itself does. The server's shared libraries are in the wheel's nvidia_pytriton.libs.
- With a pyenv-built Python the stub can pick up the system's libpython and fail at model load; the running
  interpreter's LIBDIR goes first in LD_LIBRARY_PATH. The Triton environment's bin/ goes first in PATH, so the
  stub's interpreter finds that environment's packages (numpy<2, ONNX Runtime).
- On stop, in-flight requests finish; new gRPC requests are still served until the process exits, so the
  harness stops sending before it stops the server.

The server runs in a session of its own (its python-backend stubs are its children: one signal to the group ends
them all) and asks the kernel for SIGTERM when the process that started it dies, so it never outlives a test.
Every server started here is stopped by `stop_all()` too, which the harness child calls when it is stopped.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import EXIT_FAILURE, UserError
from ..paths import Paths

ENVIRONMENT = "triton"
BUILD_HINT = 'make build RUN_ARGS="--harness_type=triton"'
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
STOP_GRACE_S = 4.0           # a stopped harness child's share of the 10 s its parent waits for it
EXIT_TIMEOUT_S = 5           # tritonserver --exit-timeout-secs: how long in-flight requests may take at stop
PR_SET_PDEATHSIG = 1
SHARED_MEMORY_DIR = "/dev/shm"

_running: set["TritonServer"] = set()
_running_lock = threading.Lock()


def triton_venv() -> Path:
    return Paths.create().triton_venv


@dataclass(frozen=True)
class Installation:
    """Where the Triton environment keeps the server."""

    venv: Path
    dist: Path          # .../site-packages/pytriton/tritonserver
    libs: Path          # .../site-packages/nvidia_pytriton.libs
    python_version: str

    @property
    def binary(self) -> Path:
        return self.dist / "bin" / "tritonserver"

    @property
    def stub(self) -> Path:
        return self.dist / "python_backend_stubs" / self.python_version / "triton_python_backend_stub"


def find_installation(venv: Path | None = None) -> Installation:
    """The Triton environment's server; UserError naming the make target that makes it when it is missing."""
    venv = venv or triton_venv()
    found = sorted(venv.glob("lib/python3*/site-packages/pytriton/tritonserver"))
    if not found or not (found[-1] / "bin" / "tritonserver").is_file():
        raise UserError(f"The Triton harness needs Triton Inference Server's environment in {venv}, which is not "
                        f"there: make it with `{BUILD_HINT}` (it installs the locked requirements/triton.txt, "
                        f"PyPI's nvidia-pytriton with its tritonserver binary).", exit_code=EXIT_FAILURE)
    dist = found[-1]
    version = dist.parents[2].name.removeprefix("python")
    installation = Installation(venv, dist, dist.parents[1] / "nvidia_pytriton.libs", version)
    if not installation.stub.is_file():
        raise UserError(f"nvidia-pytriton in {venv} has no python backend stub for Python {version} "
                        f"({installation.stub}); rebuild the environment with `{BUILD_HINT}`.", exit_code=EXIT_FAILURE)
    return installation


def backend_directory(installation: Installation, folder: Path) -> Path:
    """Triton's backend folder: the wheel's python backend (libtriton_python.so, triton_python_backend_utils.py)
    and the stub of the environment's Python."""
    python = folder / "python"
    python.mkdir(parents=True, exist_ok=True)
    bundled = [f for f in (installation.dist / "backends" / "python").iterdir() if f.is_file()]
    for source in [*bundled, installation.stub]:
        target = python / source.name
        if not target.is_file() or target.read_bytes() != source.read_bytes():
            shutil.copy2(source, target)
    return folder


def server_environment(installation: Installation) -> dict[str, str]:
    env = dict(os.environ)
    libdirs = [sysconfig.get_config_var("LIBDIR") or "", str(installation.libs), env.get("LD_LIBRARY_PATH", "")]
    env["LD_LIBRARY_PATH"] = ":".join(part for part in libdirs if part)
    env["PATH"] = f"{installation.venv / 'bin'}:{env.get('PATH', '')}"
    env.pop("PYTHONPATH", None)      # the stub's interpreter sees the Triton environment, not the toolkit's
    env.pop("VIRTUAL_ENV", None)
    return env


def _die_with_parent():
    """A preexec_fn: SIGTERM to the server when the thread that started it ends (Linux; None elsewhere). libc is
    loaded here, before the fork: the forked child only makes the one system call."""
    if not sys.platform.startswith("linux"):
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    return lambda: prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class TritonServer:
    """One tritonserver process serving `repository` on `grpc_port` (HTTP and metrics off)."""

    def __init__(self, repository: Path, grpc_port: int, log_path: Path, *, installation: Installation | None = None,
                 work_dir: Path | None = None) -> None:
        self.installation = installation or find_installation()
        self.repository = Path(repository)
        self.grpc_port = int(grpc_port)
        self.log_path = Path(log_path)
        self.work_dir = Path(work_dir or Paths.create().triton)
        self.process: subprocess.Popen | None = None
        # The python backend's shared memory regions (/dev/shm/<prefix>*), removed once the server has ended:
        # a server that was killed cannot remove its own.
        self.shm_prefix = f"mlperf-triton-{os.getpid()}-{self.grpc_port}-"

    @property
    def url(self) -> str:
        return f"localhost:{self.grpc_port}"

    def command(self) -> list[str]:
        backends = backend_directory(self.installation, self.work_dir / "backends")
        return [str(self.installation.binary), f"--model-repository={self.repository}",
                f"--backend-directory={backends}", "--allow-http=false", "--allow-metrics=false",
                f"--grpc-port={self.grpc_port}", "--model-control-mode=none", "--strict-readiness=true",
                "--exit-on-error=true", f"--exit-timeout-secs={EXIT_TIMEOUT_S}", "--log-verbose=0",
                f"--backend-config=python,shm-region-prefix-name={self.shm_prefix}"]

    def start(self) -> "TritonServer":
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(self.command(), env=server_environment(self.installation), stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, preexec_fn=_die_with_parent())
        with _running_lock:
            _running.add(self)
        return self

    def wait_ready(self, models: list[str], timeout_s: float = READY_TIMEOUT_S) -> "TritonServer":
        """Block until the server and `models` are ready; stop it and raise UserError when it exits or the time
        runs out, with the end of its log."""
        from .client import probe

        deadline = time.monotonic() + timeout_s
        problem = "not started"
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                code = None if self.process is None else self.process.returncode
                self.stop()
                raise UserError(f"Triton Inference Server on port {self.grpc_port} exited (status {code}) before it "
                                f"was ready. The end of its log ({self.log_path}):\n{self.log_tail()}",
                                exit_code=EXIT_FAILURE)
            problem = probe(self.url, models, timeout_s=2.0)
            if problem is None:
                return self
            time.sleep(0.2)
        self.stop()
        raise UserError(f"Triton Inference Server on port {self.grpc_port} was not ready after {timeout_s:.0f} s "
                        f"({problem}). The end of its log ({self.log_path}):\n{self.log_tail()}",
                        exit_code=EXIT_FAILURE)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM to the server's group (in-flight requests finish), SIGKILL after `timeout_s`."""
        process = self.process
        if process is not None and process.poll() is None:
            _signal_group(process, signal.SIGTERM)
            try:
                process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                _signal_group(process, signal.SIGKILL)
                process.wait()
        if process is not None:
            _signal_group(process, signal.SIGKILL)   # python backend stubs left behind, if any
            for region in Path(SHARED_MEMORY_DIR).glob(f"{self.shm_prefix}*"):
                region.unlink(missing_ok=True)
        with _running_lock:
            _running.discard(self)

    def kill(self) -> None:
        """SIGKILL, no grace: what a crashed node looks like to the clients."""
        if self.process is not None and self.process.poll() is None:
            _signal_group(self.process, signal.SIGKILL)
            self.process.wait()

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def __enter__(self) -> "TritonServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    try:
        os.killpg(process.pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def stop_all(timeout_s: float = STOP_GRACE_S) -> None:
    """Stop every server this process started (a stopped harness child calls it before it exits, within the
    time its parent gives it)."""
    with _running_lock:
        servers = list(_running)
    for server in servers:
        server.stop(timeout_s)


def free_port() -> int:
    """A TCP port nobody listens on now (for a local server)."""
    import socket

    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        return probe_socket.getsockname()[1]
