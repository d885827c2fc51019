"""The image of this machine and what its build is given: the Dockerfile, the base, the name, proxies and the
host's extra CA bundle."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from ..common.errors import EXIT_FAILURE, UserError
from ..common.paths import Paths

REPOSITORY = "mlperf-inference-toolkit"
DEFAULT_BASE = {"cpu": "python:3.11-slim-bookworm", "gpu": "nvidia/cuda:12.9.1-cudnn-runtime-ubuntu24.04"}
# Docker's predefined build arguments: a build uses them, the image's history keeps none of them.
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "FTP_PROXY", "NO_PROXY", "ALL_PROXY",
                   "http_proxy", "https_proxy", "ftp_proxy", "no_proxy", "all_proxy")
# Where the container finds the host's extra CA bundle, and the variables that point the installers at it.
CA_IN_CONTAINER = "/etc/toolkit-ca/ca-bundle.crt"
CA_VARIABLES = ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
CA_SECRET = "ca_bundle"    # the build secret's id where the builder is BuildKit
_TAG_CHARACTERS = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Image:
    """The image of one flavour (cpu or gpu) from one base: `<repository>:<tag>-latest` as make build_docker makes
    it, `<repository>:<tag>` with the calling user's layer (NVIDIA's names). A base other than the default is part
    of the tag, so images from different bases never replace each other."""

    flavour: str
    base: str

    @classmethod
    def of(cls, flavour: str, base_image: str | None) -> "Image":
        return cls(flavour, base_image or DEFAULT_BASE[flavour])

    @property
    def tag(self) -> str:
        if self.base == DEFAULT_BASE[self.flavour]:
            return self.flavour
        return f"{self.flavour}-{_TAG_CHARACTERS.sub('-', self.base).strip('-.')}"[:100]

    @property
    def built(self) -> str:
        return f"{REPOSITORY}:{self.tag}-latest"

    @property
    def with_user(self) -> str:
        return f"{REPOSITORY}:{self.tag}"


@dataclass(frozen=True)
class CaBundle:
    path: Path
    source: str     # where the host's installers are told to trust it, for messages


def pip_config_listing() -> str:
    """`pip config list` of the host's python3 (empty where it has no pip)."""
    python = shutil.which("python3") or sys.executable
    try:
        done = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True, timeout=60,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout if done.returncode == 0 else ""


def find_ca_bundle(environ: Mapping[str, str] = os.environ,
                   pip_config: Callable[[], str] = pip_config_listing) -> CaBundle | None:
    """The extra CA bundle the host's installers trust, in the order pip reads its settings (PIP_CERT, then its
    `cert` configuration), then the variables of requests and of Python's ssl module; None where none is set."""
    candidates: list[tuple[str, str]] = []
    if environ.get("PIP_CERT"):
        candidates.append(("PIP_CERT", environ["PIP_CERT"]))
    for line in pip_config().splitlines():
        key, _, value = line.partition("=")
        if key.strip().endswith(".cert") and value.strip():
            candidates.append((f"pip's configuration ({key.strip()})", value.strip().strip("'\"")))
    candidates += [(name, environ[name]) for name in ("REQUESTS_CA_BUNDLE", "SSL_CERT_FILE") if environ.get(name)]
    if not candidates:
        return None
    source, value = candidates[0]
    path = Path(value).expanduser()
    if not path.is_file():
        raise UserError(f"{source} names the CA bundle {value}, which is not a file: correct or unset it, then run "
                        f"the make command again.")
    return CaBundle(path.resolve(), source)


def proxy_settings(environ: Mapping[str, str] = os.environ) -> list[tuple[str, str]]:
    return [(name, environ[name]) for name in PROXY_VARIABLES if environ.get(name)]


def builder_has_secrets(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether `docker build` builds with BuildKit here, which takes build secrets: asked for (DOCKER_BUILDKIT=1),
    or the buildx component that current clients build with; DOCKER_BUILDKIT=0 asks for the legacy builder."""
    if environ.get("DOCKER_BUILDKIT") in ("0", "1"):
        return environ["DOCKER_BUILDKIT"] == "1"
    try:
        return subprocess.run(["docker", "buildx", "version"], capture_output=True, timeout=20,
                              check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def with_secret_mount(dockerfile: str, staged: str) -> str:
    """The Dockerfile for BuildKit: the install step reads the bundle from the build secret CA_SECRET, mounted
    where the legacy builder's copy of the staged file would be, so no layer or cache holds it."""
    copy = re.compile(rf"^COPY {re.escape(staged)} (\S+)\nRUN ", flags=re.M)
    found = copy.findall(dockerfile)
    if len(found) != 1:
        raise UserError(f"The Dockerfile has {len(found)} steps that copy {staged} and install (one expected): "
                        f"restore it from the repository.", exit_code=EXIT_FAILURE)
    return copy.sub(f"RUN --mount=type=secret,id={CA_SECRET},target={found[0]} ", dockerfile)


def build_command(paths: Paths, image: Image, bundle: CaBundle | None, secrets: bool,
                  environ: Mapping[str, str] = os.environ) -> list[str]:
    """`docker build` of the image: the repository as the context (.dockerignore keeps it to a few MB), the base
    and proxies as build arguments, the host's network (as NVIDIA's builds: the proxies and name servers the host
    uses). With BuildKit (`secrets`) the Dockerfile comes on stdin, its install step reading the bundle as a build
    secret."""
    dockerfile = "-" if secrets else str(paths.dockerfile(image.flavour))
    command = ["docker", "build", "--network", "host", "-t", image.built, "-f", dockerfile,
               "--build-arg", f"BASE_IMAGE={image.base}"]
    if secrets and bundle is not None:
        command += ["--secret", f"id={CA_SECRET},src={bundle.path}"]
    for name, value in proxy_settings(environ):
        command += ["--build-arg", f"{name}={value}"]
    return [*command, str(paths.repo)]


def stage_ca_bundle(paths: Paths, bundle: CaBundle | None) -> Path:
    """Put the bundle (or an empty file: the Dockerfiles copy the path either way) where the legacy builder's
    install stage reads it (BuildKit's reads the secret: give None); the caller removes it when the build ends."""
    staged = paths.docker_ca_stage
    staged.parent.mkdir(parents=True, exist_ok=True)
    if bundle is None:
        staged.write_bytes(b"")
    else:
        shutil.copyfile(bundle.path, staged)
    return staged


def ca_run_flags(bundle: CaBundle | None) -> list[str]:
    """The host's bundle mounted read-only into the container, and the installers pointed at it."""
    if bundle is None:
        return []
    flags = ["-v", f"{bundle.path}:{CA_IN_CONTAINER}:ro"]
    for name in CA_VARIABLES:
        flags += ["-e", f"{name}={CA_IN_CONTAINER}"]
    return flags
