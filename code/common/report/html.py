"""The report as one self-contained HTML page: inline style, PNG plots as data: URIs, no script, nothing fetched.

Every string from a record, a log or a path goes through `html.escape`.
"""
from __future__ import annotations

import base64
import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from .collect import Latencies, ReportRow
from ..paths import shown_path
from .text import NONE, figure_text, headline, layout_text, number, plural, ratio_text, target_text


@dataclass(frozen=True)
class TestView:
    """One test with what was read and drawn for it."""

    row: ReportRow
    anchor: str
    latencies: Latencies
    bound_ms: float | None
    latency_png: bytes | None


@dataclass(frozen=True)
class GroupView:
    """The tests of one (system, benchmark, scenario) with the plot of its runs over time."""

    group: tuple[str, str, str]
    history_png: bytes | None
    history_runs: int
    tests: tuple[TestView, ...]


@dataclass(frozen=True)
class Page:
    title: str
    scope: str
    generated: str
    history_roots: str
    groups: tuple[GroupView, ...]
    skipped: tuple[tuple[str, str], ...]
    repo: Path


STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 75em;
       padding: 0 1em; color: #222; }
h1 { margin-bottom: 0.2em; } h2 { border-bottom: 1px solid #ccc; margin-top: 2em; } h3 { margin-bottom: 0.3em; }
.meta, .folder { color: #555; } code, pre { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 0.9em; }
table { border-collapse: collapse; margin: 0.5em 0; } td, th { border: 1px solid #ddd; padding: 0.25em 0.6em;
text-align: left; vertical-align: top; } th { background: #f4f4f4; } td.num { text-align: right; }
.verdict { font-weight: bold; padding: 0.1em 0.5em; border-radius: 0.3em; white-space: nowrap; }
.VALID { background: #dff0d8; color: #2d662d; } .INVALID, .FAILED { background: #f8d7da; color: #8a1f28; }
.INTERRUPTED, .CHANGED { background: #fff3cd; color: #7a5b00; }
article { border: 1px solid #ddd; border-radius: 0.5em; padding: 0.5em 1em 1em; margin: 1em 0; }
.reasons { background: #fff8f0; border-left: 4px solid #e69500; padding: 0.3em 1em; }
.error { background: #fdecee; border-left: 4px solid #c9302c; padding: 0.3em 1em; }
pre { white-space: pre-wrap; word-break: break-word; } img { max-width: 100%; height: auto; }
figure { margin: 0.5em 0; } figcaption { color: #555; font-size: 0.9em; }
details { margin: 0.4em 0; } summary { cursor: pointer; font-weight: bold; }
"""


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def data_uri(png: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def _verdict(row: ReportRow) -> str:
    changed = " CHANGED" if row.changed_logs else ""
    return f'<span class="verdict {esc(row.verdict)}{changed}">{esc(row.verdict_text)}</span>'


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], numeric: frozenset[int] = frozenset()) -> str:
    """A table of already escaped cells."""
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f'<td class="num">{c}</td>' if i in numeric else f"<td>{c}</td>"
                                    for i, c in enumerate(cells)) + "</tr>" for cells in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _image(png: bytes, alt: str, caption: str) -> str:
    return (f'<figure><img src="{data_uri(png)}" alt="{esc(alt)}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


def _summary(page: Page) -> str:
    rows = [(esc(t.row.system), esc(t.row.benchmark), esc(t.row.scenario),
             f'<a href="#{esc(t.anchor)}">{esc(t.row.mode)}</a>',
             esc(headline(t.row)), esc(target_text(t.row)), _verdict(t.row),
             f"<code>{esc(shown_path(t.row.run_dir, page.repo))}</code>")
            for g in page.groups for t in g.tests]
    return _table(("system", "benchmark", "scenario", "mode", "figure", "target", "verdict", "run folder"), rows)


def _facts(test: TestView, repo: Path) -> str:
    row = test.row
    facts: list[tuple[str, str]] = []
    if row.is_accuracy:
        text = row.accuracy.text if row.accuracy else ""
        facts.append(("accuracy", f"{esc(headline(row))}" + (f" (<code>{esc(text)}</code>)" if text else "")))
    else:
        name = f" ({esc(row.metric.label)})" if row.metric and row.metric.label else ""
        facts.append(("figure", esc(figure_text(row.metric)) + name))
    comparison = ratio_text(row)
    facts.append(("target", esc(target_text(row)) + (f": {esc(comparison)}" if comparison else "")))
    if test.bound_ms is not None:
        facts.append(("latency bound", esc(f"{number(test.bound_ms)} ms")))
    layout = layout_text(row)
    if layout and not row.is_accuracy:
        facts.append(("layout", esc(layout)))
    facts += [("verdict", _verdict(row)), ("status", esc(row.status)),
              ("model, data set", esc(f"{row.model}, {row.dataset}")),
              ("started", esc(row.started.isoformat(timespec="seconds"))),
              ("run folder", f"<code>{esc(shown_path(row.run_dir, repo))}</code>")]
    return "<table>" + "".join(f"<tr><th>{esc(k)}</th><td>{v}</td></tr>" for k, v in facts) + "</table>"


def _changed(row: ReportRow) -> str:
    """The warning of a run whose logs are no longer what the test left: which files, and what that means."""
    if not row.changed_logs:
        return ""
    files = "".join(f"<li><code>{esc(name)}</code></li>" for name in row.changed_logs)
    return (f'<div class="error"><h4>Logs changed since the run</h4><ul>{files}</ul><p>These files no longer match '
            f"what <code>metadata.json</code> recorded when the test ended (the sha256 of each LoadGen log, the "
            f"accuracy of <code>accuracy.txt</code>). The verdict and figure shown are the recorded ones; what is "
            f"read from the logs (latency percentiles) is read from the changed files. stage_results refuses this "
            f"run: restore the files, or run the test again: <code>{esc(row.rerun_command)}</code></p></div>")


def _reasons(row: ReportRow) -> str:
    parts = [_changed(row)] if row.changed_logs else []
    if row.reasons:
        title = "Why INVALID" if row.verdict == "INVALID" else "Notes"
        items = "".join(f"<li>{esc(r)}</li>" for r in row.reasons)
        parts.append(f'<div class="reasons"><h4>{title}</h4><ul>{items}</ul></div>')
    if row.error:
        parts.append(f'<div class="error"><h4>Error ({esc(row.status)})</h4><pre>{esc(row.error)}</pre></div>')
    return "".join(parts)


def _latency(test: TestView) -> str:
    if not test.latencies.curves:
        return ""
    names = list(test.latencies.curves)
    percentiles = sorted({p for points in test.latencies.curves.values() for p, _ in points})
    by_name = {n: dict(points) for n, points in test.latencies.curves.items()}
    rows = [(esc(f"p{p:g}"), *(esc(number(by_name[n][p])) if p in by_name[n] else NONE for n in names))
            for p in percentiles]
    table = _table(("percentile", *(esc(f"{n} (ms)") for n in names)), rows, frozenset(range(1, len(names) + 1)))
    image = _image(test.latency_png, "latency percentiles", "Latency percentiles from mlperf_log_detail.txt") \
        if test.latency_png else ""
    return f"<h4>Latency</h4>{image}{table}"


def _scalar(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _config(row: ReportRow) -> str:
    rows = [(f"<code>{esc(name)}</code>", esc(_scalar(value)), esc(row.sources.get(name, "")))
            for name, value in row.fields.items()]
    title = f"Config: workload setting {row.workload_setting}" + (f", {row.config_class}" if row.config_class else "")
    return f"<details><summary>{esc(title)}</summary>{_table(('field', 'value', 'source'), rows)}</details>"


def _engine(row: ReportRow) -> str:
    manifest: Mapping[str, Any] = row.engine_manifest
    summary = f"Engine: {row.precision or 'precision unknown'}" + (
        f", {manifest['runtime_version']}" if manifest.get("runtime_version") else "")
    rows = [("path", f"<code>{esc(row.engine_path or NONE)}</code>")]
    rows += [(f"<code>{esc(k)}</code>", esc(_scalar(v))) for k, v in manifest.items()]
    return f"<details><summary>{esc(summary)}</summary>{_table(('manifest entry', 'value'), rows)}</details>"


def _test(test: TestView, repo: Path) -> str:
    row = test.row
    return (f'<article id="{esc(test.anchor)}"><h3>{esc(row.mode)} {_verdict(row)}</h3>{_facts(test, repo)}'
            f"{_reasons(row)}{_latency(test)}{_config(row)}{_engine(row)}</article>")


def _group(group: GroupView, page: Page) -> str:
    system, benchmark, scenario = group.group
    history = _image(group.history_png, "runs over time",
                     f"{plural(group.history_runs, 'completed run')} of {system} {benchmark} {scenario} under "
                     f"{page.history_roots}, by start time (UTC); red crosses are INVALID runs.") \
        if group.history_png else ""
    tests = "".join(_test(t, page.repo) for t in group.tests)
    return f"<section><h2>{esc(system)} · {esc(benchmark)} · {esc(scenario)}</h2>{history}{tests}</section>"


def _skipped(page: Page) -> str:
    if not page.skipped:
        return ""
    items = "".join(f"<li><code>{esc(path)}</code>: {esc(reason)}</li>" for path, reason in page.skipped)
    return f'<h2>Records left out</h2><div class="reasons"><ul>{items}</ul></div>'


def render(page: Page) -> str:
    tests = [t.row for g in page.groups for t in g.tests]
    verdicts = [r.verdict for r in tests]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(("VALID", "INVALID", *sorted(verdicts)))
                       if v in verdicts)
    changed = sum(1 for r in tests if r.changed_logs)
    counts += f"; {changed} with logs changed since the run" if changed else ""
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{esc(page.title)}</title><style>{STYLE}</style></head><body>"
            f"<h1>{esc(page.title)}</h1>"
            f'<p class="meta">{esc(page.scope)}. {esc(plural(len(tests), "test"))}: {esc(counts)}. '
            f"Generated {esc(page.generated)}.</p>"
            f"<h2>Summary</h2>{_summary(page)}{_skipped(page)}"
            + "".join(_group(g, page) for g in page.groups) + "</body></html>\n")
