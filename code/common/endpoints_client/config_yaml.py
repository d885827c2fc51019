"""The client's YAML (`inference-endpoint benchmark from-config --config <file>`), rendered from the toolkit's
resolved settings: the benchmark's data set blocks as the round's reference example has them, the served model and
the endpoints (given with --endpoints, or the local server's), and the run settings the official checker reads.

Where the v6.1 checker and the reference example disagree, the toolkit follows the checker (it judges the
submission): the example sets both seeds to 42 and min_duration_ms to 0, the checker wants the round's
sample_index_rng_seed and schedule_rng_seed and min_duration_ms >= 600000 (its min_duration_check and seeds_check
read settings.runtime.* of the tree's config.yaml). A test run (--test_run) keeps the seeds and shortens the
duration; its tree says so and is never submittable. worker_initialization_timeout and service_ready_timeout_s are at
least 300 s: the client's defaults (60 s, 30 s) are too short for its workers and its metrics and event-log services
to import on a small or busy machine (on 2 shared cores the services' ready check failed at 30 s).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import yaml

MIN_STARTUP_TIMEOUT_S = 300.0
RULE_NOTE = ("seeds and min_duration_ms follow the v6.1 submission checker (seeds_check, min_duration_check), not "
             "the reference example's 42 / 0")


@dataclass(frozen=True)
class ClientConfig:
    name: str
    served_model: str
    endpoints: tuple[str, ...]
    datasets: tuple[Mapping[str, Any], ...]      # the data set blocks, as the reference example writes them
    report_dir: str
    sample_index_rng_seed: int
    schedule_rng_seed: int
    min_duration_ms: int
    test_type: str = "online"
    tokenizer: str | None = None
    model_params: Mapping[str, Any] = field(default_factory=dict)   # temperature, seed, max_new_tokens, ...
    load_pattern: Mapping[str, Any] = field(default_factory=lambda: {"type": "agentic_inference",
                                                                     "target_concurrency": 1})
    max_duration_ms: int = 0
    n_samples_to_issue: int | None = None
    worker_initialization_timeout_s: float = MIN_STARTUP_TIMEOUT_S
    service_ready_timeout_s: float = MIN_STARTUP_TIMEOUT_S
    num_workers: int = 1
    max_connections: int = 1
    warmup_connections: int = 0
    timeout_s: int | None = None
    api_type: str = "openai"
    extra_settings: Mapping[str, Any] = field(default_factory=dict)   # settings blocks beyond these (warmup, drain)
    audit: Mapping[str, Any] | None = None       # the client's compliance audit, run after the performance phase

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("the client needs at least one endpoint")
        if self.max_duration_ms and self.max_duration_ms < self.min_duration_ms:
            raise ValueError(f"max_duration_ms {self.max_duration_ms} is below min_duration_ms "
                             f"{self.min_duration_ms}")


def as_mapping(config: ClientConfig) -> dict[str, Any]:
    """The YAML's content, in the order of the reference examples."""
    model = {"name": config.served_model, **({"tokenizer_name": config.tokenizer} if config.tokenizer else {}),
             **dict(config.model_params)}
    runtime: dict[str, Any] = {"min_duration_ms": int(config.min_duration_ms),
                               "max_duration_ms": int(config.max_duration_ms),
                               "scheduler_random_seed": int(config.schedule_rng_seed),
                               "dataloader_random_seed": int(config.sample_index_rng_seed)}
    if config.n_samples_to_issue is not None:
        runtime["n_samples_to_issue"] = int(config.n_samples_to_issue)
    document: dict[str, Any] = {"name": config.name, "version": "1.0", "type": config.test_type}
    if config.timeout_s is not None:
        document["timeout"] = int(config.timeout_s)
    document |= {
        "model_params": model,
        "datasets": [dict(block) for block in config.datasets],
        **({"audit": dict(config.audit)} if config.audit is not None else {}),
        "settings": {
            "service_ready_timeout_s": max(float(config.service_ready_timeout_s), MIN_STARTUP_TIMEOUT_S),
            "runtime": runtime,
            "load_pattern": dict(config.load_pattern),
            "client": {"num_workers": config.num_workers, "max_connections": config.max_connections,
                       "warmup_connections": config.warmup_connections,
                       "worker_initialization_timeout": max(float(config.worker_initialization_timeout_s),
                                                            MIN_STARTUP_TIMEOUT_S)},
            **{name: dict(block) for name, block in config.extra_settings.items()},
        },
        "endpoint_config": {"endpoints": list(config.endpoints), "api_type": config.api_type, "api_key": None},
        "report_dir": config.report_dir,
    }
    return document


def render(config: ClientConfig, notes: tuple[str, ...] = (RULE_NOTE,)) -> str:
    """The YAML text, headed by comments saying what rules it follows."""
    header = "".join(f"# {note}\n" for note in ("Written by the toolkit's endpoints harness.", *notes))
    return header + yaml.safe_dump(as_mapping(config), sort_keys=False, default_flow_style=False, width=120)
