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

from ..audit.evidence import digest_problems, disagreement, written_verdict
from ..audit.test06 import verify_test06
from ..audit.test07 import score_test07
from ..audit.test09 import issued_samples, verify_test09
from ..audit.verify import (Check, compare_accuracy_logs, read_accuracy_log, verify_performance,
                            verify_test01_accuracy)
from ..errors import UserError
from ..fileio import write_atomically
from ..paths import (ACCURACY_LOG, ACCURACY_TXT, COMPLIANCE_DIRS, DETAIL_LOG, RUN_RECORD, SUMMARY_LOG,
                     VERIFY_ACCURACY, VERIFY_OUTPUT_LEN, VERIFY_PERFORMANCE, accuracy_dir, performance_run_dir)
from ..records.loadgen_log import read_detail
from ..records.metadata import RunRecord, read_metadata
from .checker_rules import ERROR, WARNING, ScenarioContext
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


def _read_provenance(sources: TreeSources, scenario_dir: Path) -> dict[str, Any]:
    where = sources.provenance_of(scenario_dir)
    if where is None:
        return {}
    try:
        data = json.loads((where.parent / COMPLIANCE_PROVENANCE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


# -- the check of a tree -----------------------------------------------------------------------------------------
def check_compliance_evidence(ctx: ScenarioContext, sources: TreeSources) -> None:
    """Every TEST0x/ of one results scenario folder: its logs against its run's digests, its verdicts derived."""
    if ctx.benchmark is None:
        return
    provenance = _read_provenance(sources, ctx.folder)
    for folder in sorted(p for p in ctx.folder.glob(COMPLIANCE_DIRS) if p.is_dir()):
        spec = ctx.rules.compliance_tests.get(folder.name)
        if spec is None or folder.name not in ctx.benchmark.compliance_tests:
            continue
        staged = provenance.get(folder.name)
        EvidenceCheck(ctx, sources, folder, spec, staged if isinstance(staged, dict) else {}).run()


class EvidenceCheck:
    def __init__(self, ctx: ScenarioContext, sources: TreeSources, folder: Path, spec, staged: dict[str, Any]):
        self.ctx, self.sources, self.folder, self.spec, self.staged = ctx, sources, folder, spec, staged

    def run(self) -> None:
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
        if log is None or self.sources.paths is None or not isinstance(model, str) or not isinstance(dataset, str):
            return None     # the compliance data set and the scorer are the toolkit's: only with its folders
        from ..benchmark_api import get_benchmark

        benchmark = get_benchmark(self.ctx.benchmark_key)
        try:
            benchmark.preprocessed(model, dataset, self.sources.paths)
        except UserError as error:
            self.ctx.report(WARNING, self.folder / VERIFY_ACCURACY,
                            f"{VERIFY_ACCURACY} was not scored again, the compliance data set is not at hand "
                            f"({error}); point MLPERF_SCRATCH_PATH at it and run make check_submission again.")
            return None
        return score_test07(benchmark, model, dataset, log, self.sources.paths, self.spec.accuracy_threshold,
                            self.spec.score_pattern)
