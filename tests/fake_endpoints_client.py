"""A fake checkout of mlcommons/endpoints for tests where the real client cannot be had (it is not on PyPI): a git
repository with the pyproject, uv.lock and console script `inference-endpoint` of the real one, built by an in-tree
build backend (no registry needed). Its client records each call (argv, working folder, the YAML it was given) as a
JSON line in the file FAKE_ENDPOINTS_CALLS names, and exits with FAKE_ENDPOINTS_EXIT (0 by default).
"""
from __future__ import annotations

import subprocess
from pathlib import Path

PYPROJECT = """\
[build-system]
requires = []
build-backend = "fake_backend"
backend-path = ["."]

[project]
name = "inference-endpoint"
version = "0.1.0"
requires-python = ">=3.12"
dependencies = []

[project.optional-dependencies]
bfcl = []
"""

BACKEND = '''\
"""An in-tree PEP 517 backend: a pure-Python wheel of src/inference_endpoint, with its console script."""
import base64, hashlib, os, zipfile

NAME, VERSION = "inference_endpoint", "0.1.0"
DIST = f"{NAME}-{VERSION}.dist-info"


def _record(path, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for name in sorted(os.listdir("src/inference_endpoint")):
        with open(os.path.join("src/inference_endpoint", name), "rb") as f:
            files[f"inference_endpoint/{name}"] = f.read()
    files[f"{DIST}/METADATA"] = f"Metadata-Version: 2.1\\nName: inference-endpoint\\nVersion: {VERSION}\\n".encode()
    files[f"{DIST}/WHEEL"] = b"Wheel-Version: 1.0\\nGenerator: fake\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"
    files[f"{DIST}/entry_points.txt"] = b"[console_scripts]\\ninference-endpoint = inference_endpoint.main:run\\n"
    record = "\\n".join(_record(p, d) for p, d in files.items()) + f"\\n{DIST}/RECORD,,\\n"
    wheel = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, wheel), "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{DIST}/RECORD", record)
    return wheel
'''

MAIN = '''\
"""The fake client: records its call and exits as FAKE_ENDPOINTS_EXIT says."""
import json, os, sys


def run():
    argv = sys.argv[1:]
    call = {"argv": argv, "cwd": os.getcwd()}
    if "--config" in argv:
        with open(argv[argv.index("--config") + 1]) as f:
            call["config"] = f.read()
    if os.environ.get("FAKE_ENDPOINTS_CALLS"):
        with open(os.environ["FAKE_ENDPOINTS_CALLS"], "a") as f:
            f.write(json.dumps(call) + "\\n")
    sys.exit(int(os.environ.get("FAKE_ENDPOINTS_EXIT", "0")))
'''

UV_LOCK = """\
version = 1
revision = 3
requires-python = ">=3.12"

[[package]]
name = "inference-endpoint"
version = "0.1.0"
source = { editable = "." }

[package.optional-dependencies]
bfcl = []

[package.metadata]
provides-extras = ["bfcl"]
"""


def git(folder: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(folder), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout.strip()


def make_checkout(folder: Path) -> str:
    """Write and commit the fake checkout in `folder`; its commit."""
    (folder / "src" / "inference_endpoint").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(PYPROJECT)
    (folder / "fake_backend.py").write_text(BACKEND)
    (folder / "uv.lock").write_text(UV_LOCK)
    (folder / "src" / "inference_endpoint" / "__init__.py").write_text("")
    (folder / "src" / "inference_endpoint" / "main.py").write_text(MAIN)
    git(folder, "init", "-q")
    git(folder, "add", "-A")
    git(folder, "commit", "-q", "-m", "fake client")
    return git(folder, "rev-parse", "HEAD")
