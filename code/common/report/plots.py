"""The report's plots as PNG bytes, drawn with matplotlib's Agg canvas (no display, no pyplot global state).

matplotlib is imported inside the functions: importing this module costs nothing.
"""
from __future__ import annotations

import datetime as dt
import io
import math
import re
from typing import Sequence

from .collect import Figure, Latencies, ReportRow

WIDTH, HEIGHT, DPI = 7.0, 3.2, 100
_ONE_HOUR = dt.timedelta(hours=1)
VALID_COLOUR, INVALID_COLOUR, LIMIT_COLOUR = "#1f77b4", "#d62728", "#7f7f7f"


def _figure(rows: int = 1):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure as MplFigure

    figure = MplFigure(figsize=(WIDTH, HEIGHT * rows), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure


def _png(figure) -> bytes:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _nines(percentile: float) -> float:
    """Percentiles spread as in a latency report: 50 -> 0.3, 90 -> 1, 99 -> 2, 99.9 -> 3."""
    return -math.log10(1.0 - percentile / 100.0)


def _headline_percentile(row: ReportRow) -> float | None:
    """The percentile a latency figure stands for ("90th percentile latency ..." -> 90), if it is one."""
    if row.metric is None or row.metric.unit != "ms":
        return None
    found = re.match(r"(\d+(?:\.\d+)?)(?:st|nd|rd|th) percentile", row.metric.label)
    return float(found.group(1)) if found and 0 < float(found.group(1)) < 100 else None


def latency_png(row: ReportRow, latencies: Latencies, expected: Figure | None, bound_ms: float | None) -> bytes:
    """Latency (ms) against percentile, one curve per kind LoadGen logged, with the bound or expectation."""
    figure = _figure()
    axes = figure.add_subplot()
    ticks: set[float] = set()
    for number, (name, points) in enumerate(latencies.curves.items()):   # a second curve dashed: they may overlap
        axes.plot([_nines(p) for p, _ in points], [ms for _, ms in points], marker="o", label=name,
                  linestyle="-" if number == 0 else "--", alpha=1.0 if number == 0 else 0.7)
        ticks.update(p for p, _ in points)
    marked = _headline_percentile(row)
    if marked is not None:
        axes.plot([_nines(marked)], [row.metric.value], marker="*", markersize=14, linestyle="none",
                  color=INVALID_COLOUR if row.valid is False else VALID_COLOUR,
                  label=f"figure: {row.metric.value:.3g} ms ({row.metric.label})")
        ticks.add(marked)
    if bound_ms is not None:
        axes.axhline(bound_ms, color=INVALID_COLOUR, linestyle="--", label=f"latency bound {bound_ms:g} ms")
    if expected is not None and expected.unit == "ms":
        axes.axhline(expected.value, color=LIMIT_COLOUR, linestyle=":", label=f"{expected.label} {expected.value:g} ms")
    axes.set_xticks([_nines(p) for p in sorted(ticks)], [f"p{p:g}" for p in sorted(ticks)])
    axes.set_xlabel("percentile")
    axes.set_ylabel("latency (ms)")
    heights = [ms for points in latencies.curves.values() for _, ms in points]
    heights += [v for v in (bound_ms, expected.value if expected and expected.unit == "ms" else None) if v]
    axes.set_ylim(0, max(heights, default=1.0) * 1.15)   # room above the highest curve or line
    axes.grid(True, alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    axes.set_title(f"{row.system} {row.benchmark} {row.scenario}: latency percentiles ({row.verdict})",
                   fontsize="medium")
    return _png(figure)


def history_png(group: tuple[str, str, str], series: Sequence[tuple[str, Sequence[tuple[ReportRow, float]]]]) -> bytes:
    """One panel per series (e.g. throughput, latency, accuracy), each point a run at its start time; INVALID
    runs drawn as red crosses."""
    import matplotlib.dates as mdates

    figure = _figure(len(series))
    panels = figure.subplots(len(series), 1, sharex=True, squeeze=False)[:, 0]
    for axes, (label, points) in zip(panels, series):
        times = [row.started for row, _ in points]
        values = [value for _, value in points]
        axes.plot(times, values, color=VALID_COLOUR, alpha=0.4)
        for valid, marker, colour, name in ((True, "o", VALID_COLOUR, "valid"),
                                            (False, "x", INVALID_COLOUR, "invalid")):
            chosen = [(row.started, value) for row, value in points if bool(row.valid) is valid]
            if chosen:
                axes.scatter(*zip(*chosen), marker=marker, color=colour, label=name, zorder=3)
        axes.set_ylabel(label)
        axes.grid(True, alpha=0.3)
        axes.legend(loc="best", fontsize="small")
        axes.set_ylim(0, max(max(values) * 1.12, 1e-9))   # from zero, so changes read at their true size
        locator = mdates.AutoDateLocator()
        axes.xaxis.set_major_locator(locator)
        axes.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
    times = [row.started for _, points in series for row, _ in points]
    first, last = min(times), max(times)
    pad = (last - first) * 0.05 if last > first else _ONE_HOUR   # one moment: a window around it
    panels[-1].set_xlim(first - pad, last + pad)
    panels[-1].set_xlabel("run start (UTC)")
    panels[0].set_title(f"{' '.join(group)}: runs over time", fontsize="medium")
    return _png(figure)
