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
    """Measurements of the harness and of its baseline, as many of each, taken in turns: one of each a round, the
    baseline first in the first round and every other one after it (baseline, harness, harness, baseline, baseline,
    harness, ...). A shared VM's speed moves in phases (measured here: MobileNetV2's batch-1 p90 at 5 ms for tens of
    seconds, then at 8 ms), so a ratio of two single runs can compare a quiet phase with a slow one. Taken in turns,
    each side gets its runs in every phase, a steady drift favours neither (every other round reversed), and the
    figure compares the best of each side (the highest throughput, the lowest latency): both as the quietest phase
    let them run, as timeit takes the fastest of its repeats. Both sides have the same number of runs: the best of
    one more run is better by chance alone (of runs that read 5 or 8 ms at random, the fastest of 4 reads 5 ms more
    often than the fastest of 3). Every round is kept, to be printed."""

    harness: tuple[float, ...]
    baselines: tuple[float, ...]      # as many as harness
    higher_is_better: bool = True

    def best(self) -> tuple[float, float]:
        """(harness, baseline): the best run of each."""
        pick = max if self.higher_is_better else min
        return pick(self.harness), pick(self.baselines)

    def taken(self) -> list[tuple[bool, float]]:
        """(whether it is the harness's, the figure) of every run, in the order taken."""
        runs: list[tuple[bool, float]] = []
        for number, (harness, baseline) in enumerate(zip(self.harness, self.baselines)):
            pair = [(False, baseline), (True, harness)]
            runs += pair if baseline_first(number) else pair[::-1]
        return runs


def baseline_first(number: int) -> bool:
    """Whether round `number` (from 0) runs the baseline before the harness: the first, and every other one."""
    return number % 2 == 0


def in_turns(baseline: Callable[[], float], harness: Callable[[], float], rounds: int,
             higher_is_better: bool = True) -> Rounds:
    """`rounds` measurements of each, in turns (Rounds says in which order)."""
    if rounds < 1:
        raise ValueError("at least one round")
    baselines: list[float] = []
    measured: list[float] = []
    for number in range(rounds):
        if baseline_first(number):
            baselines.append(baseline())
            measured.append(harness())
        else:
            measured.append(harness())
            baselines.append(baseline())
    return Rounds(tuple(measured), tuple(baselines), higher_is_better)
