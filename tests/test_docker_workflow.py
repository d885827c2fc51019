"""The container workflow (make build_docker, docker_add_user, launch_docker, prebuild, configure_mig,
teardown_mig) through real make calls, with recording stand-ins for `docker` and `nvidia-smi` first on PATH: what
the image is built from (ignore file, base, build arguments, the host's CA bundle), what a container gets (mounts,
user, GPUs, MIG devices, DOCKER_ARGS, DOCKER_COMMAND and its exit status), and the Dockerfiles' own facts."""
from __future__ import annotations

import fnmatch
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from code.common.errors import UserError
from code.common.paths import Paths
from code.docker import image as image_module
from code.docker.image import CA_IN_CONTAINER, Image, find_ca_bundle, with_secret_mount
from code.docker.mig import Profile, parse_mig_conf, profile_for
from code.docker.workflow import Request, Workflow

from .conftest import REPO, make_in
from .fake_container_tools import FakeTools

BASE = "toolkit-base:bookworm"
BUILT = "mlperf-inference-toolkit:cpu-toolkit-base-bookworm-latest"
WITH_USER = "mlperf-inference-toolkit:cpu-toolkit-base-bookworm"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    path = tmp_path / "site-ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\nsite proxy CA\n-----END CERTIFICATE-----\n")
    return path


def tools_in(tmp_path: Path, monkeypatch, nvidia_smi: str | None = None, pip_cert: Path | None = None) -> FakeTools:
    """The fakes on PATH for the make calls of this test; the host's pip settings and CA variables out of the way
    (PIP_CERT set to `pip_cert` where given)."""
    tools = FakeTools(tmp_path / "fake", nvidia_smi)
    for name, value in tools.environment().items():
        monkeypatch.setenv(name, value)
    for name in ("PIP_CERT", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "DOCKER_BUILDKIT", *image_module.PROXY_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)     # pip reads no configuration file
    if pip_cert is not None:
        monkeypatch.setenv("PIP_CERT", str(pip_cert))
    return tools


def option(args: list[str], flag: str) -> list[str]:
    return [args[i + 1] for i, a in enumerate(args[:-1]) if a == flag]


def built_with(tools: FakeTools, *variables: str) -> tuple[subprocess.CompletedProcess, dict]:
    """make build_docker with `variables`: its output, and the one `docker build` it called."""
    done = make_in(REPO, "build_docker", *variables)
    assert done.returncode == 0, done.stderr
    [build] = tools.calls("docker", "build")
    return done, build


# -- what goes into the image ------------------------------------------------------------------------------------
def test_the_build_context_is_the_installs_inputs_and_not_environments_builds_or_history():
    patterns = [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
                if line.strip() and not line.startswith("#")]
    excluded = [p for p in patterns if not p.startswith("!")]
    for name in (".git", ".venv", ".venv-triton", ".venv-vllm", "build", "scratch"):
        assert any(fnmatch.fnmatch(name, p) for p in excluded), name
    staged = Paths.create().docker_ca_stage.relative_to(REPO).as_posix()
    assert f"!{staged}" in patterns      # the one file of build/ the install stage reads
    for dockerfile in ("cpu", "gpu"):
        assert f"COPY {staged} " in (REPO / "docker" / f"Dockerfile.{dockerfile}").read_text()
    # What is left of this checkout is what a build sends: a few MB (tracked files alone, as a fresh clone has).
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True)
    sent = [name for name in tracked.stdout.split("\0") if name and not any(
        fnmatch.fnmatch(name.split("/")[0], p) for p in excluded)]
    assert sum((REPO / name).stat().st_size for name in sent if (REPO / name).is_file()) < 50 * 2**20


@pytest.mark.parametrize("flavour, python, extras", [("cpu", "python3", "dev"), ("gpu", "python3.11", "dev,tensorrt")])
def test_each_dockerfile_takes_its_base_installs_the_lock_and_keeps_no_ca_bundle(flavour, python, extras):
    """The GPU image cannot be built here (no CUDA base image, no GPU): its Dockerfile is read for the same facts."""
    text = (REPO / "docker" / f"Dockerfile.{flavour}").read_text()
    assert f"ARG BASE_IMAGE={image_module.DEFAULT_BASE[flavour]}\n" in text
    stages = re.split(r"^FROM ", text, flags=re.M)[1:]
    assert [s.split("\n")[0] for s in stages] == ["${BASE_IMAGE} AS tools", "tools AS install", "tools"]
    tools, install, final = stages
    assert f"{python} /opt/toolkit/scripts/bootstrap_venv.py --venv /opt/venv --extras {extras}" in install
    assert "COPY requirements/ " in install and "ca-bundle.crt" in install
    # The final image copies the environment alone from the stage that saw the bundle, and sets no CA variable.
    assert re.findall(r"^COPY .*$", final, flags=re.M) == ["COPY --from=install /opt/venv /opt/venv"]
    assert "ca-bundle" not in final and "CERT" not in final and "ENV VENV=/opt/venv" in final
    assert "make" in tools and "g++" in tools and "cmake" in tools


def test_build_docker_passes_base_and_proxies_and_stages_the_hosts_ca_bundle_for_the_build_alone(
        tmp_path, monkeypatch, bundle):
    tools = tools_in(tmp_path, monkeypatch, pip_cert=bundle)
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.example:3128")
    done, build = built_with(tools, f"BASE_IMAGE={BASE}", "NO_BUILD=1")
    args = build["args"]
    assert option(args, "-t") == [BUILT] and option(args, "-f") == [str(REPO / "docker" / "Dockerfile.cpu")]
    assert option(args, "--build-arg") == [f"BASE_IMAGE={BASE}", "HTTPS_PROXY=http://proxy.example:3128"]
    assert args[-1] == str(REPO)
    assert build["staged_ca"] == bundle.read_text()          # the install stage trusts the host's bundle ...
    assert not Paths.create().docker_ca_stage.parent.exists()   # ... and the checkout keeps no copy afterwards
    assert f"trusting the CA bundle {bundle} (PIP_CERT)" in done.stdout
    assert tools.calls("docker", "run") == []                # NO_BUILD=1: make build is not run in it


def test_where_the_builder_is_buildkit_the_bundle_is_a_build_secret_and_no_file_of_the_context(
        tmp_path, monkeypatch, bundle):
    tools = tools_in(tmp_path, monkeypatch, pip_cert=bundle)
    monkeypatch.setenv("FAKE_DOCKER_BUILDX", "1")
    done, build = built_with(tools, f"BASE_IMAGE={BASE}", "NO_BUILD=1")
    assert option(build["args"], "--secret") == [f"id=ca_bundle,src={bundle}"] and option(build["args"], "-f") == ["-"]
    assert build["staged_ca"] == ""
    assert "RUN --mount=type=secret,id=ca_bundle,target=/opt/toolkit-ca/ca-bundle.crt if [ -s " in build["stdin"]
    assert build["stdin"].replace(
        "RUN --mount=type=secret,id=ca_bundle,target=/opt/toolkit-ca/ca-bundle.crt ",
        f"COPY {Paths.create().docker_ca_stage.relative_to(REPO).as_posix()} /opt/toolkit-ca/ca-bundle.crt\nRUN ") \
        == (REPO / "docker" / "Dockerfile.cpu").read_text()      # that step alone differs
    assert "as a BuildKit secret" in done.stdout
    for flavour in ("cpu", "gpu"):     # the GPU Dockerfile has the same step
        assert "--mount=type=secret" in with_secret_mount((REPO / "docker" / f"Dockerfile.{flavour}").read_text(),
                                                          "build/docker-ca/ca-bundle.crt")
    with pytest.raises(UserError, match="The Dockerfile has 0 steps that copy build/docker-ca/ca-bundle.crt"):
        with_secret_mount("FROM x\nRUN true\n", "build/docker-ca/ca-bundle.crt")


def test_build_docker_then_runs_make_build_in_the_image_and_stages_an_empty_bundle_where_the_host_has_none(
        tmp_path, monkeypatch):
    tools = tools_in(tmp_path, monkeypatch)
    done = make_in(REPO, "build_docker")
    assert done.returncode == 0, done.stderr
    build = tools.calls("docker", "build")[0]
    assert option(build["args"], "-t") == ["mlperf-inference-toolkit:cpu-latest"]
    assert option(build["args"], "--build-arg") == ["BASE_IMAGE=python:3.11-slim-bookworm"]
    assert build["staged_ca"] == ""
    assert option(tools.calls("docker", "build")[-1]["args"], "-t") == ["mlperf-inference-toolkit:cpu"]  # user layer
    [run] = tools.calls("docker", "run")
    assert run["args"][-4:] == ["mlperf-inference-toolkit:cpu", "bash", "-c", "make build"]


def test_the_ca_bundle_is_the_one_the_hosts_installers_trust_in_pips_order(tmp_path, bundle):
    other = tmp_path / "other.pem"
    other.write_text("other")
    config = f"global.cert='{other}'\n"
    assert find_ca_bundle({"PIP_CERT": str(bundle), "SSL_CERT_FILE": str(other)}, lambda: config).path == bundle
    found = find_ca_bundle({"REQUESTS_CA_BUNDLE": str(bundle)}, lambda: config)
    assert (found.path, found.source) == (other, "pip's configuration (global.cert)")
    assert find_ca_bundle({"SSL_CERT_FILE": str(bundle)}, lambda: "").path == bundle
    assert find_ca_bundle({}, lambda: "global.index-url='https://example'\n") is None
    with pytest.raises(UserError, match=r"PIP_CERT names the CA bundle .*missing.pem, which is not a file"):
        find_ca_bundle({"PIP_CERT": str(tmp_path / "missing.pem")}, lambda: "")


# -- what a container gets ---------------------------------------------------------------------------------------
def test_launch_docker_adds_the_user_layer_mounts_the_checkout_and_returns_the_commands_status(
        tmp_path, monkeypatch, bundle):
    tools = tools_in(tmp_path, monkeypatch, nvidia_smi="gpu", pip_cert=bundle)
    scratch = tmp_path / "scratch space"
    monkeypatch.setenv("FAKE_RUN_STATUS", "7")
    done = make_in(REPO, "launch_docker", "DOCKER_COMMAND=make run RUN_ARGS=\"--test_run --scenarios=offline\"",
                   "DOCKER_ARGS=--shm-size=2g --env 'NOTE=a b'", f"MLPERF_SCRATCH_PATH={scratch}")
    assert "The image mlperf-inference-toolkit:gpu-latest does not exist here: make build_docker makes it." \
        in done.stderr and done.returncode != 0
    assert make_in(REPO, "build_docker", "NO_BUILD=1").returncode == 0
    done = make_in(REPO, "launch_docker", "DOCKER_COMMAND=make run RUN_ARGS=\"--test_run --scenarios=offline\"",
                   "DOCKER_ARGS=--shm-size=2g --env 'NOTE=a b'", f"MLPERF_SCRATCH_PATH={scratch}")
    assert done.returncode != 0 and "Error 7" in done.stderr       # the command's own status
    user_build = tools.calls("docker", "build")[-1]
    assert user_build["args"][-1] == "-" and user_build["stdin"] == (REPO / "docker" / "Dockerfile.user").read_text()
    assert option(user_build["args"], "--build-arg")[:1] == ["BASE_IMAGE=mlperf-inference-toolkit:gpu-latest"]
    assert f"USER_ID={os.getuid()}" in option(user_build["args"], "--build-arg")
    assert f"GROUP_ID={os.getgid()}" in option(user_build["args"], "--build-arg")
    [run] = tools.calls("docker", "run")
    args = run["args"]
    assert args[-4:] == ["mlperf-inference-toolkit:gpu", "bash", "-c",
                         "make run RUN_ARGS=\"--test_run --scenarios=offline\""]
    assert "-t" not in args and "-i" not in args and "--rm" in args
    volumes = option(args, "-v")
    assert f"{REPO}:/work" in volumes and f"{scratch}:{scratch}" in volumes and scratch.is_dir()
    assert f"{bundle}:{CA_IN_CONTAINER}:ro" in volumes
    assert {f"MLPERF_SCRATCH_PATH={scratch}", f"PIP_CERT={CA_IN_CONTAINER}", f"SSL_CERT_FILE={CA_IN_CONTAINER}",
            f"REQUESTS_CA_BUNDLE={CA_IN_CONTAINER}", "PYTHONUNBUFFERED=1"} <= set(option(args, "-e"))
    assert option(args, "--gpus") == ["all"]
    assert args[args.index("--shm-size=2g"):][:3] == ["--shm-size=2g", "--env", "NOTE=a b"]
    # The container is removed by name even where the client was stopped before --rm could.
    [remove] = tools.calls("docker", "rm")
    assert remove["args"] == ["rm", "--force", option(args, "--name")[0]]
    # Launched again: the user layer is newer than the image, so it is not rebuilt.
    make_in(REPO, "launch_docker", "DOCKER_COMMAND=true")
    assert len(tools.calls("docker", "build")) == 2


def test_prebuild_builds_adds_the_user_and_enters_the_image_or_sets_up_the_local_environment(tmp_path, monkeypatch):
    tools = tools_in(tmp_path, monkeypatch)
    done = make_in(REPO, "prebuild", "NO_BUILD=1")
    assert done.returncode == 0, done.stderr
    builds = tools.calls("docker", "build")
    assert [option(b["args"], "-t") for b in builds] == [["mlperf-inference-toolkit:cpu-latest"],
                                                          ["mlperf-inference-toolkit:cpu"]]
    [run] = tools.calls("docker", "run")
    assert run["args"][-1] == "mlperf-inference-toolkit:cpu" and "-i" in run["args"] and "-t" not in run["args"]
    monkeypatch.setenv("FAKE_DOCKER_ENGINE", "none")
    done = make_in(REPO, "prebuild")
    assert done.returncode == 0, done.stderr
    assert "No docker engine (the docker client found no running engine): setting up the local environment " \
           "instead." in done.stdout and f"The local virtual environment {sys.prefix} is set up." in done.stdout
    assert len(tools.calls("docker", "build")) == 2


def test_a_container_runs_as_the_caller_and_mounts_shared_data_where_it_lies(tmp_path, monkeypatch):
    tools_in(tmp_path, monkeypatch)
    repo = tmp_path / "checkout" / "repo"
    (repo.parent / "shared").mkdir(parents=True)
    monkeypatch.setattr(os, "getuid", lambda: 1234)
    monkeypatch.setattr(os, "getgid", lambda: 567)
    workflow = Workflow(Paths.create(repo=repo), Request(base_image=BASE))
    args = workflow.run_command(WITH_USER, None, interactive_terminal=True, name="n")
    assert option(args, "--user") == ["1234:567"] and "-t" in args and "-i" in args
    shared = (repo.parent / "shared").resolve()
    assert set(option(args, "-v")) == {f"{repo}:/work", f"{shared}:/shared", f"{shared}:{shared}"}
    assert args[-1] == WITH_USER and "--gpus" not in args


def test_bad_container_variables_are_refused_by_name_before_anything_runs(tmp_path, monkeypatch):
    tools = tools_in(tmp_path, monkeypatch)
    for variable, message in (("NO_BUILD=maybe", "NO_BUILD='maybe' is not valid: give NO_BUILD=1 or NO_BUILD=0."),
                              ("MIG_CONF=two", "MIG_CONF='two' is not valid"),
                              ("DOCKER_ARGS=--env 'A=b", "DOCKER_ARGS=\"--env 'A=b\" cannot be split")):
        done = make_in(REPO, "build_docker", variable)
        assert done.returncode != 0 and "Error 2" in done.stderr and message in done.stderr, done.stderr
    assert tools.calls("docker", "build") == []
    monkeypatch.setenv("FAKE_DOCKER_ENGINE", "none")
    done = make_in(REPO, "launch_docker")
    assert "No docker engine answers here (the docker client found no running engine)" in done.stderr


def test_container_variables_are_data_on_the_host(tmp_path, monkeypatch):
    """DOCKER_COMMAND reaches the container as typed, one argument of bash -c; nothing in it, in DOCKER_ARGS or in
    BASE_IMAGE runs on the host."""
    tools = tools_in(tmp_path, monkeypatch)
    witness = tmp_path / "witness"
    witness.mkdir()
    hostile = (f"x;touch {witness}/semicolon $(touch {witness}/dollar) `touch {witness}/backquote` "
               f"$(shell touch {witness}/make) $$(touch {witness}/double)")
    _, build = built_with(tools, f"BASE_IMAGE={hostile}", "NO_BUILD=1")
    assert option(build["args"], "--build-arg") == [f"BASE_IMAGE={hostile}"]
    done = make_in(REPO, "launch_docker", f"BASE_IMAGE={hostile}", f"DOCKER_COMMAND={hostile}",
                   f"DOCKER_ARGS=--label '{hostile}'")
    assert done.returncode == 0, done.stderr
    [run] = tools.calls("docker", "run")
    assert run["args"][-3:] == ["bash", "-c", hostile] and option(run["args"], "--label") == [hostile]
    assert sorted(p.name for p in witness.iterdir()) == []


def test_the_container_targets_need_no_environment_of_the_toolkit():
    """They run on the host's python3 before .venv exists: the standard library alone (-S: no site packages)."""
    done = subprocess.run([sys.executable, "-S", "-m", "code.docker", "--action=launch"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "invalid choice: 'launch'" in done.stderr and "launch_docker" in done.stderr


# -- MIG -----------------------------------------------------------------------------------------------------------
def test_mig_instances_are_made_mapped_into_the_container_and_removed(tmp_path, monkeypatch):
    tools = tools_in(tmp_path, monkeypatch, nvidia_smi="mig")
    done = make_in(REPO, "configure_mig", "MIG_CONF=2")
    assert done.returncode == 0, done.stderr
    assert "GPU 1: 2 x MIG 3g.40gb (profile 9) created." in done.stdout
    smi = [c["args"] for c in tools.calls("nvidia-smi")]
    for gpu in ("0", "1"):
        assert ["-i", gpu, "-mig", "1"] in smi and ["mig", "-i", gpu, "-cgi", "9,9", "-C"] in smi
    assert make_in(REPO, "build_docker", "NO_BUILD=1").returncode == 0
    done = make_in(REPO, "launch_docker", "MIG_CONF=2", "DOCKER_COMMAND=nvidia-smi -L")
    assert done.returncode == 0, done.stderr
    [run] = tools.calls("docker", "run")
    assert option(run["args"], "--gpus") == ['"device=MIG-0-0,MIG-0-1,MIG-1-0,MIG-1-1"']
    done = make_in(REPO, "launch_docker", "MIG_CONF=3", "DOCKER_COMMAND=true")
    assert "MIG_CONF=3 means 6 MIG instance(s) on 2 GPU(s), and nvidia-smi lists 4: run make configure_mig " \
           "MIG_CONF=3 first" in done.stderr
    done = make_in(REPO, "teardown_mig")
    assert done.returncode == 0 and "GPU 0: MIG instances removed, MIG off." in done.stdout
    smi = [c["args"] for c in tools.calls("nvidia-smi")]
    assert smi[-3:] == [["mig", "-i", "1", "-dci"], ["mig", "-i", "1", "-dgi"], ["-i", "1", "-mig", "0"]]


def test_mig_on_a_machine_without_it_says_so(tmp_path, monkeypatch):
    tools_in(tmp_path, monkeypatch, nvidia_smi="gpu")
    done = make_in(REPO, "configure_mig", "MIG_CONF=2")
    assert "No GPU of this machine supports MIG (nvidia-smi reports its MIG mode as N/A)" in done.stderr
    assert done.returncode != 0
    done = make_in(REPO, "configure_mig")
    assert "make configure_mig needs MIG_CONF=<instances per GPU>" in done.stderr


def test_mig_without_nvidia_smi_and_the_profile_of_a_count():
    with pytest.raises(UserError, match="MIG_CONF='0' is not valid"):
        parse_mig_conf("0")
    assert (parse_mig_conf("off"), parse_mig_conf("all"), parse_mig_conf("07")) == (None, "ALL", "7")
    available = [Profile(0, "1g.10gb", 19, 7, 9.75), Profile(0, "2g.20gb", 14, 3, 19.6), Profile(0, "7g.80gb", 0, 1,
                                                                                                  79.0)]
    assert [profile_for(n, available).name for n in (1, 2, 3, 4, 7)] == ["7g.80gb", "2g.20gb", "2g.20gb", "1g.10gb",
                                                                         "1g.10gb"]
    with pytest.raises(UserError, match="this GPU holds at most 7 instances; give MIG_CONF=7 or less"):
        profile_for(8, available)


def test_images_from_different_bases_have_different_names():
    assert Image.of("cpu", None).built == "mlperf-inference-toolkit:cpu-latest"
    assert Image.of("cpu", BASE).with_user == WITH_USER
    assert Image.of("gpu", "registry.example:5000/cuda:12.9").tag == "gpu-registry.example-5000-cuda-12.9"


# -- end to end, where a docker engine answers -------------------------------------------------------------------
def engine_and_base() -> str:
    """The base image to build from, where a docker engine answers and has it; otherwise the test is skipped naming
    what is missing."""
    import shutil

    if shutil.which("docker") is None:
        pytest.skip("no docker client on PATH (Debian: apt-get install docker.io)")
    try:
        info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=15, check=False)
    except subprocess.TimeoutExpired:
        pytest.skip("docker info did not answer within 15 s")
    if info.returncode != 0 or not info.stdout.strip():
        pytest.skip("no docker engine answers here (start dockerd)")
    base = os.environ.get("TOOLKIT_DOCKER_BASE_IMAGE", BASE)
    if subprocess.run(["docker", "image", "inspect", base], capture_output=True, check=False).returncode != 0:
        pytest.skip(f"the base image {base} is not here (documentation/docker.md makes one; "
                    f"TOOLKIT_DOCKER_BASE_IMAGE names another)")
    return base


def test_end_to_end_the_image_builds_and_runs_commands_as_the_caller(tmp_path):
    base = engine_and_base()
    done = make_in(REPO, "build_docker", f"BASE_IMAGE={base}", "NO_BUILD=1")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    context = re.search(r"Sending build context to Docker daemon\s+([\d.]+)([kMG]?B)", done.stdout + done.stderr)
    if context:     # the legacy builder says how much it sent
        assert float(context.group(1)) * {"B": 1, "kB": 1e3, "MB": 1e6, "GB": 1e9}[context.group(2)] < 100e6
    scratch = tmp_path / "scratch"
    check = ("test ! -e /opt/toolkit-ca && $VENV/bin/python -c 'import mlperf_loadgen, onnxruntime' "
             "&& touch $MLPERF_SCRATCH_PATH/written-inside && test \"$(id -u)\" = " + str(os.getuid()))
    done = make_in(REPO, "launch_docker", f"BASE_IMAGE={base}", f"DOCKER_COMMAND={check}",
                   f"MLPERF_SCRATCH_PATH={scratch}")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (scratch / "written-inside").stat().st_uid == os.getuid()
    done = make_in(REPO, "launch_docker", f"BASE_IMAGE={base}", "DOCKER_COMMAND=exit 3")
    assert done.returncode != 0 and "Error 3" in done.stderr
    left = subprocess.run(["docker", "ps", "-a", "--filter", "name=mlperf-inference-toolkit-", "--format",
                           "{{.Names}}"], capture_output=True, text=True, check=True)
    assert left.stdout.strip() == ""
