"""The shape of one rules round: plain frozen dataclasses filled in by one module per round."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from ..constants import AccuracyTarget, Scenario, SystemType


@dataclass(frozen=True)
class Seeds:
    qsl_rng_seed: int
    sample_index_rng_seed: int
    schedule_rng_seed: int


@dataclass(frozen=True)
class ComplianceTest:
    """One audit test: the audit.config lines it needs and how its verdict is reached."""

    name: str
    description: str
    # Lines of audit.config; `{sampling_target}` is filled from the benchmark's rules.
    audit_config: tuple[str, ...]
    # Relative tolerance of the performance metric against the submission run.
    performance_tolerance: float
    # Wider tolerance for very fast SingleStream / MultiStream runs.
    fast_tolerance: float
    fast_singlestream_ms: float = 0.2
    fast_multistream_ms: float = 1.6


@dataclass(frozen=True)
class BenchmarkRules:
    """What one round says about one benchmark. Keyed in the round by the toolkit's benchmark name."""

    submission_names: Mapping[AccuracyTarget, str]  # folder name in results/, per accuracy target
    loadgen_model: str                               # model name in user.conf / mlperf.conf
    required_scenarios: Mapping[SystemType, tuple[Scenario, ...]]
    accuracy_metric: str                             # what accuracy.txt reports
    accuracy_reference: float                        # FP32 reference value of that metric
    accuracy_pattern: str                            # regex the checker applies to accuracy.txt
    performance_sample_count: int
    dataset_size: int
    offline_min_samples: int | None                  # closed-division Offline minimum samples per query
    server_latency_ms: float | None                  # Server latency bound (None: no Server scenario)
    compliance_tests: tuple[str, ...]
    test01_sampling_target: int | None = None        # accuracy_log_sampling_target for TEST01

    @property
    def accuracy_targets(self) -> tuple[AccuracyTarget, ...]:
        return tuple(self.submission_names)

    def accuracy_threshold(self, target: AccuracyTarget) -> float:
        """The metric value a closed-division accuracy run must reach."""
        if target not in self.submission_names:
            raise KeyError(target)
        return self.accuracy_reference * target.fraction

    def submission_name(self, target: AccuracyTarget) -> str:
        return self.submission_names[target]


@dataclass(frozen=True)
class RulesRound:
    version: str
    loadgen_version: str
    seeds: Seeds
    min_duration_ms: int
    benchmarks: Mapping[str, BenchmarkRules]
    compliance_tests: Mapping[str, ComplianceTest]
    all_models: tuple[str, ...]                     # every model name the round accepts
    accuracy_log_keep_chars: int = 4000             # truncation keeps this many characters at each end
    accuracy_log_max_bytes: int = 10240             # truncated accuracy json may be at most this big
    system_json_fields: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        object.__setattr__(self, "benchmarks", MappingProxyType(dict(self.benchmarks)))
        object.__setattr__(self, "compliance_tests", MappingProxyType(dict(self.compliance_tests)))

    def benchmark(self, name: str) -> BenchmarkRules:
        try:
            return self.benchmarks[name]
        except KeyError:
            raise KeyError(f"rules round {self.version} has no benchmark '{name}' "
                           f"(it knows {', '.join(self.benchmarks)})") from None
