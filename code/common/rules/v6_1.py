"""MLPerf Inference rules round v6.1 (LoadGen 6.0.17), as data.

Values follow the round's LoadGen mlperf.conf, compliance scripts (compliance/TEST01, TEST04, TEST06) and submission
checkers (tools/submission/submission_checker/ and submission_checker_old.py, `--version v6.1`). Where the
round sets nothing for a field of ours (no Server scenario, no Offline minimum), the value is None. A system
type missing from `required_scenarios` is one whose suite does not hold the benchmark (the checkers have no
scenario list for it and reject, or crash on, such a result).
"""
from __future__ import annotations

from ..constants import AccuracyTarget as T
from ..constants import Scenario as S
from ..constants import SystemType
from .schema import AccuracyMetric, BenchmarkRules, ComplianceTest, RulesRound, Seeds, TokenLatencyLimits

EDGE, DATACENTER, BOTH = SystemType.edge, SystemType.datacenter, SystemType.datacenter_edge

SEEDS = Seeds(
    qsl_rng_seed=2085463073848966840,
    sample_index_rng_seed=2747215439041700203,
    schedule_rng_seed=16159082839903944936,
)

COMPLIANCE_TESTS = {
    "TEST01": ComplianceTest(
        name="TEST01",
        description="samples a random subset of responses into the accuracy log during a performance run, "
                    "to show that the results are not cached or altered in performance mode",
        audit_config=(
            "*.*.mode = 2",
            "*.*.accuracy_log_rng_seed = 720381539243781796",
            "*.*.accuracy_log_sampling_target = {sampling_target}",
        ),
        performance_tolerance=0.10,
        fast_tolerance=0.20,
        # verify_performance.py: detail log, raw figures (ns for SS/MS), two-sided, 20 % at or below 0.2 / 1.6 ms.
        score_kind="raw",
        fast_limit={S.SingleStream: 200_000, S.MultiStream: 1_600_000},
        samples_accuracy=True,
    ),
    "TEST04": ComplianceTest(
        name="TEST04",
        description="issues the same sample over and over, to show that the system does not cache results "
                    "(it must not run 10 % (Offline, Server) or 20 % (SingleStream, MultiStream) faster than the "
                    "submission run)",
        audit_config=(
            "*.*.mode = 2",
            "*.*.performance_issue_unique = 0",
            "*.*.performance_issue_same = 1",
            "*.*.performance_issue_same_index = 3",
            # compliance/TEST04/audit.config's lines for one model: a video takes minutes, so 20 queries suffice.
            "wan-2.2-t2v-a14b.Offline.min_query_count = 20",
            "wan-2.2-t2v-a14b.SingleStream.min_query_count = 20",
        ),
        performance_tolerance=0.10,
        fast_tolerance=0.20,
        # verify_performance.py: summary log, SS/MS scored as 1e9 / latency (ns), one-sided `test < ref*(1+t)`.
        # Its README says 10 %; its code compares the *rate* with 200000 / 1600000, so SS/MS always get 20 %.
        score_kind="rate",
        fast_limit={S.SingleStream: 200_000, S.MultiStream: 1_600_000},
    ),
    "TEST06": ComplianceTest(
        name="TEST06",
        description="logs 100 sampled responses of a short performance run and checks their output tokens, to "
                    "show that the reported first token is the output's first token, that no output pads its end "
                    "with end-of-sequence tokens, and that the reported token counts are true",
        # compliance/TEST06/audit.config, line for line.
        audit_config=(
            "*.*.mode = 2",
            "*.*.accuracy_log_rng_seed = 720381539243781796",
            "*.*.accuracy_log_sampling_target = 100",
            "*.*.min_query_count = 100",
            "*.*.min_duration = 0",
            "*.*.sample_concatenate_permutation = 0",
        ),
        # compliance/TEST06/README.md has three criteria, all on the tokens; run_verification.py writes no
        # verify_performance.txt and neither checker reads a TEST06 performance run: no tolerance applies.
        performance_tolerance=0.0,
        fast_tolerance=0.0,
        compares_performance=False,
        checks_output_tokens=True,
        accuracy_log_sampling_target=100,
    ),
    "TEST07": ComplianceTest(
        name="TEST07",
        description="runs the whole compliance data set (gpt-oss-120b: 990 GPQA questions) in performance mode, logs "
                    "every response and scores them, to show that performance mode computes answers as accurate as "
                    "the compliance threshold",
        # compliance/TEST07/gpt-oss-120b/audit.config, line for line (the one benchmark of the round with TEST07);
        # LoadGen reads the first six and ignores the threshold, which run_verification.py reads.
        audit_config=(
            "*.*.mode = 2",
            "*.*.accuracy_log_rng_seed = 720381539243781796",
            "*.*.accuracy_log_sampling_target = 990",
            "*.*.min_query_count = 990",
            "*.*.min_duration = 0",
            "*.*.performance_issue_unique = 1",
            "*.*.sample_concatenate_permutation = 0",
            "*.*.test07_accuracy_threshold = 60.698",
        ),
        # Neither checker reads a TEST07 performance run: no tolerance applies.
        performance_tolerance=0.0,
        fast_tolerance=0.0,
        compares_performance=False,
        accuracy_log_sampling_target=990,
        scores_accuracy=True,
        accuracy_threshold=60.698,
        # run_verification.py's default --score-pattern, which its README gives for gpt-oss-120b.
        score_pattern=r"'exact_match':\s*([\d.]+)",
    ),
    "TEST09": ComplianceTest(
        name="TEST09",
        description="runs every sample of the performance data set once in performance mode and logs every "
                    "response, to show that the mean output length stays within 10 % of the reference's (1278.20 "
                    "tokens for gpt-oss-120b), so that no output is cut short for speed",
        # compliance/TEST09/gpt-oss-120b/audit.config, line for line; LoadGen ignores the two bounds.
        audit_config=(
            "*.*.mode = 2",
            "*.*.accuracy_log_rng_seed = 720381539243781796",
            "*.*.accuracy_log_sampling_target = 10000",
            "*.*.min_query_count = 6396",
            "*.*.min_duration = 0",
            "*.*.performance_issue_unique = 1",
            "*.*.sample_concatenate_permutation = 0",
            "*.*.test09_min_output_tokens = 1150.38",
            "*.*.test09_max_output_tokens = 1406.02",
        ),
        performance_tolerance=0.0,
        fast_tolerance=0.0,
        compares_performance=False,
        accuracy_log_sampling_target=10000,
        checks_output_length=True,
        output_token_bounds=(1150.38, 1406.02),
    ),
}

# The checkers' ACC_PATTERN entries of the LLM metrics (evaluation.py prints one dict line:
# {'rouge1': '38.8638', 'rouge2': '16.2134', 'rougeL': '24.5295', 'rougeLsum': '35.8712', 'gen_len': 3077653, ...}).
ROUGE1 = r".*'rouge1':\s+'?([\d.]+)'?.*"
ROUGE2 = r".*'rouge2':\s+'?([\d.]+)'?.*"
ROUGEL = r".*'rougeL':\s+'?([\d.]+)'?.*"
ROUGELSUM = r".*'rougeLsum':\s+'?([\d.]+)'?.*"
GEN_LEN = r".*'gen_len':\s([\d.]+).*"
# The reasoning benchmarks' and llama2-70b's (evaluate-accuracy.py, eval_accuracy.py, eval_mlperf_accuracy.py print
# {'exact_match': 83.2, 'tokens_per_sample': 3890.1, ...} or {'rouge1': ..., 'tokens_per_sample': 294.4, ...}).
EXACT_MATCH = r".*'exact_match':\s([\d.]+).*"
TOKENS_PER_SAMPLE = r".*'tokens_per_sample':\s([\d.]+).*"
# wan-2.2-t2v-a14b's (accuracy.txt's {'vbench_score': 70.48, ...}: the mean of six VBench dimensions x 100).
VBENCH_SCORE = r".*'vbench_score':\s([\d.]+).*"
# qwen3-vl-235b-a22b's (its evaluation writes {"f1": 0.79...} into accuracy.txt).
F1_HIERARCHICAL = r'\{.*"f1":\s*([\d\.]+).*\}'


def _llm_accuracy(rouge1: float, rouge2: float, rouge_l: float, rouge_lsum: float,
                  gen_len: float) -> tuple[AccuracyMetric, ...]:
    """accuracy-target (ROUGE at the target's fraction, GEN_LEN at 0.9) and accuracy-upper-limit (GEN_LEN at 1.1)
    of the checkers, for one variant's reference values."""
    return (AccuracyMetric("ROUGE1", "rouge1", ROUGE1, rouge1),
            AccuracyMetric("ROUGE2", "rouge2", ROUGE2, rouge2),
            AccuracyMetric("ROUGEL", "rougeL", ROUGEL, rouge_l),
            AccuracyMetric("ROUGELSUM", "rougeLsum", ROUGELSUM, rouge_lsum),
            AccuracyMetric("GEN_LEN", "gen_len", GEN_LEN, gen_len, lower_fraction=0.9, upper_fraction=1.1))


def _tokens_per_sample(reference: float, lower: float) -> AccuracyMetric:
    """The checkers' TOKENS_PER_SAMPLE bounds: the accuracy-upper-limit at 1.1, and the accuracy-target table's
    lower bound (0.9; 0 where the table holds none)."""
    return AccuracyMetric("TOKENS_PER_SAMPLE", "tokens_per_sample", TOKENS_PER_SAMPLE, reference,
                          lower_fraction=lower, upper_fraction=1.1)


# The LLM benchmarks of the datacenter suite: Offline required, Server and Interactive optional, one of them asked
# of a closed result (main.py Loader.check_scenarios, the old checker's last check).
_LLM_DATACENTER = dict(
    required_scenarios={DATACENTER: (S.Offline,), BOTH: (S.Offline,)},
    optional_scenarios={DATACENTER: (S.Interactive, S.Server), BOTH: (S.Interactive, S.Server)},
    required_one_of={DATACENTER: (S.Server, S.Interactive), BOTH: (S.Server, S.Interactive)},
)


BENCHMARKS = {
    "resnet50": BenchmarkRules(
        submission_names={T.k_99: "resnet"},
        loadgen_model="resnet50",
        # resnet is an edge benchmark in v6.1; a system entered as datacenter,edge must also run Server.
        required_scenarios={EDGE: (S.SingleStream, S.MultiStream, S.Offline),
                            BOTH: (S.SingleStream, S.MultiStream, S.Offline, S.Server)},
        accuracy_metric="top-1 accuracy (%)",
        accuracy_reference=76.46,
        accuracy_pattern=r'^(?:\{"accuracy|accuracy)[": ]*=?\s*([\d\.]+).*',
        performance_sample_count=1024,
        dataset_size=50000,
        offline_min_samples=24576,
        server_latency_ms=15.0,
        compliance_tests=("TEST01", "TEST04"),
        test01_sampling_target=4096,
    ),
    "bert": BenchmarkRules(
        submission_names={T.k_99: "bert-99", T.k_99_9: "bert-99.9"},
        loadgen_model="bert",
        required_scenarios={EDGE: (S.SingleStream, S.Offline), BOTH: (S.SingleStream, S.Offline)},
        accuracy_metric="F1 (%)",
        accuracy_reference=90.874,
        accuracy_pattern=r'^{["\']exact_match["\']\:\s*[\d\.]+,\s*["\']f1["\']\:\s*([\d\.]+)}',
        performance_sample_count=10833,
        dataset_size=10833,
        offline_min_samples=10833,
        server_latency_ms=130.0,
        compliance_tests=("TEST01",),
        test01_sampling_target=4096,
    ),
    "3d-unet": BenchmarkRules(
        submission_names={T.k_99: "3d-unet-99", T.k_99_9: "3d-unet-99.9"},
        loadgen_model="3d-unet",
        required_scenarios={EDGE: (S.SingleStream, S.Offline), DATACENTER: (S.Offline,),
                            BOTH: (S.SingleStream, S.Offline)},
        accuracy_metric="mean DICE",
        accuracy_reference=0.8617,
        accuracy_pattern=r'Accuracy\:\s*mean\s*=\s*([\d\.]+).*',
        performance_sample_count=43,
        dataset_size=43,
        offline_min_samples=43,
        server_latency_ms=None,
        compliance_tests=("TEST01",),
        test01_sampling_target=64,
        equal_issue=True,
    ),
    "yolo": BenchmarkRules(
        submission_names={T.k_95: "yolo-95", T.k_99: "yolo-99"},
        loadgen_model="yolo",
        required_scenarios={EDGE: (S.SingleStream, S.MultiStream, S.Offline),
                            BOTH: (S.SingleStream, S.MultiStream, S.Offline)},
        accuracy_metric="COCO mAP (%)",
        accuracy_reference=53.4,
        accuracy_pattern=r".*(?:mAP=|'Total':)\s*([\d.]+)",
        performance_sample_count=64,
        dataset_size=1525,
        offline_min_samples=1525,
        server_latency_ms=None,
        compliance_tests=("TEST01",),
        test01_sampling_target=64,
        official_checker_defect="the old checker (submission_checker_old.py) has no yolo entry in its Offline "
                                "samples-per-query table and fails or crashes on every yolo Offline result; "
                                "main.py, the current checker, accepts it",
    ),
    "llama3.1-8b": BenchmarkRules(
        submission_names={T.k_99: "llama3.1-8b"},
        loadgen_model="llama3_1-8b",
        interactive_loadgen_model="llama3_1-8b-interactive",
        # A datacenter benchmark: Offline required, Server and Interactive optional, and the checkers ask a closed
        # result for at least one of the two (main.py Loader.check_scenarios, the old checker's last check).
        required_scenarios={DATACENTER: (S.Offline,), BOTH: (S.Offline,)},
        optional_scenarios={DATACENTER: (S.Interactive, S.Server), BOTH: (S.Interactive, S.Server)},
        required_one_of={DATACENTER: (S.Server, S.Interactive), BOTH: (S.Server, S.Interactive)},
        accuracy_metric="ROUGE1",
        accuracy_reference=38.7792,
        accuracy_pattern=ROUGE1,
        accuracy_metrics=_llm_accuracy(38.7792, 15.9075, 24.4957, 35.793, 8167644),
        performance_sample_count=13368,
        dataset_size=13368,
        offline_min_samples=13368,
        # The checkers' latency-constraint (on effective_target_latency_ns, which mlperf.conf sets to 0 for this
        # model); the bounds a run is judged by are the TTFT / TPOT ones below.
        server_latency_ms=20_000.0,
        compliance_tests=("TEST06",),
        equal_issue=True,
        uses_token_latencies=True,
        # LLM_LATENCY_LIMITS of both checkers = mlperf.conf's llama3_1-8b(-interactive).Server.ttft/tpot_latency.
        token_latency_limits={S.Server: TokenLatencyLimits(ttft_ms=2000, tpot_ms=100),
                              S.Interactive: TokenLatencyLimits(ttft_ms=500, tpot_ms=30)},
    ),
    "llama3.1-8b-edge": BenchmarkRules(
        submission_names={T.k_99: "llama3.1-8b-edge"},
        loadgen_model="llama3_1-8b-edge",
        required_scenarios={EDGE: (S.SingleStream, S.Offline), BOTH: (S.SingleStream, S.Offline)},
        accuracy_metric="ROUGE1",
        accuracy_reference=39.06,
        accuracy_pattern=ROUGE1,
        accuracy_metrics=_llm_accuracy(39.06, 16.1147, 24.6375, 36.124, 3051113),
        performance_sample_count=5000,
        dataset_size=5000,
        offline_min_samples=5000,
        server_latency_ms=None,
        # compliance/README.md lists TEST06 for Llama3.1-8b, so the toolkit runs it for both variants; but neither
        # checker asks it of llama3.1-8b-edge (main.py's models_TEST06 and the old checker's TEST06 list name only
        # llama3.1-8b), so a result without it passes them.
        compliance_tests=("TEST06",),
        checker_compliance_tests=(),
        equal_issue=True,
        uses_token_latencies=True,
    ),
    "whisper": BenchmarkRules(
        submission_names={T.k_99: "whisper"},
        loadgen_model="whisper",
        required_scenarios={EDGE: (S.Offline,), DATACENTER: (S.Offline,), BOTH: (S.Offline,)},
        # The checkers hold accuracy= (100 - WER) to 99 % of 97.9329 (= 100 - 2.0671): 96.9536 %.
        accuracy_metric="ACCURACY",
        accuracy_reference=100.0 - 2.0671,
        accuracy_pattern=r"Word Error Rate\:.*, accuracy=([0-9\.]+)%",
        performance_sample_count=1633,
        dataset_size=1633,
        offline_min_samples=1633,
        server_latency_ms=None,
        # compliance/README.md: TEST01 alone (its whisper/audit.config samples 4096); a response that differs from
        # the accuracy run's goes to Part III (both accuracy logs scored, WER within tolerance).
        compliance_tests=("TEST01",),
        test01_sampling_target=4096,
        equal_issue=True,
        uses_token_latencies=True,
    ),
    "llama2-70b-99.9": BenchmarkRules(
        submission_names={T.k_99_9: "llama2-70b-99.9"},
        loadgen_model="llama2-70b",
        interactive_loadgen_model="llama2-70b-interactive",
        **_LLM_DATACENTER,
        accuracy_metric="ROUGE1",
        accuracy_reference=44.4312,
        accuracy_pattern=ROUGE1,
        # accuracy-target: ROUGE1/2/L at 99.9 %, TOKENS_PER_SAMPLE at 0.9; accuracy-upper-limit: TOKENS_PER_SAMPLE 1.1.
        accuracy_metrics=(AccuracyMetric("ROUGE1", "rouge1", ROUGE1, 44.4312),
                          AccuracyMetric("ROUGE2", "rouge2", ROUGE2, 22.0352),
                          AccuracyMetric("ROUGEL", "rougeL", ROUGEL, 28.6162),
                          _tokens_per_sample(294.45, 0.9)),
        performance_sample_count=24576,
        dataset_size=24576,
        offline_min_samples=24576,
        server_latency_ms=20_000.0,
        compliance_tests=("TEST06",),
        equal_issue=True,
        uses_token_latencies=True,
        token_latency_limits={S.Server: TokenLatencyLimits(ttft_ms=2000, tpot_ms=200),
                              S.Interactive: TokenLatencyLimits(ttft_ms=450, tpot_ms=40)},
    ),
    "deepseek-r1": BenchmarkRules(
        submission_names={T.k_99: "deepseek-r1"},
        loadgen_model="deepseek-r1",
        interactive_loadgen_model="deepseek-r1-interactive",
        **_LLM_DATACENTER,
        accuracy_metric="exact_match",
        accuracy_reference=81.3582,
        accuracy_pattern=EXACT_MATCH,
        accuracy_metrics=(AccuracyMetric("exact_match", "exact_match", EXACT_MATCH, 81.3582),
                          _tokens_per_sample(3886.2274, 0.9)),
        performance_sample_count=4388,
        dataset_size=4388,
        offline_min_samples=4388,
        server_latency_ms=60_000.0,
        compliance_tests=("TEST06",),
        equal_issue=True,
        uses_token_latencies=True,
        token_latency_limits={S.Server: TokenLatencyLimits(ttft_ms=2000, tpot_ms=80),
                              S.Interactive: TokenLatencyLimits(ttft_ms=1500, tpot_ms=15)},
    ),
    "gpt-oss-120b": BenchmarkRules(
        submission_names={T.k_99: "gpt-oss-120b"},
        loadgen_model="gpt-oss-120b",
        interactive_loadgen_model="gpt-oss-120b-interactive",
        **_LLM_DATACENTER,
        accuracy_metric="exact_match",
        accuracy_reference=83.13,
        accuracy_pattern=EXACT_MATCH,
        # The checkers hold no lower bound on its tokens per sample, and an upper one of 1.1 x 9999.
        accuracy_metrics=(AccuracyMetric("exact_match", "exact_match", EXACT_MATCH, 83.13),
                          _tokens_per_sample(9999, 0.0)),
        # Performance runs read perf_eval_ref (6396 prompts), accuracy runs acc_eval_inputs (4395: mlperf.conf's
        # accuracy_sample_count_override).
        performance_sample_count=6396,
        dataset_size=6396,
        accuracy_sample_count=4395,
        # The checkers' OFFLINE_MIN_SPQ_SINCE_V4 (mlperf.conf sets no Offline min_query_count for it).
        offline_min_samples=6396,
        server_latency_ms=60_000.0,
        compliance_tests=("TEST07", "TEST09"),
        official_checker_defect="the old checker (submission_checker_old.py) crashes on every closed gpt-oss-120b "
                                "result: it asks TEST07 and TEST09 for a verify_performance.txt their scripts never "
                                "write, then reaches `raise NotImplemented` in its TEST07 accuracy check; main.py, "
                                "the current checker, judges it",
        equal_issue=True,
        uses_token_latencies=True,
        token_latency_limits={S.Server: TokenLatencyLimits(ttft_ms=3000, tpot_ms=80),
                              S.Interactive: TokenLatencyLimits(ttft_ms=2000, tpot_ms=15)},
    ),
    "qwen3-vl-235b-a22b": BenchmarkRules(
        submission_names={T.k_99: "qwen3-vl-235b-a22b"},
        loadgen_model="qwen3-vl-235b-a22b",
        # mlperf.conf has no qwen3-vl-235b-a22b-interactive entry: an Interactive run is LoadGen's Server under the
        # model's own name (its mlperf.conf lines: sample concatenation, no token latencies) with user.conf's
        # target_latency of 1500 ms (interactive_latency_ms below).
        interactive_loadgen_model="qwen3-vl-235b-a22b",
        # main.py (the checker of record): Offline required, Server and Interactive optional, one of them asked of a
        # closed result. The old checker asks Server of every datacenter result, holds Server to 60 s and Interactive
        # to the Offline/Server F1 target: it refuses some results main.py accepts.
        **_LLM_DATACENTER,
        accuracy_metric="F1_HIERARCHICAL",
        # The checkers' accuracy-target: 0.7903 x 0.99 = 0.782397 (Offline, Server); Interactive's 8k subset
        # 0.7878 x 0.99 = 0.779922 (main.py's per-scenario entry).
        accuracy_reference=0.7903,
        scenario_accuracy_references={S.Interactive: 0.7878},
        # main.py's accuracy-sample-count: 48289 (Offline, Server), the 8k subset's 8000 (Interactive).
        scenario_accuracy_sample_counts={S.Interactive: 8000},
        accuracy_pattern=F1_HIERARCHICAL,
        performance_sample_count=48289,
        dataset_size=48289,
        offline_min_samples=48289,
        # main.py's latency-constraint: Server 12 s (mlperf.conf's target_latency 12000), Interactive 1.5 s.
        server_latency_ms=12_000.0,
        interactive_latency_ms=1_500.0,
        # No compliance test is asked of it (compliance/README.md, the checkers' models_TEST* lists).
        compliance_tests=(),
        equal_issue=True,
        official_checker_defect="the old checker (submission_checker_old.py) crashes on every qwen3-vl-235b-a22b "
                                "accuracy folder: its accuracy-sample-count for it is a table per scenario, which it "
                                "compares with a number (TypeError); main.py, the current checker, judges it",
    ),
    "qwen3.6-27b": BenchmarkRules(
        submission_names={T.k_99: "qwen3.6-27b"},
        loadgen_model="qwen3.6-27b",
        # Edge (and datacenter-edge) only, SingleStream: the checkers' required-scenarios-edge. Endpoints trees only:
        # the MLCommons endpoints client runs it (the agentic replay, then BFCL v4), never LoadGen.
        required_scenarios={EDGE: (S.SingleStream,), BOTH: (S.SingleStream,)},
        # The checkers' accuracy-target: ("mAP", 86.23 x 0.99); the client's ruleset gates overall_accuracy at
        # 0.97 x 86.23 = 83.64 and normalized_single_turn_score at 85.32, which the endpoints harness applies.
        accuracy_metric="mAP",
        accuracy_reference=86.23,
        accuracy_pattern=r"overall_accuracy=([0-9\.]+)",
        # The checkers' performance-sample-count and accuracy-sample-count: the 995 BFCL v4 samples.
        performance_sample_count=995,
        dataset_size=995,
        offline_min_samples=None,
        server_latency_ms=None,
        # No compliance test is asked of it (no models_TEST* list of the checkers names it).
        compliance_tests=(),
        official_checker_defect="the old checker (submission_checker_old.py) reads no endpoints tree, and the round "
                                "has qwen3.6-27b as endpoints trees only: it asks the folder for a user.conf and finds "
                                "no LoadGen log (NoResults); main.py, the current checker, reads it with its "
                                "endpoints parser",
    ),
    "wan-2.2-t2v-a14b": BenchmarkRules(
        submission_names={T.k_99: "wan-2.2-t2v-a14b"},
        loadgen_model="wan-2.2-t2v-a14b",
        # Datacenter only, Offline and SingleStream both required (both checkers' required-scenarios-datacenter).
        required_scenarios={DATACENTER: (S.Offline, S.SingleStream), BOTH: (S.Offline, S.SingleStream)},
        accuracy_metric="vbench_score",
        # The reference's BF16 VBench score; the checkers' accuracy-target is 70.48 x 0.99 = 69.7752.
        accuracy_reference=70.48,
        accuracy_pattern=VBENCH_SCORE,
        # mlperf.conf's performance_sample_count_override is 248; the checkers ask at least 50.
        performance_sample_count=248,
        dataset_size=248,
        # mlperf.conf's Offline min_query_count; its min_duration is the default 600 s.
        offline_min_samples=248,
        server_latency_ms=None,
        # compliance/README.md and the checkers' models_TEST04.
        compliance_tests=("TEST04",),
        # main.py's REQUIRED_ACC_BENCHMARK v6.1: these ten videos (<id>.mp4) and captions.txt in accuracy/videos/.
        accuracy_artefacts={"videos": ("130", "106", "84", "59", "12", "123", "43", "22", "238", "32")},
        official_checker_defect="the old checker (submission_checker_old.py) crashes on every wan-2.2-t2v-a14b "
                                "accuracy folder: its v6.1 accuracy-target names 'vbench_score', which its "
                                "ACC_PATTERN lacks (KeyError); main.py, the current checker, judges it",
        # main.py reports SingleStream's early-stopping latency in seconds (SPECIAL_UNIT_DICT "Latency (s)").
        latency_unit="s",
    ),
}

ALL_MODELS = (
    "resnet", "bert-99", "bert-99.9", "3d-unet-99", "3d-unet-99.9", "llama3.1-8b", "llama3.1-8b-edge",
    "llama2-70b-99.9", "stable-diffusion-xl", "rgat", "deepseek-r1", "whisper", "gpt-oss-120b",
    "wan-2.2-t2v-a14b", "qwen3-vl-235b-a22b", "qwen3.6-27b", "dlrm-v3", "yolo-95", "yolo-99",
    "e2e-rag-qna", "e2e-rag-db",
)

SYSTEM_JSON_FIELDS = (
    "division", "submitter", "status", "system_name", "number_of_nodes", "host_processor_model_name",
    "host_processors_per_node", "host_processor_core_count", "host_memory_capacity", "host_storage_capacity",
    "host_storage_type", "accelerators_per_node", "accelerator_model_name", "accelerator_memory_capacity",
    "framework", "operating_system", "system_type", "other_software_stack", "host_processor_frequency",
    "host_processor_caches", "host_memory_configuration", "host_processor_interconnect", "host_networking",
    "host_networking_topology", "accelerator_frequency", "accelerator_host_interconnect",
    "accelerator_interconnect", "accelerator_interconnect_topology", "accelerator_memory_configuration",
    "accelerator_on-chip_memories", "cooling", "hw_notes", "sw_notes", "host_network_card_count",
    "system_type_detail",
)

# SYSTEM_DESC_MEANINGFUL_RESPONSE_REQUIRED_FIELDS of the checkers: a falsy value ("", 0, false) is rejected.
SYSTEM_JSON_MEANINGFUL_FIELDS = (
    "division", "submitter", "system_type", "status", "system_name", "number_of_nodes",
    "host_processor_model_name", "host_processors_per_node", "host_processor_core_count", "host_memory_capacity",
    "host_memory_configuration", "host_storage_capacity", "host_storage_type", "host_networking",
    "host_network_card_count", "host_networking_topology", "accelerators_per_node", "accelerator_model_name",
    "accelerator_memory_capacity", "accelerator_host_interconnect", "accelerator_memory_configuration",
    "accelerator_interconnect", "cooling", "framework", "operating_system", "other_software_stack",
)

# (logs, folder): main.py's inferred_check allows exactly these, and only on systems whose type includes edge.
INFERABLE_SCENARIOS = ((S.SingleStream, S.MultiStream), (S.MultiStream, S.Offline), (S.SingleStream, S.Offline))

ROUND = RulesRound(
    version="v6.1",
    loadgen_version="6.0.17",
    seeds=SEEDS,
    min_duration_ms=600_000,
    benchmarks=BENCHMARKS,
    compliance_tests=COMPLIANCE_TESTS,
    all_models=ALL_MODELS,
    system_json_fields=SYSTEM_JSON_FIELDS,
    system_json_meaningful_fields=SYSTEM_JSON_MEANINGFUL_FIELDS,
    inferable_scenarios=INFERABLE_SCENARIOS,
    # configuration.py get_delta_perc: 1 (%), or 0.1 for a model whose name holds "99.9".
    part3_delta_percent={T.k_95: 1.0, T.k_99: 1.0, T.k_99_9: 0.1},
    # mlperf.conf sets *.MultiStream.min_query_count = 662; the others keep TestSettings' 100.
    min_query_count={S.SingleStream: 100, S.MultiStream: 662, S.Server: 100, S.Offline: 100},
)
