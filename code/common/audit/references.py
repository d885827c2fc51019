"""The submission's own runs a compliance test is compared with: exactly the ones stage_results stages.

They are chosen by records/runs.choose_runs, the function staging uses, over the same metadata.json files, so
the audited run, the staged run and the README's command line are one run. Test runs count as in a dry run:
a full VALID run outranks every test run, so this is the run stage_results stages with or without
--allow_test_runs, whenever it stages any.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from ..config_registry import ResolvedConfig
from ..constants import AUDIT_ACTION, TestMode
from ..errors import EXIT_FAILURE, UserError
from ..records.metadata import RunRecord
from ..records.computation import differing_fields
from ..records.reproduce import record_selection
from ..records.runs import Choice, choose_runs, conflict_message, load_records


@dataclass(frozen=True)
class Reference:
    performance: RunRecord | None
    accuracy: RunRecord | None

    def missing(self) -> list[TestMode]:
        return [mode for mode, record in ((TestMode.PerformanceOnly, self.performance),
                                          (TestMode.AccuracyOnly, self.accuracy)) if record is None]


def _differences(record: RunRecord, config: ResolvedConfig) -> list[str]:
    fields = record.config.fields
    return [f"{name}={fields.get(name)}, not {config[name]}"
            for name in differing_fields(fields, config.values, record.config.benchmark_defaults,
                                         config.benchmark_defaults)]


def find_references(roots: Iterable[Path], system_id: str, config: ResolvedConfig,
                    log: Callable[[str], None] = print) -> Reference:
    """The performance and accuracy runs stage_results would stage for this config's benchmark and scenario.

    UserError (exit 1) when the run staging would submit computes something else than `config` (another model,
    data set, backend, precision or generation cap): the test would be compared with a run that is never staged;
    and when the accuracy runs of that run's computation disagree, as stage_results stages none of them."""
    key = (system_id, config.benchmark, config.scenario)
    choice = choose_runs(load_records(roots, log), allow_test_runs=True, system_id=system_id).get(key, Choice())
    if choice.conflict:
        raise UserError(conflict_message(f"{config.benchmark} {config.scenario.value}", choice.conflict,
                                         then="make run_audit_harness"), exit_code=EXIT_FAILURE)
    performance = choice.performance
    if performance is not None and _differences(performance, config):
        raise UserError(
            f"The compliance tests of {config.benchmark} {config.scenario.value} are compared with the run "
            f"stage_results stages, {performance.log_dir}, which computes something else than the selected "
            f"config ({'; '.join(_differences(performance, config))}). Select that run: "
            f"{record_selection(performance).without_test().command(AUDIT_ACTION)}", exit_code=EXIT_FAILURE)
    accuracy = choice.accuracy
    if accuracy is not None and _differences(accuracy, config):
        accuracy = None
    return Reference(performance=performance, accuracy=accuracy)
