"""The official MLCommons submission checker, run on the exported tree when the user has a checkout of the
MLCommons inference repository (`MLPERF_INFERENCE_DIR`). The toolkit's own checker runs regardless; this one is
the referee that decides on submission day, so its verdict is saved beside ours.
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import UserError
from ..fileio import write_atomically

LOG_NAME = "official_submission_checker_log.txt"
# The checker became a package (tools/submission/submission_checker/main.py) in the v5.x rounds; older
# checkouts have the single script.
PACKAGE = Path("tools/submission/submission_checker/main.py")
SCRIPT = Path("tools/submission/submission_checker.py")


@dataclass(frozen=True)
class OfficialResult:
    submitter: str
    returncode: int
    log: Path

    @property
    def passed(self) -> bool:
        return self.returncode == 0


def checker_command(inference_dir: Path, root: Path, version: str, submitter: str,
                    csv: Path) -> tuple[list[str], Path]:
    """(command, working directory) of the official checker in `inference_dir`."""
    arguments = ["--input", str(root), "--version", version, "--submitter", submitter, "--csv", str(csv)]
    if (inference_dir / PACKAGE).is_file():
        # Run as a module from tools/submission, so its relative imports resolve as they do upstream.
        return [sys.executable, "-m", "submission_checker.main", *arguments], inference_dir / PACKAGE.parent.parent
    if (inference_dir / SCRIPT).is_file():
        return [sys.executable, str(inference_dir / SCRIPT), *arguments], inference_dir / SCRIPT.parent
    raise UserError(f"MLPERF_INFERENCE_DIR={inference_dir} is not a checkout of the MLCommons inference repository: "
                    f"it has neither {PACKAGE} nor {SCRIPT}.", exit_code=1)


def run_official_checker(inference_dir: Path, root: Path, version: str, summary_dir: Path,
                         log: Callable[[str], None]) -> list[OfficialResult]:
    """Run the official checker once per submitter folder of `root`. Its output goes to
    `<division>/<submitter>/results/official_submission_checker_log.txt`, its CSV summary to `summary_dir`
    (outside the tree, which must hold only what is submitted)."""
    results = []
    summary_dir.mkdir(parents=True, exist_ok=True)
    for submitter_dir in sorted(p for p in root.glob("*/*") if p.is_dir()):
        results_dir = submitter_dir / "results"
        summary = summary_dir / f"{submitter_dir.parent.name}-{submitter_dir.name}-summary.csv"
        command, cwd = checker_command(Path(inference_dir), root, version, submitter_dir.name, summary)
        done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
        path = write_atomically(results_dir / LOG_NAME, f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
        verdict = "passed" if done.returncode == 0 else f"FAILED (exit status {done.returncode})"
        log(f"official checker {version} for {submitter_dir.parent.name}/{submitter_dir.name}: {verdict}; "
            f"its output is in {path}")
        results.append(OfficialResult(submitter_dir.name, done.returncode, path))
    return results
