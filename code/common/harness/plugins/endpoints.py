"""The endpoints harness (`--harness_type=endpoints`): the round's endpoints track, where the unmodified MLCommons
endpoints client (mlcommons/endpoints, `inference-endpoint`) is the load generator instead of LoadGen, and sends
the benchmark's queries to OpenAI-compatible servers.

The client needs Python >= 3.12 and is not on PyPI: `make build RUN_ARGS="--harness_type=endpoints"` (and `make run`
with this harness) makes its environment (.venv-endpoints) from the checkout MLCOMMONS_ENDPOINTS_DIR names
(code/common/endpoints_client/), and vLLM's (.venv-vllm) for a local server where no --endpoints are given. A test
on it (run_own_test, in the test's own process): the benchmark says what the client runs (its data set blocks,
generation settings and gates: GenerativeBenchmark.endpoints_workload), endpoints_client/run.py writes the YAML,
has the client check it, starts a local server where no --endpoints name running ones, runs the client, applies the
gates and stops the server; the run's record keeps the client (version, commit, interpreter) and its figures.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ...endpoints_client.child import stop_clients
from ..registry import HarnessFlag, HarnessPlugin, OwnEstimate
from .openai import make_server_environments, prepare_served_model, stop_local_servers

ENDPOINTS = "endpoints"


class EndpointsHarness(HarnessPlugin):
    name = ENDPOINTS
    harness_type = ENDPOINTS
    implementation = "python"
    generates_tokens = True
    needs_engine = False
    own_load_generator = True
    description = ("the MLCommons endpoints client (inference-endpoint, Python >= 3.12, from your checkout at "
                   "MLCOMMONS_ENDPOINTS_DIR) as the load generator, against OpenAI-compatible servers")
    flags = (
        HarnessFlag("endpoints", "comma list of http://host:port of running OpenAI-compatible LLM servers (make "
                    "serve_llm starts one), one or more per node. Default: a local server started for each test"),
    )

    def parse_flag(self, name: str, text: str):
        from ...serving.endpoints import parse_endpoints

        return tuple(endpoint.url for endpoint in parse_endpoints([i.strip() for i in text.split(",") if i.strip()]))

    def why_not(self, selection) -> str | None:
        from ...benchmark_api import generative, get_benchmark
        from ...errors import UserError

        try:
            benchmark = get_benchmark(selection.benchmark)
        except UserError as unknown:      # one of no benchmark of the round (a test's own): the client serves none
            return str(unknown)
        if not generative(benchmark).endpoints_served:
            return (f"the MLCommons endpoints client serves no test of {selection.benchmark} in this toolkit "
                    f"(documentation/endpoints.md lists those it does)")
        return None

    def preflight(self, fields, args, paths) -> None:
        """The client's environment is made (make run makes it before this check) and, without --endpoints, vLLM's
        for the local server."""
        from ...endpoints_client.environment import require_environment

        require_environment(paths.endpoints_venv)
        if not args.endpoints:
            from ...serving.local_server import check_local_server
            from .openai import _benchmark_of

            check_local_server(paths, _benchmark_of(fields["model"], args.benchmarks))

    def needs_environment(self, args, for_run: bool) -> bool:
        """make build and make run make the client's environment for this harness (and vLLM's for a local
        server)."""
        return args.workload.harness_type.value == ENDPOINTS

    def make_environment(self, ctx) -> None:
        from ...endpoints_client.environment import BFCL_EXTRA, ensure_environment

        client = ensure_environment(ctx.paths.endpoints_venv, extras=(BFCL_EXTRA,), log=ctx.log)
        modified = " (the checkout has local changes: not the unmodified client)" if client.modified else ""
        ctx.log(f"MLCommons endpoints client {client.client_version} at {client.commit[:8]}{modified}, on Python "
                f"{client.python_version} ({client.interpreter}, found by {client.interpreter_found_by}), in "
                f"{client.venv}")
        if not ctx.args.endpoints:     # the tests start a local server: vLLM, or a benchmark's own
            make_server_environments(ctx)

    def capabilities(self, ctx) -> list[tuple[str, str, str]]:
        from ...endpoints_client.environment import environment_row

        return [environment_row(ctx.paths.endpoints_venv)]

    def run_options(self, args, paths) -> dict:
        return {"endpoints": list(args.endpoints)}

    def layout_tunable(self, args) -> str | None:
        return ("its model runs in the serving engines and its load comes from the endpoints client, neither of which "
                "sees the toolkit's engine layout")

    def prepare_model(self, config, paths, log) -> str:
        """The model's Hugging Face folder, which a local server loads."""
        return prepare_served_model(config, paths, log)

    def interrupted(self) -> None:
        """The test's local server and the client's process group."""
        stop_local_servers()
        stop_clients()

    def plan_own_test(self, benchmark, fields, mode, test_run: bool, earlier, min_duration_s: float,
                      latency_field: str, earlier_accuracy=None, *, scenario: str = "") -> OwnEstimate | None:
        """From what the client will issue (the benchmark's endpoints_load) at the earlier client test's time per
        query (an accuracy test: the earlier accuracy test's time per sample where there is one), or the config's
        expected latency (endpoints_client/plan.py)."""
        from ...benchmark_api import generative
        from ...constants import TestMode
        from ...endpoints_client.plan import (config_pace, estimate_client_test, per_query_time, per_sample_time,
                                              startup_time)

        accuracy = mode is TestMode.AccuracyOnly
        load = generative(benchmark).endpoints_load(fields["model"], accuracy, fields, test_run, scenario=scenario)
        own_pace = per_sample_time(earlier_accuracy) if accuracy else None     # an earlier accuracy test's
        if own_pace is not None:
            per_query, earlier = own_pace, earlier_accuracy
        else:
            per_query = per_query_time(earlier, config_pace(fields, latency_field))
        if load is None or per_query is None:
            return None
        found = estimate_client_test(load, per_query, 0.0 if test_run or accuracy else min_duration_s,
                                     startup_time(earlier), str(earlier.folder) if earlier is not None else "")
        return OwnEstimate(found.queries, found.seconds, found.per_query_s, found.measured, found.basis,
                           "the MLCommons endpoints client", found.notes)

    def run_own_test(self, spec, benchmark, paths, log_dir: Path) -> dict[str, Any]:
        from ...benchmark_api import generative
        from ...constants import TestMode
        from ...endpoints_client.environment import require_environment
        from ...endpoints_client.run import client_test, run_on_client
        from ...rules import get_round
        from ...serving.local_server import start_for_benchmark

        client = require_environment(paths.endpoints_venv)
        accuracy = spec.mode_enum is TestMode.AccuracyOnly
        fields = spec.fields
        workload = generative(benchmark).endpoints_workload(spec.model, accuracy, fields, paths, log_dir,
                                                            spec.test_run, scenario=spec.scenario)
        test = client_test(spec.label, f"{spec.benchmark}-{spec.scenario}", benchmark.models[spec.model].served_name
                           or spec.model, workload, get_round(spec.rules_version), accuracy, spec.test_run)
        say = lambda line: print(line, flush=True)  # noqa: E731
        endpoints = tuple(spec.harness_options.get("endpoints") or ())
        started = time.monotonic()
        outcome = run_on_client(client, test, log_dir, endpoints=endpoints, show=say,
                                start_server=lambda: start_for_benchmark(benchmark, spec.model, fields, paths,
                                                                         log=say))
        if accuracy and outcome.passed:
            generative(benchmark).endpoints_artefacts(spec.model, fields, paths, outcome.report_dir, log_dir)
        return outcome_fields(spec, client, test, outcome, time.monotonic() - started, local=not endpoints)


def outcome_fields(spec, client, test, outcome, seconds: float, local: bool) -> dict[str, Any]:
    """The record's outcome fields of a test the client ran: valid where every gate passed; submittable where valid,
    not a test run and the tree's rules are the round's (a test run's shortened duration is not)."""
    from urllib.parse import urlsplit

    from ...endpoints_client.run import subset_scores
    from ...records.metadata import AccuracyRecord, Durations
    from ...records.record import EndpointRecord
    from ...serving.machines import machine_key

    failed = tuple(f"the toolkit's gate failed: {gate.line()}" for gate in outcome.gates if not gate.passed)
    valid = outcome.passed
    result: dict[str, Any] = {
        "durations": Durations(test_s=round(seconds, 3),
                               measured_s=(outcome.figures["duration_ns"] / 1e9 if "duration_ns" in outcome.figures
                                           else outcome.figures.get("duration_s"))),
        "valid": valid, "submittable": valid and not spec.test_run,
        "reasons": failed + (("a test run (--test_run): shortened, never submittable",) if spec.test_run else ()),
        "endpoints": tuple(EndpointRecord(host=host, port=port, protocol="http", model=outcome.served_model,
                                          local=local, machine=machine_key(host))
                           for host, port in ((u.hostname or "", u.port or 80)
                                              for u in (urlsplit(e) for e in outcome.endpoints))),
        "load_generator": {"name": "MLCommons endpoints client (inference-endpoint)", **client.as_dict(),
                           **outcome.as_dict()},
    }
    if test.accuracy:
        figures = outcome.figures
        lines = [f"{name}={value:.2f}" for name, value in figures.items() if name in test.targets]
        subset = outcome.accuracy_subset
        text = "\n".join([*([subset.line()] if subset is not None else []), *lines,
                          f"samples={int(figures.get('total_samples', 0))}",
                          *([subset_scores(subset, figures)] if subset is not None else []),
                          *(gate.line() for gate in outcome.gates)]) + "\n"
        first = next(iter(test.targets), "score")

        def labelled(name: str) -> str:    # a short pass's figures are the subset's, wherever they are shown
            return f"{name} of the {subset.samples}-sample subset" if subset is not None else name

        result["accuracy"] = AccuracyRecord(
            metric=first, value=float(figures.get(first, 0.0)), text=text,
            metrics={labelled(name): figures[name] for name in test.targets if name in figures},
            samples=int(figures["total_samples"]) if "total_samples" in figures else None,
            threshold=test.targets.get(first), meets_target=valid)
    else:
        from ...rules import get_round

        unit = get_round(spec.rules_version).benchmark(spec.benchmark).latency_unit
        result["metric"] = headline(spec.scenario_enum, outcome.figures, unit)
        result["result_validity"] = "VALID" if valid else "INVALID"
    return result


def headline(scenario, figures, latency_unit: str = "ms") -> Any:
    """The run's figure as the checker reads an endpoints tree's: SingleStream's 90th percentile latency in ms, or in
    s where the checker reports the benchmark's in seconds (BenchmarkRules.latency_unit: wan) (the early-stopping
    estimate, or the plain percentile where the run had too few queries for one), else the qps."""
    from ...constants import Scenario
    from ...endpoints_client.run import EARLY_STOPPING_P90, PLAIN_P90
    from ...records.loadgen_log import Metric

    scale = 1e3 if latency_unit == "s" else 1.0
    if scenario is Scenario.SingleStream:
        if EARLY_STOPPING_P90 in figures:
            return Metric("90th percentile latency (early stopping)", figures[EARLY_STOPPING_P90] / scale,
                          latency_unit, False)
        if PLAIN_P90 in figures:
            return Metric("90th percentile latency (too few queries for early stopping)", figures[PLAIN_P90] / scale,
                          latency_unit, False)
    qps = figures.get("qps")
    return Metric("samples per second (the client's qps)", float(qps) if qps is not None else float("nan"),
                  "samples/s", True)
