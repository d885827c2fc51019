"""A harness child for the --resume tests: no LoadGen, no model; a test's first attempt ends INVALID, a retry VALID.

`python -m tests.resume_child <run_spec.json> [<watch pipe fd>]` writes only the metadata.json that
code.common.harness.child would write for a completed test, so that --resume meets an INVALID first attempt and a
VALID retry without running anything.
"""
from __future__ import annotations

import sys
from pathlib import Path

from code.common.harness.child import base_record
from code.common.records.loadgen_log import Metric
from code.common.records.metadata import COMPLETED, write_metadata
from code.common.harness.spec import RunSpec
from code.common.paths import RETRY_SUFFIX

FIRST_ATTEMPT_REASON = "injected: a first attempt is INVALID"


def main(argv: list[str]) -> int:
    spec = RunSpec.load(Path(argv[0]))
    valid = RETRY_SUFFIX in Path(spec.log_dir).name
    record = base_record(spec, COMPLETED, valid=valid, submittable=False, result_validity="VALID" if valid else
                         "INVALID", metric=Metric("samples per second", 100.0, "samples/s", True),
                         reasons=() if valid else (FIRST_ATTEMPT_REASON,), started="2026-01-01T00:00:00+00:00",
                         finished="2026-01-01T00:00:01+00:00")
    write_metadata(Path(spec.log_dir), record)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
