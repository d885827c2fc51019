"""Read LoadGen's mlperf_log_detail.txt: the result of a run, its validity and the reasons.

The detail log holds one `:::MLLOG {json}` per line; the text summary is for people and is not parsed. A key
logged more than once counts with its first value, as the official checkers and compliance scripts read it.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..constants import Scenario
from ..paths import ACCURACY_LOG, DETAIL_LOG, SUMMARY_LOG

PREFIX = ":::MLLOG "
# The last line LoadGen writes into the summary, when the test ends (logging.cc, AsyncLog::SetLogFiles).
SUMMARY_END = re.compile(r"(No errors encountered during test\.|\d+ ERRORS? encountered\. See detailed log\.)\n\Z")
ACCURACY_END = b"]\n"        # the accuracy log's JSON array closes when the test ends


# The p99 token-latency figures LoadGen logs for a non-Offline run with use_token_latencies, and the bounds it
# judged them against (logged only for such runs; ns).
TTFT_P99 = "result_first_token_99.00_percentile_latency_ns"
TPOT_P99 = "result_time_per_output_token_99.00_percentile_ns"
TTFT_BOUND = "requested_server_ttft_latency"
TPOT_BOUND = "requested_server_tpot_latency"
# The headline figure of a run with token latencies, per scenario, as main.py (the checker of record) reads it
# (its RESULT_FIELD_BENCHMARK_OVERWRITE of v6.1: llama3.1-8b, llama3.1-8b-edge): tokens per second for Offline and
# Server (an Interactive run is logged as Server), and SingleStream's plain 90th-percentile sample latency. (The old
# checker's table stops at v5.1: it reads samples per second, under a "Tokens/s" unit.)
TOKEN_RESULT_FIELDS = {Scenario.Offline: "result_tokens_per_second",
                       Scenario.Server: "result_completed_tokens_per_second",
                       Scenario.SingleStream: "result_90.00_percentile_latency_ns"}


@dataclass(frozen=True)
class Metric:
    name: str
    value: float
    unit: str
    higher_is_better: bool


@dataclass(frozen=True)
class TokenLatencies:
    """An LLM run's 99th-percentile time to first token and time per output token (ns), with the bounds LoadGen
    judged them against (None where the log has no figure)."""

    ttft_p99_ns: float | None
    tpot_p99_ns: float | None
    ttft_bound_ns: float | None
    tpot_bound_ns: float | None


@dataclass(frozen=True)
class LoadGenLog:
    values: dict[str, Any]
    errors: tuple[str, ...] = field(default_factory=tuple)
    warnings: tuple[str, ...] = field(default_factory=tuple)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def scenario(self) -> Scenario:
        return Scenario.parse(str(self.values["effective_scenario"]))

    @property
    def test_mode(self) -> str:
        return str(self.values.get("effective_test_mode", ""))

    @property
    def valid(self) -> bool:
        return self.values.get("result_validity") == "VALID"

    @property
    def seeds(self) -> dict[str, int]:
        return {k: int(self.values.get(f"effective_{k}", 0)) for k in
                ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")}

    @property
    def uses_token_latencies(self) -> bool:
        """Whether LoadGen measured token latencies (LoadGen logs requested_use_token_latencies only when true)."""
        return self.values.get("requested_use_token_latencies") is True

    def token_latencies(self) -> TokenLatencies | None:
        """The p99 TTFT and TPOT of a run with token latencies; None for any other run (and for Offline, where
        LoadGen measures no first token)."""
        if not self.uses_token_latencies or self.scenario is Scenario.Offline:
            return None
        # LoadGen logs its Server bounds in every scenario; they bound only a Server run (SingleStream has none).
        bounds = (TTFT_BOUND, TPOT_BOUND) if self.scenario is Scenario.Server else ()
        return TokenLatencies(*(number(self.values.get(key)) for key in (TTFT_P99, TPOT_P99)),
                              *(number(self.values.get(key)) if key in bounds else None
                                for key in (TTFT_BOUND, TPOT_BOUND)))

    def metric(self, latency_unit: str = "ms") -> Metric | None:
        """The scenario's headline figure, as the submission checker reads it; a latency in `latency_unit` (ms, or
        s where the checker reports the benchmark's latency in seconds: BenchmarkRules.latency_unit)."""
        metric = self._metric()
        if metric is None or metric.unit != "ms" or latency_unit == "ms":
            return metric
        if latency_unit != "s":
            raise ValueError(f"a latency unit is ms or s, not {latency_unit!r}")
        return Metric(metric.name, metric.value / 1e3, "s", metric.higher_is_better)

    def _metric(self) -> Metric | None:
        v = self.values
        scenario = self.scenario
        if self.uses_token_latencies:
            return self._token_metric()
        if scenario is Scenario.Offline and "result_samples_per_second" in v:
            return Metric("samples per second", float(v["result_samples_per_second"]), "samples/s", True)
        if scenario is Scenario.Server and "result_completed_samples_per_sec" in v:
            return Metric("completed samples per second", float(v["result_completed_samples_per_sec"]),
                          "samples/s", True)
        if scenario in (Scenario.SingleStream, Scenario.MultiStream):
            percentile, key = (90, "early_stopping_latency_ss") if scenario is Scenario.SingleStream \
                else (99, "early_stopping_latency_ms")
            if float(v.get(key, 0) or 0) > 0:
                return Metric(f"{percentile}th percentile latency (early stopping)", float(v[key]) / 1e6, "ms", False)
            plain = v.get(f"result_{percentile}.00_percentile_latency_ns")
            if plain is not None:   # too few queries for an early-stopping estimate (short runs)
                return Metric(f"{percentile}th percentile latency (too few queries for early stopping)",
                              float(plain) / 1e6, "ms", False)
        return None

    def _token_metric(self) -> Metric | None:
        """An LLM run's figure: tokens per second (Offline, Server and so Interactive), or SingleStream's 90th
        percentile latency in ms."""
        key = TOKEN_RESULT_FIELDS.get(self.scenario)
        value = number(self.values.get(key)) if key else None
        if value is None:
            return None
        if self.scenario is Scenario.SingleStream:
            return Metric("90th percentile latency", value / 1e6, "ms", False)
        name = "tokens per second" if self.scenario is Scenario.Offline else "completed tokens per second"
        return Metric(name, value, "tokens/s", True)

    @property
    def min_duration_ms(self) -> int:
        return int(self.values.get("effective_min_duration_ms", 0))

    @property
    def offline_query_samples(self) -> int:
        """The samples of the Offline query LoadGen issued: generated_samples_per_query, which is padded to a
        multiple of the performance sample set in equal-issue mode (the LLMs: a test run's min_query_count 8 over
        24 loaded samples issues 24), where effective_samples_per_query stays what the settings asked."""
        v = self.values
        return int(float(v.get("generated_samples_per_query") or v.get("effective_samples_per_query") or 0))

    @property
    def run_duration_s(self) -> float | None:
        """Duration of the measured part of the run, from LoadGen's own figures."""
        v = self.values
        if self.scenario is Scenario.Offline:
            per_s = float(v.get("result_samples_per_second", 0))
            return self.offline_query_samples / per_s if per_s > 0 else None
        qps = float(v.get("result_qps_with_loadgen_overhead", 0))
        return int(v.get("result_query_count", 0)) / qps if qps > 0 else None


def number(value: Any) -> float | None:
    """A logged figure as a float; None for a missing, boolean or unreadable value."""
    if isinstance(value, bool):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def read_detail(log_dir: Path) -> LoadGenLog:
    path = log_dir / DETAIL_LOG
    values: dict[str, Any] = {}
    errors: list[str] = []
    warnings: list[str] = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith(PREFIX):
            continue
        try:
            record = json.loads(line[len(PREFIX):])
        except json.JSONDecodeError:
            continue  # a line cut by a crash; the rest of the log still counts
        key, value = record.get("key"), record.get("value")
        meta = record.get("metadata", {})
        if meta.get("is_error"):
            errors.append(f"{key}: {value}")
        elif meta.get("is_warning"):
            warnings.append(f"{key}: {value}")
        values.setdefault(key, value)
    return LoadGenLog(values=values, errors=tuple(errors), warnings=tuple(warnings))


def read_accuracy_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of an mlperf_log_accuracy.json ({"seq_id", "qsl_idx", "data"} each, `data` in hex), for an accuracy
    script; UserError naming the file when it cannot be read or is not LoadGen's JSON array."""
    from ..errors import EXIT_FAILURE, UserError

    try:
        entries = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        raise UserError(f"cannot read the accuracy log {path}: {error}", exit_code=EXIT_FAILURE) from None
    if not isinstance(entries, list):
        raise UserError(f"{path}: expected a JSON array of LoadGen accuracy entries", exit_code=EXIT_FAILURE)
    return entries


def cut_logs(log_dir: Path, performance: bool) -> list[str]:
    """What is missing at the end of LoadGen's logs in `log_dir` ([] when they are whole). LoadGen writes them with
    C++ streams, which drop without a word what a full disk does not take: a test then ends as usual, with its
    summary empty or cut and its detail log short. Each of the three logs ends in a known way when the test ends;
    a PerformanceOnly detail log also holds LoadGen's verdict (result_validity)."""
    problems = []
    for name in (SUMMARY_LOG, DETAIL_LOG, ACCURACY_LOG):
        if not (log_dir / name).is_file():
            problems.append(f"{name} is missing")
    if problems:
        return problems
    summary = (log_dir / SUMMARY_LOG).read_bytes()
    if not SUMMARY_END.search(summary.decode(errors="replace")):
        problems.append(f"{SUMMARY_LOG} is {'empty' if not summary else 'cut before its last line'}")
    detail = (log_dir / DETAIL_LOG).read_bytes()
    last = detail.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode(errors="replace")
    if not detail.endswith(b"\n") or not _parses(last):
        problems.append(f"{DETAIL_LOG} is {'empty' if not detail else 'cut in the middle of a line'}")
    elif performance and b'"key": "result_validity"' not in detail:
        problems.append(f"{DETAIL_LOG} ends before LoadGen's verdict (result_validity)")
    with open(log_dir / ACCURACY_LOG, "rb") as accuracy:
        size = accuracy.seek(0, 2)
        accuracy.seek(max(0, size - len(ACCURACY_END)))
        if accuracy.read() != ACCURACY_END:
            problems.append(f"{ACCURACY_LOG} is {'empty' if not size else 'cut before its closing bracket'}")
    return problems


def _parses(line: str) -> bool:
    if not line.startswith(PREFIX):
        return False
    try:
        json.loads(line[len(PREFIX):])
    except json.JSONDecodeError:
        return False
    return True
