"""One performance test with some config fields set, for find_peak and bench: run, and read back as an Outcome.

Every run here is planned with purpose "bench", so staging never takes it for a result, and goes into the run
folder it is given.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from ..common.constants import Scenario, TestMode
from ..common.errors import EXIT_FAILURE, UserError
from ..common.harness.runner import plan_test, run_test
from ..common.tuning.search import Outcome
from ..common.tuning.trials import FIND_PEAK_SOURCE, SHORT_RUNS, outcome_of


def with_fields(ctx, scenarios: tuple[Scenario, ...], test_run: bool, fields: Mapping[str, Any],
                source: str = FIND_PEAK_SOURCE):
    """A copy of the action context that selects `scenarios` and sets `fields` over the command line's, recorded
    as filled in by `source`."""
    args = ctx.args.fill_in(source, fields, scenarios=scenarios, test_run=test_run)
    return dataclasses.replace(ctx, args=args, _registry=None)


def run_once(ctx, benchmark: str, scenario: Scenario, run_dir: Path, fields: Mapping[str, Any],
             short: bool = True, source: str = FIND_PEAK_SOURCE) -> Outcome:
    """One PerformanceOnly test with `fields` set, short (SHORT_RUNS, unless `fields` set the length) or at full
    length, into `run_dir`. A run that did not complete (the harness failed) stops the search: a UserError naming
    the folder."""
    run_fields = {**(SHORT_RUNS[scenario] if short else {}), **fields}
    run_ctx = with_fields(ctx, (scenario,), short, run_fields, source)
    spec = plan_test(run_ctx, benchmark, scenario, TestMode.PerformanceOnly, log_dir=run_dir, purpose="bench")
    record = run_test(spec, ctx.paths.repo, log=lambda _: None)
    if not record.completed:
        raise UserError(f"The {benchmark} {scenario.value} run in {run_dir} did not complete ({record.status}: "
                        f"{record.error}); see harness_error.txt there. The search stopped.", exit_code=EXIT_FAILURE)
    return outcome_of(Path(record.log_dir), bool(record.valid), record.reasons)
