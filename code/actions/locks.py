"""The locks of the actions that write configs or measure.

- Configs: one writer at a time of configs/<benchmark>/<Scenario>/custom.py and code/common/systems/custom_list.py
  (find_peak for its whole search, add_custom_system while it writes); a second one stops at once, naming the first.
  The files a writer changes are each written whole, and all put back when it fails midway.
- Measurements: find_peak writes what it measures into a config, so it needs the machine to itself. It holds the
  measure lock exclusively; run_harness, run, run_audit_harness and bench hold it shared, so they run beside each
  other as before but never beside find_peak.
"""
from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Iterable, Iterator

from ..common.fileio import write_atomically
from ..common.locking import exclusive_lock, shared_lock
from ..common.paths import Paths

CONFIGS = "the config files of this checkout (configs/*/*/custom.py, code/common/systems/custom_list.py)"
MEASUREMENTS = ("the measurements of this checkout (make find_peak measures with nothing else running; run_harness, "
                "run, run_audit_harness and bench measure too)")

_configs_held_here: set[Path] = set()    # the configs lock is taken again by write_value inside find_peak


@contextlib.contextmanager
def editing_configs(paths: Paths, files: Iterable[Path] = ()) -> Iterator[None]:
    """Hold the configs lock while the block runs (it may be taken again inside a block of this process that holds
    it). `files`, the ones the block writes, are put back as they were when the block fails."""
    with _configs_lock(paths):
        before = {Path(f): Path(f).read_bytes() if Path(f).exists() else None for f in files}
        try:
            yield
        except BaseException:
            _put_back(before)
            raise


@contextlib.contextmanager
def _configs_lock(paths: Paths) -> Iterator[None]:
    lock = paths.configs_lock
    if lock in _configs_held_here:
        yield
        return
    with exclusive_lock(lock, CONFIGS):
        _configs_held_here.add(lock)
        try:
            yield
        finally:
            _configs_held_here.discard(lock)


def _put_back(before: dict[Path, bytes | None]) -> None:
    """Each file as it was; one that cannot be put back (the disk is full) was never replaced, since every write
    here is atomic, or keeps its new content whole."""
    for path, data in before.items():
        try:
            if data is None:
                path.unlink(missing_ok=True)
            elif not path.exists() or path.read_bytes() != data:
                write_atomically(path, data)
        except OSError:
            continue


def measuring(paths: Paths, alone: bool = False):
    """The measure lock: exclusive for find_peak (`alone`), shared for the other actions that run tests."""
    return exclusive_lock(paths.measure_lock, MEASUREMENTS) if alone else shared_lock(paths.measure_lock,
                                                                                        MEASUREMENTS)
