"""The toolkit's own gates on what the client wrote in its report folder (the layout of an endpoints tree's
scenario folder): the run completed with no failed sample, the agentic replay dropped no turn, and the accuracy
figures meet the round's targets. Each gate is a line of the run's summary; a missing or damaged file is an error
(exit status 1) that names it, and nothing is staged from the run.

    report_dir/config.yaml                        the YAML as the client ran it
    report_dir/performance/result_summary.json    n_samples_issued / completed / failed, state, qps, latencies
    report_dir/scores.json                        the agentic replay's inline scores, its `turns` block
    report_dir/accuracy/accuracy_results.json     accuracy_scores: one entry per scored data set
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ..errors import EXIT_FAILURE, UserError
from .workload import AccuracySubset

RESULT_SUMMARY = Path("performance") / "result_summary.json"
ACCURACY_RESULTS = Path("accuracy") / "accuracy_results.json"
AGENTIC_SCORES = Path("scores.json")
CONFIG = Path("config.yaml")
# The client's verdict of its output-caching audit (MLPerf TEST04), written into <report>/audit/ after the performance
# phase where the YAML has an audit block (compliance/result.py: audit_<test>.json).
AUDIT_OUTPUT_CACHING = Path("audit") / "audit_output_caching_test.json"


@dataclass(frozen=True)
class Gate:
    name: str
    passed: bool
    detail: str

    def line(self) -> str:
        return f"{'PASS' if self.passed else 'FAIL'}  {self.name}: {self.detail}"


def read_report(report_dir: Path, relative: Path) -> dict[str, Any]:
    path = Path(report_dir) / relative
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"The endpoints client left no {relative} in {report_dir}: the run did not finish; nothing "
                        f"is staged from it.", exit_code=EXIT_FAILURE) from None
    except (OSError, ValueError) as error:
        raise UserError(f"{path} cannot be read as the client's report ({error}): it is damaged or was edited; "
                        f"nothing is staged from it.", exit_code=EXIT_FAILURE) from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not the client's report (not a JSON object); nothing is staged from it.",
                        exit_code=EXIT_FAILURE)
    return data


def _count(data: Mapping[str, Any], key: str, path: Path) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise UserError(f"{path} has no count {key} (found {value!r}): it is damaged or was edited; nothing is "
                        f"staged from it.", exit_code=EXIT_FAILURE)
    return value


def performance_gates(report_dir: Path) -> list[Gate]:
    """The run finished, every issued sample completed and none failed; the replay's turns all came back."""
    summary = read_report(report_dir, RESULT_SUMMARY)
    where = Path(report_dir) / RESULT_SUMMARY
    issued, completed, failed = (_count(summary, key, where) for key in
                                 ("n_samples_issued", "n_samples_completed", "n_samples_failed"))
    gates = [Gate("run complete", summary.get("state") == "complete" and summary.get("complete") is True,
                  f"state {summary.get('state')!r}, complete {summary.get('complete')!r}"),
             Gate("no failed samples", failed == 0, f"{failed} of {issued} issued failed"),
             Gate("every sample completed", completed == issued and issued > 0,
                  f"{completed} of {issued} completed")]
    scores_path = Path(report_dir) / AGENTIC_SCORES
    if scores_path.exists():
        turns = read_report(report_dir, AGENTIC_SCORES).get("turns")
        if not isinstance(turns, dict):
            gates.append(Gate("no missing turns", False, f"{scores_path} has no turns block"))
        else:
            missing, observed, expected = turns.get("missing"), turns.get("observed"), turns.get("expected")
            gates.append(Gate("no missing turns", missing == 0 and expected is not None and observed == expected,
                              f"{missing} missing, {observed} of {expected} scorable turns observed "
                              f"({turns.get('issued')} issued)"))
    return gates


def accuracy_entry(results: Mapping[str, Any], where: Path) -> Mapping[str, Any]:
    """The accuracy data set's entry (not the replay's inline score, dataset_type performance)."""
    for entry in results.get("accuracy_scores") or ():
        if isinstance(entry, dict) and entry.get("dataset_type", "accuracy") == "accuracy":
            return entry
    raise UserError(f"{where} holds no accuracy score: the accuracy data set was not scored; nothing is staged "
                    f"from the run.", exit_code=EXIT_FAILURE)


def accuracy_figures(report_dir: Path) -> dict[str, float]:
    """Every figure of the accuracy entry by name: `score` and its breakdown's numbers (BFCL: overall_accuracy,
    normalized_single_turn_score, ...), total_samples, and duration_s (the samples' issue and scoring)."""
    where = Path(report_dir) / ACCURACY_RESULTS
    entry = accuracy_entry(read_report(report_dir, ACCURACY_RESULTS), where)
    figures: dict[str, float] = {}
    breakdown = entry.get("breakdown") if isinstance(entry.get("breakdown"), dict) else {}
    nested = [(f"{key}.{name}", value) for key, block in breakdown.items() if isinstance(block, dict)
              for name, value in block.items()]     # BFCL's category_scores, subset_scores: "category_scores.live"
    for key, value in [("score", entry.get("score")), ("total_samples", entry.get("total_samples")),
                       ("duration_s", entry.get("duration_s")), *breakdown.items(), *nested]:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            figures[key] = float(value)
        elif isinstance(value, str):
            try:
                figures[key] = float(value)     # older reports wrote figures as text ("86.23")
            except ValueError:
                pass
    # BFCL's breakdown carries overall_accuracy in percent, beside a scalar score that is a fraction (0.1126 for
    # 11.26 %); other scorers have only their score, in their own unit, and are gated on it by name.
    return figures


def accuracy_gates(report_dir: Path, targets: Mapping[str, float], samples: int | None = None,
                   subset: AccuracySubset | None = None) -> list[Gate]:
    """Each target figure >= its threshold (a missing figure fails), and the samples scored where `samples` is
    the number the round requires; for a short pass's `subset`, that the client scored that subset."""
    figures = accuracy_figures(report_dir)
    gates = []
    for name, threshold in targets.items():
        value = figures.get(name)
        gates.append(Gate(f"{name} >= {_figure(threshold)}", value is not None and value >= threshold,
                          "not in the report" if value is None else _figure(value)))
    if samples is not None:
        scored = figures.get("total_samples")
        gates.append(Gate(f"{samples} samples scored", scored is not None and int(scored) >= samples,
                          "not in the report" if scored is None else f"{int(scored)} scored"))
    if subset is not None:
        gates.append(subset_gate(figures, subset))
    return gates


def _figure(value: float) -> str:
    """Two decimals, or as many as it takes to tell a figure from its threshold (an F1 of 0.782397)."""
    return f"{value:.2f}" if round(value, 2) == value else f"{value:.6g}"


def subset_gate(figures: Mapping[str, float], subset: AccuracySubset) -> Gate:
    """The client scored the subset asked: its sample count, and a score of every part (where the report names
    parts)."""
    scored = int(figures.get("total_samples", -1))
    parts = {part for group in subset.counts.values() for part in group}
    found = {key.split(".", 1)[1] for key in figures if key.startswith(f"{subset.part_scores}.")} \
        if subset.part_scores else parts
    missing = sorted(parts - found)
    detail = f"{scored} of {subset.samples} samples scored, {len(parts & found)} of {len(parts)} parts" + \
        (f" (none of {', '.join(missing)})" if missing else "")
    return Gate(f"the subset asked ({subset.samples} samples)", scored == subset.samples and not missing, detail)
