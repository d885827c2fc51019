"""--resume: continue an interrupted run_harness or run in its LOG_DIR, never overwriting a result.

The LOG_DIR is the one given (LOG_DIR=...) or else the newest under build/logs. A planned test whose run folder, or
one of its retry folders, holds a completed VALID record made as asked now is skipped: the same resolved config
fields (but those a sweep of the engine chose then and now: tuning/measured_layout), workload setting (harness),
--test_run and running servers (--endpoints, compared as machines and ports).
A completed record made otherwise stops the plan, saying what differs: reusing it would stage a result of other
settings, and running again beside it would leave two kinds of runs in one LOG_DIR. One whose attempts
are all INVALID, failed, interrupted, unreadable or without a record runs again into a fresh retry folder beside
the first (`Paths.retry_run_dir`: `<test mode>-retry<k>`); a test that never started runs in its own folder. In one
invocation a test runs again at most --retries times. Every attempt keeps its folder and record: staging ranks
them like any runs (VALID first, then a full run, the better figure, the newer) and never stages a failed or
interrupted one.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence
from urllib.parse import urlsplit

from ..errors import UserError
from ..paths import RETRY_SUFFIX, Paths
from ..records.metadata import COMPLETED
from ..serving.machines import machine_key
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
class AskedFor:
    """How a planned test is asked to be made now: what an earlier record must match to be reused."""

    fields: Mapping[str, Any]                   # the resolved config fields
    test_run: bool
    workload_setting: str = ""
    servers: tuple[tuple[str, int], ...] = ()   # --endpoints as (host, port); none: servers the test starts itself
    # The fields a sweep of the engine chooses now, none being tuned or typed (tuning/measured_layout)
    untuned: frozenset[str] = frozenset()

    @classmethod
    def of(cls, fields: Mapping[str, Any], test_run: bool, workload_setting: str, endpoints: Sequence[str],
           untuned: Collection[str] = ()) -> "AskedFor":
        """From the run flags: `endpoints` as --endpoints gives them (host:port, or http://host:port)."""
        servers = []
        for endpoint in endpoints:
            split = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
            servers.append((str(split.hostname), int(split.port or 0)))
        return cls(fields, test_run, workload_setting, tuple(servers), frozenset(untuned))


@dataclass(frozen=True)
class Attempts:
    """What LOG_DIR holds of one planned test."""

    run_dir: Path                       # the first attempt's folder
    done: EarlierRun | None             # a completed VALID run made as asked now
    not_done: tuple[str, ...]           # each earlier attempt that does not count, and why
    last_retry: int                     # the highest retry folder that exists (0: none)
    other_settings: str | None = None   # a completed attempt made otherwise: its folder and what differs

    @property
    def next_folder(self) -> Path:
        if not self.not_done and not self.run_dir.exists():
            return self.run_dir
        return Paths.retry_run_dir(self.run_dir, self.last_retry + 1)


def _plain(value: Any) -> Any:
    """A value as its record keeps it (JSON): tuples are lists there."""
    return json.loads(json.dumps(value, default=str))


def _servers_text(servers: Sequence[tuple[str, int]]) -> str:
    if not servers:
        return "none (servers the test starts itself)"
    return ",".join(f"[{host}]:{port}" if ":" in host else f"{host}:{port}" for host, port in servers)


def _differences(run: EarlierRun, asked: AskedFor) -> list[str]:
    """How `run` was made otherwise than the test as asked now, each "what: <then> then, <now> now" (empty: the
    same). Config fields are compared where the record holds them (a field added since is not in older ones). A
    field a sweep of the engine chose both then and now was asked for neither time: a sweep measured again (on a
    quieter machine, say) may choose otherwise, and the test is still the one asked for."""
    swept = run.untuned & asked.untuned
    differences = [f"{name}: {run.fields[name]} then, {asked.fields[name]} now" for name in sorted(run.fields)
                   if name in asked.fields and name not in swept
                   and _plain(run.fields[name]) != _plain(asked.fields[name])]
    if run.workload_setting and asked.workload_setting and run.workload_setting != asked.workload_setting:
        differences.append(f"workload setting: {run.workload_setting} then, {asked.workload_setting} now")
    then = {(machine or machine_key(host), port) for host, port, machine in run.servers}
    if then != {(machine_key(host), port) for host, port in asked.servers}:
        differences.append(f"--endpoints: {_servers_text([(h, p) for h, p, _ in run.servers])} then, "
                           f"{_servers_text(asked.servers)} now")
    if run.test_run != asked.test_run:
        differences.append(f"--test_run: {'yes' if run.test_run else 'no'} then, {'yes' if asked.test_run else 'no'}"
                           f" now")
    return differences


def find_attempts(run_dir: Path, runs: Sequence[EarlierRun], unreadable: Mapping[Path, str],
                  asked: AskedFor) -> Attempts:
    """The attempts of the test first run in `run_dir`; `unreadable`: folder -> why its metadata.json is unusable.
    A completed attempt made otherwise than `asked` ends the search: `other_settings` says how."""
    by_folder = {run.folder.resolve(): run for run in runs}
    retries = Paths.retry_run_dirs(run_dir)
    folders = ([run_dir] if run_dir.is_dir() else []) + retries
    last_retry = int(retries[-1].name[len(run_dir.name) + len(RETRY_SUFFIX):]) if retries else 0
    not_done = []
    for folder in folders:
        run = by_folder.get(folder.resolve())
        differences = _differences(run, asked) if run is not None else []
        if run is None:
            why = unreadable.get(folder.resolve())
            not_done.append(f"{folder}: " + (f"unreadable metadata.json ({why})" if why else
                                             "no metadata.json (stopped without a record, or still running)"))
        elif differences and run.status == COMPLETED:
            return Attempts(run_dir, None, tuple(not_done), last_retry, f"{folder}: {'; '.join(differences)}")
        elif differences:
            not_done.append(f"{folder}: {run.outcome()}, made with other settings ({'; '.join(differences)})")
        elif run.done:
            return Attempts(run_dir, run, tuple(not_done), last_retry)
        else:
            not_done.append(f"{folder}: {run.outcome()}")
    return Attempts(run_dir, None, tuple(not_done), last_retry)


def refuse_other_settings(log_dir: Path, made_otherwise: Sequence[str]) -> None:
    """UserError (exit 2) naming each test LOG_DIR holds that was made otherwise than asked now, and what to do."""
    if made_otherwise:
        raise UserError(f"--resume reuses a test only when it was made as asked now, and LOG_DIR={log_dir} holds "
                        f"{len(made_otherwise)} made otherwise: " + " | ".join(made_otherwise) + ". Resume with the "
                        f"settings they were made with, give another LOG_DIR=... for these, or drop --resume (a new "
                        f"timestamped LOG_DIR).")


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
