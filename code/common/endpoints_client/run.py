"""One test on the endpoints client, from the YAML to the gates:

    outcome = run_on_client(client, test, run_dir, endpoints=(), start_server=start)

1. the client's YAML is rendered (config_yaml.py) into the run folder and checked by the client itself
   (`validate-yaml`) before anything is started, so that a refused YAML costs no server start;
2. where no endpoints are given, `start_server()` starts a local server (the openai harness's vLLM, or the
   benchmark's own) and the YAML is rendered again with its endpoint and served name; given endpoints that list
   their models must list the served one (`check_served`);
3. the client runs as a child process (child.py: its output shown as it comes, Ctrl-C handed to its group), its
   report in <run folder>/report, `--accuracy-only` for an accuracy test;
4. the toolkit's gates (gates.py) are applied to that report, whatever the client's exit status said (it exits 0
   when samples fail or turns go missing);
5. the server is stopped whatever happened, and the run's record (client_run.json: the interpreter, the client's
   version and commit, the endpoints, the gates and the figures) is written into the run folder.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..fileio import sha256_file, write_atomically
from .child import run_client, validate
from .config_yaml import RULE_NOTE, ClientConfig, render
from .environment import ClientEnvironment
from .workload import AccuracySubset, ClientWorkload
from .gates import (ACCURACY_RESULTS, AGENTIC_SCORES, AUDIT_OUTPUT_CACHING, CONFIG, RESULT_SUMMARY, Gate,
                    accuracy_figures, accuracy_gates, performance_gates, read_report)

CLIENT_YAML = "client.yaml"           # the YAML the toolkit wrote (the client copies it into its report)
REPORT = "report"                     # the client's report folder inside the run folder
CLIENT_LOG = "client.log"             # everything the client printed
VALIDATE_LOG = "validate.log"
CLIENT_RUN = "client_run.json"        # the run's record of the client
PLACEHOLDER_ENDPOINT = "http://127.0.0.1:8000"   # the schema check connects to nothing
# The report files whose sha256 a run's record keeps (when present): what an endpoints tree stages.
REPORT_FILES = (CONFIG, RESULT_SUMMARY, ACCURACY_RESULTS, AGENTIC_SCORES, AUDIT_OUTPUT_CACHING)
# SingleStream's figure, as the checker maps it (latency.early_stopping_percentiles.90.0 is its
# result_90.00_percentile_latency_ns); a short run has too few queries for an early-stopping estimate.
EARLY_STOPPING_P90, PLAIN_P90 = "early_stopping_latency_p90_ms", "latency_p90_ms"
INLINE_SCORE = "tool_call_iou"       # the replay's inline check, as a figure of the run's record
SUMMARY_FIGURES = ("qps", "tps", "duration_ns", "n_samples_issued", "n_samples_completed", "n_samples_failed")


class Server(Protocol):
    """What a local server is to a run: where it listens, what it serves, how it stops."""

    @property
    def endpoint(self) -> str: ...

    @property
    def served_name(self) -> str: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class ClientTest:
    """What one test on the client is."""

    label: str                                   # "qwen3.6-27b SingleStream PerformanceOnly"
    config: ClientConfig                         # its report_dir and endpoints are set by the run
    accuracy: bool                               # AccuracyOnly: the client's --accuracy-only
    targets: Mapping[str, float] = field(default_factory=dict)   # accuracy figure -> its threshold
    samples_required: int | None = None          # the accuracy samples the round scores (None: not gated)
    notes: tuple[str, ...] = ()                  # header lines of the YAML (which rule it follows, substitutes)
    accuracy_subset: AccuracySubset | None = None   # a short accuracy pass's part of the set (None: all of it)


@dataclass(frozen=True)
class ClientOutcome:
    gates: tuple[Gate, ...]
    figures: Mapping[str, float]
    endpoints: tuple[str, ...]
    served_model: str
    report_dir: Path
    accuracy_subset: AccuracySubset | None = None   # what a short accuracy pass scored (None: all of the set)

    @property
    def passed(self) -> bool:
        return all(gate.passed for gate in self.gates)

    def as_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "gates": [{"name": g.name, "passed": g.passed, "detail": g.detail}
                                                 for g in self.gates],
                "figures": dict(self.figures), "endpoints": list(self.endpoints), "served_model": self.served_model,
                "report_dir": str(self.report_dir), "report_sha256": report_digests(self.report_dir),
                **({"accuracy_subset": self.accuracy_subset.as_dict()} if self.accuracy_subset is not None else {})}


def report_digests(report_dir: Path) -> dict[str, str]:
    """The sha256 of each report file an endpoints tree stages, as the client wrote it (what staging checks)."""
    return {str(relative): sha256_file(Path(report_dir) / relative) for relative in REPORT_FILES
            if (Path(report_dir) / relative).is_file()}


def client_test(label: str, name: str, served_model: str, workload: ClientWorkload, rules, accuracy: bool,
                test_run: bool) -> ClientTest:
    """The test of `workload` under the round's `rules`: its seeds, and min_duration_ms as the checker wants it
    (0 for a test run: one pass over the data set blocks as they are, shortened by the benchmark)."""
    config = ClientConfig(name=name, served_model=served_model, endpoints=(PLACEHOLDER_ENDPOINT,),
                          datasets=tuple(workload.datasets), report_dir="",
                          sample_index_rng_seed=rules.seeds.sample_index_rng_seed,
                          schedule_rng_seed=rules.seeds.schedule_rng_seed,
                          min_duration_ms=0 if test_run else rules.min_duration_ms,
                          tokenizer=workload.tokenizer, model_params=dict(workload.model_params),
                          load_pattern=dict(workload.load_pattern), timeout_s=workload.timeout_s,
                          test_type=workload.test_type, api_type=workload.api_type,
                          n_samples_to_issue=workload.n_samples_to_issue, extra_settings=dict(workload.settings),
                          num_workers=workload.num_workers, max_connections=workload.max_connections,
                          audit=None if accuracy or workload.audit is None else dict(workload.audit))
    subset = workload.accuracy_subset if accuracy else None
    notes = (*workload.notes, *((subset.line(),) if subset is not None else ()),
             *(("a test run (--test_run): min_duration_ms 0, never submittable",) if test_run else ()))
    return ClientTest(label=label, config=config, accuracy=accuracy, targets=dict(workload.targets),
                      samples_required=workload.samples_required, notes=notes,
                      accuracy_subset=subset)


def _write_yaml(test: ClientTest, config: ClientConfig, path: Path) -> Path:
    write_atomically(path, render(config, notes=(RULE_NOTE, *test.notes)))
    return path


def _performance_figures(report_dir: Path) -> dict[str, float]:
    """The summary's figures, and the agentic replay's inline score (the tool calls' multiset IoU against the
    recording, the performance data set's entry of accuracy_results.json) where the client wrote one."""
    summary = read_report(report_dir, RESULT_SUMMARY)
    figures = {key: float(summary[key]) for key in SUMMARY_FIGURES
               if isinstance(summary.get(key), (int, float)) and not isinstance(summary.get(key), bool)}
    latency = summary.get("latency") if isinstance(summary.get("latency"), dict) else {}
    for block, name in (("early_stopping_percentiles", EARLY_STOPPING_P90), ("percentiles", PLAIN_P90)):
        value = (latency.get(block) or {}).get("90.0") if isinstance(latency.get(block), dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            figures[name] = float(value) / 1e6
    if (Path(report_dir) / ACCURACY_RESULTS).is_file():
        for entry in read_report(report_dir, ACCURACY_RESULTS).get("accuracy_scores") or ():
            if isinstance(entry, dict) and entry.get("dataset_type") == "performance" \
                    and isinstance(entry.get("score"), (int, float)):
                figures[INLINE_SCORE] = float(entry["score"])
    return figures


def judge(test: ClientTest, report_dir: Path) -> tuple[list[Gate], dict[str, float]]:
    """The gates and figures of the client's report: the performance gates for a performance test, the accuracy
    targets (and the samples scored) for an accuracy test."""
    if test.accuracy:
        return (accuracy_gates(report_dir, test.targets, test.samples_required, test.accuracy_subset),
                accuracy_figures(report_dir))
    return performance_gates(report_dir), _performance_figures(report_dir)


def check_served(endpoints: Sequence[str], served_model: str, timeout_s: float = 10.0) -> None:
    """Each given endpoint that lists its models (/v1/models) lists `served_model` (UserError, exit 1, naming what
    it serves otherwise): a server of another model would fail every sample after the client's minutes of start-up.
    An endpoint that does not answer is left to the client, which names it."""
    import urllib.error
    import urllib.request

    from ..errors import EXIT_FAILURE, UserError
    from ..serving.transport import serving

    for endpoint in endpoints:
        try:
            with urllib.request.urlopen(f"{endpoint.rstrip('/')}/v1/models", timeout=timeout_s) as answer:
                models = json.loads(answer.read()).get("data")
        except (OSError, ValueError, AttributeError, urllib.error.URLError):
            continue
        if isinstance(models, list) and serving(models, served_model) is None:
            names = ", ".join(str(m.get("id")) for m in models if isinstance(m, dict)) or "nothing"
            raise UserError(f"{endpoint} serves {names}, not {served_model} (its /v1/models); point --endpoints at "
                            f"servers of {served_model}, or leave --endpoints out to have a local one started.",
                            exit_code=EXIT_FAILURE)


def run_on_client(client: ClientEnvironment, test: ClientTest, run_dir: Path, *, endpoints: Sequence[str] = (),
                  start_server: Callable[[], Server] | None = None, show: Callable[[str], None] = print,
                  env: Mapping[str, str] | None = None) -> ClientOutcome:
    """Run `test` on the client into `run_dir` (see the module's docstring); UserError when the client refuses
    the YAML, the client fails or leaves no report, ClientInterrupted when stopped. The gates' failures are the outcome's,
    not errors: the caller decides what a failed gate makes of the test."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    report_dir = run_dir / REPORT
    config = replace(test.config, report_dir=str(report_dir),
                     endpoints=tuple(endpoints) or (PLACEHOLDER_ENDPOINT,))
    yaml_path = _write_yaml(test, config, run_dir / CLIENT_YAML)
    for note in test.notes:
        show(f"{test.label}: note: {note}")
    show(f"{test.label}: the client checks the YAML ({yaml_path})")
    validate(client.command, yaml_path, run_dir / VALIDATE_LOG, env=env)
    if endpoints:
        check_served(endpoints, config.served_model)
    server = None
    try:
        if not endpoints:
            if start_server is None:
                raise ValueError("no endpoints and no server to start")
            server = start_server()
            config = replace(config, endpoints=(server.endpoint,), served_model=server.served_name)
            _write_yaml(test, config, yaml_path)
        args = ["benchmark", "from-config", "--config", str(yaml_path), *(["--accuracy-only"] if test.accuracy
                                                                         else [])]
        show(f"{test.label}: MLCommons endpoints client {client.client_version} ({client.commit[:8]}) against "
             f"{', '.join(config.endpoints)}; log: {run_dir / CLIENT_LOG}")
        run_client(client.command, args, run_dir / CLIENT_LOG, cwd=run_dir, env=env, show=show,
                   what=f"The MLCommons endpoints client ({test.label})")
    finally:
        if server is not None:
            server.stop()
    gates, figures = judge(test, report_dir)
    outcome = ClientOutcome(tuple(gates), figures, tuple(config.endpoints), config.served_model, report_dir,
                            test.accuracy_subset)
    write_atomically(run_dir / CLIENT_RUN, json.dumps({"client": client.as_dict(), **outcome.as_dict()},
                                                      indent=2) + "\n")
    for gate in gates:
        show(f"{test.label}: {gate.line()}")
    show(f"{test.label}: figures: {', '.join(f'{name} {value:g}' for name, value in figures.items())}")
    if test.accuracy_subset is not None:
        show(f"{test.label}: {subset_scores(test.accuracy_subset, figures)}")
    return outcome


def subset_scores(subset: AccuracySubset, figures: Mapping[str, float]) -> str:
    """The subset's scores by group (and part), labelled as the subset's."""
    def score(key: str, name: str) -> str:
        value = figures.get(f"{key}.{name}") if key else None
        return f"{value:.2f}" if value is not None else "?"

    groups = "; ".join(f"{group} {score(subset.group_scores, group)} ("
                       f"{', '.join(f'{part} {score(subset.part_scores, part)} of {n}' for part, n in parts.items())})"
                       for group, parts in subset.counts.items())
    return f"scores on the subset of {subset.samples} of {subset.of_samples} samples (not the full score): {groups}"
