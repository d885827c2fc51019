"""The toolkit's own check of a tree's compliance folders: each verdict derived again from its logs, each laid-out
log against the sha256 its compliance run recorded.

The official checkers read a TEST0x/ verdict file as it is: a verify_accuracy.txt edited from TEST FAIL to TEST PASS
passes them. Here each verdict is recomputed from the logs beside it, as stage_compliance recomputed it:
TEST01/TEST04 against the scenario's own performance run, TEST01's sampled responses against its accuracy run,
TEST09 counted against the samples its run issued and measured, and, with the toolkit's folders at hand, TEST06
with the EOS token ids and TEST07 scored again on the compliance data set its run used. A verdict file that says
otherwise is an error naming the file and both verdicts. Truncated accuracy logs are taken whole from the backups
truncate_results kept (cross_checks.AccuracyCheck checks a cut log against its backup).

What stage_compliance staged each test from (the compliance run's record, the sha256 of its logs, its model and
data set, TEST06's EOS ids) it records in a hidden file of the staging tree, which export_submission leaves out.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from ..audit.evidence import (digest_problems, disagreement, laid_out_logs, laid_out_problems,
                              written_verdict)
from ..audit.test06 import verify_test06
from ..audit.test07 import score_test07
from ..audit.test09 import issued_samples, verify_test09
from ..audit.verify import (Check, compare_accuracy_logs, read_accuracy_log, verify_performance,
                            verify_test01_accuracy)
from ..errors import UserError
from ..fileio import sha256_file, write_atomically
from ..paths import (ACCURACY_LOG, ACCURACY_TXT, COMPLIANCE_DIRS, DETAIL_LOG, RUN_RECORD, SUMMARY_LOG,
                     VERIFY_ACCURACY, VERIFY_OUTPUT_LEN, VERIFY_PERFORMANCE, accuracy_dir, performance_run_dir)
from ..records.loadgen_log import read_detail
from ..records.metadata import RunRecord, read_metadata
from .checker_rules import ERROR, ScenarioContext
from .cross_checks import OWN_CHECK, TreeSources
from .truncate import HASH_LINE

COMPLIANCE_PROVENANCE = ".compliance_provenance.json"   # in a staged scenario folder: {test: what it was staged from}
RERUN = "run the test again (make run_audit_harness), then make stage_compliance truncate_results export_submission"


# -- what stage_compliance records -------------------------------------------------------------------------------
def compliance_provenance(record: RunRecord | None, against: Mapping[str, Any]) -> dict[str, Any]:
    """What a staged TEST0x was staged from: its compliance run's record and the sha256 of the logs it wrote, the
    model and data set it ran (TEST07 is scored on them again), TEST06's EOS token ids."""
    entry: dict[str, Any] = {}
    if record is not None:
        entry.update(run_record=str(record.path or Path(record.log_dir) / RUN_RECORD), model=record.model,
                     dataset=record.dataset, benchmark=record.benchmark, log_sha256=dict(record.log_sha256))
    if isinstance(against.get("eos_token_ids"), list):
        entry["eos_token_ids"] = [int(i) for i in against["eos_token_ids"]]
    return entry


def write_compliance_provenance(scenario_dir: Path, entries: Mapping[str, dict[str, Any]]) -> None:
    """Record (in the staging tree, never exported) what each staged TEST0x of the scenario was staged from."""
    path = scenario_dir / COMPLIANCE_PROVENANCE
    if entries:
        write_atomically(path, json.dumps(dict(entries), indent=2) + "\n")
    else:
        path.unlink(missing_ok=True)


def _read_provenance(sources: TreeSources, scenario_dir: Path) -> tuple[dict[str, Any], Path | None]:
    """(what stage_compliance recorded for the scenario, where it is kept); ({}, None) without a staging tree."""
    where = sources.provenance_of(scenario_dir)
    if where is None:
        return {}, None
    path = where.parent / COMPLIANCE_PROVENANCE
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}, path
    return (data if isinstance(data, dict) else {}), path


# -- the check of a tree -----------------------------------------------------------------------------------------
def check_compliance_evidence(ctx: ScenarioContext, sources: TreeSources) -> None:
    """Every TEST0x/ of one results scenario folder: its logs readable files, not the submission run's own, against
    its run's digests, its verdicts derived. With the toolkit's folders (make check_submission), evidence that
    stage_compliance did not stage from a recorded compliance run, or whose verdict cannot be derived again, fails."""
    if ctx.benchmark is None:
        return
    provenance, where = _read_provenance(sources, ctx.folder)
    for folder in sorted(ctx.folder.glob(COMPLIANCE_DIRS)):
        if folder.is_symlink() or not folder.is_dir():
            ctx.report(ERROR, folder, f"{folder.name} is {'a link' if folder.is_symlink() else 'a file'} where a "
                                      f"compliance folder should be, so nothing in it could be verified "
                                      f"({OWN_CHECK}); {RERUN}.")
            continue
        spec = ctx.rules.compliance_tests.get(folder.name)
        if spec is None or folder.name not in ctx.benchmark.compliance_tests:
            ctx.report(ERROR, folder, f"{folder.name}/ is not a compliance test of {ctx.benchmark_key} in "
                                      f"{ctx.rules.version}, so nothing verifies it ({OWN_CHECK}); remove it and run "
                                      f"make export_submission again.")
            continue
        staged = provenance.get(folder.name)
        EvidenceCheck(ctx, sources, folder, spec, staged if isinstance(staged, dict) else {}, where).run()


class EvidenceCheck:
    def __init__(self, ctx: ScenarioContext, sources: TreeSources, folder: Path, spec, staged: dict[str, Any],
                 recorded_in: Path | None = None):
        self.ctx, self.sources, self.folder, self.spec, self.staged = ctx, sources, folder, spec, staged
        self.recorded_in = recorded_in
        # make check_submission (the toolkit's folders at hand): what cannot be verified fails. The tree alone
        # gets the checks its own files allow.
        self.strict = sources.paths is not None
        self.unrecorded = False     # refused already: what cannot be derived then goes without saying

    def run(self) -> None:
        if self._unusable() or self._submission_runs_own():
            return
        self.unrecorded = self._unrecorded()
        if self._digests():
            return     # logs that are not the run's give no verdict worth deriving
        spec = self.spec
        if spec.compares_performance:
            self._agree(VERIFY_PERFORMANCE, self._performance())
        if spec.samples_accuracy:
            self._agree(VERIFY_ACCURACY, self._sampled())
        if spec.checks_output_tokens:
            self._agree(VERIFY_ACCURACY, self._tokens())
        if spec.scores_accuracy:
            self._agree(VERIFY_ACCURACY, self._scored())
        if spec.checks_output_length:
            self._agree(VERIFY_OUTPUT_LEN, self._lengths())

    def _error(self, path: Path, problem: str) -> None:
        self.ctx.report(ERROR, path, f"{problem} ({OWN_CHECK}); {RERUN}.")

    def _not_derived(self, path: Path, why: str) -> None:
        """A verdict that could not be derived again: a failure under make check_submission."""
        if self.strict and not self.unrecorded:
            self._error(path, f"{path.name} cannot be verified: {why}")

    # -- the evidence itself -------------------------------------------------------------------------------
    def _required_logs(self) -> list[Path]:
        spec, logs = self.spec, []
        if spec.compares_performance:
            logs += [performance_run_dir(self.folder) / SUMMARY_LOG, performance_run_dir(self.folder) / DETAIL_LOG]
        if spec.samples_accuracy or spec.checks_output_tokens or spec.scores_accuracy or spec.checks_output_length:
            logs.append(accuracy_dir(self.folder) / ACCURACY_LOG)
        return logs

    def _unusable(self) -> bool:
        """Each log place holding a link, a folder or an unreadable file, and (make check_submission) each log the
        test's verdict is derived from that is missing; whether there was one."""
        problems = laid_out_problems(self.folder)
        if self.strict:
            problems += [(path, f"{path} is missing, and {self.folder.name}'s verdict is derived from it")
                         for path in self._required_logs() if not path.exists() and not path.is_symlink()]
        for path, problem in problems:
            self._error(path, problem)
        return bool(problems)

    def _submission_runs_own(self) -> bool:
        """A compliance folder laying out the detail log of the submission run itself (its performance or accuracy
        run) instead of a compliance run's: each LoadGen run writes its own (its start time, its settings), so an
        identical one was copied in by hand."""
        own = (performance_run_dir(self.ctx.folder) / DETAIL_LOG, accuracy_dir(self.ctx.folder) / DETAIL_LOG)
        log = performance_run_dir(self.folder) / DETAIL_LOG
        if not log.is_file():
            return False
        digest = sha256_file(log)
        same = next((path for path in own if path.is_file() and sha256_file(path) == digest), None)
        if same is not None:
            self._error(log, f"{log} is the submission run's own {DETAIL_LOG} ({same}), not one a compliance run "
                             f"wrote: the test was not run, its folder was filled by hand")
        return same is not None

    def _unrecorded(self) -> bool:
        """make check_submission: evidence that stage_compliance did not stage from a recorded compliance run
        (no record of it in the staging tree, or one without the sha256 of its logs) is refused."""
        if not self.strict or isinstance(self.staged.get("log_sha256"), dict):
            return False
        where = self.recorded_in or (self.sources.paths.staging if self.sources.paths else "the staging tree")
        self._error(self.folder, f"{self.folder.name}/ was not staged by make stage_compliance from a recorded "
                                 f"compliance run ({where} holds no record of it with the sha256 of its logs): "
                                 f"compliance evidence put in the tree by hand, or whose run's record is gone, "
                                 f"cannot be verified")
        return True

    # -- the logs ------------------------------------------------------------------------------------------
    def _whole(self, log: Path) -> Path | None:
        """`log` whole: itself, or the backup truncate_results kept of it (None when not at hand)."""
        txt = log.parent / ACCURACY_TXT
        if not log.is_file():
            return None
        if txt.is_file() and HASH_LINE.search(txt.read_text(errors="replace")):
            backup = self.sources.backup_of(log)
            return backup if backup is not None and backup.is_file() else None
        return log

    def _digests(self) -> bool:
        """Each log of the folder against the sha256 its compliance run recorded (the record as staged, or read
        again when it is still there); whether one differs."""
        digests = self.staged.get("log_sha256")
        run = self.staged.get("run_record")
        if isinstance(run, str):
            try:
                digests = read_metadata(Path(run)).log_sha256 or digests
            except Exception:  # noqa: BLE001 - the record as staging read it stands in for one gone since
                pass
        if not isinstance(digests, dict):
            return False
        logs = {SUMMARY_LOG: performance_run_dir(self.folder) / SUMMARY_LOG,
                DETAIL_LOG: performance_run_dir(self.folder) / DETAIL_LOG,
                ACCURACY_LOG: self._whole(accuracy_dir(self.folder) / ACCURACY_LOG)}
        present = {name: path for name, path in logs.items() if path is not None and path.is_file()}
        problems = digest_problems(present, digests, run or "its compliance run")
        for path, message in problems:
            self.ctx.report(ERROR, path, f"{message} ({OWN_CHECK}); {RERUN}.")
        return bool(problems)

    # -- the verdicts ---------------------------------------------------------------------------------------
    def _agree(self, name: str, derived: Check | None) -> None:
        if derived is None:
            return
        path = self.folder / name
        found = disagreement(path, written_verdict(path), derived)
        if found is not None:
            self.ctx.report(ERROR, path, f"{found[1]} ({OWN_CHECK}); {RERUN}.")

    def _performance(self) -> Check | None:
        reference, run_1 = performance_run_dir(self.ctx.folder), performance_run_dir(self.folder)
        if not all((d / n).is_file() for d in (reference, run_1) for n in (SUMMARY_LOG, DETAIL_LOG)):
            return None     # the official checks report what is missing
        return verify_performance(self.spec, reference, run_1)

    def _response(self):
        from ..benchmark_api import get_benchmark

        return get_benchmark(self.ctx.benchmark_key).response

    def _sampled(self) -> Check | None:
        full = self._whole(accuracy_dir(self.ctx.folder) / ACCURACY_LOG)
        sampled = self._whole(accuracy_dir(self.folder) / ACCURACY_LOG)
        if full is None or sampled is None:
            self._not_derived(self.folder / VERIFY_ACCURACY, f"an {ACCURACY_LOG} it compares was cut and its full "
                                                             f"copy is not in the backups of truncate_results")
            return None
        try:
            return verify_test01_accuracy(compare_accuracy_logs(read_accuracy_log(full), read_accuracy_log(sampled),
                                                                self._response().np_dtype))
        except (OSError, ValueError, KeyError, TypeError):
            return None     # a log that does not parse is cross_checks' finding

    def _tokens(self) -> Check | None:
        eos = self.staged.get("eos_token_ids")
        log = self._whole(accuracy_dir(self.folder) / ACCURACY_LOG)
        if not eos or log is None:
            why = ("no EOS token ids were recorded when it was staged" if not eos else
                   f"its {ACCURACY_LOG} was cut and its full copy is not in the backups of truncate_results")
            self._not_derived(self.folder / VERIFY_ACCURACY, why)
            return None
        try:
            entries = read_accuracy_log(log)
        except (OSError, ValueError):
            return None
        logged = read_detail(performance_run_dir(self.ctx.folder)).scenario
        return verify_test06(entries, logged, eos, self._response().np_dtype)

    def _lengths(self) -> Check | None:
        log = self._whole(accuracy_dir(self.folder) / ACCURACY_LOG)
        detail = performance_run_dir(self.folder) / DETAIL_LOG
        if log is None:
            self._not_derived(self.folder / VERIFY_OUTPUT_LEN, f"its {ACCURACY_LOG} was cut and its full copy is not "
                                                               f"in the backups of truncate_results")
            return None
        issued = issued_samples(read_detail(detail.parent)) if detail.is_file() else None
        if issued is None:
            self.ctx.report(ERROR, detail, f"{self.folder.name}'s detail log is missing or does not say how many "
                                           f"samples the run issued, so its responses cannot be counted "
                                           f"({OWN_CHECK}); {RERUN}.")
            return None
        try:
            entries = read_accuracy_log(log)
        except (OSError, ValueError) as error:
            entries = f"unreadable: {error}"
        return verify_test09(entries, self.spec.output_token_bounds, self._response().np_dtype, issued,
                             self.spec.accuracy_log_sampling_target)

    def _scored(self) -> Check | None:
        log = self._whole(accuracy_dir(self.folder) / ACCURACY_LOG)
        model, dataset = self.staged.get("model"), self.staged.get("dataset")
        if self.sources.paths is None:
            return None     # the compliance data set and the scorer are the toolkit's: only with its folders
        if log is None or not isinstance(model, str) or not isinstance(dataset, str):
            why = ("no record names the model and compliance data set it was scored on" if log is not None else
                   f"its {ACCURACY_LOG} was cut and its full copy is not in the backups of truncate_results")
            self._not_derived(self.folder / VERIFY_ACCURACY, why)
            return None
        from ..benchmark_api import get_benchmark

        benchmark = get_benchmark(self.ctx.benchmark_key)
        try:
            benchmark.preprocessed(model, dataset, self.sources.paths)
        except UserError as error:
            self.ctx.report(ERROR, self.folder / VERIFY_ACCURACY,
                            f"{VERIFY_ACCURACY} cannot be verified, the compliance data set it is scored on is not "
                            f"at hand ({error}); point MLPERF_SCRATCH_PATH at it and run make check_submission "
                            f"again.")
            return None
        return score_test07(benchmark, model, dataset, log, self.sources.paths, self.spec.accuracy_threshold,
                            self.spec.score_pattern)
