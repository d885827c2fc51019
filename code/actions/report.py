"""report: the runs of the newest LOG_DIR (or of LOG_DIR, or with --all of every run) as an HTML page with
PNG plots under build/reports/<name>/, and a summary table on the console."""
from __future__ import annotations

import sys
from pathlib import Path

from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.records.metadata import skipped_line
from ..common.paths import ALL_RUNS_REPORT, shown_path
from ..common.report.collect import ReportRow, Scope, newest_log_dir, ordered, read_rows
from ..common.report.text import plural
from .base import Handler

MAKE_RUNS = ('make run_harness RUN_ARGS="--benchmarks=resnet50 --scenarios=offline --test_mode=PerformanceOnly '
             '--test_run"')


class Report(Handler):
    def handle(self) -> int:
        from ..common.report import write_report
        from ..common.report.console import summary_table

        ctx, paths = self.ctx, self.ctx.paths
        given = self._given_log_dir()
        roots = [paths.logs_root, *([given] if given and not given.is_relative_to(paths.logs_root) else []),
                 *([paths.compliance_logs_root] if ctx.args.all_runs else [])]
        damaged: list[tuple[Path, str]] = []
        every = read_rows(roots, lambda path, reason: damaged.append((path, reason)))
        scope = self._scope(every, given, roots)
        skipped = [(path, reason) for path, reason in damaged
                   if any(path.absolute().is_relative_to(root) for root in scope.roots)]
        for path, reason in skipped:
            ctx.log(skipped_line(path, reason))
        rows = ordered(r for r in every if scope.holds(r) and self._selected(r))
        if not rows:
            raise UserError(self._no_runs(scope), exit_code=EXIT_FAILURE)
        shown = " and ".join(shown_path(root, paths.repo) for root in roots)
        try:
            written = write_report(paths, scope, rows, every, skipped, self._latency_bound, shown)
        except OSError as error:
            raise UserError(self._cannot_write(error, paths.report_dir(scope.name)), exit_code=EXIT_FAILURE) from None
        ctx.log(summary_table(rows, paths.repo, f"{plural(len(rows), 'test')}. {scope.description}",
                              terminal=ctx.log is print and sys.stdout.isatty()))
        for row in (r for r in rows if r.changed_logs):
            ctx.log(f"note: {shown_path(row.run_dir, paths.repo)}: {row.changed_text} (they no longer match what "
                    f"its metadata.json recorded; stage_results refuses the run)")
        ctx.log(f"Report: {shown_path(written.html, paths.repo)}")
        ctx.log(f"Plots:  {len(written.plots)} PNG files in {shown_path(paths.report_dir(scope.name), paths.repo)}/")
        return EXIT_OK

    @staticmethod
    def _cannot_write(error: OSError, report_dir: Path) -> str:
        """A folder of the report that refuses its files (read-only, full disk): which one, and what to do."""
        # The file or folder that could not be made lies in the folder that refused it.
        folder = Path(error.filename).parent if error.filename else report_dir
        return (f"The report cannot be written in {folder} ({error.strerror or error}): make that folder writable "
                f"(or free space on its disk), then run make report again.")

    def _given_log_dir(self) -> Path | None:
        """LOG_DIR when the user gave one: it must be an existing folder."""
        if self.ctx.args.log_dir is None:
            return None
        folder = self.ctx.paths.log_dir
        if not folder.is_dir():
            state = "is not a folder" if folder.exists() else "does not exist"
            raise UserError(f"LOG_DIR={self.ctx.args.log_dir} ({folder}) {state}: give the folder of a "
                            f"make run_harness invocation (build/logs/<timestamp>), or leave LOG_DIR out to report "
                            f"the newest one.")
        return folder

    def _scope(self, every: list[ReportRow], given: Path | None, roots: list[Path]) -> Scope:
        paths = self.ctx.paths
        if self.ctx.args.all_runs:
            shown = " and ".join(shown_path(root, paths.repo) for root in roots)
            return Scope(ALL_RUNS_REPORT, f"Every run under {shown}", tuple(roots))
        if given is not None:
            return Scope(paths.report_name(given), f"Runs in LOG_DIR {shown_path(given, paths.repo)}",
                         (given,))
        newest = newest_log_dir(every, paths.logs_root)
        if newest is None:   # nothing usable anywhere: the message names build/logs
            return Scope("none", f"Runs under {shown_path(paths.logs_root, paths.repo)}", (paths.logs_root,))
        return Scope(paths.report_name(newest),
                     f"Runs of the newest LOG_DIR {shown_path(newest, paths.repo)} (RUN_ARGS=--all: every run "
                     f"under {shown_path(paths.logs_root, paths.repo)})", (newest,))

    def _selected(self, row: ReportRow) -> bool:
        """--benchmarks and --scenarios narrow the report when given."""
        args = self.ctx.args
        return ("benchmarks" not in args.explicit or row.benchmark in args.benchmarks) and \
            ("scenarios" not in args.explicit or row.scenario in {s.value for s in args.scenarios})

    def _no_runs(self, scope: Scope) -> str:
        searched = " and ".join(str(root) for root in scope.roots)
        narrowed = " for the selected --benchmarks/--scenarios" \
            if {"benchmarks", "scenarios"} & self.ctx.args.explicit else ""
        return (f"No runs to report{narrowed}: no usable metadata.json under {searched}. Make runs first, e.g. "
                f"{MAKE_RUNS} (or make run), then make report.")

    def _latency_bound(self, benchmark: str) -> float | None:
        try:
            rules = self.ctx.rules.benchmark(benchmark)
            # An LLM's Server runs are bounded by TTFT and TPOT, not by a latency per sample: no line to draw.
            return None if rules.uses_token_latencies else rules.server_latency_ms
        except KeyError:
            return None
