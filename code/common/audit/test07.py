"""TEST07 of gpt-oss-120b: a performance-mode run over the whole compliance data set (990 GPQA questions, every
response logged), scored by the benchmark's accuracy scorer and held to a threshold, judged as
compliance/TEST07/run_verification.py judges it.

The script runs the benchmark's accuracy script on the compliance run's mlperf_log_accuracy.json (its README: the
evaluation script with `--reference-data acc_eval_compliance_gpqa.parquet`), takes the first match of its score
pattern in the whole output (`re.search`, default `'exact_match':\\s*([\\d.]+)`, group 1 as a number) and passes
when `score >= threshold` (audit.config's test07_accuracy_threshold, 60.698). No match is a failure. The toolkit
does the same with the benchmark's own scorer (`Benchmark.score` on the compliance data set, whose result text has
the official script's `'exact_match': <score>` line) and the pattern and threshold of the rules round.

verify_accuracy.txt is written as the script writes it: the scorer's output, then a summary block
(`TEST07 Verification Summary`, `Accuracy score`, `Accuracy threshold`, `Accuracy check pass`, `TEST PASS` or
`TEST FAIL`); the checkers look for `TEST PASS` in it.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from ..errors import UserError
from .verify import FAIL, PASS, Check

RULE = "=" * 80
SUMMARY_TITLE = "TEST07 Verification Summary"


def find_score(output: str, pattern: str) -> float | None:
    """run_verification.py's reading of the accuracy script's output: the first match of `pattern` anywhere in
    it, group 1 as a number; None when nothing matches (or the match is no number)."""
    found = re.search(pattern, output)
    if found is None:
        return None
    try:
        return float(found.group(1))
    except (IndexError, ValueError):
        return None


def verify_test07(output: str, threshold: float, pattern: str, samples: int | None = None) -> Check:
    """The TEST07 verdict of the accuracy scorer's output on the compliance run's log. `samples`, the number of
    samples scored, goes into the summary for people only."""
    score = find_score(output, pattern)
    passed = score is not None and score >= threshold
    summary_lines = [RULE, SUMMARY_TITLE, RULE]
    if score is not None:
        summary_lines += [f"Accuracy score: {score}", f"Accuracy threshold: {threshold}",
                          f"Accuracy check pass: {passed}", PASS if passed else FAIL]
        scored = f" over {samples} samples" if samples is not None else ""
        summary = f"accuracy {score:g}{scored}: {'at least' if passed else 'below'} the threshold {threshold:g}"
    else:
        summary_lines += ["Error: Could not parse accuracy score", FAIL]
        summary = f"the accuracy scorer's output has no score matching {pattern!r}"
    text = output if output.endswith("\n") or not output else output + "\n"
    return Check(passed, text + "\n" + "\n".join(summary_lines) + "\n", summary)


def read_logged_entries(accuracy_log: Path) -> tuple[list[Any] | None, str | None]:
    """(entries, problem): the compliance run's accuracy log as LoadGen writes it, or why it cannot be used."""
    try:
        entries = json.loads(Path(accuracy_log).read_text())
    except FileNotFoundError:
        return None, f"{accuracy_log} is missing: the compliance run logged no response"
    except (OSError, UnicodeDecodeError, ValueError) as error:
        return None, f"{accuracy_log} cannot be read as JSON ({error}): the run did not finish cleanly"
    if not isinstance(entries, list):
        return None, f"{accuracy_log} is not LoadGen's JSON array of entries"
    if not entries:
        return None, f"{accuracy_log} holds no entry: the compliance run logged no response"
    return entries, None


def score_test07(benchmark: Any, model: str, dataset: str, accuracy_log: Path, paths: Any, threshold: float,
                 pattern: str) -> Check:
    """Score the compliance run's accuracy log with the benchmark's scorer on the compliance data set `dataset`,
    then give the TEST07 verdict. A missing or damaged log, or a scorer that refuses it, fails with the reason."""
    entries, problem = read_logged_entries(accuracy_log)
    if problem is None:
        try:
            result = benchmark.score(model, dataset, Path(accuracy_log), paths)
        except (UserError, OSError, ValueError, KeyError) as error:
            problem = f"the accuracy scorer of {dataset} refused {accuracy_log} ({error})"
    if problem is not None:
        return Check(False, "\n".join([f"Error: {problem}", "", RULE, SUMMARY_TITLE, RULE,
                                       "Error: Could not parse accuracy score", FAIL]) + "\n", problem)
    return verify_test07(result.text, threshold, pattern, result.samples)
