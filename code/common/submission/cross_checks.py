"""The toolkit's own integrity checks of a submission tree: do its files agree with each other and with the run?

The official checkers read each file as it is: a `Samples per second` edited in mlperf_log_summary.txt, an
accuracy.txt edited by hand, or an accuracy log cut so that it no longer parses all pass them. These checks
catch such a tree, and every finding says it is the toolkit's own:

* every mlperf_log_summary.txt against its mlperf_log_detail.txt: the result line and the headline figure;
* every mlperf_log_accuracy.json parses, unless truncate_results cut it (accuracy.txt then holds its hash=);
* with the toolkit's folders at hand (`TreeSources.paths`): a cut log against its backup in build/full_results
  (the hash= line, and the cut itself), the accuracy log against the one stage_results staged, and accuracy.txt
  re-scored from the full log with the benchmark's scorer. A checkout with no backups (or no staging tree) at all
  did not truncate (or stage) the tree: it gets only the checks the tree itself allows; one with backups but not
  this log's, or a data set not at hand, gets a warning saying what was not verified.

What a staged scenario was run with (benchmark, model, data set) is recorded by stage_results in a hidden file of
the staging tree, which export_submission leaves out of the submission.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..fields import is_safe_name
from ..fileio import sha256_file, write_atomically
from ..records.loadgen_log import LoadGenLog, number, read_detail
from ..records.metadata import RunRecord
from ..paths import (ACCURACY_DIR, ACCURACY_LOG, ACCURACY_TXT, COMPLIANCE_DIRS, DETAIL_LOG, PERFORMANCE_DIR,
                     PERFORMANCE_RUN, SUMMARY_LOG, Paths, accuracy_dir, performance_run_dir)
from .checker_rules import ERROR, WARNING, ScenarioContext
from .truncate import HASH_LINE, has_truncated_shape, truncated_text

PROVENANCE = ".provenance.json"   # in a staged scenario folder: what its accuracy run was run with
EDITED = "the logs disagree: the tree was edited after the run"
OWN_CHECK = "an integrity check of the toolkit's own, which the official checkers do not make"
RESTAGE = "stage the run again (make stage_results, then make truncate_results export_submission)"
# (line of mlperf_log_summary.txt, key of mlperf_log_detail.txt): the headline figures LoadGen writes in both.
SUMMARY_FIGURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"^Samples per second\s*:\s*(\S+)"), "result_samples_per_second"),
    (re.compile(r"^Completed samples per second\s*:\s*(\S+)"), "result_completed_samples_per_sec"),
    (re.compile(r"^\s*\*\s*Early stopping 90(?:\.0+)?th percentile estimate\s*:\s*(\S+)"),
     "early_stopping_latency_ss"),
    (re.compile(r"^\s*\*\s*Early stopping 99(?:\.0+)?th percentile estimate\s*:\s*(\S+)"),
     "early_stopping_latency_ms"),
    # Runs with token latencies (LLMs): the figures the checkers take as the result.
    (re.compile(r"^Tokens per second\s*:\s*(\S+)"), "result_tokens_per_second"),
    (re.compile(r"^Completed tokens per second\s*:\s*(\S+)"), "result_completed_tokens_per_second"),
)
_RESULT_LINE = re.compile(r"^Result is\s*:\s*(\S+)")


@dataclass(frozen=True)
class TreeSources:
    """The checked tree and, when known, the toolkit's folders beside it (backups, staging tree, data sets)."""

    root: Path
    paths: Paths | None = None

    def _beside(self, base: Path, path: Path) -> Path:
        return base / path.relative_to(self.root)

    def backup_of(self, accuracy_log: Path) -> Path | None:
        """Where truncate_results backed up the full log of `accuracy_log`; None when this checkout holds no
        backups at all (a tree truncated elsewhere: only the checks the tree itself allows)."""
        if self.paths is None or not self.paths.full_results.is_dir():
            return None
        return self._beside(self.paths.full_results, accuracy_log)

    def provenance_of(self, scenario_dir: Path) -> Path | None:
        """Where stage_results recorded the run of `scenario_dir`; None when this checkout has no staging tree."""
        if self.paths is None or not self.paths.staging.is_dir():
            return None
        return self._beside(self.paths.staging, scenario_dir) / PROVENANCE


def check_integrity(ctx: ScenarioContext, sources: TreeSources) -> None:
    """Every integrity check of one results/<system>/<benchmark>/<Scenario> folder."""
    for run_dir in run_dirs(ctx.folder):
        for problem in summary_problems(run_dir):
            ctx.report(ERROR, run_dir / SUMMARY_LOG, f"{EDITED}: {problem} ({OWN_CHECK}); {RESTAGE}.")
    for folder in accuracy_dirs(ctx.folder):
        AccuracyCheck(ctx, sources, folder).run()


def run_dirs(scenario_dir: Path) -> list[Path]:
    """The folders of a scenario that hold a summary and a detail log written by one LoadGen test."""
    candidates = [performance_run_dir(scenario_dir), accuracy_dir(scenario_dir),
                  *sorted(scenario_dir.glob(f"{COMPLIANCE_DIRS}/{PERFORMANCE_DIR}/{PERFORMANCE_RUN}"))]
    return [d for d in candidates if (d / SUMMARY_LOG).is_file() and (d / DETAIL_LOG).is_file()]


def accuracy_dirs(scenario_dir: Path) -> list[Path]:
    candidates = [accuracy_dir(scenario_dir), *sorted(scenario_dir.glob(f"{COMPLIANCE_DIRS}/{ACCURACY_DIR}"))]
    return [d for d in candidates if (d / ACCURACY_LOG).is_file()]


# -- summary against detail ------------------------------------------------------------------------------
def summary_problems(run_dir: Path) -> list[str]:
    """Where mlperf_log_summary.txt says something else than mlperf_log_detail.txt beside it."""
    try:
        summary = (run_dir / SUMMARY_LOG).read_text(errors="replace").splitlines()
        detail = read_detail(run_dir)
    except OSError:
        return []   # an unreadable file is the official checks' finding
    problems = []
    validity = detail.get("result_validity")
    stated = _first(_RESULT_LINE, summary)
    if validity is not None and stated is None and any(line.strip() for line in summary):
        problems.append(f"{SUMMARY_LOG} has no `Result is` line, while {DETAIL_LOG} logs the run as {validity}")
    elif validity is not None and stated is not None and stated != str(validity):
        problems.append(f"{SUMMARY_LOG} says `Result is : {stated}` but {DETAIL_LOG} logs the run as {validity}")
    for pattern, key in SUMMARY_FIGURES:
        problem = _figure_problem(_first(pattern, summary), detail, key)
        if problem:
            problems.append(problem)
    return problems


def _first(pattern: re.Pattern[str], lines: list[str]) -> str | None:
    return next((found.group(1) for found in map(pattern.match, lines) if found), None)


def _figure_problem(stated: str | None, detail: LoadGenLog, key: str) -> str | None:
    logged = number(detail.get(key))
    if stated is None or logged is None:
        return None
    printed = _decimal(stated)
    if printed is None or not same_number(printed, logged):
        return f"{SUMMARY_LOG} gives {stated} where {DETAIL_LOG} has {key} {detail.get(key)}"
    return None


def _decimal(text: str) -> Decimal | None:
    try:
        value = Decimal(text)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def same_number(printed: Decimal, value: float) -> bool:
    """Whether `value` rounds to `printed`: half a unit of its last printed digit, and a hair for float noise."""
    step = Decimal(1).scaleb(printed.as_tuple().exponent) / 2
    tolerance = float(step) + abs(value) * 1e-9
    return abs(float(printed) - value) <= tolerance


# -- accuracy logs -------------------------------------------------------------------------------------
class AccuracyCheck:
    """One accuracy folder (`accuracy/` or `TEST01/accuracy/`): the log parses or was cut by truncate_results;
    with the toolkit's folders, the cut log matches its backup and accuracy.txt its re-scored value."""

    def __init__(self, ctx: ScenarioContext, sources: TreeSources, folder: Path) -> None:
        self.ctx, self.sources, self.folder = ctx, sources, folder
        self.log = folder / ACCURACY_LOG
        self.txt = folder / ACCURACY_TXT
        self.main = folder.parent == ctx.folder    # the scenario's own accuracy run, not a compliance test's

    def report(self, level: str, path: Path, message: str) -> None:
        self.ctx.report(level, path, message)

    def run(self) -> None:
        text = self.txt.read_text(errors="replace") if self.txt.is_file() else ""
        found = HASH_LINE.search(text)
        recorded_hash = found.group(1).lower() if found else None
        parse_error = json_problem(self.log)
        if recorded_hash is None and (parse_error or self._looks_cut()):
            state = f"does not parse ({parse_error})" if parse_error else "is cut short"
            self.report(ERROR, self.log, f"{ACCURACY_LOG} {state}, and {ACCURACY_TXT} holds no hash= line of a log "
                                         f"that truncate_results cut: the log is damaged or was cut by hand "
                                         f"({OWN_CHECK}); {RESTAGE}.")
            return
        if self.sources.paths is None:
            return   # the checks below need the backups, the staging tree and the data sets
        full = self._full_log(recorded_hash, parse_error)
        if full is not None:
            self._rescore(full, text)

    def _full_log(self, recorded_hash: str | None, parse_error: str | None) -> Path | None:
        """The whole accuracy log, checked against the hash= line and the backup; None when there is none."""
        if recorded_hash is None:
            return self.log
        backup = self.sources.backup_of(self.log)
        if backup is None:
            return None
        if backup.is_file():
            return self._check_backup(backup, recorded_hash)
        if parse_error is None and not self._looks_cut():
            if sha256_file(self.log) != recorded_hash:
                self.report(ERROR, self.log, f"{EDITED}: the sha256 of {ACCURACY_LOG} is not the hash= line of "
                                             f"{ACCURACY_TXT} ({OWN_CHECK}); {RESTAGE}.")
                return None
            return self.log
        self.report(WARNING, self.log, f"{ACCURACY_LOG} was cut by truncate_results and its full log is not at "
                                       f"{backup}, so it was neither verified nor re-scored; check the submission in "
                                       f"the checkout that truncated it, or restore the backup there.")
        return None

    def _looks_cut(self) -> bool:
        """Whether the log has the shape truncate_results gives a long log (which may parse by chance: a cut
        inside a string on both sides joins into one string)."""
        text = self.log.read_bytes().decode("utf-8", errors="surrogateescape")
        return has_truncated_shape(text, self.ctx.rules.accuracy_log_keep_chars)

    def _check_backup(self, backup: Path, recorded_hash: str) -> Path | None:
        if sha256_file(backup) != recorded_hash:
            self.report(ERROR, self.txt, f"{EDITED}: the hash= line of {ACCURACY_TXT} is not the sha256 of the full "
                                         f"log backed up at {backup} ({OWN_CHECK}); {RESTAGE}.")
            return None
        keep = self.ctx.rules.accuracy_log_keep_chars
        full_text = backup.read_bytes().decode("utf-8", errors="surrogateescape")
        cut = truncated_text(full_text, keep).encode("utf-8", errors="surrogateescape")
        if self.log.read_bytes() != cut:
            self.report(ERROR, self.log, f"{EDITED}: {ACCURACY_LOG} is not what truncate_results makes of the full log "
                                         f"backed up at {backup} ({OWN_CHECK}); {RESTAGE}.")
            return None
        return backup

    def _rescore(self, full_log: Path, txt: str) -> None:
        bench = self.ctx.benchmark
        if bench is None:
            return   # a model the toolkit has no tables (nor scorer) for
        if not self.txt.is_file():
            return   # no accuracy.txt to compare with (TEST06/accuracy/ holds the sampled responses only)
        patterns = [m.pattern for m in bench.accuracy_metrics] or [bench.accuracy_pattern]
        if all(_first(re.compile(pattern), txt.splitlines()) is None for pattern in patterns):
            return   # no score in it to compare with (TEST07/TEST09's holds the hash= line alone)
        provenance = self._provenance()
        if provenance is None:
            return
        if self.main and provenance.get("accuracy_log_sha256") not in (None, sha256_file(full_log)):
            self.report(ERROR, self.log, f"{EDITED}: the accuracy log is not the one stage_results staged from "
                                         f"{provenance.get('accuracy_log_dir', 'the run')} ({OWN_CHECK}); {RESTAGE}.")
            return
        result = self._score(provenance, full_log)
        if result is None:
            return
        # One metric: against the scorer's first. Several (an LLM): each against the scorer's metric named as the
        # checkers name it (ROUGE1, ..., GEN_LEN) or as the accuracy script does in accuracy.txt (rouge1, ...).
        checks = [(m.name, m.pattern, _first_known(result.get(m.name), result.get(m.key)))
                  for m in bench.accuracy_metrics] or \
            [(bench.accuracy_metric, bench.accuracy_pattern, result.value)]
        for name, pattern, scored in checks:
            stated = _first(re.compile(pattern), txt.splitlines())
            printed = _decimal(stated) if stated is not None else None
            if printed is None or scored is None:
                continue   # no readable value: the official checks report it
            if not same_number(printed, scored):
                which = f"{name} " if bench.accuracy_metrics else ""
                self.report(ERROR, self.txt, f"{EDITED}: {ACCURACY_TXT} gives {which}{stated}, but its accuracy log "
                                             f"scores {result.text} with the benchmark's scorer ({OWN_CHECK}); "
                                             f"{RESTAGE}.")
                return

    def _provenance(self) -> dict[str, Any] | None:
        path = self.sources.provenance_of(self.ctx.folder)
        if path is None:
            return None
        provenance, problem = read_provenance(path)
        if provenance is None:
            self.report(WARNING, self.txt, f"{ACCURACY_TXT} was not re-scored: {problem}; stage the run again with "
                                           f"make stage_results (it records the model and data set).")
        return provenance

    def _score(self, provenance: dict[str, Any], full_log: Path):
        from ..benchmark_api import get_benchmark

        paths = self.sources.paths
        try:
            benchmark = get_benchmark(provenance["benchmark"])
            benchmark.preprocessed(provenance["model"], provenance["dataset"], paths)
        except UserError as error:
            self.report(WARNING, self.txt, f"{ACCURACY_TXT} was not re-scored, the data set is not at hand ({error}); "
                                           f"point MLPERF_SCRATCH_PATH at it and run make check_submission again.")
            return None
        try:
            return benchmark.score(provenance["model"], provenance["dataset"], full_log, paths)
        except (UserError, KeyError, TypeError, ValueError) as error:
            self.report(ERROR, self.log, f"the accuracy log cannot be scored ({type(error).__name__}: {error}; "
                                         f"{OWN_CHECK}); {RESTAGE}.")
            return None


def json_problem(path: Path) -> str | None:
    """Why `path` is not a JSON document, or None."""
    try:
        with open(path, encoding="utf-8") as f:
            json.load(f)
    except OSError as error:
        return f"it cannot be read: {error.strerror or error}"
    except UnicodeDecodeError:
        return "it is not UTF-8 text"
    except json.JSONDecodeError as error:
        return f"{error.msg} at line {error.lineno} column {error.colno}"
    except RecursionError:
        return "it nests too deeply"
    return None


# -- provenance of a staged scenario ----------------------------------------------------------------------
def write_provenance(scenario_dir: Path, accuracy_record: RunRecord, accuracy_log: Path) -> Path:
    """Record in the staging tree what the staged accuracy run was run with (never exported: a hidden file)."""
    fields = accuracy_record.config.fields
    data = {"benchmark": accuracy_record.benchmark, "model": fields["model"], "dataset": fields["dataset"],
            "accuracy_log_dir": accuracy_record.log_dir, "accuracy_log_sha256": sha256_file(accuracy_log)}
    return write_atomically(scenario_dir / PROVENANCE, json.dumps(data, indent=2) + "\n")


def read_provenance(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the record, None), or (None, why it cannot be used)."""
    if not path.is_file():
        return None, f"no record of the run's model and data set at {path}"
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return None, f"{path} cannot be read ({error})"
    if not isinstance(data, dict) or not all(isinstance(data.get(k), str) and is_safe_name(data[k])
                                             for k in ("benchmark", "model", "dataset")):
        return None, f"{path} does not name a benchmark, model and data set"
    return data, None


def _first_known(*values: float | None) -> float | None:
    return next((v for v in values if v is not None), None)
