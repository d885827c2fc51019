"""Pack the exported submission tree into a tar.gz (+ .sha1), optionally encrypted with openssl.

The archive holds the division folders at its top level, in sorted order, with no owner names and a
fixed gzip header, so the same tree gives the same archive. Encryption uses the openssl command the
MLCommons submission instructions describe; the passphrase goes through stdin, never argv (argv is
visible to every user of the machine in `ps`).
"""
from __future__ import annotations

import gzip
import os
import shlex
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError
from ..fileio import atomic_path, file_digest, write_atomically
from ..paths import timestamp

Log = Callable[[str], None]
CIPHER = ("-aes-256-cbc", "-pbkdf2", "-iter", "100000")
EXIT_PRECONDITION = 1


@dataclass(frozen=True)
class PackResult:
    tarball: Path
    sha1_file: Path
    encrypted: Path | None = None         # <tarball>.enc when a passphrase was given
    decrypt_command: str | None = None    # run in the folder holding the .enc file
    encrypted_sha1: Path | None = None    # <tarball>.enc.sha1


def sha1_file(path: Path) -> str:
    return file_digest(path, "sha1")


def write_sha1(path: Path) -> Path:
    """`<path>.sha1` in sha1sum's format, with the bare name so `sha1sum -c` works beside the file."""
    out = path.with_name(path.name + ".sha1")
    write_atomically(out, f"{sha1_file(path)}  {path.name}\n")
    return out


def _entries(root: Path) -> Iterator[Path]:
    """Every path under `root`, parents before children, in sorted order."""
    for entry in sorted(root.iterdir()):
        if entry.is_symlink():
            raise UserError(f"{entry} is a symbolic link; export the submission again (the export resolves "
                            "links) before packing.", exit_code=EXIT_PRECONDITION)
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
                        exit_code=EXIT_PRECONDITION)
    return found


def decrypt_command(encrypted: Path, tarball: Path) -> str:
    """The command that gives the tarball back (openssl asks for the passphrase)."""
    return " ".join(["openssl", "enc", "-d", *CIPHER, "-in", shlex.quote(encrypted.name),
                     "-out", shlex.quote(tarball.name)])


def _encrypt(openssl: str, tarball: Path, encrypted: Path, passphrase: str) -> None:
    with atomic_path(encrypted) as tmp:
        proc = subprocess.run([openssl, "enc", *CIPHER, "-salt", "-in", str(tarball), "-out", str(tmp),
                               "-pass", "stdin"], input=(passphrase + "\n").encode(), capture_output=True,
                              check=False)
        if proc.returncode != 0:
            raise UserError(f"openssl could not encrypt {tarball}: {proc.stderr.decode(errors='replace').strip()}",
                            exit_code=EXIT_PRECONDITION)


def pack_tree(submission_root: Path, tarball: Path, passphrase: str | None, log: Log) -> PackResult:
    """Archive the contents of `submission_root` into `tarball` (+ .sha1); with a passphrase, also
    `<tarball>.enc` (+ .sha1) and the command that decrypts it."""
    submission_root, tarball = Path(submission_root), Path(tarball)
    if not submission_root.is_dir() or not any(p.is_dir() for p in submission_root.iterdir()):
        raise UserError(f"No submission tree at {submission_root}: export the submission first.",
                        exit_code=EXIT_PRECONDITION)
    if submission_root.resolve() in tarball.absolute().parents:
        raise UserError(f"The tarball {tarball} may not be written inside the tree it packs ({submission_root}).")
    openssl = None
    if passphrase is not None:  # checked before anything is written
        if not passphrase or "\n" in passphrase or "\r" in passphrase:
            raise UserError("The passphrase must be one non-empty line.")
        openssl = _openssl()
    encrypted = tarball.with_name(tarball.name + ".enc")
    outputs = [tarball, encrypted]
    _move_aside(outputs + [p.with_name(p.name + ".sha1") for p in outputs], log)

    with atomic_path(tarball) as tmp, open(tmp, "wb") as raw, \
            gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz, \
            tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for entry in _entries(submission_root):
            tar.add(entry, arcname=entry.relative_to(submission_root).as_posix(), recursive=False,
                    filter=_anonymous)
    sha1 = write_sha1(tarball)
    log(f"packed {submission_root} into {tarball} ({tarball.stat().st_size} bytes)")
    if openssl is None:
        return PackResult(tarball=tarball, sha1_file=sha1)

    _encrypt(openssl, tarball, encrypted, passphrase or "")
    enc_sha1 = write_sha1(encrypted)
    command = decrypt_command(encrypted, tarball)
    log(f"encrypted {tarball.name} into {encrypted}; decrypt with: {command}")
    return PackResult(tarball=tarball, sha1_file=sha1, encrypted=encrypted, decrypt_command=command,
                      encrypted_sha1=enc_sha1)
