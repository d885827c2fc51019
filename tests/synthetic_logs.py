"""Hand-made LoadGen logs for tests of parsing, explanations and verification."""
from __future__ import annotations

import json
from pathlib import Path


def write_detail(directory: Path, values: dict, errors: dict | None = None) -> Path:
    """A mlperf_log_detail.txt holding `values` (and `errors` flagged as LoadGen errors)."""
    directory.mkdir(parents=True, exist_ok=True)
    lines = []
    for key, value in values.items():
        lines.append(":::MLLOG " + json.dumps({"key": key, "value": value,
                                               "metadata": {"is_error": False, "is_warning": False}}))
    for key, value in (errors or {}).items():
        lines.append(":::MLLOG " + json.dumps({"key": key, "value": value,
                                               "metadata": {"is_error": True, "is_warning": False}}))
    (directory / "mlperf_log_detail.txt").write_text("\n".join(lines) + "\n")
    return directory


def offline_detail(directory: Path, samples_per_second: float, valid: bool = True) -> Path:
    return write_detail(directory, {"effective_scenario": "Offline", "result_validity": "VALID" if valid else "INVALID",
                                    "result_samples_per_second": samples_per_second,
                                    "effective_samples_per_query": 1000, "effective_min_duration_ms": 600000,
                                    "result_min_duration_met": True})


def accuracy_entries(responses: dict[int, int] | list[tuple[int, int]]) -> list[dict]:
    """LoadGen accuracy-log entries with int32 responses: {qsl_idx: class} or [(qsl_idx, class), ...]."""
    pairs = responses.items() if isinstance(responses, dict) else responses
    return [{"seq_id": seq, "qsl_idx": index, "data": int(value).to_bytes(4, "little", signed=True).hex().upper()}
            for seq, (index, value) in enumerate(pairs)]


# -- LLM runs (token latencies) ------------------------------------------------------------------------
def llm_server_detail(directory: Path, ttft_ms: float, tpot_ms: float, bounds_ms: tuple[float, float] = (2000, 100),
                      valid: bool | None = None, **more) -> Path:
    """A Server run with token latencies, as LoadGen 6.0.17 logs one (results.cc): the p99 TTFT / TPOT, the bounds
    it judged them by (requested_server_ttft/tpot_latency, ns) and tokens per second. VALID unless a p99 is over
    its bound (LoadGen's `>`), or as `valid` says."""
    over = ttft_ms > bounds_ms[0] or tpot_ms > bounds_ms[1]
    valid = not over if valid is None else valid
    values = {"effective_scenario": "Server", "result_validity": "VALID" if valid else "INVALID",
              "requested_use_token_latencies": True, "requested_server_ttft_latency": int(bounds_ms[0] * 1e6),
              "requested_server_tpot_latency": int(bounds_ms[1] * 1e6), "effective_target_latency_ns": 0,
              "effective_target_qps": 12.0, "effective_min_duration_ms": 600000, "result_min_duration_met": True,
              "result_perf_constraints_met": not over, "result_min_queries_met": True, "early_stopping_met": True,
              "result_first_token_99.00_percentile_latency_ns": int(ttft_ms * 1e6),
              "result_time_per_output_token_99.00_percentile_ns": int(tpot_ms * 1e6),
              "result_completed_samples_per_sec": 11.9, "result_completed_tokens_per_second": 1523.2,
              "result_query_count": 7200, "result_qps_with_loadgen_overhead": 12.0}
    values.update(more)
    return write_detail(directory, values)


def token_entry(seq: int, qsl_idx: int, tokens: list[int], first: list[int] | None = None,
                count: int | None = None, dtype: str = "int32") -> dict:
    """One accuracy-log entry of an LLM run with token latencies (LoadGen's logging.cc LogAccuracy): `data` the
    output tokens, `token_count` the count the SUT reported (default: the true one) and, outside Offline,
    `token_data` the first token it reported on its own (None: Offline, no such key)."""
    import numpy as np

    entry = {"seq_id": seq, "qsl_idx": qsl_idx, "data": np.asarray(tokens, dtype=dtype).tobytes().hex().upper()}
    if first is not None:
        entry["token_data"] = np.asarray(first, dtype=dtype).tobytes().hex().upper()
    entry["token_count"] = len(tokens) if count is None else count
    return entry
