"""An accuracy log of a task benchmark read back: each sample's generated token ids, decoded."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..llm.token_log import read_token_log

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
    log = read_token_log(accuracy_log, samples, RESPONSE_DTYPE, first_entry_only)
    return Outputs(log.qsl_indices, tuple(len(ids) for ids in log.token_ids),
                   tuple(decode(ids) for ids in log.token_ids), log.entries)
