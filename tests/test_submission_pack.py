"""pack_submission: the plain tarball, and the encrypted one that MLCommons' pack_submission.sh --unpack opens
(fast, no GPU, no network)."""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.actions.base import Context
from code.actions.submission import PackSubmission
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.submission import pack
from code.common.submission.check_record import write_record
from code.common.submission.pack import pack_tree

PASSPHRASE = "correct horse battery staple"
TARBALL = "mlperf-inference-ACME-submission.tar.gz"
ENCRYPTED, ENCRYPTED_SHA1 = "mlperf_submission_ACME.tar.gz", "mlperf_submission_ACME.sha1"
OFFICIAL_SCRIPT = Path("tools/submission/pack_submission.sh")
needs_tools = pytest.mark.skipif(any(shutil.which(t) is None for t in ("openssl", "sha1sum", "tar", "bash")),
                                 reason="needs openssl, sha1sum, tar and bash on the PATH (apt-get install openssl "
                                        "coreutils tar bash)")

# pack_submission.sh's --unpack branch, literally, except that openssl reads the passphrase from stdin
# instead of asking for it: compare sha1sum's line with the .sha1 file's content, decrypt, untar.
UNPACK = """set -o pipefail
TARBALL_NAME=mlperf_submission_ACME.tar.gz
SHA1_FILE_NAME=mlperf_submission_ACME.sha1
if [ "$(sha1sum ${TARBALL_NAME})" = "$(cat ${SHA1_FILE_NAME})" ]; then
    openssl enc -d -aes256 -in ${TARBALL_NAME} -pass stdin | tar -xz
else
    echo "sha1sum mismatch" >&2; exit 3
fi
"""


class Log(list):
    def __call__(self, line: str) -> None:
        self.append(line)


def _exported(tmp_path: Path) -> Path:
    root = tmp_path / "submission"
    result = root / "closed/ACME/results/sys1/resnet/Offline"
    for folder in (result / "accuracy", result / "TEST01/accuracy", result / "performance/run_1",
                   root / "open/ACME/results/sys1/resnet/SingleStream/accuracy", root / "closed/ACME/src/empty"):
        folder.mkdir(parents=True)
    (result / "accuracy/accuracy.txt").write_text("accuracy=76.456%, good=38228, total=50000\nhash=ab12\n")
    (result / "accuracy/mlperf_log_accuracy.json").write_text("[\n" + "{}, " * 2000 + "{}\n]")
    (result / "TEST01/accuracy/accuracy.txt").write_text("TEST PASS\n")
    (result / "performance/run_1/mlperf_log_detail.txt").write_bytes(bytes(range(256)) * 64)
    (root / "open/ACME/results/sys1/resnet/SingleStream/accuracy/accuracy.txt").write_text("x\n")
    (root / "closed/ACME/systems").mkdir()
    (root / "closed/ACME/systems/sys1.json").write_text("{}")
    return root


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its content (None for a folder)."""
    return {p.relative_to(root).as_posix(): (None if p.is_dir() else p.read_bytes()) for p in root.rglob("*")}


# -- plain tarball ---------------------------------------------------------------------------------
def test_pack_tarball_sha1_and_moves_old_one_aside(tmp_path: Path) -> None:
    root, tarball = _exported(tmp_path), tmp_path / "out" / "mlperf-ACME.tar.gz"
    tarball.parent.mkdir()
    tarball.write_bytes(b"old")
    log = Log()
    result = pack_tree(root, tarball, None, log)
    assert result.encrypted is None and result.decrypt_command is None and result.encrypted_sha1 is None
    aside = list(tarball.parent.glob("mlperf-ACME.tar.gz.*.bak"))
    assert len(aside) == 1 and aside[0].read_bytes() == b"old" and any("aside" in line for line in log)
    digest = hashlib.sha1(tarball.read_bytes()).hexdigest()
    assert result.sha1_file.read_text() == f"{digest}  {tarball.name}\n"
    with tarfile.open(tarball) as tar:
        names = tar.getnames()
    assert names[0] == "closed" and names == sorted(names, key=lambda n: n.split("/"))
    assert {"closed/ACME/systems/sys1.json", "open"} <= set(names) and not any(n.startswith("/") for n in names)
    assert sorted(p.name for p in tarball.parent.iterdir() if not p.name.endswith(".bak")) == \
        ["mlperf-ACME.tar.gz", "mlperf-ACME.tar.gz.sha1"]


def test_pack_is_deterministic_and_moves_stale_encrypted_outputs_aside(tmp_path: Path) -> None:
    root = _exported(tmp_path)
    first = pack_tree(root, tmp_path / "a" / TARBALL, None, Log()).tarball.read_bytes()
    (tmp_path / "b").mkdir()
    for name in (ENCRYPTED, ENCRYPTED_SHA1):   # from an earlier encrypted pack: no longer match the tarball
        (tmp_path / "b" / name).write_text("stale")
    result = pack_tree(root, tmp_path / "b" / TARBALL, None, Log(), submitter="ACME")
    assert result.tarball.read_bytes() == first
    assert not (tmp_path / "b" / ENCRYPTED).exists() and not (tmp_path / "b" / ENCRYPTED_SHA1).exists()
    assert len(list((tmp_path / "b").glob("mlperf_submission_ACME.*.bak"))) == 2


def test_pack_without_openssl_is_a_user_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(UserError, match="openssl"):
        pack_tree(_exported(tmp_path), tmp_path / "t.tar.gz", "secret", Log())
    assert not (tmp_path / "t.tar.gz").exists()


@pytest.mark.parametrize("passphrase, submitter, tarball, match", [
    ("", "ACME", TARBALL, "empty"),
    ("two\nlines", "ACME", TARBALL, "one line"),
    ("tab\there", "ACME", TARBALL, "one line"),
    ("x" * 513, "ACME", TARBALL, "longer than 512 bytes"),
    (PASSPHRASE, "Big Corp", TARBALL, "unquoted"),
    (PASSPHRASE, "ACME", ENCRYPTED, "encrypted one's name"),
])
def test_pack_refuses_what_the_official_unpack_could_not_open(tmp_path: Path, passphrase: str, submitter: str,
                                                              tarball: str, match: str) -> None:
    with pytest.raises(UserError, match=match):
        pack_tree(_exported(tmp_path), tmp_path / "out" / tarball, passphrase, Log(), submitter=submitter)
    assert not (tmp_path / "out").exists()


def test_pack_needs_the_submitter_when_the_tree_has_several(tmp_path: Path) -> None:
    root = _exported(tmp_path)
    (root / "open/OTHER").mkdir()
    with pytest.raises(UserError, match="give the submitter name"):
        pack_tree(root, tmp_path / TARBALL, PASSPHRASE, Log())


# -- encrypted, as pack_submission.sh --unpack expects ---------------------------------------------
def _pack_encrypted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **kwargs) -> tuple[Path, pack.PackResult]:
    """Pack with the passphrase, checking it never reaches a command line."""
    argvs: list[list[str]] = []
    real_run = subprocess.run

    def run(argv, *args, **kw):
        argvs.append([str(a) for a in argv])
        return real_run(argv, *args, **kw)

    monkeypatch.setattr(pack.subprocess, "run", run)
    root = _exported(tmp_path)
    result = pack_tree(root, tmp_path / "out" / TARBALL, PASSPHRASE, Log(), **kwargs)
    assert argvs and not any(PASSPHRASE in arg for argv in argvs for arg in argv)
    assert any(argv[1:5] == ["enc", "-e", "-aes256", "-md"] for argv in argvs)
    return root, result


@needs_tools
@pytest.mark.parametrize("submitter", ["ACME", None])   # None: taken from the tree's closed/ACME, open/ACME
def test_pack_encrypted_opens_with_the_official_unpack_procedure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 submitter: str | None) -> None:
    root, result = _pack_encrypted(tmp_path, monkeypatch, submitter=submitter)
    out = tmp_path / "out"
    assert result.encrypted == out / ENCRYPTED and result.encrypted_sha1 == out / ENCRYPTED_SHA1
    assert result.tarball == out / TARBALL and (out / (TARBALL + ".sha1")).is_file()
    assert result.encrypted.read_bytes().startswith(b"Salted__")   # openssl's salted format, not a gzip
    assert result.decrypt_command == f"openssl enc -d -aes256 -in {ENCRYPTED} | tar -xvz"
    sha1sum = subprocess.run(["sha1sum", ENCRYPTED], cwd=out, capture_output=True, text=True, check=True).stdout
    assert result.encrypted_sha1.read_text() == sha1sum   # sha1sum's whole line, name included

    # The reviewer's folder holds just the two files MLCommons receives.
    review = tmp_path / "review"
    review.mkdir()
    for path in (result.encrypted, result.encrypted_sha1):
        shutil.copy2(path, review)
    proc = subprocess.run(["bash", "-c", UNPACK], cwd=review, input=PASSPHRASE + "\n", capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    unpacked = _tree(review)
    for name in (ENCRYPTED, ENCRYPTED_SHA1):
        unpacked.pop(name)
    assert unpacked == _tree(root)
    assert {name.split("/")[0] for name in unpacked} == {"closed", "open"}

    # The decrypted stream is the deterministic plain tarball, byte for byte; a wrong passphrase opens nothing.
    plain = subprocess.run(["openssl", "enc", "-d", "-aes256", "-in", ENCRYPTED, "-pass", "stdin"], cwd=out,
                           input=(PASSPHRASE + "\n").encode(), capture_output=True, check=True).stdout
    assert plain == result.tarball.read_bytes()
    wrong = tmp_path / "wrong"
    wrong.mkdir()
    for path in (result.encrypted, result.encrypted_sha1):
        shutil.copy2(path, wrong)
    proc = subprocess.run(["bash", "-c", UNPACK], cwd=wrong, input="wrong\n", capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0 and not (wrong / "closed").exists()


@needs_tools
def test_pack_submission_action_writes_the_official_names(tmp_path: Path) -> None:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path / "repo")
    shutil.copytree(_exported(tmp_path), paths.submission)
    write_record(paths.submission_check_record, paths.submission, dry_run=False, relaxed=False)  # as a passing check
    secret = tmp_path / "passphrase.txt"
    secret.write_text(PASSPHRASE + "\n")
    args = SimpleNamespace(action="pack_submission", submitter="ACME", passphrase_file=str(secret),
                           allow_test_runs=False)
    log = Log()
    assert PackSubmission(Context(args=args, paths=paths, rules=get_round(), detect=lambda: None, log=log)).run() == 0
    packed = {p.name for p in paths.build.iterdir() if p.is_file()} - \
        {paths.submission_check_record.name, paths.submission_lock.name}
    assert sorted(packed) == sorted([ENCRYPTED, ENCRYPTED_SHA1, TARBALL, TARBALL + ".sha1"])
    assert any("pack_submission.sh --unpack" in line and "SUBMITTER=ACME" in line for line in log)
    assert not any(PASSPHRASE in line for line in log)
    missing = SimpleNamespace(action="pack_submission", submitter="ACME", passphrase_file=str(tmp_path / "nope"),
                              allow_test_runs=False)
    with pytest.raises(UserError, match="Cannot read the passphrase file"):
        PackSubmission(Context(args=missing, paths=paths, rules=get_round(), detect=lambda: None, log=log)).run()


@needs_tools
def test_pack_encrypted_opens_with_the_official_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inference = os.environ.get("MLPERF_INFERENCE_DIR")
    if not inference or not (Path(inference) / OFFICIAL_SCRIPT).is_file():
        pytest.skip(f"set MLPERF_INFERENCE_DIR to an MLCommons inference checkout with {OFFICIAL_SCRIPT}")
    root, result = _pack_encrypted(tmp_path, monkeypatch, submitter="ACME")
    review = tmp_path / "review"
    review.mkdir()
    for path in (result.encrypted, result.encrypted_sha1):
        shutil.copy2(path, review)
    script = tmp_path / "pack_submission.sh"
    shutil.copy(Path(inference) / OFFICIAL_SCRIPT, script)
    subprocess.run(["sed", "-i", "s/^SUBMITTER=.*/SUBMITTER=ACME/", str(script)], check=True)
    assert "\nSUBMITTER=ACME\n" in script.read_text()
    # The script runs `openssl enc -d -aes256 -in ... | tar -xvz` unchanged. openssl asks for the passphrase
    # on /dev/tty; in a new session there is no controlling terminal, so it reads the answer from stdin.
    proc = subprocess.run(["bash", str(script), "--unpack"], cwd=review, input=PASSPHRASE + "\n",
                          capture_output=True, text=True, timeout=120, start_new_session=True)
    assert "sha1sum matches." in proc.stdout, proc.stdout + proc.stderr
    unpacked = _tree(review)
    for name in (ENCRYPTED, ENCRYPTED_SHA1):
        unpacked.pop(name)
    assert unpacked == _tree(root), proc.stdout + proc.stderr   # the script exits 0 even when it fails
