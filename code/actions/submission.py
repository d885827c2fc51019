"""The submission pipeline: generate_conf_files, stage_results, stage_compliance, truncate_results,
export_submission, check_submission, pack_submission. Every step reads metadata.json files or the tree the
step before it wrote, nothing else."""
from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from ..common.arguments import read_passphrase_file
from ..common.benchmark_api import get_benchmark
from ..common.constants import TestMode
from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.fileio import write_atomically
from ..common.records.reproduce import record_selection
from ..common.locking import exclusive_lock
from ..common.submission import check_record
from ..common.submission import measurements as conf
from ..common.submission import staging
from ..common.submission.endpoints_tree import described_system_id, endpoints_system_description, tree_key
from ..common.records.runs import choose_runs, conflict_message, load_records
from .base import Handler

# src/ of the submission: the code, and the hash-locked environment it ran in (requirements/).
SRC_ITEMS = ("code", "configs", "scripts", "docker", "documentation", "requirements", "Makefile", "pyproject.toml",
             "README.md")
CHECKER_LOG = "submission_checker_log.txt"


class _SubmissionStep(Handler):
    def run(self) -> int:
        """Each step holds the submission lock while it runs: two steps never write (or read half-written) the
        staging tree, the exported tree or the tarball at once; a second one stops at once, naming the first."""
        paths = self.ctx.paths
        with exclusive_lock(paths.submission_lock, f"the submission trees in {paths.build} (submission-staging/, "
                                                   f"submission/, the tarball)"):
            return super().run()

    def submitter(self) -> str:
        if not self.ctx.args.submitter:
            raise UserError(f"Set the organisation name: make {self.ctx.args.action} SUBMITTER=MyOrg")
        return self.ctx.args.submitter

    def choices(self):
        """The runs of this machine's system that make up the submission, by (system, benchmark, scenario)."""
        records = load_records([self.ctx.paths.logs_root, self.ctx.paths.log_dir.parent], self.ctx.log)
        chosen = choose_runs(records, self.ctx.args.allow_test_runs, self.ctx.system.system_id, key=tree_key)
        selected = {(b, s) for b in self.ctx.args.benchmarks for s in self.ctx.args.scenarios}
        return {key: c for key, c in chosen.items() if (key[1], key[2]) in selected}


class GenerateConfFiles(_SubmissionStep):
    def handle(self) -> int:
        from ..common.submission import system_json

        ctx = self.ctx
        chosen = [(key, c) for key, c in sorted(self.choices().items()) if c.performance is not None]
        if not chosen:
            raise UserError("No performance run to describe in build/logs: run make run_harness first"
                            + ("" if ctx.args.allow_test_runs else " (test runs count only with --allow_test_runs)"),
                            exit_code=EXIT_FAILURE)
        for (system_id, benchmark, scenario), choice in chosen:
            folder = conf.write_measurements(ctx.paths, choice.performance, ctx.rules.benchmark(benchmark),
                                             get_benchmark(benchmark), system_id=system_id)
            written = "measurements.json, README.md" if choice.performance.load_generator else \
                "measurements.json, user.conf, README.md"
            ctx.log(f"wrote {folder.relative_to(ctx.paths.repo)}/ ({written})")
        calibration = ctx.paths.calibration_doc
        write_atomically(calibration, conf.calibration_markdown([c.performance for _, c in chosen]))
        ctx.log(f"wrote {calibration.relative_to(ctx.paths.repo)}")

        system_id = ctx.system.system_id
        overrides_path = ctx.paths.system_overrides_json(system_id)
        shown = overrides_path.relative_to(ctx.paths.repo)
        overrides = system_json.load_overrides(overrides_path, ctx.rules, shown)
        division = chosen[0][1].division
        data = system_json.describe_system(ctx.system.info, system_id, division, ctx.args.submitter or "",
                                           ctx.system.system_type.value,
                                           system_json.framework([c.performance for _, c in chosen],
                                                                 "ONNX Runtime " + _version("onnxruntime")),
                                           overrides, ctx.rules, overrides_path=shown)
        system_json.write_system_json(ctx.paths.system_json(system_id), data)
        system_json.write_overrides_template(overrides_path, system_json.empty_fields(data, ctx.rules))
        ctx.log(f"wrote {ctx.paths.system_json(system_id).relative_to(ctx.paths.repo)}")
        for tree_system in sorted({key[0] for key, _ in chosen} - {system_id}):   # <system>_endpoints
            system_json.write_system_json(ctx.paths.system_json(tree_system),
                                          endpoints_system_description(data))
            ctx.log(f"wrote {ctx.paths.system_json(tree_system).relative_to(ctx.paths.repo)} (this machine's "
                    f"description, for the tree of the endpoints client's runs)")
        optional = system_json.empty_optional_fields(data, ctx.rules)
        if optional:
            ctx.log(f"note: {len(optional)} optional field(s) of the system description are empty, which the "
                    f"checkers accept: {', '.join(optional)}; fill them in {shown} where they apply.")
        system_json.require_complete(data, ctx.rules, shown)
        return EXIT_OK


class StageResults(_SubmissionStep):
    def handle(self) -> int:
        ctx, submitter = self.ctx, self.submitter()
        choices = self.choices()
        system_type = self._system_type()
        staged: dict[tuple[str, str], set] = {}
        divisions: dict[tuple[str, str], str] = {}
        refused = []
        nodes: dict[str, int] = {}     # system id -> machines its performance runs ran on
        for key, choice in choices.items():
            if choice.performance is not None:
                nodes[key[0]] = max(nodes.get(key[0], 1), choice.performance.nodes)
        for key, choice in sorted(choices.items()):
            for reason in choice.passed_over:
                ctx.log(f"not staged: {reason}")
            if choice.performance is None:
                continue
            why = self._refusal(key, choice, system_type)
            if why:
                removed = staging.unstage_scenario(ctx.paths, submitter, key[0], self._names(key), key[2])
                if removed:
                    why += " " + staging.removed_note(f"{key[0]} {key[1]} {key[2].value}", removed)
                refused.append(why)
                ctx.log(f"not staged: {why}")
                continue
            if choice.accuracy is None:
                ctx.log(self._no_accuracy_line(key, choice))
            try:
                dest = staging.stage_scenario(ctx.paths, ctx.rules, submitter, key, choice, ctx.log)
            except UserError as error:     # this scenario's logs or measurements: the others are still staged
                refused.append(str(error))
                ctx.log(f"not staged: {error}")
                continue
            staging.stage_system_files(ctx.paths, choice.division, submitter, key[0], nodes.get(key[0], 1), ctx.log)
            staged.setdefault((key[0], key[1]), set()).add(key[2])
            divisions[(key[0], key[1])] = dest.parent
        if not staged and refused:
            raise UserError(f"Nothing staged: the {'result was' if len(refused) == 1 else 'results were'} refused "
                            f"(the \"not staged:\" lines above say why and what to do).", exit_code=EXIT_FAILURE)
        if not staged:
            raise UserError("Nothing to stage: no completed, VALID performance run in build/logs"
                            + ("" if ctx.args.allow_test_runs else " (test runs need --allow_test_runs)"),
                            exit_code=EXIT_FAILURE)
        missing = self._fill_missing(system_type, staged, divisions)
        for line in missing:
            ctx.log(f"missing: {line}")
        gaps = f"; {len(missing)} required scenario(s) missing" if missing else ""
        ctx.log(f"Staged in {ctx.paths.staging}{gaps}")
        return 1 if refused else 0

    def _names(self, key) -> tuple[str, ...]:
        """Every folder name the benchmark of `key` may be staged under (one per accuracy target)."""
        return tuple(dict.fromkeys(self.ctx.rules.benchmark(key[1]).submission_names.values()))

    @staticmethod
    def _no_accuracy_line(key, choice) -> str:
        """No accuracy run belongs to the staged performance run: the command that makes one, and the accuracy runs
        of other computations that were passed over."""
        command = record_selection(choice.performance).with_test_mode(TestMode.AccuracyOnly).command("run_harness")
        others = f" (passed over, another computation: {' | '.join(choice.other_accuracy)})" \
            if choice.other_accuracy else ""
        return (f"{key[0]} {key[1]} {key[2].value}: no accuracy run of the staged performance run's engine, "
                f"preprocessed data and config{others}; run {command}")

    def _refusal(self, key, choice, system_type) -> str | None:
        """Why this result does not go into the submission of a `system_type` system (its accuracy runs disagree,
        or the round does not let it in), or None."""
        from ..common.submission.system_json import benchmark_not_in_suite_message

        system_id, benchmark, scenario = key
        if choice.conflict:
            return conflict_message(f"{system_id} {benchmark} {scenario.value}", choice.conflict)
        rules = self.ctx.rules.benchmark(benchmark)
        name = conf.submission_benchmark(rules, choice.performance)
        described = described_system_id(system_id)    # <system>_endpoints is described by the machine's overrides
        if not rules.allows(system_type):
            return benchmark_not_in_suite_message(name, system_type.value, described)
        if choice.division == "closed" and scenario not in rules.allowed_scenarios(system_type):
            return (f"{system_id} {name} {scenario.value}: the closed division has no {scenario.value} for {name} on "
                    f"a {system_type.value} system, and the official checkers reject the benchmark with it; it may "
                    f"go into the open division, or set system_type in "
                    f"systems/{described}.overrides.json to a type whose suite holds it.")
        return None

    def _fill_missing(self, system_type, staged: dict, folders: dict) -> list[str]:
        """With --infer_scenarios, fill each missing required folder the rules let an edge system infer; the
        lines of what is still missing."""
        ctx = self.ctx
        missing = []
        for (system_id, benchmark), scenarios in sorted(staged.items()):
            for scenario in ctx.rules.benchmark(benchmark).required_scenarios.get(system_type, ()):
                if scenario in scenarios:
                    continue
                sources = staging.inferable_sources(ctx.rules, system_type, scenario, scenarios)
                if sources and ctx.args.infer_scenarios:
                    staging.infer_scenario(folders[(system_id, benchmark)], sources[0], scenario)
                    ctx.log(f"{system_id} {benchmark} {scenario.value}: inferred from the staged {sources[0].value} "
                            f"run (--infer_scenarios), as the rules allow an edge system; the checkers compute the "
                            f"{scenario.value} figure from its logs")
                    continue
                hint = (f", or infer it from {sources[0].value} with RUN_ARGS=\"--infer_scenarios\" (the rules allow "
                        f"it for an edge system)") if sources else ""
                missing.append(f"{system_id} {benchmark} {scenario.value}: required for {system_type.value} systems "
                               f"and not staged: make run_harness RUN_ARGS=\"--benchmarks={benchmark} "
                               f"--scenarios={scenario.value} --test_mode=PerformanceOnly\" (and AccuracyOnly){hint}")
        return missing

    def _system_type(self):
        """The system type systems/<id>.json declares, spelled exactly as the checkers accept it (a bad spelling
        is a UserError naming the file); the detected system's type when the file does not say."""
        from ..common.submission.system_json import declared_system_type

        paths, system_id = self.ctx.paths, self.ctx.system.system_id
        declared = declared_system_type(paths.system_json(system_id),
                                        paths.system_overrides_json(system_id).relative_to(paths.repo))
        return declared or self.ctx.system.system_type


class StageCompliance(_SubmissionStep):
    def handle(self) -> int:
        ctx = self.ctx
        found = staging.staged_scenarios(ctx.paths, ctx.rules, self.submitter())
        if not found:
            raise UserError("Nothing staged yet: run make stage_results first.", exit_code=EXIT_FAILURE)
        problems = []
        for folder, system_id, benchmark, scenario in found:
            target = staging.accuracy_target_of(ctx.rules, benchmark, folder.parent.name)
            problems += staging.stage_compliance_for(ctx.paths, ctx.rules, folder, system_id, benchmark, scenario,
                                                     target, get_benchmark(benchmark).response, ctx.log)
        for line in problems:
            ctx.log(f"not staged: {line}")
        refused = [line for line in problems if isinstance(line, staging.EvidenceProblem)]
        if refused:
            raise UserError(f"{len(refused)} compliance test{'s were' if len(refused) > 1 else ' was'} refused: "
                            f"a log or verdict file disagrees with the run that wrote it, or cannot be verified "
                            f"against it (the \"not staged:\" lines above name each file), and nothing of {'them' if len(refused) > 1 else 'it'} is staged; "
                            f"run the test again with make run_audit_harness, then make stage_compliance.",
                            exit_code=EXIT_FAILURE)
        return EXIT_OK


class TruncateResults(_SubmissionStep):
    def handle(self) -> int:
        from ..common.submission.truncate import truncate_tree

        report = truncate_tree(self.ctx.paths.staging, self.ctx.paths.full_results, self.ctx.rules, self.ctx.log)
        if report.truncated:
            self.ctx.log(f"Truncated {len(report.truncated)} accuracy log(s); the full logs are in "
                         f"{self.ctx.paths.full_results}")
        if report.already and not report.truncated:
            self.ctx.log(f"Nothing to do: all {len(report.already)} accuracy log(s) were already truncated.")
        return EXIT_OK


class ExportSubmission(_SubmissionStep):
    def handle(self) -> int:
        from ..common.submission.export import export_tree

        if not self.ctx.paths.staging.is_dir():
            raise UserError("Nothing staged yet: run make stage_results first.", exit_code=EXIT_FAILURE)
        items = [self.ctx.paths.repo / item for item in SRC_ITEMS if (self.ctx.paths.repo / item).exists()]
        dest = export_tree(self.ctx.paths.staging, self.ctx.paths.submission, items, self.ctx.paths.repo,
                           self.ctx.log)
        self.ctx.log(f"Exported to {dest}")
        return EXIT_OK


class CheckSubmission(_SubmissionStep):
    def handle(self) -> int:
        from ..common.submission.checker import check_submission

        ctx, root = self.ctx, self.ctx.paths.submission
        if ctx.args.submitter and root.is_dir():
            # A tree exported for another submitter is not checked for this one; an earlier pass of it stays.
            check_record.require_submitter(root, ctx.args.submitter, "check_submission", ctx.paths.staging)
        check_record.forget_record(ctx.paths.submission_check_record)   # only a pass of this check may let pack go
        if not root.is_dir():
            raise UserError("No exported tree: run make export_submission first.", exit_code=EXIT_FAILURE)
        report = check_submission(root, ctx.rules, ctx.args.allow_test_runs, paths=ctx.paths)
        text = report.text()
        ctx.log(text.rstrip())
        for results in root.glob("*/*/results"):
            write_atomically(results / CHECKER_LOG, text)
        official_failed = official_waived = False
        inference_dir = os.environ.get("MLPERF_INFERENCE_DIR")
        if inference_dir:
            from ..common.submission.official import run_official_checker

            results = run_official_checker(Path(inference_dir), root, ctx.rules.version,
                                           ctx.paths.official_checker_dir, ctx.log)
            official_failed = not all(r.passed for r in results)
            if official_failed and ctx.args.allow_test_runs:
                ctx.log("Expected for a dry run: the official checker accepts no short test runs. Its log says "
                        "whether anything else is wrong; a real submission must pass it.")
                official_failed, official_waived = False, True
        if report.errors or official_failed:
            return EXIT_FAILURE
        self._record_pass(relaxed=ctx.args.allow_test_runs and (bool(report.warnings) or official_waived))
        return EXIT_OK

    def _record_pass(self, relaxed: bool) -> None:
        """The digest of the tree as it passed (its checker logs included): pack_submission packs only that."""
        ctx = self.ctx
        record_file = ctx.paths.submission_check_record
        check_record.write_record(record_file, ctx.paths.submission, ctx.args.allow_test_runs, relaxed)
        ctx.log(f"recorded the passing check in {record_file}: make pack_submission packs this tree as it is now"
                + (" (a dry run: pack it with RUN_ARGS=\"--allow_test_runs\")" if relaxed else ""))


class PackSubmission(_SubmissionStep):
    def handle(self) -> int:
        from ..common.submission.pack import pack_tree

        ctx, submitter = self.ctx, self.submitter()
        if not ctx.paths.submission.is_dir():
            raise UserError("No exported tree: run make export_submission first.", exit_code=EXIT_FAILURE)
        # Checked when the arguments were parsed; read again here, as the file may have changed since.
        passphrase = read_passphrase_file(ctx.args.passphrase_file) if ctx.args.passphrase_file else None
        check_record.require_passed_check(ctx.paths.submission_check_record, ctx.paths.submission, submitter,
                                          ctx.args.allow_test_runs, ctx.paths.staging)
        result = pack_tree(ctx.paths.submission, ctx.paths.tarball(submitter), passphrase, ctx.log,
                           submitter=submitter)
        ctx.log(f"wrote {result.tarball} and {result.sha1_file}")
        if result.encrypted:
            ctx.log(f"for MLCommons: {result.encrypted} and {result.encrypted_sha1} (what "
                    f"tools/submission/pack_submission.sh --unpack opens, with SUBMITTER={submitter} set in it); "
                    f"by hand, in a folder holding both: {result.decrypt_command}")
        return EXIT_OK


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "?"
