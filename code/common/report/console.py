"""The console summary: one row per test (rich table, rendered to text so any logger can print it)."""
from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Sequence

from .collect import ReportRow
from ..paths import shown_path
from .text import headline, target_text

COLUMNS = ("system", "benchmark", "scenario", "mode", "figure", "target", "verdict", "run folder")
KEEP_WHOLE = frozenset({"system", "benchmark", "scenario", "mode", "figure"})   # short; the others may wrap
VERDICT_STYLES = {"VALID": "green", "INVALID": "bold red", "FAILED": "bold red", "INTERRUPTED": "yellow"}
CHANGED_STYLE = "bold yellow"   # a verdict whose logs changed since the run: not to be trusted as shown
FILE_WIDTH = 240    # a pipe or a log file has no screen width to fit


def summary_table(rows: Sequence[ReportRow], repo: Path, title: str, terminal: bool = False) -> str:
    """The table as text; `terminal`: fit the screen's width and colour the verdicts."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text   # cells as Text: a "[" in a name or folder is not read as markup

    table = Table(title=Text(title), title_justify="left")
    for column in COLUMNS:
        table.add_column(column, overflow="fold", no_wrap=column in KEEP_WHOLE)
    for row in rows:
        cells = (row.system, row.benchmark, row.scenario, row.mode, headline(row), target_text(row))
        style = CHANGED_STYLE if row.changed_logs else VERDICT_STYLES.get(row.verdict, "")
        table.add_row(*(Text(c) for c in cells), Text(row.verdict_text, style=style),
                      Text(shown_path(row.run_dir, repo)))
    out = io.StringIO()
    width = shutil.get_terminal_size().columns if terminal else FILE_WIDTH
    Console(file=out, width=width, force_terminal=terminal, no_color=not terminal, highlight=False).print(table)
    return "\n".join(line.rstrip() for line in out.getvalue().rstrip("\n").splitlines())
