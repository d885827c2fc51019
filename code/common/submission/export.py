"""Write the pristine submission tree: staging's systems/, documentation/, results/ plus src/.

The export is a derived artifact, rebuilt from scratch each time. It must hold no hidden files,
no symlinks (the checker and the reviewers see copies, never links into someone's disk) and no
caches or build outputs.
"""
from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ..errors import EXIT_FAILURE, UserError
from ..paths import DOCUMENTATION_DIR, RESULTS_DIR, SRC_DIR, SYSTEMS_DIR

Log = Callable[[str], None]
EXPORTED_DIRS = (SYSTEMS_DIR, DOCUMENTATION_DIR, RESULTS_DIR)
# Not source code: caches, build outputs, data and environments.
SRC_EXCLUDED_DIRS = frozenset({"__pycache__", "build", "scratch", ".venv", ".git"})
SRC_EXCLUDED_SUFFIXES = (".pyc", ".pyo")


def _is_hidden(name: str) -> bool:
    return name.startswith(".")


def _skip_src(entry: Path, is_dir: bool) -> bool:
    return (entry.name in SRC_EXCLUDED_DIRS) if is_dir else entry.name.endswith(SRC_EXCLUDED_SUFFIXES)


def _skip_tree(entry: Path, is_dir: bool) -> bool:
    return (is_dir and entry.name == "__pycache__") or (not is_dir and entry.name.endswith(SRC_EXCLUDED_SUFFIXES))


def _resolve(path: Path) -> Path:
    """The real file behind `path`; a dangling link is an error (the export would silently lose it)."""
    if path.is_symlink() and not path.exists():
        raise UserError(f"{path} is a symbolic link to {os.readlink(path)}, which does not exist. "
                        "Fix or remove the link and export again.", exit_code=EXIT_FAILURE)
    return path.resolve()


def _copy(src: Path, dst: Path, skip: Callable[[Path, bool], bool], ancestors: tuple[Path, ...] = ()) -> None:
    """Copy `src` (a file or folder, links followed) to `dst`, leaving out hidden and skipped names."""
    real = _resolve(src)
    if real.is_file():
        shutil.copy2(real, dst)
        return
    if not real.is_dir():
        raise UserError(f"{src} is neither a file nor a folder; it cannot go into a submission.",
                        exit_code=EXIT_FAILURE)
    if real in ancestors:  # a link back to a folder being copied would recurse forever
        raise UserError(f"{src} links back to {real}, a folder that contains it. Remove the link.",
                        exit_code=EXIT_FAILURE)
    dst.mkdir(parents=True, exist_ok=True)
    for entry in sorted(real.iterdir()):
        if _is_hidden(entry.name):
            continue
        is_dir = _resolve(entry).is_dir()
        if not skip(entry, is_dir):
            _copy(entry, dst / entry.name, skip, ancestors + (real,))


def _check_dest(dest: Path, staging_root: Path, repo: Path) -> None:
    """The export is deleted and rebuilt: it must not be or hold the repo or staging tree, nor lie in staging."""
    target, staging, source = dest.resolve(), staging_root.resolve(), repo.resolve()
    if target in (staging, source) or target in staging.parents or target in source.parents \
            or staging in target.parents:
        raise UserError(f"The export folder {dest} overlaps {staging_root} or {repo}; choose another folder.")


def _src_name(item: Path, repo: Path) -> Path:
    """Where an item goes under src/: its path in the repo (code/, configs/, Makefile...)."""
    try:
        return item.absolute().relative_to(repo.absolute())
    except ValueError:
        return Path(item.name)


def export_tree(staging_root: Path, dest: Path, src_items: list[Path], repo: Path, log: Log) -> Path:
    """Copy every `<division>/<submitter>/` of `staging_root` into `dest`, with src/ made of `src_items`
    (paths absolute or relative to `repo`). An existing `dest` is replaced. Returns `dest`."""
    staging_root, dest, repo = Path(staging_root), Path(dest), Path(repo)
    if not staging_root.is_dir():
        raise UserError(f"No staging tree at {staging_root}: stage the results first.",
                        exit_code=EXIT_FAILURE)
    _check_dest(dest, staging_root, repo)
    items = [item if item.is_absolute() else repo / item for item in map(Path, src_items)]
    for item in items:
        if not item.exists() and not item.is_symlink():
            raise UserError(f"{item} does not exist; it was to be copied into src/.", exit_code=EXIT_FAILURE)
        if _is_hidden(item.name):
            raise UserError(f"{item} is hidden; a submission may not contain hidden files or folders.")
    submitters = [s for d in sorted(staging_root.iterdir()) if d.is_dir() and not _is_hidden(d.name)
                  for s in sorted(d.iterdir()) if s.is_dir() and not _is_hidden(s.name)]
    if not submitters:
        raise UserError(f"{staging_root} holds no <division>/<submitter>/ folder: stage the results first.",
                        exit_code=EXIT_FAILURE)
    # Built beside dest and swapped in at the end: a failure leaves the previous export untouched.
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for submitter in submitters:
            rel = submitter.relative_to(staging_root)
            out = tmp / rel
            out.mkdir(parents=True)
            for name in EXPORTED_DIRS:
                if (submitter / name).exists() or (submitter / name).is_symlink():
                    _copy(submitter / name, out / name, _skip_tree)
                else:
                    log(f"note: {rel}/{name}/ is missing in the staging tree")
            (out / SRC_DIR).mkdir()
            for item in items:
                target = out / SRC_DIR / _src_name(item, repo)
                target.parent.mkdir(parents=True, exist_ok=True)
                _copy(item, target, _skip_src)
            log(f"exported {rel} ({len(items)} source items in src/)")
        if dest.exists() or dest.is_symlink():
            log(f"removing the previous export {dest}")
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)
            else:
                dest.unlink()
        os.replace(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return dest
