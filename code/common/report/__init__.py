"""`make report`: the runs of one scope as an HTML page with PNG plots, and a console summary.

collect reads the run records and logs, plots draws, html writes the page, console the table. matplotlib and
rich are imported only when a report is drawn.
"""
from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from ..errors import EXIT_FAILURE, UserError
from ..fileio import write_atomically
from ..paths import Paths
from .collect import Latencies, ReportRow, Scope, history, latency_bound_ms, read_latencies, target
from .html import GroupView, Page, TestView, render

__all__ = ["Scope", "Written", "write_report"]


@dataclass(frozen=True)
class Written:
    html: Path
    plots: tuple[Path, ...]


def _slug(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", "-".join(parts)).strip("._")


def _history_series(runs: Sequence[ReportRow], latencies: Callable[[ReportRow], Latencies]) \
        -> list[tuple[str, list[tuple[ReportRow, float]]]]:
    """Throughput of the performance runs, their latency figure where that is the headline, and accuracy."""
    throughput, latency, accuracy = [], [], []
    for run in runs:
        if run.is_accuracy:
            if run.accuracy is not None and run.accuracy.value is not None:
                accuracy.append((run, run.accuracy.value))
            continue
        if latencies(run).throughput is not None:
            throughput.append((run, latencies(run).throughput))
        if run.metric is not None and run.metric.unit == "ms":
            latency.append((run, run.metric.value))
    accuracy_label = next((f"accuracy: {run.accuracy.metric}" for run, _ in accuracy), "accuracy")
    return [(label, points) for label, points in (("throughput (samples/s)", throughput),
                                                  ("latency figure (ms)", latency),
                                                  (accuracy_label, accuracy)) if points]


def refuse_another_source(paths: Paths, scope: Scope) -> str:
    """The text naming the folders `scope` reports; UserError (exit 1) when its report folder already holds the
    report of other folders, which this one would replace."""
    source = "".join(f"{Path(root).resolve()}\n" for root in scope.roots)
    recorded = paths.report_source(scope.name)
    earlier = recorded.read_text(errors="replace") if recorded.is_file() else source
    if earlier != source:
        raise UserError(f"{paths.report_dir(scope.name)} holds the report of {earlier.strip()} (its {recorded.name}), "
                        f"not of {source.strip()}: move that folder away, then run make report again.",
                        exit_code=EXIT_FAILURE)
    return source


def write_report(paths: Paths, scope: Scope, rows: Sequence[ReportRow], every_row: Sequence[ReportRow],
                 skipped: Sequence[tuple[Path, str]], rules_bound_ms: Callable[[str], float | None],
                 history_roots: str, now: dt.datetime | None = None) -> Written:
    """Draw the plots of `rows` (history from `every_row`), write them and the page under build/reports/<name>/.
    Plots of an earlier report of the same name that this one does not draw are removed."""
    from . import plots

    source = refuse_another_source(paths, scope)
    written: list[Path] = []

    def save(plot: str, png: bytes) -> bytes:
        written.append(write_atomically(paths.report_plot(scope.name, plot), png))
        return png

    read: dict[Path, Latencies] = {}

    def latencies(row: ReportRow) -> Latencies:
        if row.record_path not in read:
            read[row.record_path] = read_latencies(row)
        return read[row.record_path]

    numbered = list(enumerate(rows, 1))
    groups = []
    for group in dict.fromkeys(r.group for r in rows):
        runs = history(every_row, group)
        series = _history_series(runs, latencies)
        history_png = save(_slug("history", *group), plots.history_png(group, series)) if series else None
        tests = []
        for index, row in ((i, r) for i, r in numbered if r.group == group):
            goal, bound = target(row), latency_bound_ms(row, rules_bound_ms)
            png = save(_slug(f"latency-{index:02d}", row.system, row.benchmark, row.scenario, row.mode),
                       plots.latency_png(row, latencies(row), goal, bound)) if latencies(row).curves else None
            tests.append(TestView(row, f"test-{index}", latencies(row), bound, png))
        groups.append(GroupView(group, history_png, len(runs), tuple(tests)))
    page = Page(title=f"MLPerf Inference runs: {scope.name}", scope=scope.description,
                generated=(now or dt.datetime.now().astimezone()).isoformat(timespec="seconds"),
                history_roots=history_roots, groups=tuple(groups),
                skipped=tuple((str(p), reason) for p, reason in skipped), repo=paths.repo)
    html_path = write_atomically(paths.report_html(scope.name), render(page))
    write_atomically(paths.report_source(scope.name), source)
    for stale in set(paths.report_dir(scope.name).glob("*.png")) - set(written):
        stale.unlink(missing_ok=True)
    return Written(html_path, tuple(written))
