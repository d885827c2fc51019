"""The targets of the container workflow, as NVIDIA's Makefile.docker names them: build_docker, docker_add_user,
launch_docker, prebuild (build, then launch), configure_mig and teardown_mig."""
from __future__ import annotations

import grp
import os
import pwd
import secrets
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..common.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, UserError
from ..common.paths import Paths
from . import mig
from .image import (Image, build_command, builder_has_secrets, ca_run_flags, find_ca_bundle, proxy_settings,
                    stage_ca_bundle, with_secret_mount)

IN_CONTAINER = "/work"          # where the repository is mounted (NVIDIA's CONTAINER_VOL)
SHARED_IN_CONTAINER = "/shared"  # ../shared as the repository mounted at /work sees it


@dataclass(frozen=True)
class Request:
    """The make variables of one call, as data."""

    base_image: str | None = None
    no_build: bool = False
    docker_args: tuple[str, ...] = ()
    docker_command: str | None = None
    mig_conf: str | None = None
    scratch_path: str | None = None
    passthrough: tuple[str, ...] = ()      # the other flags, for code.main where prebuild finds no docker engine
    log: Callable[[str], None] = field(default=lambda line: print(line, flush=True))


def docker_engine() -> tuple[bool, str]:
    """Whether a docker engine answers here, and why not."""
    if shutil.which("docker") is None:
        return False, "the docker client is not installed"
    try:
        done = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True,
                              text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return False, f"docker info failed: {error}"
    if done.returncode != 0 or not done.stdout.strip():
        return False, "the docker client found no running engine"
    return True, f"docker engine {done.stdout.strip()}"


def has_nvidia_gpu() -> bool:
    if shutil.which("nvidia-smi") is None:
        return False
    done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False)
    return done.returncode == 0 and any(line.startswith("GPU ") for line in done.stdout.splitlines())


class Workflow:
    def __init__(self, paths: Paths, request: Request) -> None:
        self.paths, self.request, self.log = paths, request, request.log
        self.gpu = has_nvidia_gpu()
        self.image = Image.of("gpu" if self.gpu else "cpu", request.base_image)

    # -- the targets ------------------------------------------------------------------------------------------
    def build_docker(self) -> int:
        self._need_engine()
        bundle = find_ca_bundle()
        secrets = builder_has_secrets()
        dockerfile = self.paths.dockerfile(self.image.flavour)
        how = "as a BuildKit secret" if secrets else "in the install stage alone (legacy builder: no secrets)"
        self.log(f"Building {self.image.built} from {dockerfile.relative_to(self.paths.repo)} on {self.image.base}"
                 + (f"; trusting the CA bundle {bundle.path} ({bundle.source}) {how}" if bundle else ""))
        staged = stage_ca_bundle(self.paths, None if secrets else bundle)
        text = with_secret_mount(dockerfile.read_text(), staged.relative_to(self.paths.repo).as_posix()) \
            if secrets else None
        try:
            status = subprocess.run(build_command(self.paths, self.image, bundle, secrets), input=text, text=True,
                                    check=False).returncode
        finally:
            staged.unlink(missing_ok=True)
            if not any(staged.parent.iterdir()):
                staged.parent.rmdir()
        if status != 0:
            raise UserError(f"docker build of {dockerfile.relative_to(self.paths.repo)} failed (its messages are "
                            f"above).", exit_code=EXIT_FAILURE)
        if self.request.no_build:
            self.log(f"{self.image.built} is built (NO_BUILD=1: make build not run in it). Next: make launch_docker")
            return EXIT_OK
        self.docker_add_user()
        self.log("Running make build in it (NO_BUILD=1 skips this) ...")
        return self._run(self.image.with_user, "make build")

    def docker_add_user(self) -> int:
        self._need_engine()
        self._need_image(self.image.built)
        user, group = self._caller()
        self.log(f"Adding {user[0]} (uid {user[1]}, gid {group[1]}) to {self.image.built} as {self.image.with_user}")
        arguments = {"BASE_IMAGE": self.image.built, "USER_NAME": user[0], "USER_ID": user[1],
                     "GROUP_NAME": group[0], "GROUP_ID": group[1]}
        command = ["docker", "build", "-t", self.image.with_user]
        for name, value in arguments.items():
            command += ["--build-arg", f"{name}={value}"]
        with open(self.paths.dockerfile("user"), "rb") as dockerfile:     # no context: the file on stdin
            if subprocess.call([*command, "-"], stdin=dockerfile) != 0:
                raise UserError("docker build of the user layer failed (its messages are above).",
                                exit_code=EXIT_FAILURE)
        return EXIT_OK

    def launch_docker(self) -> int:
        self._need_engine()
        self._need_image(self.image.built)
        if not self._user_layer_is_current():
            self.docker_add_user()
        return self._run(self.image.with_user, self.request.docker_command)

    def prebuild(self) -> int:
        ok, why = docker_engine()
        if not ok:
            return self._local_prebuild(why)
        status = self.build_docker()
        return status if status != EXIT_OK else self.launch_docker()

    def configure_mig(self) -> int:
        conf = mig.parse_mig_conf(self.request.mig_conf)
        if conf is None or conf == mig.ALL:
            raise UserError("make configure_mig needs MIG_CONF=<instances per GPU>, e.g. make configure_mig "
                            "MIG_CONF=2.")
        mig.configure(int(conf), self.log)
        return EXIT_OK

    def teardown_mig(self) -> int:
        mig.teardown(self.log)
        return EXIT_OK

    # -- running a container ------------------------------------------------------------------------------------
    def run_command(self, image: str, command: str | None, interactive_terminal: bool, name: str) -> list[str]:
        """`docker run` of `image`: the repository at /work, the scratch space at its own path, ../shared where it
        exists, the host's CA bundle and proxies, the GPUs (or MIG_CONF's instances), DOCKER_ARGS, then `command`
        through bash (headless) or an interactive shell."""
        # The host's network, as NVIDIA's containers: servers started inside (serve_triton, serve_llm) are
        # reachable at the host's address, and the host's proxies and name servers apply.
        run = ["docker", "run", "--rm", "--init", "--name", name, "-w", IN_CONTAINER, "--network", "host"]
        run += ["-e", "PYTHONUNBUFFERED=1"]     # headless, stdout is a pipe: progress shows as it happens
        run += ["-i", "-t"] if command is None and interactive_terminal else ["-i"] if command is None else []
        if os.getuid() != 0:
            run += ["--user", f"{os.getuid()}:{os.getgid()}"]
        run += ["-v", f"{self.paths.repo}:{IN_CONTAINER}"]
        scratch = self._scratch()
        if scratch is not None:
            run += ["-v", f"{scratch}:{scratch}", "-e", f"MLPERF_SCRATCH_PATH={scratch}"]
        if self.paths.shared.is_dir():
            shared = self.paths.shared.resolve()
            run += ["-v", f"{shared}:{SHARED_IN_CONTAINER}"]
            if str(shared) != SHARED_IN_CONTAINER:     # links written on the host name it by its own path
                run += ["-v", f"{shared}:{shared}"]
        run += ca_run_flags(find_ca_bundle())
        for name_value in proxy_settings():
            run += ["-e", "=".join(name_value)]
        conf = mig.parse_mig_conf(self.request.mig_conf)
        run += mig.run_flags(conf) if conf else (["--gpus", "all"] if self.gpu else [])
        run += [*self.request.docker_args, image]
        return run + (["bash", "-c", command] if command is not None else [])

    def _run(self, image: str, command: str | None) -> int:
        name = f"mlperf-inference-toolkit-{self.image.tag}-{secrets.token_hex(4)}"
        terminal = sys.stdin.isatty() and sys.stdout.isatty()
        run = self.run_command(image, command, terminal, name)
        self.log(f"Launching {image} with the repository at {IN_CONTAINER}"
                 + (f": {command}" if command is not None else " (exit the shell to leave)"))
        try:
            return subprocess.call(run)
        finally:    # --rm removes it when it ends; an interrupted client can leave it running
            subprocess.run(["docker", "rm", "--force", name], capture_output=True, check=False)

    def _scratch(self) -> Path | None:
        """MLPERF_SCRATCH_PATH, made where it does not exist; None when unset (./scratch lies under /work)."""
        if not self.request.scratch_path:
            return None
        scratch = Path(self.request.scratch_path).expanduser().absolute()
        scratch.mkdir(parents=True, exist_ok=True)
        return scratch

    # -- checks -------------------------------------------------------------------------------------------------
    def _need_engine(self) -> None:
        ok, why = docker_engine()
        if not ok:
            raise UserError(f"No docker engine answers here ({why}): install one (Debian: apt-get install docker.io) "
                            f"and start it, or use the local environment: make build", exit_code=EXIT_FAILURE)

    def _need_image(self, image: str) -> None:
        if self._created(image) is None:
            base = f" BASE_IMAGE={self.request.base_image}" if self.request.base_image else ""
            raise UserError(f"The image {image} does not exist here: make build_docker{base} makes it.",
                            exit_code=EXIT_FAILURE)

    @staticmethod
    def _inspect(image: str, field: str) -> str | None:
        """`docker image inspect`'s `field` of `image` ("" when it is empty), None where the image is not here."""
        done = subprocess.run(["docker", "image", "inspect", "--format", "{{" + field + "}}", image],
                              capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else None

    def _created(self, image: str) -> str | None:
        return self._inspect(image, ".Created") or None

    def _user_layer_is_current(self) -> bool:
        """Whether the user layer exists, was made after the image built last, and for the caller."""
        created, built = self._created(self.image.with_user), self._created(self.image.built)
        user = self._inspect(self.image.with_user, ".Config.User")
        return (created is not None and built is not None and created >= built
                and user == f"{os.getuid()}:{os.getgid()}")

    @staticmethod
    def _caller() -> tuple[tuple[str, str], tuple[str, str]]:
        uid, gid = os.getuid(), os.getgid()
        try:
            user = pwd.getpwuid(uid).pw_name
        except KeyError:
            user = os.environ.get("USER") or f"user{uid}"
        try:
            group = grp.getgrgid(gid).gr_name
        except KeyError:
            group = user
        return (user, str(uid)), (group, str(gid))

    def _local_prebuild(self, why: str) -> int:
        """No docker engine: the local environment, as make prebuild did before (.venv, then code.main's prebuild)."""
        self.log(f"No docker engine ({why}): setting up the local environment instead.")
        venv = Path(os.environ.get("VENV") or self.paths.venv)
        bootstrap = self.paths.repo / "scripts" / "bootstrap_venv.py"
        if subprocess.call([sys.executable, str(bootstrap), "--venv", str(venv)]) != 0:
            return EXIT_FAILURE
        return subprocess.call([str(venv / "bin" / "python"), "-m", "code.main", "--action=prebuild",
                                *self.request.passthrough], cwd=self.paths.repo)


def parse_switch(name: str, value: str | None) -> bool:
    if value in (None, "", "0", "false", "no"):
        return False
    if value in ("1", "true", "yes"):
        return True
    raise UserError(f"{name}={value!r} is not valid: give {name}=1 or {name}=0.", exit_code=EXIT_BAD_INPUT)


def split_docker_args(value: str | None) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(value or ""))
    except ValueError as error:
        raise UserError(f"DOCKER_ARGS={value!r} cannot be split into flags ({error}): close its quotes.") from error
