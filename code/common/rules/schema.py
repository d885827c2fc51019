"""The shape of one rules round: plain frozen dataclasses filled in by one module per round."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from ..constants import AccuracyTarget, Scenario, SystemType

NS_PER_MS = 1_000_000


@dataclass(frozen=True)
class Seeds:
    qsl_rng_seed: int
    sample_index_rng_seed: int
    schedule_rng_seed: int


@dataclass(frozen=True)
class ComplianceTest:
    """One audit test: the audit.config lines it needs and how its verdict is reached.

    TEST01 and TEST04 compare the compliance run's performance with the submission run (`compares_performance`);
    TEST01 also compares its sampled responses with the accuracy run (`samples_accuracy`); TEST06 checks the
    sampled responses' output tokens on their own (`checks_output_tokens`), with no performance verdict; TEST07
    scores a run over a whole compliance data set against an accuracy threshold (`scores_accuracy`) and TEST09
    bounds the mean output length of a run over the whole performance data set (`checks_output_length`), neither
    with a performance verdict.

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
    # TEST01: responses sampled into the accuracy log are compared with the submission's accuracy run.
    samples_accuracy: bool = False
    # Whether the verdict compares the run's performance with the submission run (verify_performance.py).
    # TEST06 does not: its README's criteria are about the output tokens only, and neither checker reads a
    # performance run of it.
    compares_performance: bool = True
    # TEST06 (run_verification.py): the sampled responses' tokens are checked on their own (first token, trailing
    # EOS, token count), with no other run to compare with.
    checks_output_tokens: bool = False
    # accuracy_log_sampling_target the test's own audit.config fixes (TEST06: 100); TEST01's depends on the
    # benchmark (BenchmarkRules.test01_sampling_target).
    accuracy_log_sampling_target: int | None = None
    # TEST07 (run_verification.py): the run logs every sample of the benchmark's compliance data set (the data set
    # the benchmark names for the test, `Benchmark.compliance_dataset`), its accuracy log is scored by the
    # benchmark's accuracy scorer, and the test passes when the score `score_pattern` finds (re.search, first
    # match, group 1) is at least `accuracy_threshold` (the audit.config's test07_accuracy_threshold).
    scores_accuracy: bool = False
    accuracy_threshold: float | None = None
    score_pattern: str = r"'exact_match':\s*([\d.]+)"
    # TEST09 (run_verification.py): the run logs every sample of the performance data set, and the test passes when
    # the mean output token count of the logged entries lies within `output_token_bounds` (min <= mean <= max; the
    # audit.config's test09_min_output_tokens / test09_max_output_tokens).
    checks_output_length: bool = False
    output_token_bounds: tuple[float, float] | None = None

    def sampling_target(self, bench: "BenchmarkRules") -> int | None:
        """How many responses the compliance run logs into its accuracy log (LoadGen's sampling target): TEST01's
        per benchmark, TEST06's fixed one; None for a test that logs none."""
        if self.samples_accuracy:
            return bench.test01_sampling_target
        return self.accuracy_log_sampling_target


@dataclass(frozen=True)
class AccuracyMetric:
    """One figure of accuracy.txt that a closed-division result is held to, as the checkers hold it.

    The checkers' accuracy-target table gives each metric a lower bound (`reference * lower_fraction`; None: the
    accuracy target's own fraction, 0.99 for a 99 % target) and their accuracy-upper-limit table an upper one for
    some (`reference * upper_fraction`), such as the generated length of an LLM, which must stay within 10 % of the
    reference's so that a system cannot gain speed by writing less.
    """

    name: str                          # the checkers' name of the metric (their ACC_PATTERN key): ROUGE1, GEN_LEN
    key: str                           # how the accuracy script names it in accuracy.txt: rouge1, gen_len
    pattern: str                       # the checkers' regex (re.match on each line; group 1 is the value)
    reference: float                   # the reference implementation's value
    lower_fraction: float | None = None
    upper_fraction: float | None = None


@dataclass(frozen=True)
class AccuracyBound:
    """What one metric of accuracy.txt must be for one accuracy target: at least `minimum`, at most `maximum`."""

    name: str
    key: str
    pattern: str
    reference: float
    minimum: float
    maximum: float | None = None

    def within(self, value: float) -> bool:
        """The checkers' test: at least the target, and not above the upper limit."""
        return value >= self.minimum and (self.maximum is None or value <= self.maximum)


@dataclass(frozen=True)
class TokenLatencyLimits:
    """The 99th-percentile bounds of an LLM's server-like scenario: time to first token and time per output token.

    The checkers pass a run when both measured percentiles are strictly below these (LLM_LATENCY_LIMITS); LoadGen
    takes the same figures from mlperf.conf (`<model>.Server.ttft_latency` / `tpot_latency`, in ms)."""

    ttft_ms: float
    tpot_ms: float

    @property
    def ttft_ns(self) -> int:
        return int(self.ttft_ms * NS_PER_MS)

    @property
    def tpot_ns(self) -> int:
        return int(self.tpot_ms * NS_PER_MS)


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
    # LoadGen's model name for the Interactive scenario (mlperf.conf's `<model>-interactive`); None: no Interactive.
    interactive_loadgen_model: str | None = None
    # Every metric accuracy.txt is held to, when there are several (an LLM: ROUGE scores and the generated
    # length). Empty: the one metric of accuracy_metric / accuracy_reference / accuracy_pattern.
    accuracy_metrics: tuple[AccuracyMetric, ...] = ()
    # LoadGen measures time to first token and time per output token (mlperf.conf `use_token_latencies = 1`); the
    # checkers refuse a run of such a benchmark made without them.
    uses_token_latencies: bool = False
    # The unit of the SingleStream / MultiStream latency result as the checkers report it: "ms", or "s" where the
    # checker divides it once more (its SPECIAL_UNIT_DICT "Latency (s)": wan-2.2-t2v-a14b's minutes-long videos).
    latency_unit: str = "ms"
    # Per server-like scenario (Server, Interactive), the TTFT / TPOT bounds of the checkers' LLM_LATENCY_LIMITS.
    token_latency_limits: Mapping[Scenario, TokenLatencyLimits] = field(default_factory=dict)
    # Per system type, optional scenarios of which a closed-division result needs at least one (the checkers'
    # "one of Interactive or Server is required" for LLMs with both optional).
    required_one_of: Mapping[SystemType, tuple[Scenario, ...]] = field(default_factory=dict)
    # The compliance tests the official checkers ask of a result, where they ask fewer than `compliance_tests`
    # (which the toolkit runs and stages, from the round's compliance README); None: the same.
    checker_compliance_tests: tuple[str, ...] | None = None
    # Samples an accuracy run scores, where the accuracy data set differs from the performance one (the checkers'
    # accuracy-sample-count, mlperf.conf's accuracy_sample_count_override); None: dataset_size.
    accuracy_sample_count: int | None = None
    # Per scenario, the reference value of the headline metric where a scenario has its own (qwen3-vl's Interactive
    # runs the 8k subset, whose reference F1 is lower); scenarios not named take accuracy_reference.
    scenario_accuracy_references: Mapping[Scenario, float] = field(default_factory=dict)
    # The end-to-end latency bound of Interactive where mlperf.conf has no `<model>-interactive` entry (user.conf
    # sets target_latency); None: mlperf.conf's, or no Interactive scenario.
    interactive_latency_ms: float | None = None
    # Per scenario, the samples an accuracy run covers where a scenario has a data set of its own (qwen3-vl's
    # Interactive: 8000, main.py's accuracy-sample-count table); scenarios not named take accuracy_samples.
    scenario_accuracy_sample_counts: Mapping[Scenario, int] = field(default_factory=dict)
    # Folders an accuracy/ folder holds beside its logs, each with the names (no extension) it must hold and a
    # captions.txt (the checkers' REQUIRED_ACC_BENCHMARK: a generated-media benchmark's audit files).
    accuracy_artefacts: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def accuracy_samples(self) -> int:
        """How many samples an accuracy run of the whole accuracy data set covers."""
        return self.accuracy_sample_count if self.accuracy_sample_count is not None else self.dataset_size

    def accuracy_samples_for(self, scenario: Scenario | None) -> int:
        """How many samples an accuracy run of `scenario` covers (its own data set's, where it has one)."""
        return self.scenario_accuracy_sample_counts.get(scenario, self.accuracy_samples) if scenario is not None \
            else self.accuracy_samples

    def allows(self, system_type: SystemType) -> bool:
        """Whether the round has this benchmark in the suite of the system type."""
        return system_type in self.required_scenarios

    def allowed_scenarios(self, system_type: SystemType) -> tuple[Scenario, ...]:
        return (*self.required_scenarios.get(system_type, ()), *self.optional_scenarios.get(system_type, ()))

    def loadgen_model_for(self, scenario: Scenario) -> str:
        """The model name LoadGen reads mlperf.conf / user.conf / audit.config lines under for this scenario: the
        Interactive one for Interactive (LoadGen runs it as Server with that model's tighter bounds), else
        loadgen_model. ValueError for Interactive on a benchmark that has no Interactive scenario."""
        if scenario is Scenario.Interactive:
            if self.interactive_loadgen_model is None:
                raise ValueError(f"{self.loadgen_model} has no Interactive scenario in this round")
            return self.interactive_loadgen_model
        return self.loadgen_model

    @property
    def accuracy_targets(self) -> tuple[AccuracyTarget, ...]:
        return tuple(self.submission_names)

    def accuracy_threshold(self, target: AccuracyTarget, scenario: Scenario | None = None) -> float:
        """The value of the first (headline) metric a closed-division accuracy run must reach."""
        return self.accuracy_bounds(target, scenario)[0].minimum

    def accuracy_bounds(self, target: AccuracyTarget, scenario: Scenario | None = None) -> tuple[AccuracyBound, ...]:
        """Every figure of accuracy.txt a closed-division result for `target` (of `scenario`, where the round
        sets a scenario its own reference) is held to, with its bounds, in the checkers' order (the headline
        metric first)."""
        if target not in self.submission_names:
            raise KeyError(target)
        if not self.accuracy_metrics:
            reference = self.scenario_accuracy_references.get(scenario, self.accuracy_reference) \
                if scenario is not None else self.accuracy_reference
            return (AccuracyBound(self.accuracy_metric, self.accuracy_metric, self.accuracy_pattern,
                                  reference, reference * target.fraction),)
        return tuple(AccuracyBound(m.name, m.key, m.pattern, m.reference,
                                   m.reference * (target.fraction if m.lower_fraction is None else m.lower_fraction),
                                   None if m.upper_fraction is None else m.reference * m.upper_fraction)
                     for m in self.accuracy_metrics)

    def submission_name(self, target: AccuracyTarget) -> str:
        return self.submission_names[target]

    def token_limits(self, scenario: Scenario) -> TokenLatencyLimits | None:
        """The TTFT / TPOT bounds of a scenario folder (Interactive's own, not Server's); None where none apply."""
        return self.token_latency_limits.get(scenario)

    @property
    def checked_compliance_tests(self) -> tuple[str, ...]:
        """The compliance tests the official checkers require of a closed-division result."""
        return self.compliance_tests if self.checker_compliance_tests is None else self.checker_compliance_tests


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
