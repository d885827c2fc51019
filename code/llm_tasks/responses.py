"""An accuracy log of a task benchmark read back: each sample's generated token ids, decoded."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError
from ..common.records.loadgen_log import read_accuracy_entries

RESPONSE_DTYPE = "int32"     # the reference SUTs write int32 token ids; the evaluation scripts read --dtype int32


@dataclass(frozen=True)
class Outputs:
    """The responses of an accuracy log: the first of each qsl_idx (as most evaluation scripts count them), or
    every entry."""

    qsl_indices: tuple[int, ...]
    token_counts: tuple[int, ...]
    texts: tuple[str, ...]
    entries: int                 # log entries read, repeats included

    @property
    def duplicates(self) -> int:
        """Entries left out for repeating a qsl_idx."""
        return self.entries - len(self.qsl_indices)


def read_outputs(accuracy_log: Path, samples: int, decode: Callable[[np.ndarray], str],
                 first_entry_only: bool = True) -> Outputs:
    """Each distinct sample's token ids from the log (every entry, with `first_entry_only` False, as gpt-oss-120b's
    script counts them), decoded with `decode`; UserError for a log that is missing, damaged or names a sample
    outside the data set's `samples`."""
    if not accuracy_log.is_file():
        raise UserError(f"Cannot score: {accuracy_log} is missing.", exit_code=EXIT_FAILURE)
    entries = read_accuracy_entries(accuracy_log)
    seen: set[int] = set()
    indices, counts, texts = [], [], []
    for entry in entries:
        try:
            index, data = int(entry["qsl_idx"]), bytes.fromhex(entry["data"])
        except (KeyError, TypeError, ValueError) as error:
            raise UserError(f"{accuracy_log}: an entry is not LoadGen's {{qsl_idx, data}} ({error!r})",
                            exit_code=EXIT_FAILURE) from None
        if index in seen and first_entry_only:
            continue
        if not 0 <= index < samples:
            raise UserError(f"{accuracy_log}: qsl_idx {index} is outside the data set's {samples} samples",
                            exit_code=EXIT_FAILURE)
        if len(data) % 4:
            raise UserError(f"{accuracy_log}: the response of qsl_idx {index} is {len(data)} bytes, not a whole "
                            f"number of int32 token ids", exit_code=EXIT_FAILURE)
        ids = np.frombuffer(data, np.int32)
        seen.add(index)
        indices.append(index)
        counts.append(len(ids))
        texts.append(decode(ids))
    if not indices:
        raise UserError(f"{accuracy_log} holds no responses to score.", exit_code=EXIT_FAILURE)
    return Outputs(tuple(indices), tuple(counts), tuple(texts), len(entries))
