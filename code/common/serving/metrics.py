"""The servers' `/metrics` (Prometheus text format), read during a run into its record.

Serving engines name their metrics each in their own way (`vllm:request_success_total`,
`sglang:num_requests_running`, ...), so what is kept is chosen by the part after the engine's prefix: requests
answered, prompt and generated tokens, time requests spent queued in the server, prefix-cache queries and hits
(MLPerf's rules ask for prefix caching off: hits should stay 0), and the most requests running and waiting at any
poll. Counters are kept as what the run added (last poll minus the one before the test), gauges as their largest
value seen.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# what the record calls it -> the metric name endings (after "<engine>:" or "<engine>_") that give it
COUNTERS = {
    "requests_succeeded": ("request_success_total", "request_success"),
    "prompt_tokens": ("prompt_tokens_total", "prompt_tokens"),
    "generation_tokens": ("generation_tokens_total", "generation_tokens"),
    "prefix_cache_queries": ("prefix_cache_queries_total", "prefix_cache_queries"),
    "prefix_cache_hits": ("prefix_cache_hits_total", "prefix_cache_hits"),
}
HISTOGRAMS = {"queue_time_s": ("request_queue_time_seconds", "queue_time_seconds")}
GAUGES = {"requests_running_max": ("num_requests_running",), "requests_waiting_max": ("num_requests_waiting",)}


def _short(name: str) -> str:
    """The metric name without its engine prefix (`vllm:x` -> `x`)."""
    return name.split(":", 1)[1] if ":" in name else name


def parse(text: str) -> dict[str, float]:
    """Every sample of the text summed over its labels: name -> value (histograms as name_sum and name_count).
    ValueError when it is not Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    values: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[sample.name] = values.get(sample.name, 0.0) + float(sample.value)
    return values


def _find(values: dict[str, float], endings: tuple[str, ...], suffix: str = "") -> float | None:
    found = [value for name, value in values.items()
             if any(_short(name) == ending + suffix or _short(name).endswith("_" + ending + suffix)
                    for ending in endings)]
    return sum(found) if found else None


@dataclass
class MetricsWatch:
    """Polls of one endpoint's metrics: the first (before the test), the latest, and the gauges' peaks."""

    first: dict[str, float] | None = None
    last: dict[str, float] | None = None
    peaks: dict[str, float] = field(default_factory=dict)
    polls: int = 0
    problem: str = ""           # why there are none (the server has no /metrics), for the record

    def add(self, values: dict[str, float]) -> None:
        if self.first is None:
            self.first = values
        self.last = values
        self.polls += 1
        for name, endings in GAUGES.items():
            value = _find(values, endings)
            if value is not None:
                self.peaks[name] = max(self.peaks.get(name, value), value)

    def summary(self) -> dict[str, Any]:
        """What the run added and saw, for the record."""
        if self.first is None or self.last is None:
            return {"problem": self.problem or "no poll answered"}
        out: dict[str, Any] = {"polls": self.polls}
        for name, endings in COUNTERS.items():
            before, after = _find(self.first, endings), _find(self.last, endings)
            if before is not None and after is not None:
                out[name] = round(after - before, 3)
        for name, endings in HISTOGRAMS.items():
            total = [_find(values, endings, "_sum") for values in (self.first, self.last)]
            count = [_find(values, endings, "_count") for values in (self.first, self.last)]
            if None not in total and None not in count and count[1] > count[0]:
                out[name + "_mean"] = round((total[1] - total[0]) / (count[1] - count[0]), 6)
        out.update({name: value for name, value in self.peaks.items()})
        return out
