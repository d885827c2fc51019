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
    """One audit test: the audit.config lines it needs and how its verdict is reached.

    The performance verdict follows the round's verify_performance.py of the test. `score_kind` says what it
    compares: "raw" (TEST01: the detail log's figure as it is, latencies in ns for SingleStream/MultiStream,
    pass when ref*(1-t) <= test <= ref*(1+t)) or "rate" (TEST04: the summary's figure, SingleStream/MultiStream
    as 1e9 / latency in ns, pass when test < ref*(1+t)). The wider `fast_tolerance` applies when the reference
    score, in that kind, is at most the scenario's `fast_limit` (the scripts' 200000 / 1600000, whatever the
    unit: for TEST04 these compare a rate, so in practice every SingleStream/MultiStream run gets 20 %).
    """

    name: str
    description: str
    # Lines of audit.config; `{sampling_target}` is filled from the benchmark's rules.
    audit_config: tuple[str, ...]
    # Relative tolerance of the performance metric against the submission run.
    performance_tolerance: float
    # Wider tolerance for very fast SingleStream / MultiStream runs.
    fast_tolerance: float
    score_kind: str = "raw"                            # "raw" (two-sided) or "rate" (one-sided, at most faster)
    fast_limit: Mapping[Scenario, float] = field(default_factory=dict)
    samples_accuracy: bool = False                     # the run samples responses into the accuracy log


@dataclass(frozen=True)
class BenchmarkRules:
    """What one round says about one benchmark. Keyed in the round by the toolkit's benchmark name."""

    submission_names: Mapping[AccuracyTarget, str]  # folder name in results/, per accuracy target
    loadgen_model: str                               # model name in user.conf / mlperf.conf
    # Per system type the scenarios a result needs; a system type missing here may not submit the benchmark.
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
    # Per system type scenarios a result may add (none for the CV and NLP benchmarks of v6.1).
    optional_scenarios: Mapping[SystemType, tuple[Scenario, ...]] = field(default_factory=dict)
    # Equal-issue mode: the old checker asks effective_sample_concatenate_permutation = true (mlperf.conf sets it).
    equal_issue: bool = False
    # A defect of one official checker that rejects every result of the benchmark, which the toolkit warns about
    # instead of refusing the benchmark (the other checker, the one of record, accepts it).
    official_checker_defect: str = ""

    def allows(self, system_type: SystemType) -> bool:
        """Whether the round has this benchmark in the suite of the system type."""
        return system_type in self.required_scenarios

    def allowed_scenarios(self, system_type: SystemType) -> tuple[Scenario, ...]:
        return (*self.required_scenarios.get(system_type, ()), *self.optional_scenarios.get(system_type, ()))

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
    accuracy_log_keep_chars: int = 4096             # truncation keeps this many characters at each end (VIEWABLE_SIZE)
    accuracy_log_max_bytes: int = 10240             # truncated accuracy json may be at most this big
    system_json_fields: tuple[str, ...] = field(default_factory=tuple)
    # Fields of systems/<system>.json the checker requires a truthy value for ("0" passes, 0 and "" do not).
    system_json_meaningful_fields: tuple[str, ...] = field(default_factory=tuple)
    # (scenario of the logs, scenario folder) pairs an edge result may be inferred with.
    inferable_scenarios: tuple[tuple[Scenario, Scenario], ...] = ()
    # Part III of TEST01: allowed |1 - baseline / compliance| in percent, per accuracy target.
    part3_delta_percent: Mapping[AccuracyTarget, float] = field(default_factory=dict)
    # LoadGen's min_query_count per scenario where no user.conf line sets one: the round's mlperf.conf
    # (`*.<Scenario>.min_query_count`), else TestSettings' default. Offline's per-benchmark value (mlperf.conf's
    # `<model>.Offline.min_query_count`) is BenchmarkRules.offline_min_samples where the round sets one.
    min_query_count: Mapping[Scenario, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "benchmarks", MappingProxyType(dict(self.benchmarks)))
        object.__setattr__(self, "compliance_tests", MappingProxyType(dict(self.compliance_tests)))
        object.__setattr__(self, "part3_delta_percent", MappingProxyType(dict(self.part3_delta_percent)))
        object.__setattr__(self, "min_query_count", MappingProxyType(dict(self.min_query_count)))

    def benchmark(self, name: str) -> BenchmarkRules:
        try:
            return self.benchmarks[name]
        except KeyError:
            raise KeyError(f"rules round {self.version} has no benchmark '{name}' "
                           f"(it knows {', '.join(self.benchmarks)})") from None
