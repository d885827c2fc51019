"""run_audit_harness: run the round's compliance tests and verify them against the submission's own runs.

Per (benchmark, scenario) and test: an audit.config from the rules tables, handed to LoadGen by explicit path
inside the run folder (never the working directory); the compliance run as a normal child-process test in
build/compliance_logs/<TEST>/<system>/<benchmark>/<Scenario>/runs/<stamp>-attempt<k>/; verification; the
verdict files and logs laid out as results/<system>/<benchmark>/<Scenario>/TEST0x/ wants them. A failed test is
run again up to `audit_retries` times. TEST06 (LLMs) compares with no run: its sampled responses' tokens are
checked on their own, with the EOS token ids of the model's tokenizer. TEST07 and TEST09 (gpt-oss-120b) compare
with no run either: TEST07 runs the benchmark's compliance data set and scores its every response against a
threshold, TEST09 bounds the mean output length of a run over the whole performance data set.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

from ..common.audit.audit_config import audit_config_setting
from ..common.audit.references import Reference, find_references
from ..common.audit.test06 import verify_test06
from ..common.audit.test07 import score_test07
from ..common.audit.test09 import verify_test09
from ..common.audit.verdicts import (PART3_SCORES, read_verified_against, verdict_problems,
                                     write_verified_against)
from ..common.audit.verify import (Check, WholeResponses, compare_accuracy_logs, compare_whole_responses,
                                   part3_baseline, part3_verdict, read_accuracy_log, verify_performance,
                                   verify_test01_accuracy)
from ..common.benchmark_api import get_benchmark
from ..common.config_registry import ResolvedConfig
from ..common.constants import TestMode
from ..common.errors import EXIT_BAD_INPUT, EXIT_FAILURE, EXIT_OK, UserError
from ..common.fileio import copy_atomically, sha256_file, write_atomically
from ..common.records.metadata import RunRecord
from ..common.harness.plan import Plan, announce, free_space, plan_entry
from ..common.harness.planned import earlier_runs
from ..common.records.reproduce import config_command
from ..common.harness.runner import plan_test, run_test
from ..common.paths import (ACCURACY_DIR, ACCURACY_LOG, ACCURACY_TXT, COMPLIANCE_RUNS, DETAIL_LOG, PERFORMANCE_DIR,
                            SUMMARY_LOG, VERIFY_ACCURACY, VERIFY_OUTPUT_LEN, VERIFY_PERFORMANCE, accuracy_dir,
                            performance_run_dir, timestamp)
from .base import Context, Handler
from .locks import measuring
from .harness import EMBEDDED_FIELDS, RunHarness, with_embedded_default

SELECTION_FLAGS = ("benchmarks", "scenarios")
REFERENCE_SOURCE = "compared run"   # what the record says of a value taken over from the run a test is compared with
# Beside verify_accuracy.txt (never staged): TEST01's sampled responses compared whole, not just their first value.
WHOLE_RESPONSES = "whole_responses.txt"


def audit_config_lines(template: tuple[str, ...], sampling_target: int | None) -> list[str]:
    return [line.format(sampling_target=sampling_target) for line in template]


def compliance_dataset(benchmark: str, test: str, dataset: str) -> str | None:
    """The data set a test that scores a data set of its own (TEST07) runs on, as the benchmark names it for a
    submission run on `dataset`; None when the benchmark names none."""
    named = getattr(get_benchmark(benchmark), "compliance_dataset", None)
    return named(test, dataset) if named is not None else None


def _refuse_too_few_loaded(test: str, audit_config: tuple[str, ...], config: ResolvedConfig) -> None:
    """TEST04 issues the loaded sample at performance_issue_same_index again and again: a run that loads no more
    samples than that index would have LoadGen issue a sample it never loaded."""
    index = audit_config_setting(audit_config, "performance_issue_same_index")
    capped = [int(v) for v in (config["total_sample_count"], config["performance_sample_count_override"]) if v]
    if index is not None and capped and min(capped) <= index:
        raise UserError(f"{test} issues the loaded sample at index {index:g} again and again, and this run loads "
                        f"{min(capped)} sample(s); run it with at least {index + 1:g} (--total_sample_count and "
                        f"--performance_sample_count_override).", exit_code=EXIT_BAD_INPUT)


def _qps_scale(config: ResolvedConfig) -> float:
    """The fraction of the Server target QPS a compliance run asks for (1 in the other scenarios)."""
    return float(config["audit_server_qps_scale"]) if config.scenario.server_like else 1.0


def _audit_context(ctx: Context) -> Context:
    """With no model or data set named, audit what `make run` runs for the selection (each benchmark's embedded
    default; resnet50 Offline with no selection at all)."""
    chosen = any(field in ctx.args.overrides for field in EMBEDDED_FIELDS)
    return ctx if chosen else with_embedded_default(ctx, test_run=False)


@dataclasses.dataclass(frozen=True)
class Outcome:
    label: str
    passed: bool
    summary: str
    folder: Path


class _PerformanceWithClientAudits(RunHarness):
    """The performance tests on a harness that brings its own load generator (the MLCommons endpoints client), whose
    YAML carries the audit block: the client runs its compliance audit after the performance phase into the same
    report, as the round's reference submission YAMLs have it, and stage_results stages its verdict."""

    def test_modes(self) -> list[TestMode]:
        return [TestMode.PerformanceOnly]


def client_audited(ctx: Context) -> list[str]:
    """The selected benchmarks whose compliance tests the client runs itself (its audit block), where the harness
    is the one that brings its own load generator; [] for every other harness. UserError (exit 2) where such a
    harness is chosen for benchmarks the round asks none of its audits of."""
    from ..common.harness.registry import own_load_generator_type
    from ..common.submission.endpoints_tree import CLIENT_AUDIT_TESTS

    if ctx.args.workload.harness_type.value != own_load_generator_type():
        return []
    selected = list(dict.fromkeys(b for b, _ in ctx.selected()))
    others = [b for b in selected
              if not set(ctx.rules.benchmark(b).checked_compliance_tests) & set(CLIENT_AUDIT_TESTS)]
    if others or not selected:
        raise UserError(f"No compliance test the endpoints client runs ({', '.join(CLIENT_AUDIT_TESTS)}) applies to "
                        f"{', '.join(others) or 'the selection'} in {ctx.rules.version}; select only benchmarks it "
                        f"audits (documentation/endpoints.md lists them).", exit_code=EXIT_BAD_INPUT)
    return selected


class RunAuditHarness(Handler):
    free_space = staticmethod(free_space)    # free bytes of the compliance logs' file system (tests fake it)

    def __init__(self, ctx: Context) -> None:
        super().__init__(_audit_context(ctx))
        self._contexts: dict[str, Context] = {}

    def run(self) -> int:
        audited = client_audited(self.ctx)
        if audited:
            self.ctx.log(f"The endpoints client runs the compliance audit of {', '.join(audited)} itself, after the "
                         f"performance phase of a performance test whose YAML has the audit block (as the round's "
                         f"reference submission YAMLs do): running that test; make stage_results stages its verdict "
                         f"into audit/ of the endpoints tree.")
            return _PerformanceWithClientAudits(self.ctx).run()
        with measuring(self.ctx.paths):    # never beside find_peak, which needs the machine to itself
            return super().run()

    def handle(self) -> int:
        plans = self._plan()
        plan = self._estimate(plans)
        if not announce(plan, self.ctx.args.dry_run, self.ctx.log, self.free_space(plan.where)):
            return EXIT_OK
        outcomes = [self._run_test(*p) for p, test in zip(plans, plan.tests) if not test.skip]
        self.ctx.log("\nCompliance summary:")
        for test in plan.tests:
            if test.skip:
                self.ctx.log(f"  {test.audit_test} {test.benchmark} {test.scenario.value}: skipped, {test.skip}")
        for outcome in outcomes:
            self.ctx.log(f"  {outcome.label}: {'PASS' if outcome.passed else 'FAIL'} ({outcome.summary})")
            self.ctx.log(f"    {outcome.folder}")
        return 0 if all(o.passed for o in outcomes) else 1

    # -- planning: every reference found before the first run --------------------------------------
    def _plan(self) -> list[tuple[str, ResolvedConfig, Reference]]:
        ctx, wanted = self.ctx, (self.ctx.args.audit_test or "").upper()
        plans, missing = [], []
        for benchmark, scenario in ctx.selected():
            config = ctx.resolve(benchmark, scenario, TestMode.PerformanceOnly)   # compliance runs' mode
            tests = [t for t in ctx.rules.benchmark(benchmark).compliance_tests if not wanted or t == wanted]
            if not tests:
                continue
            for test in tests:
                if ctx.rules.compliance_tests[test].scores_accuracy and \
                        compliance_dataset(benchmark, test, config["dataset"]) is None:
                    raise UserError(f"{test} of {benchmark} runs on a compliance data set of its own, and the "
                                    f"benchmark names none for the data set {config['dataset']} "
                                    f"(Benchmark.compliance_dataset); see documentation/compliance.md.",
                                    exit_code=EXIT_FAILURE)
            for test in tests:
                _refuse_too_few_loaded(test, ctx.rules.compliance_tests[test].audit_config, config)
            reference = find_references([ctx.paths.logs_root, ctx.paths.log_dir.parent], ctx.system.system_id,
                                        config, ctx.log)
            needed = [m for m in reference.missing() if m is TestMode.PerformanceOnly or "TEST01" in tests]
            missing += [config_command("run_harness", config, mode, ctx.args.test_run) for mode in needed]
            plans += [(test, config, reference) for test in tests]
        if missing:
            raise UserError("The compliance tests are compared with the submission's own runs, and these are "
                            "missing (no completed run in build/logs):\n  " + "\n  ".join(missing),
                            exit_code=EXIT_FAILURE)
        if not plans:
            raise UserError(f"No compliance test {wanted or ''} applies to the selected benchmarks in "
                            f"{ctx.rules.version}.")
        return plans

    def _estimate(self, plans: list[tuple[str, ResolvedConfig, Reference]]) -> Plan:
        """Each compliance test's expected duration and disk (a test run, its logs and the verdict folder's copy);
        under --resume a test whose verdict passed against the runs it is compared with now is skipped."""
        ctx = self.ctx
        runs = earlier_runs([ctx.paths.logs_root, ctx.paths.log_dir.parent], lambda path, reason: None)  # named above
        tests = []
        for name, config, reference in plans:
            folder = ctx.paths.compliance_log_dir(name, ctx.system.system_id, config.benchmark, config.scenario)
            test = plan_entry(self._run_context(reference, name), config.benchmark, config.scenario,
                              TestMode.PerformanceOnly, runs, audit_test=name, qps_scale=_qps_scale(config),
                              folder=folder, copies=2)
            passed = self._passed_already(name, config, reference, folder) if ctx.args.resume else None
            tests.append(dataclasses.replace(test, skip=passed) if passed else test)
        retries = sorted({int(config["audit_retries"]) for _, config, _ in plans})
        note = f"  (a failing test runs again, up to audit_retries={'/'.join(map(str, retries))} times)"
        return Plan(tuple(tests), ctx.paths.compliance_logs_root, notes=(note,))

    def _passed_already(self, name: str, config: ResolvedConfig, reference: Reference, folder: Path) -> str | None:
        """--resume: why the test in `folder` need not run again (its verdict passes, reached against the very
        runs it is compared with now, their logs unchanged), or None."""
        try:
            against = read_verified_against(folder)
        except (OSError, UnicodeDecodeError, ValueError):
            return None
        performance, accuracy, test = reference.performance, reference.accuracy, self.ctx.rules.compliance_tests[name]
        detail = Path(performance.log_dir) / DETAIL_LOG
        if against.get("performance_log_dir") != performance.log_dir or \
                not detail.is_file() or against.get("performance_detail_sha256") != sha256_file(detail):
            return None
        if test.samples_accuracy:
            log = Path(accuracy.log_dir) / ACCURACY_LOG if accuracy is not None else None
            if log is None or against.get("accuracy_log_dir") != accuracy.log_dir or not log.is_file() \
                    or against.get("accuracy_log_sha256") != sha256_file(log):
                return None
        if verdict_problems(folder, test, self.ctx.rules.benchmark(config.benchmark),
                            self.ctx.args.workload_for(config.benchmark).accuracy_target, self.ctx.rules):
            return None
        return f"PASS already against {performance.log_dir} (verdict in {folder})"

    # -- one test ----------------------------------------------------------------------------------
    def _run_context(self, reference: Reference, test: str) -> Context:
        """The context of the compliance runs compared with `reference`, worked out once (it says what differs);
        for a test that scores a data set of its own (TEST07), on that data set."""
        key = reference.performance.log_dir
        if key not in self._contexts:
            self._contexts[key] = self._like_reference(reference.performance)
        ctx = self._contexts[key]
        if not self.ctx.rules.compliance_tests[test].scores_accuracy:
            return ctx
        fields = ctx.args.fields_for(reference.performance.benchmark)
        dataset = compliance_dataset(reference.performance.benchmark, test,
                                     str(fields.get("dataset", reference.performance.dataset)))
        if dataset is None:
            raise UserError(f"{test} of {reference.performance.benchmark} runs on a compliance data set of its own, "
                            f"and the benchmark names none for the run it is set up like "
                            f"({reference.performance.log_dir}); see documentation/compliance.md.",
                            exit_code=EXIT_FAILURE)
        if (key, test) not in self._contexts:
            self._contexts[(key, test)] = dataclasses.replace(
                ctx, args=ctx.args.fill_in(f"{test} compliance data set", {"dataset": dataset}), _registry=None)
        return self._contexts[(key, test)]

    def _run_test(self, name: str, config: ResolvedConfig, reference: Reference) -> Outcome:
        ctx, test = self.ctx, self.ctx.rules.compliance_tests[name]
        rules = ctx.rules.benchmark(config.benchmark)
        folder = ctx.paths.compliance_log_dir(name, ctx.system.system_id, config.benchmark, config.scenario)
        run_ctx = self._run_context(reference, name)
        scale = _qps_scale(config)
        label = f"{name} {config.benchmark} {config.scenario.value}"
        outcome = None
        for attempt in range(1, int(config["audit_retries"]) + 2):
            run_dir = folder / COMPLIANCE_RUNS / f"{timestamp()}-attempt{attempt}"
            spec = plan_test(run_ctx, config.benchmark, config.scenario, TestMode.PerformanceOnly, log_dir=run_dir,
                             audit_test=name, audit_config=audit_config_lines(test.audit_config,
                                                                              rules.test01_sampling_target),
                             qps_scale=scale)
            record = run_test(spec, ctx.paths.repo, ctx.log)
            outcome = self._verify(label, test, record, reference, run_dir, folder)
            ctx.log(f"{label} attempt {attempt}: {'PASS' if outcome.passed else 'FAIL'} ({outcome.summary})")
            if outcome.passed:
                break
        return outcome

    def _like_reference(self, performance: RunRecord) -> Context:
        """Compliance runs are set up like the run they are compared with: every field that run was given
        (typed or filled in: batch size, threads, min_duration, ...) or a sweep of its engine chose carries over
        unless given here, and a
        test-run reference gives a test-run audit."""
        args = self.ctx.args
        fields, given = performance.config.fields, args.fields_for(performance.benchmark)
        # A layout a sweep of the engine chose (a default, so not given) carries over too: the sweep may have been
        # made again since (tuning/measured_layout.py), and a compliance run runs the layout it is compared with.
        measured = dict(performance.config.measured_layout.get("fields") or {})
        inherited = {name: value for name, value in {**measured, **performance.given_fields()}.items()
                     if name not in given}
        for name, value in given.items():
            if name in fields and fields[name] != value:
                self.ctx.log(f"Note: --{name}={value} differs from the run the test is compared with "
                             f"({name}={fields[name]}, {performance.log_dir}).")
        flags = {}
        if performance.test_run and not args.test_run:
            self.ctx.log("The submission's performance run was a --test_run, so the compliance runs are too.")
            flags["test_run"] = True
        return dataclasses.replace(self.ctx, args=args.fill_in(REFERENCE_SOURCE, inherited, **flags), _registry=None)

    def _verify(self, label: str, test, record: RunRecord, reference: Reference, run_dir: Path,
                folder: Path) -> Outcome:
        if not record.completed:
            return Outcome(label, False, f"the compliance run {record.status}: {record.error}", folder)
        if test.checks_output_tokens:
            return self._verify_tokens(label, record, reference, run_dir, folder)
        if test.scores_accuracy or test.checks_output_length:
            return self._verify_logged(label, test, record, reference, run_dir, folder)
        performance = verify_performance(test, Path(reference.performance.log_dir), run_dir)
        accuracy, part3, whole = self._verify_accuracy(record, reference, run_dir) if test.samples_accuracy \
            else (None, None, None)
        self._lay_out(folder, run_dir, performance, accuracy, part3 is not None, record, reference, whole)
        accuracy_passed = accuracy is None or accuracy.passed or (part3 is not None and part3.passed)
        parts = [f"performance {'PASS' if performance.passed else 'FAIL'}: {performance.summary}"]
        if accuracy is not None:
            parts.append(f"accuracy {'PASS' if accuracy_passed else 'FAIL'}: {accuracy.summary}")
            if part3 is not None:
                parts.append(part3.summary)
        if whole is not None and whole.warning:
            parts.append(f"warning: {whole.warning} (see {folder / WHOLE_RESPONSES})")
        return Outcome(label, performance.passed and accuracy_passed, "; ".join(parts), folder)

    def _verify_tokens(self, label: str, record: RunRecord, reference: Reference, run_dir: Path,
                       folder: Path) -> Outcome:
        """TEST06: run_verification.py's checks of the sampled responses, with the EOS token ids of the model's
        tokenizer (the benchmark's generation settings) and its response dtype; laid out as the script lays out
        its output (verify_accuracy.txt, accuracy/mlperf_log_accuracy.json)."""
        benchmark = get_benchmark(record.benchmark)
        generation = benchmark.generation(record.model, record.config.fields, self.ctx.paths)
        if generation is None:
            return Outcome(label, False, f"{record.benchmark} generates no tokens, so TEST06 does not apply to it",
                           folder)
        try:
            entries = read_accuracy_log(run_dir / ACCURACY_LOG)
        except (OSError, ValueError) as error:
            return Outcome(label, False, f"the compliance run's {ACCURACY_LOG} cannot be read ({error})", folder)
        check = verify_test06(entries, record.scenario, generation.eos_token_ids, benchmark.response.np_dtype)
        self._replace_verdict(folder)
        write_atomically(folder / VERIFY_ACCURACY, check.text)
        for name, where in ((SUMMARY_LOG, performance_run_dir(folder)), (DETAIL_LOG, performance_run_dir(folder)),
                            (ACCURACY_LOG, accuracy_dir(folder))):
            where.mkdir(parents=True, exist_ok=True)
            copy_atomically(run_dir / name, where / name)
        write_verified_against(folder, reference.performance.log_dir, Path(reference.performance.log_dir) / DETAIL_LOG,
                               eos_token_ids=generation.eos_token_ids, compliance_run_dir=run_dir)
        return Outcome(label, check.passed, f"tokens {'PASS' if check.passed else 'FAIL'}: {check.summary}", folder)

    def _verify_logged(self, label: str, test, record: RunRecord, reference: Reference, run_dir: Path,
                       folder: Path) -> Outcome:
        """TEST07 (the compliance data set's every response scored by the benchmark's scorer, against the
        threshold) and TEST09 (the mean output length of every response, within the bounds): run_verification.py's
        verdicts, laid out as the scripts lay them out (verify_accuracy.txt or verify_output_len.txt,
        accuracy/mlperf_log_accuracy.json, performance/run_1/)."""
        benchmark = get_benchmark(record.benchmark)
        if test.scores_accuracy:
            check = score_test07(benchmark, record.model, record.dataset, run_dir / ACCURACY_LOG, self.ctx.paths,
                                 test.accuracy_threshold, test.score_pattern)
            verdict, what = VERIFY_ACCURACY, "accuracy"
        else:
            try:
                entries = read_accuracy_log(run_dir / ACCURACY_LOG)
            except (OSError, ValueError) as error:
                return Outcome(label, False, f"the compliance run's {ACCURACY_LOG} cannot be read ({error})", folder)
            check = verify_test09(entries, test.output_token_bounds, benchmark.response.np_dtype)
            verdict, what = VERIFY_OUTPUT_LEN, "output length"
        self._replace_verdict(folder)
        write_atomically(folder / verdict, check.text)
        for name, where in ((SUMMARY_LOG, performance_run_dir(folder)), (DETAIL_LOG, performance_run_dir(folder)),
                            (ACCURACY_LOG, accuracy_dir(folder))):
            if (run_dir / name).is_file():
                where.mkdir(parents=True, exist_ok=True)
                copy_atomically(run_dir / name, where / name)
        judged = accuracy_dir(folder) / ACCURACY_LOG
        write_verified_against(folder, reference.performance.log_dir, Path(reference.performance.log_dir) / DETAIL_LOG,
                               judged_log=judged if judged.is_file() else None, compliance_run_dir=run_dir)
        return Outcome(label, check.passed, f"{what} {'PASS' if check.passed else 'FAIL'}: {check.summary}", folder)

    def _replace_verdict(self, folder: Path) -> None:
        """Remove the verdict an earlier attempt laid out in `folder` (its runs stay in folder/runs)."""
        replaced = [p for p in (VERIFY_ACCURACY, VERIFY_OUTPUT_LEN, VERIFY_PERFORMANCE, PERFORMANCE_DIR, ACCURACY_DIR,
                                WHOLE_RESPONSES) if (folder / p).exists()]
        if replaced:
            self.ctx.log(f"Replacing the previous verdict in {folder} (every run stays in {folder / 'runs'}).")
        for name in replaced:
            target = folder / name
            shutil.rmtree(target) if target.is_dir() else target.unlink()

    def _verify_accuracy(self, record: RunRecord, reference: Reference, run_dir: Path) \
            -> tuple[Check, Check | None, WholeResponses]:
        """verify_accuracy.py's check; when responses differ, Part III: the baseline (the accuracy run's entries for
        the sampled qsl_idx) and the compliance log scored by the benchmark's accuracy script, into
        run_dir/part3/{baseline,compliance}_accuracy.txt, and the checker's delta test on them. Beside them, the
        sampled responses compared whole, in the benchmark's response format (a warning, never the verdict)."""
        benchmark = get_benchmark(record.benchmark)
        full = read_accuracy_log(Path(reference.accuracy.log_dir) / ACCURACY_LOG)
        sampled = read_accuracy_log(run_dir / ACCURACY_LOG)
        check = verify_test01_accuracy(compare_accuracy_logs(full, sampled, benchmark.response.np_dtype))
        whole = compare_whole_responses(full, sampled, benchmark.response)
        if check.passed or not sampled:
            return check, None, whole
        part3 = run_dir / "part3"
        part3.mkdir(parents=True, exist_ok=True)
        baseline_log = part3 / "mlperf_log_accuracy_baseline.json"
        write_atomically(baseline_log, json.dumps(part3_baseline(full, sampled)))
        texts = {}
        for name, log in zip(PART3_SCORES, (baseline_log, run_dir / ACCURACY_LOG), strict=True):
            texts[name] = benchmark.score(record.model, record.dataset, log, self.ctx.paths).text + "\n"
            write_atomically(part3 / name, texts[name])
        rules = self.ctx.rules
        target = self.ctx.args.workload_for(record.benchmark).accuracy_target
        verdict = part3_verdict(*texts.values(), rules.benchmark(record.benchmark).accuracy_pattern,
                                rules.part3_delta_percent.get(target, 1.0))
        return check, verdict, whole

    def _lay_out(self, folder: Path, run_dir: Path, performance: Check, accuracy: Check | None, part3: bool,
                 record: RunRecord, reference: Reference, whole: WholeResponses | None = None) -> None:
        """verify_*.txt, performance/run_1/ and (TEST01) accuracy/ in the folder staging copies from: the files
        and names compliance/TEST0x/run_verification.py writes, plus the Part III files the checker reads."""
        self._replace_verdict(folder)
        write_atomically(folder / VERIFY_PERFORMANCE, performance.text)
        run_1 = performance_run_dir(folder)
        run_1.mkdir(parents=True)
        for log in (SUMMARY_LOG, DETAIL_LOG):
            copy_atomically(run_dir / log, run_1 / log)
        if whole is not None:
            write_atomically(folder / WHOLE_RESPONSES, whole.text())
        if accuracy is not None:
            write_atomically(folder / VERIFY_ACCURACY, accuracy.text)
            accuracy_logs = accuracy_dir(folder)
            accuracy_logs.mkdir()
            copy_atomically(run_dir / ACCURACY_LOG, accuracy_logs / ACCURACY_LOG)
            result = get_benchmark(record.benchmark).score(record.model, record.dataset, accuracy_logs / ACCURACY_LOG,
                                                           self.ctx.paths)
            write_atomically(accuracy_logs / ACCURACY_TXT, result.text + "\n")
            for name in PART3_SCORES if part3 else ():
                copy_atomically(run_dir / "part3" / name, accuracy_logs / name)
        compared = reference.accuracy if accuracy is not None else None
        write_verified_against(folder, reference.performance.log_dir, Path(reference.performance.log_dir) / DETAIL_LOG,
                               compared.log_dir if compared else None,
                               Path(compared.log_dir) / ACCURACY_LOG if compared else None,
                               compliance_run_dir=run_dir)
