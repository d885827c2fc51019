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
