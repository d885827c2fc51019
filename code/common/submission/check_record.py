"""The record of the last passing check_submission, which pack_submission requires.

check_submission records, only when its verdict passes, a digest of the exact exported tree it checked
(sha256 over every relative path, sorted, and each file's content) with the tree's submitter folders, the time
and whether it was a dry run. pack_submission packs the tree only while that digest is the tree's digest now and
the tree is SUBMITTER's alone, so an archive always holds a tree that passed the checker as it is: not one that
failed, not one edited, re-exported or re-staged since, not another submitter's.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

from ..errors import EXIT_FAILURE, UserError
from ..fileio import write_atomically

CHUNK = 1 << 20


@dataclass(frozen=True)
class CheckRecord:
    digest: str             # tree_digest() of the checked tree, its checker logs included
    submitters: list[str]   # `<division>/<submitter>` folders of the tree
    checked_at: str         # local time, ISO 8601
    dry_run: bool           # check_submission ran with --allow_test_runs
    relaxed: bool           # it passed only thanks to the dry run: warnings, or an official failure it waived
    tree: str               # the folder checked


def submitter_folders(root: Path) -> list[str]:
    """`<division>/<submitter>` of every submitter folder of an exported tree, sorted."""
    return sorted(f"{d.name}/{s.name}" for d in root.iterdir() if d.is_dir() and not d.name.startswith(".")
                  for s in d.iterdir() if s.is_dir() and not s.name.startswith("."))


def tree_digest(root: Path) -> str:
    """sha256 over the sorted relative paths of everything under `root` and the content of each file; a link
    counts by its target, a folder by its name (an empty one too: the archive holds it)."""
    digest = hashlib.sha256()
    for rel, path in sorted(_entries(root)):
        if path.is_symlink():
            digest.update(b"L\0" + rel.encode() + b"\0" + os.readlink(path).encode() + b"\0")
        elif path.is_dir():
            digest.update(b"D\0" + rel.encode() + b"\0")
        else:
            digest.update(b"F\0" + rel.encode() + b"\0")
            _add_content(digest, path)
    return digest.hexdigest()


def _entries(root: Path) -> Iterator[tuple[str, Path]]:
    for folder, dirs, files in os.walk(root, onerror=_unreadable):
        for name in dirs + files:
            path = Path(folder) / name
            yield path.relative_to(root).as_posix(), path


def _unreadable(error: OSError) -> None:
    raise UserError(f"Cannot read {error.filename} of the exported tree ({error.strerror}); fix its permissions "
                    f"or run make export_submission again.", exit_code=EXIT_FAILURE)


def _add_content(digest, path: Path) -> None:
    try:
        with open(path, "rb") as f:
            digest.update(f"{os.fstat(f.fileno()).st_size}\0".encode())
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    except OSError as error:
        _unreadable(error)


def write_record(record_file: Path, root: Path, dry_run: bool, relaxed: bool) -> CheckRecord:
    record = CheckRecord(digest=tree_digest(root), submitters=submitter_folders(root),
                         checked_at=dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                         dry_run=dry_run, relaxed=relaxed, tree=str(root))
    write_atomically(record_file, json.dumps(asdict(record), indent=2) + "\n")
    return record


def forget_record(record_file: Path) -> None:
    """Before a check: whatever it finds, an earlier pass no longer speaks for the tree."""
    record_file.unlink(missing_ok=True)


def read_record(record_file: Path) -> CheckRecord | None:
    """The record, or None when there is none; a damaged one is a UserError naming it."""
    try:
        return CheckRecord(**json.loads(record_file.read_text()))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError, TypeError) as error:
        raise UserError(f"The record of the last check, {record_file}, cannot be read ({error}); run make "
                        f"check_submission again.", exit_code=EXIT_FAILURE) from None


def require_passed_check(record_file: Path, root: Path, submitter: str, allow_test_runs: bool,
                         staging: Path | None = None) -> CheckRecord:
    """Refuse (UserError, exit status 1) to pack `root` unless it is `submitter`'s alone and its last check
    passed on exactly its current content; a dry-run pass counts only for a dry-run pack."""
    require_submitter(root, submitter, "pack_submission", staging)
    record = read_record(record_file)
    if record is None:
        raise UserError(f"{root} has no passing check on record ({record_file} is absent: the last check failed, "
                        f"or none ran); run make check_submission SUBMITTER={submitter}, then pack.",
                        exit_code=EXIT_FAILURE)
    if record.digest != tree_digest(root):
        raise UserError(f"{root} changed since it passed make check_submission at {record.checked_at}; run make "
                        f"check_submission SUBMITTER={submitter} again, then pack.", exit_code=EXIT_FAILURE)
    if record.relaxed and not allow_test_runs:
        raise UserError(f"{root} passed make check_submission only as a dry run (--allow_test_runs, with warnings "
                        f"or official checker failures a real submission may not have); pass the check without "
                        f"--allow_test_runs, or pack the dry run with make pack_submission "
                        f"RUN_ARGS=\"--allow_test_runs\".", exit_code=EXIT_FAILURE)
    return record


def require_submitter(root: Path, submitter: str, action: str, staging: Path | None = None) -> None:
    """Refuse (UserError, exit status 1) to check or pack `root` for `submitter` unless the tree is `submitter`'s
    alone: an exported tree holds every submitter folder of the staging tree, so another's may be there."""
    folders = submitter_folders(root)
    if not folders:
        raise UserError(f"{root} holds no <division>/<submitter> folder; run make export_submission "
                        f"SUBMITTER={submitter}.", exit_code=EXIT_FAILURE)
    owners = sorted({f.split("/", 1)[1] for f in folders})
    if owners == [submitter]:
        return
    what = {"check_submission": "the check is of one submitter's submission",
            "pack_submission": "a tarball holds one submitter's submission"}[action]
    others = " and ".join(f"{staging or 'the staging tree'}/*/{o}" for o in owners if o != submitter)
    same = f"make {action} SUBMITTER={owners[0]}" if len(owners) == 1 else None
    raise UserError(f"{root} holds {', '.join(folders)} (exported for {' and '.join(owners)}), but "
                    f"SUBMITTER={submitter}: {what}. "
                    + (f"Use the SUBMITTER the tree was made for ({same}), or stage, " if same else "Stage, ")
                    + f"export and check it as {submitter}: remove {others}, then make stage_results "
                    f"export_submission check_submission SUBMITTER={submitter}.", exit_code=EXIT_FAILURE)
