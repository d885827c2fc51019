"""Truncate the accuracy logs of a staging tree the way the submission checker expects.

Per accuracy folder (`<Scenario>/accuracy/` and `<Scenario>/TEST01/accuracy/`): back the full logs up,
append `hash=<sha256 of the untruncated json>` to accuracy.txt, then keep only the first and last
`keep` characters of mlperf_log_accuracy.json. The hash line marks a folder as done, so a second
run changes nothing. TEST06/accuracy/ (an LLM's sampled responses, with no accuracy.txt) stays whole, as the
official truncate_accuracy_log.py leaves it; TEST07/accuracy/ and TEST09/accuracy/ (gpt-oss-120b's whole
compliance logs, with no accuracy.txt) are cut too, their accuracy.txt written with the hash line alone, as the
official script does.
"""
from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EXIT_FAILURE, UserError
from ..fileio import atomic_path, sha256_file, write_atomically
from ..paths import ACCURACY_DIR, ACCURACY_LOG, ACCURACY_TXT, RESULTS_DIR
from ..rules import RulesRound

Log = Callable[[str], None]
# <division>/<submitter>/results/<system>/<benchmark>/<Scenario>/[TEST01/]accuracy
_PATTERNS = (f"*/*/{RESULTS_DIR}/*/*/*/{ACCURACY_DIR}",
             *(f"*/*/{RESULTS_DIR}/*/*/*/{test}/{ACCURACY_DIR}" for test in ("TEST01", "TEST07", "TEST09")))
# Compliance folders whose accuracy/ holds the log alone: truncation writes their accuracy.txt (the hash line).
HASH_ONLY_TESTS = ("TEST07", "TEST09")
# The line truncate_results appends to accuracy.txt; it marks the folder as truncated.
HASH_LINE = re.compile(r"^hash=([0-9a-fA-F]{64})\s*$", re.MULTILINE)


@dataclass
class TruncateReport:
    truncated: list[Path] = field(default_factory=list)   # accuracy folders truncated by this call
    already: list[Path] = field(default_factory=list)     # accuracy folders found truncated before

    @property
    def changed(self) -> bool:
        return bool(self.truncated)


def accuracy_dirs(root: Path) -> list[Path]:
    """Every accuracy folder of a staging tree, sorted so reports and logs are stable."""
    found = {p for pattern in _PATTERNS for p in root.glob(pattern) if p.is_dir()}
    return sorted(found)


# What the official tools/submission/truncate_accuracy_log.py puts between the two ends it keeps.
TRUNCATION_MARK = "\n\n...\n\n"


def truncated_text(text: str, keep: int) -> str:
    """The official cut: the first `keep` characters, TRUNCATION_MARK, the last `keep` characters; unchanged when
    shorter than `keep` (as the official script, a log between `keep` and 2 x `keep` characters is cut too and
    comes out with its middle repeated: byte for byte what the official script makes of it)."""
    return text if len(text) < keep else text[:keep] + TRUNCATION_MARK + text[-keep:]


def has_truncated_shape(text: str, keep: int) -> bool:
    """Whether `text` has the shape truncated_text gives a long log."""
    return len(text) == 2 * keep + len(TRUNCATION_MARK) and text[keep:keep + len(TRUNCATION_MARK)] == TRUNCATION_MARK


def _read_text(path: Path) -> str:
    # newline="" keeps the bytes as they are: the hash is over the file, the cut must not rewrite it.
    with open(path, encoding="utf-8", newline="") as f:
        return f.read()


def _write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write(text)


def _backup(src: Path, dest: Path, log: Log) -> None:
    """Copy `src` to `dest`; an identical backup is fine, a different one is never overwritten."""
    if dest.exists():
        if sha256_file(dest) != sha256_file(src):
            raise UserError(
                f"The backup {dest} already exists and differs from {src}: it holds the full log of an "
                f"earlier run. Move it away (or delete it if that run is no longer wanted) and run again.",
                exit_code=EXIT_FAILURE)
        return
    with atomic_path(dest) as tmp:
        shutil.copyfile(src, tmp)
    log(f"backed up {src.name} to {dest}")


def _truncate_json(json_path: Path, keep: int) -> bool:
    text = _read_text(json_path)
    cut = truncated_text(text, keep)
    if cut == text:
        return False
    _write_text(json_path, cut)
    return True


def _truncate_one(folder: Path, backup: Path, keep: int, log: Log) -> bool:
    """Truncate one accuracy folder; False when it already was."""
    json_path, txt_path = folder / ACCURACY_LOG, folder / ACCURACY_TXT
    hash_only = folder.parent.name in HASH_ONLY_TESTS
    for needed in (json_path,) if hash_only else (json_path, txt_path):
        if not needed.is_file():
            raise UserError(f"{needed} is missing: an accuracy folder needs both {ACCURACY_LOG} and "
                            f"{ACCURACY_TXT}. Stage the accuracy run again.", exit_code=EXIT_FAILURE)
    txt = _read_text(txt_path) if txt_path.is_file() else ""
    marked = HASH_LINE.search(txt)
    if marked:
        # An interrupted earlier call wrote the hash but not the cut json: finish it. Any other json
        # is left alone (the size check below reports it).
        if marked.group(1).lower() == sha256_file(json_path) and _truncate_json(json_path, keep):
            log(f"finished the interrupted truncation of {json_path}")
            return True
        return False
    # Backups first: nothing is changed in the staging tree before the full logs are safe.
    _backup(json_path, backup / ACCURACY_LOG, log)
    if txt_path.is_file():
        _backup(txt_path, backup / ACCURACY_TXT, log)
    digest = sha256_file(json_path)
    # Hash line before the cut: a crash in between leaves a state the next call can finish (above).
    sep = "" if txt == "" or txt.endswith("\n") else "\n"
    write_atomically(txt_path, f"{txt}{sep}hash={digest}\n")
    _truncate_json(json_path, keep)
    return True


def truncate_tree(root: Path, backup_root: Path, rules: RulesRound, log: Log) -> TruncateReport:
    """Truncate every accuracy log under the staging tree `root`, backing the full ones up under
    `backup_root` (same relative paths). Raises UserError if a json is still too big afterwards."""
    root, backup_root = Path(root), Path(backup_root)
    keep, limit = rules.accuracy_log_keep_chars, rules.accuracy_log_max_bytes
    report = TruncateReport()
    folders = accuracy_dirs(root)
    if not folders:
        log(f"no accuracy folders under {root}: nothing to truncate")
    for folder in folders:
        rel = folder.relative_to(root)
        if _truncate_one(folder, backup_root / rel, keep, log):
            report.truncated.append(folder)
            log(f"truncated {rel}")
        else:
            report.already.append(folder)
    if folders and not report.truncated:
        log(f"all {len(folders)} accuracy logs were already truncated: nothing changed")
    too_big = [f"{f / ACCURACY_LOG} ({(f / ACCURACY_LOG).stat().st_size} bytes)"
               for f in folders if (f / ACCURACY_LOG).stat().st_size > limit]
    if too_big:
        raise UserError(f"Accuracy logs larger than {limit} bytes after truncation (the checker rejects them): "
                        + "; ".join(too_big) + ". Restore the full log from the backup, remove the hash= "
                        "line from accuracy.txt and truncate again.", exit_code=EXIT_FAILURE)
    return report
