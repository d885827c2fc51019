"""The runs of a tune as records on disk, so that an interrupted tune resumes where it stopped.

Each completed run leaves `tune_trial.json` in its own folder: the fields it ran with (the layout, the searched
value, short or full length, and the fields that define the engine: model, backend, precision, ...) and its outcome.
A tune asks the book before each run: a record of the same fields is handed back instead of running again (the
n-th ask of one set of fields gets its n-th record, so a search that ran a value twice on purpose gets both).
A run that did not complete leaves no record, and runs again.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, Mapping

from ..fileio import write_atomically
from .search import Outcome

RECORD = "tune_trial.json"


def _key(fields: Mapping[str, Any]) -> str:
    return json.dumps(dict(fields), sort_keys=True, default=str)


class TrialBook:
    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._recorded: dict[str, list[Outcome]] = defaultdict(list)
        self._asked: dict[str, int] = defaultdict(int)
        self.unreadable: list[Path] = []
        for path in sorted(self.folder.glob(f"*/{RECORD}")):
            try:
                data = json.loads(path.read_text())
                self._recorded[_key(data["fields"])].append(Outcome(**data["outcome"]))
            except (OSError, ValueError, KeyError, TypeError):
                self.unreadable.append(path)     # run again; the caller says so
        self.reused = 0

    @property
    def recorded(self) -> int:
        return sum(len(v) for v in self._recorded.values())

    def run(self, fields: Mapping[str, Any], run_dir: Path, measure: Callable[[Path], Outcome]) -> Outcome:
        """The recorded outcome of `fields` (the next not handed out yet), or `measure(run_dir)` recorded there."""
        key = _key(fields)
        number = self._asked[key]
        self._asked[key] += 1
        if number < len(self._recorded[key]):
            self.reused += 1
            return self._recorded[key][number]
        outcome = measure(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        write_atomically(run_dir / RECORD, json.dumps({"fields": dict(fields), "outcome": asdict(outcome)},
                                                      indent=1, sort_keys=True, default=str) + "\n")
        self._recorded[key].append(outcome)
        return outcome

    def next_free(self, name: str) -> Path:
        """`folder/name-NN` with the first NN not taken by an earlier run of this tune."""
        number = 1
        while (self.folder / f"{name}-{number:02d}").exists():
            number += 1
        return self.folder / f"{name}-{number:02d}"
