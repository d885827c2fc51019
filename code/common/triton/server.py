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

The server lives as every process the toolkit starts does (processes.py): in a process group of its own (its
python-backend stubs are its children: one signal to the group ends them all), sent SIGTERM when the thread that
started it ends, so it never outlives a test. Every server started here is stopped by `stop_all()` too, which the
harness child calls when it is stopped.
"""
from __future__ import annotations

import os
import shutil
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import EXIT_FAILURE, UserError
from ..paths import Paths
from ..processes import ProcessSet, ServerProcess

ENVIRONMENT = "triton"
BUILD_HINT = 'make build RUN_ARGS="--harness_type=triton"'
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 20.0
STOP_GRACE_S = 4.0           # a stopped harness child's share of the 10 s its parent waits for it
EXIT_TIMEOUT_S = 5           # tritonserver --exit-timeout-secs: how long in-flight requests may take at stop
SHARED_MEMORY_DIR = "/dev/shm"


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


class TritonServer(ServerProcess):
    """One tritonserver process serving `repository` on `grpc_port` (HTTP and metrics off)."""

    started = ProcessSet()
    log_lines = 20
    stop_timeout_s = STOP_TIMEOUT_S
    group_ends_alone = False     # python backend stubs left behind by the server are killed with it

    def __init__(self, repository: Path, grpc_port: int, log_path: Path, *, installation: Installation | None = None,
                 work_dir: Path | None = None) -> None:
        super().__init__(log_path)
        self.installation = installation or find_installation()
        self.repository = Path(repository)
        self.grpc_port = int(grpc_port)
        self.work_dir = Path(work_dir or Paths.create().triton)
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
        self.launch(self.command(), env=server_environment(self.installation))
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

    def stop(self, timeout_s: float | None = None) -> None:
        """SIGTERM to the server's group (in-flight requests finish), SIGKILL after `timeout_s`; then its python
        backend's shared memory regions are removed (a killed server cannot remove its own)."""
        super().stop(timeout_s)
        if self.process is not None:
            for region in Path(SHARED_MEMORY_DIR).glob(f"{self.shm_prefix}*"):
                region.unlink(missing_ok=True)


def stop_all(timeout_s: float = STOP_GRACE_S) -> None:
    """Stop every server this process started (a stopped harness child calls it before it exits, within the
    time its parent gives it)."""
    TritonServer.started.stop_all(timeout_s)
