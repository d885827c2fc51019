"""TEST09 of gpt-oss-120b: the mean output length of a performance run over the whole performance data set, judged
as compliance/TEST09/run_verification.py judges it.

The run logs every response (audit.config: accuracy_log_sampling_target 10000 >= 6396 samples, each issued once).
Per logged entry the script counts the tokens of `data`: the hex string decoded to bytes, one token per 4 bytes
(int32, little-endian; a trailing partial token is dropped), an entry with empty `data` counting 0. It counts every
entry as logged, with no dedup by qsl_idx, and takes the plain mean; the test passes when
`min <= mean <= max` (both bounds inclusive, the mean unrounded). The token width here is the benchmark's response
dtype (int32 for the LLMs), so the count is the script's.

Where the script is lenient the toolkit is not: it salvages the entries of a log that is not a JSON array (a run
cut short leaves no closing bracket) and counts an entry it cannot decode as 0 tokens; here such a log fails, with
what is wrong, as the run it comes from did not finish cleanly.

verify_output_len.txt is written with the lines the script writes (statistics, thresholds, `Min check pass`,
`Max check pass`, then `TEST PASS` or `TEST FAIL`); the checkers look for `TEST PASS` in it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .verify import FAIL, PASS, Check

RULE = "=" * 80
TITLE = "TEST09: Verify Output Token Length in Performance Mode"


@dataclass(frozen=True)
class LengthStatistics:
    lengths: tuple[int, ...]        # output tokens per logged entry, in log order

    @property
    def count(self) -> int:
        return len(self.lengths)

    @property
    def mean(self) -> float:
        return sum(self.lengths) / len(self.lengths)

    @property
    def std(self) -> float:
        """Population standard deviation, as the script computes it."""
        mean = self.mean
        return (sum((x - mean) ** 2 for x in self.lengths) / len(self.lengths)) ** 0.5


def output_lengths(entries: Any, dtype: np.dtype | str = "int32") -> tuple[tuple[int, ...], str | None]:
    """(tokens of each entry's data, the first problem that makes the log unusable or None)."""
    if not isinstance(entries, list):
        return (), "the accuracy log is not LoadGen's JSON array of entries"
    width = np.dtype(dtype).itemsize
    lengths = []
    for position, entry in enumerate(entries):
        where = f"entry {position}" + (f" (qsl_idx {entry['qsl_idx']})" if isinstance(entry, dict)
                                       and "qsl_idx" in entry else "")
        if not isinstance(entry, dict) or not isinstance(entry.get("data"), str):
            return (), f"{where} has no hex 'data' string"
        try:
            size = len(bytes.fromhex(entry["data"].strip()))
        except ValueError as error:
            return (), f"{where}: its data is not hex ({error})"
        lengths.append(size // width)
    return tuple(lengths), None


def issued_samples(detail: Any) -> int | None:
    """The samples a performance run issued, as its detail log says (generated_query_count queries of
    generated_samples_per_query samples); None when the log does not say. `detail` is a records.loadgen_log
    LoadGenLog (anything with `get`)."""
    try:
        queries, per_query = int(detail.get("generated_query_count")), int(detail.get("generated_samples_per_query"))
    except (TypeError, ValueError):
        return None
    return queries * per_query if queries >= 0 and per_query >= 0 else None


def verify_test09(entries: Any, bounds: tuple[float, float], dtype: np.dtype | str = "int32",
                  issued: int | None = None, sampling_target: int | None = None) -> Check:
    """The TEST09 verdict of a compliance run's accuracy log entries, with the test's (min, max) bounds on the mean
    output token count and the benchmark's response dtype. The Check's text is verify_output_len.txt.

    `issued`, the samples the run issued (issued_samples of its detail log): the audit.config logs every response
    (its sampling target is above the data set), so a log that holds another number of entries was cut or padded
    after the run, and the mean of what is left says nothing; the script never counts them, the toolkit fails it.
    A run that issued more samples than `sampling_target` (the audit.config's) cannot have logged them all: it
    fails too, as its mean is not the mean of every response."""
    low, high = bounds
    lengths, problem = output_lengths(entries, dtype)
    if problem is None and not lengths:
        problem = "the accuracy log holds no entry (the run logged no response)"
    if problem is None and issued is not None and sampling_target is not None and issued > sampling_target:
        problem = (f"the run issued {issued} samples, more than the {sampling_target} responses its audit.config "
                   f"logs, so the mean is not over every response: run the whole data set once, as TEST09 asks")
    elif problem is None and issued is not None and len(lengths) != issued:
        problem = (f"the accuracy log holds {len(lengths)} responses, but the run issued {issued} samples (its "
                   f"detail log: generated_query_count x generated_samples_per_query) and logged every response: "
                   f"the log was cut or added to after the run")
    if problem is not None:
        return Check(False, _failure_text(problem, low, high), problem)
    stats = LengthStatistics(lengths)
    mean = stats.mean
    min_pass, max_pass = mean >= low, mean <= high
    passed = min_pass and max_pass
    text = _text(stats, low, high, min_pass, max_pass, passed)
    samples = len({e.get("qsl_idx") for e in entries})
    repeated = f", {stats.count - samples} of them repeats of a qsl_idx" if samples != stats.count else ""
    where = "within" if passed else ("below" if not min_pass else "above")
    summary = (f"mean output {mean:.2f} tokens over {stats.count} logged responses{repeated}: {where} "
               f"[{low:g}, {high:g}]")
    return Check(passed, text, summary)


def _text(stats: LengthStatistics, low: float, high: float, min_pass: bool, max_pass: bool, passed: bool) -> str:
    """verify_output_len.txt as run_verification.py writes it."""
    lines = [RULE, TITLE, RULE, "",
             "Output Token Length Statistics", "-" * 40,
             f"Total samples: {stats.count}",
             f"Mean output tokens: {stats.mean:.2f}",
             f"Min output tokens: {min(stats.lengths)}",
             f"Max output tokens: {max(stats.lengths)}",
             f"Std deviation: {stats.std:.2f}",
             "", RULE, "Verification Results", RULE,
             f"Mean output tokens: {stats.mean:.2f}",
             f"Min threshold: {low}",
             f"Max threshold: {high}",
             f"Min check pass: {min_pass}",
             f"Max check pass: {max_pass}",
             "", PASS if passed else FAIL]
    return "\n".join(lines) + "\n"


def _failure_text(problem: str, low: float, high: float) -> str:
    """The verdict file of a log that cannot be judged (the script writes none: it stops before)."""
    return "\n".join([RULE, TITLE, RULE, "", f"Error: {problem}", f"Min threshold: {low}",
                      f"Max threshold: {high}", "", FAIL]) + "\n"

