"""How figures and targets read in the console table and the HTML page (plain text, not escaped)."""
from __future__ import annotations

from ..harness.first_run import LAYOUT_FIELDS
from .collect import Figure, ReportRow, target

NONE = "-"


def number(value: float) -> str:
    """Four significant digits or so, never in exponent notation for the figures a run gives."""
    size = abs(value)
    if size >= 100:
        return f"{value:,.1f}"
    if size >= 1:
        return f"{value:.2f}"
    return f"{value:.4g}"


def figure_text(figure: Figure | None) -> str:
    return NONE if figure is None else f"{number(figure.value)} {figure.unit}".strip()


def headline(row: ReportRow) -> str:
    """The run's figure: its metric, or for an accuracy run the accuracy."""
    if row.is_accuracy:
        if row.accuracy is None or row.accuracy.value is None:
            return NONE
        return f"{row.accuracy.value:.3f} {row.accuracy.metric}"
    return figure_text(row.metric)


def target_text(row: ReportRow) -> str:
    goal = target(row)
    return NONE if goal is None else f"{figure_text(goal)} ({goal.label})"


def ratio_text(row: ReportRow) -> str:
    """How the figure compares with its target, in words; empty when there is nothing to compare."""
    goal = target(row)
    if row.is_accuracy:
        if goal is None or row.accuracy is None or row.accuracy.value is None:
            return ""
        return f"{'meets' if row.accuracy.value >= goal.value else 'below'} the threshold {number(goal.value)}"
    if goal is None or row.metric is None or goal.value <= 0 or row.metric.unit != goal.unit:
        return ""
    percent = 100.0 * row.metric.value / goal.value
    return f"{percent:.0f}% of the {goal.label}"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def layout_text(row: ReportRow) -> str:
    """The engine layout the run had (batch size, instances, threads, window) and, where make tune chose it, the
    measurement behind it, or where a sweep of the engine did, its reason; empty for a run without layout fields (an LLM's, a served one's)."""
    shown = ", ".join(f"{name}={row.fields[name]}" for name in LAYOUT_FIELDS if name in row.fields)
    if not shown:
        return ""
    tuned = row.tuned_layout
    if not tuned and row.measured_layout:
        return f"{shown} (untuned: {row.measured_layout.get('why') or NONE})"
    if not tuned:
        return f"{shown} (as configured; not tuned on this system)"
    short, confirmed = tuned.get("short_run") or {}, tuned.get("confirmed") or {}
    return (f"{shown} (make tune, {tuned.get('tuned', '?')}: the best of {tuned.get('layouts_judged', '?')} layouts "
            f"in short runs, {short.get('figure') or NONE}; confirmed VALID at full length, "
            f"{confirmed.get('figure') or NONE}, in {confirmed.get('run_dir') or NONE})")
