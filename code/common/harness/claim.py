"""One run folder, one run: a run folder is created exclusively by the run that writes it.

os.mkdir either creates the folder or fails because it exists, atomically, so of two runs that planned the
same folder (two invocations with the same LOG_DIR, benchmark, scenario and test mode) exactly one gets it;
the other stops before it writes anything, and neither overwrites the other's logs or metadata.json.
Planning refuses an existing run folder early, before the first test of an invocation starts; the claim
itself is what settles a race between two invocations that both planned the folder.
"""
from __future__ import annotations

from pathlib import Path

from ..disk_full import DiskFull, disk_full_cause, existing_folder, why
from ..errors import EXIT_BAD_INPUT, EXIT_FAILURE, UserError



def _in_use(run_dir: Path) -> UserError:
    return UserError(f"The run folder {run_dir} is already in use by another run (running now, or one that "
                     f"stopped without a record); results are never overwritten. Use another LOG_DIR (by default "
                     f"every invocation gets a folder of its own) or, for run_audit_harness, start it again.",
                     exit_code=EXIT_FAILURE)


def refuse_used_run_dir(run_dir: Path) -> None:
    """Stop at planning, before any test starts, when `run_dir` exists: it belongs to another run. (One that
    holds a result, a metadata.json, is refused before this with a message of its own.)"""
    if run_dir.exists():
        raise _in_use(run_dir)


def claim_run_dir(run_dir: Path) -> Path:
    """Create `run_dir` for this run alone; a UserError (exit status 1) when it exists already."""
    run_dir = Path(run_dir)
    try:
        run_dir.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise _cannot_create(run_dir, error) from None
    try:
        run_dir.mkdir()
    except FileExistsError:
        raise _in_use(run_dir) from None
    except OSError as error:
        raise _cannot_create(run_dir, error) from None
    return run_dir


def _cannot_create(run_dir: Path, error: OSError) -> UserError:
    if disk_full_cause(error) is not None:
        return DiskFull(existing_folder(run_dir), why(error), context=f"Cannot create the run folder {run_dir}: ")
    return UserError(f"Cannot create the run folder {run_dir}: {error.strerror or error}. Set LOG_DIR to a "
                     f"folder you can write to.", exit_code=EXIT_BAD_INPUT)
