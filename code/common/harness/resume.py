"""--resume: continue an interrupted run_harness or run in its LOG_DIR, never overwriting a result.

The LOG_DIR is the one given (LOG_DIR=...) or else the newest under build/logs. A planned test whose run folder, or
one of its retry folders, holds a completed VALID record of the same computation is skipped. One whose attempts
are all INVALID, failed, interrupted, unreadable or without a record runs again into a fresh retry folder beside
the first (`Paths.retry_run_dir`: `<test mode>-retry<k>`); a test that never started runs in its own folder. In one
invocation a test runs again at most --retries times. Every attempt keeps its folder and record: staging ranks
them like any runs (VALID first, then a full run, the better figure, the newer) and never stages a failed or
interrupted one.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from ..paths import RETRY_SUFFIX, Paths
from ..records.computation import differing_fields
from .planned import EarlierRun, PlannedTest, earlier_runs


def resume_paths(paths: Paths, log: Callable[[str], None]) -> Paths:
    """The Paths of the LOG_DIR to continue in: LOG_DIR as given, else the newest under build/logs; says which."""
    if not paths.log_dir_is_default:
        there = "" if paths.log_dir.exists() else "; nothing there yet, so every test runs"
        log(f"Resuming in LOG_DIR={paths.log_dir} (as given{there}).")
        return paths
    newest = paths.newest_log_dir()
    if newest is None:
        log(f"Nothing to resume: {paths.logs_root} holds no LOG_DIR yet, so every test runs in a new one.")
        return paths
    log(f"Resuming in {newest}, the newest LOG_DIR under {paths.logs_root} (LOG_DIR=... resumes another).")
    return dataclasses.replace(paths, log_dir=newest, log_dir_is_default=False)


@dataclass(frozen=True)
class Attempts:
    """What LOG_DIR holds of one planned test."""

    run_dir: Path                       # the first attempt's folder
    done: EarlierRun | None             # a completed VALID run of the same computation
    not_done: tuple[str, ...]           # each earlier attempt that does not count, and why
    last_retry: int                     # the highest retry folder that exists (0: none)

    @property
    def next_folder(self) -> Path:
        if not self.not_done and not self.run_dir.exists():
            return self.run_dir
        return Paths.retry_run_dir(self.run_dir, self.last_retry + 1)


def _differences(run: EarlierRun, fields: Mapping, test_run: bool) -> list[str]:
    """How `run` differs from the test as planned now (empty: it computes the same)."""
    differences = [f"{name}={run.fields.get(name)}" for name in differing_fields(run.fields, fields)]
    if run.test_run != test_run:
        differences.append("a --test_run" if run.test_run else "not a --test_run")
    return differences


def find_attempts(run_dir: Path, runs: Sequence[EarlierRun], unreadable: Mapping[Path, str], fields: Mapping,
                  test_run: bool) -> Attempts:
    """The attempts of the test first run in `run_dir`; `unreadable`: folder -> why its metadata.json is unusable."""
    by_folder = {run.folder.resolve(): run for run in runs}
    retries = Paths.retry_run_dirs(run_dir)
    folders = ([run_dir] if run_dir.is_dir() else []) + retries
    last_retry = int(retries[-1].name[len(run_dir.name) + len(RETRY_SUFFIX):]) if retries else 0
    not_done = []
    for folder in folders:
        run = by_folder.get(folder.resolve())
        differences = _differences(run, fields, test_run) if run is not None else []
        if run is None:
            why = unreadable.get(folder.resolve())
            not_done.append(f"{folder}: " + (f"unreadable metadata.json ({why})" if why else
                                             "no metadata.json (stopped without a record, or still running)"))
        elif differences:
            not_done.append(f"{folder}: computes something else ({', '.join(differences)})")
        elif run.done:
            return Attempts(run_dir, run, tuple(not_done), last_retry)
        else:
            not_done.append(f"{folder}: {run.outcome()}")
    return Attempts(run_dir, None, tuple(not_done), last_retry)


def resume_test(test: PlannedTest, attempts: Attempts, retries: int) -> PlannedTest:
    """The planned test as --resume runs it: skipped, run for the first time, or run again into a retry folder."""
    if attempts.done is not None:
        return dataclasses.replace(test, skip=f"VALID already in {attempts.done.folder}")
    if not attempts.not_done:
        return dataclasses.replace(test, folder=attempts.run_dir, retries_left=retries)
    earlier = "; ".join(attempts.not_done)
    if retries == 0:
        return dataclasses.replace(test, skip=f"not VALID ({earlier}) and --retries=0 runs it no more")
    return dataclasses.replace(test, folder=attempts.next_folder, retry=attempts.last_retry + 1,
                               retries_left=retries - 1, note=f"runs again after: {earlier}")


def outcome_in(folder: Path) -> EarlierRun | None:
    """The run whose record lies in `folder`; None when it has none that can be read."""
    runs = earlier_runs([folder], lambda path, reason: None)
    return next((run for run in runs if run.folder.resolve() == Path(folder).resolve()), None)
