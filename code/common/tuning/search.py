"""Searches for one LoadGen setting from short runs. Pure: a search is handed `trial(value) -> Outcome` and never
starts LoadGen itself, so it is tested with fake trials.

- `find_highest` (Server's target QPS): the highest value a short run accepts, VALID with its latency percentile
  at most (1 - latency_margin) x the bound. The bracket [highest accepted, lowest rejected] is found by growing or
  shrinking from the start value by `growth`, then halved until its width is at most `tolerance` x its low end.
  Runs are noisy, so each edge is then run once more; an edge whose second result contradicts its first is run a
  third time and the majority decides. An overturned edge moves the bracket and the narrowing goes on; when it
  leaves nothing accepted, the search steps down by 2 x `tolerance` from the overturned value, not by `growth`.
  Every value is judged by the majority of its runs, so one lucky or unlucky run never decides the result alone.
- `settle` (Offline's expected QPS, SingleStream's and MultiStream's expected latency): the value follows from a
  measurement (throughput, latency); run, set the value from what was measured, run again, until a VALID run's
  measurement gives back the value it ran at, within `tolerance`. Noise that never settles ends on the safest value
  proposed.
- `confirm`: one full-length run at the value found; when it is INVALID, `step` gives a safer value to run, a bounded
  number of times. None when no run was VALID: an unconfirmed value is never handed on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

Log = Callable[[str], None]
Unit = Callable[[float], str]


@dataclass(frozen=True)
class Outcome:
    """What one run says about the value it ran at."""

    valid: bool                            # LoadGen's verdict (and no LoadGen error)
    latency_ns: float | None = None        # the percentile LoadGen judges (99th; SingleStream: 90th)
    percentile: float | None = None        # which one, e.g. 0.99
    bound_ns: float | None = None          # Server: the latency bound of that percentile
    mean_latency_ns: float | None = None
    throughput: float | None = None        # samples/s
    reason: str = ""                       # why INVALID, in a few words
    run_dir: str = ""
    # INVALID only because LoadGen's early stopping could not bound the percentile from this few queries: every
    # other constraint (the latency percentile within its bound, duration, query count) was met. A short run's
    # verdict on the latency then comes from the percentile itself; the full-length confirmation, with the round's
    # query count, is judged by LoadGen as it is.
    early_stopping_only: bool = False

    def accepted(self, latency_margin: float = 0.0) -> bool:
        """VALID (or INVALID by early stopping alone), and within (1 - latency_margin) x the latency bound where
        there is one."""
        if not (self.valid or (self.early_stopping_only and self.bound_ns and self.latency_ns is not None)):
            return False
        return self.bound_ns is None or self.latency_ns is None or \
            self.latency_ns <= self.bound_ns * (1 - latency_margin)

    def describe(self, latency_margin: float = 0.0) -> str:
        parts = []
        if self.latency_ns is not None:
            name = f"p{self.percentile * 100:g}" if self.percentile else "latency"
            text = f"{name} {self.latency_ns / 1e6:.2f} ms"
            if self.bound_ns:
                limit = f", {1 - latency_margin:.0%} of it {self.bound_ns * (1 - latency_margin) / 1e6:.2f} ms" \
                    if latency_margin else ""
                text += f" (bound {self.bound_ns / 1e6:g} ms{limit})"
            parts.append(text)
        if self.mean_latency_ns is not None and self.bound_ns is None:
            parts.append(f"mean {self.mean_latency_ns / 1e6:.2f} ms")
        if self.throughput is not None:
            parts.append(f"{self.throughput:,.1f} samples/s")
        if not self.valid:
            parts.append(self.reason or "INVALID")
        return ", ".join(parts)


@dataclass(frozen=True)
class Step:
    value: float
    outcome: Outcome
    accepted: bool


@dataclass(frozen=True)
class SearchResult:
    value: float | None          # what the search found; None when nothing was accepted
    low: float | None            # find_highest: the bracket at the end; settle: the range of the values proposed
    high: float | None
    steps: tuple[Step, ...]
    stopped: str                 # why the search ended, in words


@dataclass(frozen=True)
class ConfirmResult:
    value: float | None          # the value a full-length run rated VALID; None when none did
    steps: tuple[Step, ...]
    stopped: str


def round_sig(value: float, digits: int = 3) -> float:
    """`value` to `digits` significant digits: trial values people can read and compare."""
    return float(f"{value:.{digits}g}")


def _verdict(outcome: Outcome, accepted: bool) -> str:
    if accepted:
        return "VALID" if outcome.valid else "accepted (INVALID by early stopping alone, percentile within)"
    return "VALID, over the margin" if outcome.valid else "INVALID"


def _bracket_text(low: float | None, high: float | None, unit: Unit) -> str:
    return f"[{unit(low) if low is not None else '-'}, {unit(high) if high is not None else '-'}]"


def trial_line(kind: str, number: int, value: float, outcome: Outcome, accepted: bool, unit: Unit,
               latency_margin: float, tail: str) -> str:
    """One progress line: value, verdict, latency or reason, and the bracket (or what comes next)."""
    return (f"  {kind} {number:>2}: {unit(value):>16}  {_verdict(outcome, accepted)}: "
            f"{outcome.describe(latency_margin)}; {tail}")


def find_highest(trial: Callable[[float], Outcome], start: float, *, tolerance: float = 0.05,
                 latency_margin: float = 0.1, growth: float = 2.0, ceiling: float | None = None,
                 floor: float | None = None, max_trials: int = 16, round_value: Callable[[float], float] = round_sig,
                 unit: Unit = lambda v: f"{v:g}", log: Log = print) -> SearchResult:
    """The highest value accepted by `trial` (see the module's docstring). `ceiling`: accepted there, look no
    higher; `floor` (default start / 64): rejected below it, give up."""
    if start <= 0 or tolerance <= 0 or growth <= 1 or max_trials < 1:
        raise ValueError("start and tolerance must be positive, growth above 1, max_trials at least 1")
    floor = start / 64 if floor is None else floor
    votes: dict[float, list[bool]] = {}
    steps: list[Step] = []

    def status(value: float) -> bool | None:
        """The majority of the value's runs: True accepted, False rejected, None a tie (a contradiction)."""
        accepted = sum(votes[value])
        rejected = len(votes[value]) - accepted
        return None if accepted == rejected else accepted > rejected

    def settled(value: float) -> bool:
        """Decided by at least two agreeing runs."""
        return status(value) is not None and max(sum(votes[value]), len(votes[value]) - sum(votes[value])) >= 2

    def bracket() -> tuple[float | None, float | None]:
        rejected = [v for v in votes if status(v) is False]
        high = min(rejected, default=None)
        low = max((v for v in votes if status(v) is True and (high is None or v < high)), default=None)
        return low, high

    def result(stopped: str) -> SearchResult:
        low, high = bracket()
        return SearchResult(low, low, high, tuple(steps), stopped)

    while len(steps) < max_trials:
        tie = next((v for v in votes if status(v) is None), None)
        low, high = bracket()
        if tie is not None:
            value = tie            # two runs disagree: a third decides
        elif low is None and high is None:
            value = round_value(start)
        elif low is None:
            # A contested edge (accepted once, overturned by the runs after) puts the peak just below it: step
            # down a little. Halving from there would hand on half the rate after one lucky run.
            value = round_value(high * max(1 - 2 * tolerance, 1 / growth) if any(votes[high]) else high / growth)
            if value < floor or value >= high:
                return result(f"nothing accepted down to {unit(high)}")
        elif high is None:
            if ceiling is not None and low >= ceiling:
                return result(f"accepted at the ceiling {unit(ceiling)}")
            value = round_value(low * growth if ceiling is None else min(low * growth, ceiling))
        elif high - low > tolerance * low and round_value((low + high) / 2) not in (low, high):
            value = round_value((low + high) / 2)
        elif not settled(low):
            value = low            # the edges are run again before the search trusts them
        elif not settled(high):
            value = high
        else:
            return result(f"bracket narrower than {tolerance:.0%}, both edges confirmed by a second run")
        outcome = trial(value)
        accepted = outcome.accepted(latency_margin)
        votes.setdefault(value, []).append(accepted)
        steps.append(Step(value, outcome, accepted))
        contradiction = " (contradicts its earlier run)" if status(value) is None else ""
        log(trial_line("trial", len(steps), value, outcome, accepted, unit, latency_margin,
                       f"bracket {_bracket_text(*bracket(), unit)}{contradiction}"))
    return result(f"out of trials ({max_trials})")


def settle(trial: Callable[[float], Outcome], start: float, propose: Callable[[Outcome], float | None], *,
           safest: Callable[[Sequence[float]], float], tolerance: float = 0.05, max_trials: int = 4,
           unit: Unit = lambda v: f"{v:g}", log: Log = print) -> SearchResult:
    """The value a measurement gives back (see the module's docstring). `propose(outcome)`: the value the run's
    measurement asks for, None when it measured nothing; `safest(values)`: the safest of several proposals."""
    if start <= 0 or tolerance <= 0 or max_trials < 1:
        raise ValueError("start and tolerance must be positive, max_trials at least 1")
    value, proposals, steps = start, [], []
    while len(steps) < max_trials:
        outcome = trial(value)
        steps.append(Step(value, outcome, outcome.valid))
        proposal = propose(outcome)
        if proposal is None or proposal <= 0:
            log(trial_line("trial", len(steps), value, outcome, outcome.valid, unit, 0.0, "nothing measured"))
            return SearchResult(None, None, None, tuple(steps), "the run measured nothing to set the value from")
        proposals.append(proposal)
        done = outcome.valid and abs(proposal - value) <= tolerance * value
        tail = f"measured value {unit(proposal)}, range {_bracket_text(min(proposals), max(proposals), unit)}"
        log(trial_line("trial", len(steps), value, outcome, outcome.valid, unit, 0.0,
                       tail + (" (settled)" if done else "")))
        if done:
            return SearchResult(value, min(proposals), max(proposals), tuple(steps),
                                f"a VALID run measured its own value within {tolerance:.0%}")
        value = proposal
    return SearchResult(safest(proposals), min(proposals), max(proposals), tuple(steps),
                        f"did not settle within {max_trials} runs; the safest value measured is kept")


def confirm(trial: Callable[[float], Outcome], value: float, step: Callable[[float, Outcome], float | None], *,
            max_attempts: int = 3, unit: Unit = lambda v: f"{v:g}", log: Log = print) -> ConfirmResult:
    """Run `value` at full length; on INVALID run `step(value, outcome)` instead, at most `max_attempts` runs."""
    steps: list[Step] = []
    while len(steps) < max_attempts:
        outcome = trial(value)
        steps.append(Step(value, outcome, outcome.valid))
        if outcome.valid:
            log(trial_line("confirm", len(steps), value, outcome, True, unit, 0.0, "confirmed"))
            return ConfirmResult(value, tuple(steps), "VALID at full length")
        safer = step(value, outcome)
        last = len(steps) == max_attempts or safer is None or safer == value
        log(trial_line("confirm", len(steps), value, outcome, False, unit, 0.0,
                       "no safer value left" if last else f"stepping to {unit(safer)}"))
        if last:
            break
        value = safer
    return ConfirmResult(None, tuple(steps), f"no full-length run was VALID ({len(steps)} tried)")
