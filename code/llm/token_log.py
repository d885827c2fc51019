"""An LLM benchmark's mlperf_log_accuracy.json read back: each logged response's generated token ids.

Every LLM reference SUT writes a response as its token ids (int32 here; llama3.1-8b's evaluation.py also reads
int64) and every evaluation script reads them back the same way; they differ only in whether a sample logged more
than once counts once (its first entry: evaluation.py, evaluate-accuracy.py, deepseek-r1's eval_accuracy.py) or every
time (gpt-oss-120b's eval_mlperf_accuracy.py).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError
from ..common.records.loadgen_log import read_accuracy_entries

DTYPES = {"int32": np.int32, "int64": np.int64}


@dataclass(frozen=True)
class TokenLog:
    """The responses of an accuracy log in log order, and how many entries the log had (repeats included)."""

    qsl_indices: tuple[int, ...]
    token_ids: tuple[np.ndarray, ...]
    entries: int

    @property
    def duplicates(self) -> int:
        """Entries left out for repeating a qsl_idx."""
        return self.entries - len(self.qsl_indices)


def read_token_log(accuracy_log: Path, samples: int, dtype: str = "int32", first_entry_only: bool = True) -> TokenLog:
    """The log's responses; UserError for a log that is missing or damaged, an entry that is not LoadGen's, a sample
    outside the data set's `samples`, or a response that is not whole token ids."""
    if dtype not in DTYPES:
        raise UserError(f"Unknown token dtype {dtype!r}; the accuracy log holds int32 or int64 token ids.")
    if not Path(accuracy_log).is_file():
        raise UserError(f"Cannot score: {accuracy_log} is missing.", exit_code=EXIT_FAILURE)
    item = np.dtype(DTYPES[dtype]).itemsize
    entries = read_accuracy_entries(accuracy_log)
    seen: set[int] = set()
    indices: list[int] = []
    tokens: list[np.ndarray] = []
    for entry in entries:
        try:
            index, data = int(entry["qsl_idx"]), bytes.fromhex(entry["data"])
        except (KeyError, TypeError, ValueError) as error:
            raise UserError(f"{accuracy_log}: an entry is not LoadGen's {{qsl_idx, data}} ({error!r})",
                            exit_code=EXIT_FAILURE) from None
        if first_entry_only and index in seen:    # LoadGen may issue a sample more than once
            continue
        if not 0 <= index < samples:
            raise UserError(f"{accuracy_log}: qsl_idx {index} is outside the data set's {samples} samples",
                            exit_code=EXIT_FAILURE)
        if len(data) % item:
            raise UserError(f"{accuracy_log}: the response of qsl_idx {index} is {len(data)} bytes, not a whole "
                            f"number of {dtype} token ids", exit_code=EXIT_FAILURE)
        seen.add(index)
        indices.append(index)
        tokens.append(np.frombuffer(data, DTYPES[dtype]))
    if not indices:
        raise UserError(f"{accuracy_log} holds no responses to score.", exit_code=EXIT_FAILURE)
    return TokenLog(tuple(indices), tuple(tokens), len(entries))
