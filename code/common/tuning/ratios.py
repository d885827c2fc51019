"""The figures `make bench` reports: a measurement of the harness against a baseline measured in the same run,
as a ratio (higher is better) with a goal, and the table they are printed in."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Figure:
    label: str
    value: float               # the harness's figure
    baseline: float            # what it is measured against
    unit: str                  # of both: "samples/s", "ms", "QPS"
    goal: float | None         # the ratio to reach; None: a figure for the record, with no goal
    higher_is_better: bool = True   # False (latencies): the ratio is baseline / value
    baseline_unit: str = ""    # when the baseline's unit differs (Server QPS against Offline samples/s)

    @property
    def ratio(self) -> float:
        numerator, denominator = (self.value, self.baseline) if self.higher_is_better else (self.baseline, self.value)
        return numerator / denominator if denominator and math.isfinite(denominator) else float("nan")

    @property
    def meets(self) -> bool:
        return self.goal is None or self.ratio >= self.goal   # NaN never meets a goal


def amount(value: float, unit: str) -> str:
    """A figure as people read it: 3.521 ms, 47.5 QPS, 1,234 samples/s."""
    if not math.isfinite(value):
        return f"- {unit}"
    if unit == "ms":
        return f"{value:.3f} ms"
    return f"{value:,.1f} {unit}" if abs(value) < 100 else f"{value:,.0f} {unit}"


def figure_table(figures: list[Figure]) -> list[str]:
    """Lines of a table: figure, harness, baseline, ratio, goal, meets or BELOW."""
    header = ("figure", "harness", "baseline", "ratio", "goal", "")
    rows = [(f.label, amount(f.value, f.unit), amount(f.baseline, f.baseline_unit or f.unit),
             f"{f.ratio:.3f}" if math.isfinite(f.ratio) else "-", "-" if f.goal is None else f">= {f.goal:g}",
             "record" if f.goal is None else "meets" if f.meets else "BELOW")
            for f in figures]
    widths = [max(len(row[i]) for row in (header, *rows)) for i in range(len(header))]
    align = ("<", ">", ">", ">", "<", "<")

    def line(cells) -> str:
        return "  ".join(f"{cell:{a}{w}}" for cell, a, w in zip(cells, align, widths)).rstrip()
    return [line(header), line(["-" * w for w in widths]), *(line(row) for row in rows)]


@dataclass(frozen=True)
class Rounds:
    """Measurements of the harness between measurements of its baseline, taken in turns: baseline, harness,
    baseline, ..., baseline. Each harness figure is read against the mean of the two baseline figures beside it, so
    a machine whose speed drifts within minutes (a shared VM's can move by half) moves both sides of a ratio alike;
    the figure reported is the round of the median ratio."""

    harness: tuple[float, ...]
    baselines: tuple[float, ...]      # one more than harness
    higher_is_better: bool = True

    def ratios(self) -> list[float]:
        pairs = zip(self.harness, self.around())
        return [h / b if self.higher_is_better else b / h for h, b in pairs]

    def around(self) -> list[float]:
        return [(self.baselines[i] + self.baselines[i + 1]) / 2 for i in range(len(self.harness))]

    def median(self) -> tuple[float, float]:
        """(harness, baseline) of the round whose ratio is the median (the lower middle one of an even count)."""
        ratios = self.ratios()
        order = sorted(range(len(ratios)), key=lambda i: ratios[i])
        chosen = order[(len(order) - 1) // 2]
        return self.harness[chosen], self.around()[chosen]


def in_turns(baseline: Callable[[], float], harness: Callable[[], float], rounds: int,
             higher_is_better: bool = True) -> Rounds:
    """`rounds` harness measurements, each between two baseline ones (rounds + 1 of those)."""
    if rounds < 1:
        raise ValueError("at least one round")
    baselines, measured = [baseline()], []
    for _ in range(rounds):
        measured.append(harness())
        baselines.append(baseline())
    return Rounds(tuple(measured), tuple(baselines), higher_is_better)
