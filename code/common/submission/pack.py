"""Pack the exported submission tree into a tar.gz (+ .sha1), optionally encrypted with openssl.

The archive holds the division folders at its top level, in sorted order, with no owner names and a
fixed gzip header, so the same tree gives the same archive.

Outputs, all in the tarball's folder (`build/` for `make pack_submission`):

- always: the plain tarball, `mlperf-inference-<SUBMITTER>-submission.tar.gz`, and `<that name>.sha1`
  (sha1sum's line, so `sha1sum -c` works beside it); for looking inside, or sharing unencrypted;
- with a passphrase, also what MLCommons' `tools/submission/pack_submission.sh --unpack` opens:
  `mlperf_submission_<SUBMITTER>.tar.gz`, the plain tarball encrypted with
  `openssl enc -e -aes256 -md sha256 -salt -pass stdin` (the script's `openssl enc -e -aes256`: openssl's
  default salted EVP_BytesToKey key derivation, whose digest is sha256 since OpenSSL 1.1.0, given explicitly so
  that an older openssl (md5) packs the same; no -pbkdf2/-iter, which the script's decryption lacks), and
  `mlperf_submission_<SUBMITTER>.sha1` holding exactly `sha1sum`'s line for it, which the script compares
  as a whole. The reviewer decrypts with the script (SUBMITTER set in it) or, in a folder holding both
  files, `openssl enc -d -aes256 -in mlperf_submission_<SUBMITTER>.tar.gz | tar -xvz`, typing the passphrase.

The passphrase goes through stdin, never argv (argv is visible to every user of the machine in `ps`).
Earlier outputs are moved aside as `<name>.<timestamp>.bak`, never overwritten.
"""
from __future__ import annotations

import gzip
import os
import re
import shlex
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import EXIT_FAILURE, UserError
from ..fileio import atomic_path, file_digest, write_atomically
from ..paths import timestamp

Log = Callable[[str], None]
# pack_submission.sh encrypts with `openssl enc -e -aes256` and decrypts with `openssl enc -d -aes256`:
# AES-256-CBC, salted, key and IV from EVP_BytesToKey with the default digest (sha256 since OpenSSL 1.1.0).
CIPHER = ("-aes256", "-md", "sha256", "-salt")
# openssl reads a typed passphrase into a 512-byte buffer (longer ones fail with "UI_process:processing error").
MAX_PASSPHRASE_BYTES = 512
# The script uses SUBMITTER unquoted in file names and shell words: keep to characters that survive that.
_SAFE_SUBMITTER = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")


@dataclass(frozen=True)
class PackResult:
    tarball: Path
    sha1_file: Path
    encrypted: Path | None = None         # mlperf_submission_<SUBMITTER>.tar.gz when a passphrase was given
    decrypt_command: str | None = None    # the script's unpack line; run in the folder holding `encrypted`
    encrypted_sha1: Path | None = None    # mlperf_submission_<SUBMITTER>.sha1


def official_names(submitter: str) -> tuple[str, str]:
    """The encrypted tarball's and its sha1 file's names in MLCommons' pack_submission.sh."""
    return f"mlperf_submission_{submitter}.tar.gz", f"mlperf_submission_{submitter}.sha1"


def sha1_file(path: Path) -> str:
    return file_digest(path, "sha1")


def write_sha1(path: Path, out: Path | None = None) -> Path:
    """sha1sum's line for `path`, with the bare name so `sha1sum -c` works beside the file; written to
    `out`, by default `<path>.sha1`."""
    out = out or path.with_name(path.name + ".sha1")
    write_atomically(out, f"{sha1_file(path)}  {path.name}\n")
    return out


def _entries(root: Path) -> Iterator[Path]:
    """Every path under `root`, parents before children, in sorted order."""
    for entry in sorted(root.iterdir()):
        if entry.is_symlink():
            raise UserError(f"{entry} is a symbolic link; export the submission again (the export resolves "
                            "links) before packing.", exit_code=EXIT_FAILURE)
        yield entry
        if entry.is_dir():
            yield from _entries(entry)


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    # The archive goes to MLCommons: the packer's user and group names are no business of theirs.
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


def _move_aside(paths: list[Path], log: Log) -> None:
    """Keep earlier outputs as `<name>.<timestamp>.bak` instead of overwriting them silently."""
    stamp = timestamp()
    for path in paths:
        if not path.exists():
            continue
        backup, n = path.with_name(f"{path.name}.{stamp}.bak"), 1
        while backup.exists():
            backup, n = path.with_name(f"{path.name}.{stamp}-{n}.bak"), n + 1
        os.replace(path, backup)
        log(f"moved the existing {path.name} aside to {backup}")


def _openssl() -> str:
    found = shutil.which("openssl")
    if not found:
        raise UserError("Encrypting the submission needs the `openssl` command, which is not installed. "
                        "Install it (Debian/Ubuntu: apt-get install openssl) or pack without a passphrase.",
                        exit_code=EXIT_FAILURE)
    return found


def _check_passphrase(passphrase: str) -> None:
    if not passphrase:
        raise UserError("The passphrase is empty.")
    if any(ord(c) < 32 or ord(c) == 127 for c in passphrase):
        raise UserError("The passphrase must be one line of printable characters (no tabs or control "
                        "characters): the reviewer types it at openssl's prompt.")
    if len(passphrase.encode()) > MAX_PASSPHRASE_BYTES:
        raise UserError(f"The passphrase is longer than {MAX_PASSPHRASE_BYTES} bytes, more than openssl's "
                        "prompt accepts when the reviewer decrypts; choose a shorter one.")


def _submitter(root: Path, submitter: str | None) -> str:
    """The given submitter name, or the one `<division>/<submitter>/` folder name of the tree."""
    if not submitter:
        names = {p.name for division in root.iterdir() if division.is_dir()
                 for p in division.iterdir() if p.is_dir()}
        if len(names) != 1:
            raise UserError(f"Cannot tell the submitter from {root} (found {sorted(names) or 'none'}): "
                            "give the submitter name.", exit_code=EXIT_FAILURE)
        submitter = names.pop()
    if not _SAFE_SUBMITTER.fullmatch(submitter):
        raise UserError(f"The submitter name {submitter!r} names the encrypted tarball "
                        f"({official_names(submitter)[0]}), which MLCommons' pack_submission.sh uses unquoted: "
                        "use only letters, digits, '.', '_', '+' and '-', starting with a letter or digit.")
    return submitter


def decrypt_command(encrypted: Path) -> str:
    """pack_submission.sh's unpack line for `encrypted` (openssl asks for the passphrase)."""
    return f"openssl enc -d -aes256 -in {shlex.quote(encrypted.name)} | tar -xvz"


def _encrypt(openssl: str, tarball: Path, encrypted: Path, passphrase: str) -> None:
    with atomic_path(encrypted) as tmp:
        proc = subprocess.run([openssl, "enc", "-e", *CIPHER, "-in", str(tarball), "-out", str(tmp),
                               "-pass", "stdin"], input=(passphrase + "\n").encode(), capture_output=True,
                              check=False)
        if proc.returncode != 0:
            raise UserError(f"openssl could not encrypt {tarball}: {proc.stderr.decode(errors='replace').strip()}",
                            exit_code=EXIT_FAILURE)


def pack_tree(submission_root: Path, tarball: Path, passphrase: str | None, log: Log,
              submitter: str | None = None) -> PackResult:
    """Archive the contents of `submission_root` into `tarball` (+ `<tarball>.sha1`); with a passphrase, also
    `mlperf_submission_<submitter>.tar.gz` (+ `mlperf_submission_<submitter>.sha1`) beside it, which
    `pack_submission.sh --unpack` opens (see the module's docstring). Without `submitter`, the tree's one
    submitter folder names the encrypted files."""
    submission_root, tarball = Path(submission_root), Path(tarball)
    if not submission_root.is_dir() or not any(p.is_dir() for p in submission_root.iterdir()):
        raise UserError(f"No submission tree at {submission_root}: export the submission first.",
                        exit_code=EXIT_FAILURE)
    if submission_root.resolve() in tarball.absolute().parents:
        raise UserError(f"The tarball {tarball} may not be written inside the tree it packs ({submission_root}).")
    if passphrase is not None:  # everything is checked before anything is written
        _check_passphrase(passphrase)
        submitter = _submitter(submission_root, submitter)
    plain_outputs = [tarball, tarball.with_name(tarball.name + ".sha1")]
    encrypted_outputs = [tarball.with_name(name) for name in official_names(submitter)] \
        if submitter and _SAFE_SUBMITTER.fullmatch(submitter) else []
    if set(plain_outputs) & set(encrypted_outputs):
        raise UserError(f"The plain tarball {tarball} may not take the encrypted one's name "
                        f"({official_names(submitter or '')[0]}): name it differently.")
    openssl = _openssl() if passphrase is not None else None
    # The encrypted outputs go aside even without a passphrase: they would not match the new tarball.
    _move_aside(plain_outputs + encrypted_outputs, log)

    with atomic_path(tarball) as tmp, open(tmp, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in _entries(submission_root):
            tar.add(entry, arcname=entry.relative_to(submission_root).as_posix(), recursive=False,
                    filter=_anonymous)
    sha1 = write_sha1(tarball, plain_outputs[1])
    log(f"packed {submission_root} into {tarball} ({tarball.stat().st_size} bytes)")
    if openssl is None:
        return PackResult(tarball=tarball, sha1_file=sha1)

    encrypted, encrypted_sha1 = encrypted_outputs
    _encrypt(openssl, tarball, encrypted, passphrase or "")
    write_sha1(encrypted, encrypted_sha1)
    command = decrypt_command(encrypted)
    log(f"encrypted {tarball.name} into {encrypted} and wrote {encrypted_sha1.name}")
    return PackResult(tarball=tarball, sha1_file=sha1, encrypted=encrypted, decrypt_command=command,
                      encrypted_sha1=encrypted_sha1)
