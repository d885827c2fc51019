"""The official MLCommons submission checkers, run on the exported tree when the user has a checkout of the
MLCommons inference repository (`MLPERF_INFERENCE_DIR`): tools/submission/submission_checker/main.py, the checker
of record, and tools/submission/submission_checker_old.py where the checkout still has it, both with the round's
`--version`. The toolkit's own checker runs regardless and gives their joint verdict; these are the referees that
decide on submission day, so their output is saved beside ours (outside the tree).
"""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..errors import EXIT_FAILURE, UserError
from ..fileio import write_atomically

# The checker became a package (tools/submission/submission_checker/main.py) in the v5.x rounds and the single
# script was kept as submission_checker_old.py; older checkouts have only submission_checker.py.
PACKAGE = Path("tools/submission/submission_checker/main.py")
OLD_SCRIPT = Path("tools/submission/submission_checker_old.py")
SCRIPT = Path("tools/submission/submission_checker.py")


@dataclass(frozen=True)
class OfficialResult:
    submitter: str
    checker: str          # "main.py", "submission_checker_old.py" or "submission_checker.py"
    returncode: int
    log: Path

    @property
    def passed(self) -> bool:
        return self.returncode == 0


def checker_commands(inference_dir: Path, root: Path, version: str, submitter: str,
                     csv_dir: Path) -> list[tuple[str, list[str], Path]]:
    """(name, command, working directory) of each official checker in `inference_dir`."""
    def arguments(name: str) -> list[str]:
        return ["--input", str(root), "--version", version, "--submitter", submitter,
                "--csv", str(csv_dir / f"{submitter}-{name}.csv")]

    found = []
    if (inference_dir / PACKAGE).is_file():
        # Run as a module from tools/submission, so its relative imports resolve as they do upstream.
        found.append(("main.py", [sys.executable, "-B", "-m", "submission_checker.main", *arguments("main")],
                      inference_dir / PACKAGE.parent.parent))
    for script in (OLD_SCRIPT, SCRIPT):
        if (inference_dir / script).is_file():
            found.append((script.name, [sys.executable, "-B", str(inference_dir / script), *arguments(script.stem)],
                          inference_dir / script.parent))
            break
    if not found:
        raise UserError(f"MLPERF_INFERENCE_DIR={inference_dir} is not a checkout of the MLCommons inference "
                        f"repository: it has none of {PACKAGE}, {OLD_SCRIPT}, {SCRIPT}.", exit_code=EXIT_FAILURE)
    return found


def run_official_checker(inference_dir: Path, root: Path, version: str, summary_dir: Path,
                         log: Callable[[str], None]) -> list[OfficialResult]:
    """Run each official checker once per submitter folder of `root`. Output and CSV summaries go to
    `summary_dir` (outside the tree, which must hold only what is submitted)."""
    results = []
    summary_dir.mkdir(parents=True, exist_ok=True)
    for submitter_dir in sorted(p for p in root.glob("*/*") if p.is_dir()):
        label = f"{submitter_dir.parent.name}/{submitter_dir.name}"
        for name, command, cwd in checker_commands(Path(inference_dir), root, version, submitter_dir.name,
                                                   summary_dir):
            done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
            path = write_atomically(summary_dir / f"{submitter_dir.parent.name}-{submitter_dir.name}-{name}.log",
                                    f"$ {' '.join(command)}\n{done.stdout}{done.stderr}")
            crashed = "Traceback (most recent call last)" in done.stdout + done.stderr
            verdict = "passed" if done.returncode == 0 else \
                f"FAILED (exit status {done.returncode}{', it crashed' if crashed else ''})"
            log(f"official {name} {version} for {label}: {verdict}; its output is in {path}")
            results.append(OfficialResult(submitter_dir.name, name, done.returncode, path))
    return results
