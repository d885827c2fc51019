"""What a benchmark served by the endpoints client gives the endpoints harness for one test: its data set blocks as
the round's reference example writes them, the model's generation settings, and the gates the round holds the
client's report to. The harness adds the served model, the endpoints, the seeds and the durations (config_yaml.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping


@dataclass(frozen=True)
class ClientWorkload:
    datasets: tuple[Mapping[str, Any], ...]           # the YAML's data set blocks
    model_params: Mapping[str, Any] = field(default_factory=dict)   # temperature, seed, max_new_tokens, ...
    tokenizer: str | None = None                      # the client's tokenizer_name (None: the client counts none)
    load_pattern: Mapping[str, Any] = field(default_factory=lambda: {"type": "agentic_inference",
                                                                     "target_concurrency": 1})
    targets: Mapping[str, float] = field(default_factory=dict)      # accuracy figure -> threshold (accuracy tests)
    samples_required: int | None = None               # accuracy samples the round scores (None: not gated)
    timeout_s: int | None = None                      # the client's whole-run timeout
    test_type: str = "online"                         # the YAML's type: online, offline
    api_type: str = "openai"                          # the client's adapter: openai, videogen, ...
    n_samples_to_issue: int | None = None             # the performance phase's queries (None: the client's own count)
    num_workers: int = 1                              # the client's worker processes
    max_connections: int = 1                          # its connections to the endpoints, at most
    settings: Mapping[str, Any] = field(default_factory=dict)       # further settings blocks (warmup, drain)
    notes: tuple[str, ...] = ()                       # what the YAML's header says of it (substitutes, subsets)
