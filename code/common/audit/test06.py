"""TEST06 of the LLM benchmarks: the output tokens of the responses a short performance run sampled into its
accuracy log, judged as compliance/TEST06/run_verification.py judges them.

Three checks, on every sampled entry ({"qsl_idx", "data", "token_count"} and, outside Offline, "token_data": the
first token the SUT reported on its own), each value decoded with the benchmark's response dtype (int32 tokens):
- first token (not in Offline, where LoadGen records no first token): each value of token_data equals the value at
  the same place of data (the script zips the two, so the reported first token must be the output's first);
- EOS: walking back from the last token, the output ends with at most one end-of-sequence token (the script never
  looks at the first token, so a 2-token output of two EOS passes);
- sample length: the reported token_count equals the number of tokens in data.

The EOS token id comes from the caller, who has it from the benchmark (`Benchmark.generation(...).eos_token_ids`,
read from the model's tokenizer): a token counts as EOS when it is any of the ids given, so with one id the
verdict is the script's. The script takes `--eos_token_id` as a string when it is given on its command line and
then never matches a token (numpy compares an int32 with a str as unequal): its EOS check passes every log unless
the id is its default 2. The verdict here is never weaker than the script's with either.

verify_accuracy.txt is written with the script's lines, which are what both submission checkers read:
`First token check pass: True|False|Skipped`, `EOS check pass: ...`, `Sample length check pass: ...`, then
`TEST06 verification complete` or `TEST06 verification failed`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

from ..constants import Scenario
from .verify import Check

COMPLETE, FAILED = "TEST06 verification complete", "TEST06 verification failed"
FIRST_TOKEN, EOS, LENGTH = "First token check pass", "EOS check pass", "Sample length check pass"
SKIPPED = "Skipped"


@dataclass(frozen=True)
class TokenCheck:
    """One of the three checks: passed (None: skipped), and for people the first entry that fails it."""

    passed: bool | None
    detail: str = ""

    @property
    def shown(self) -> str:
        """The value the script writes after the check's name: True, False or Skipped."""
        return SKIPPED if self.passed is None else str(self.passed)


def _tokens(entry: Any, key: str, dtype: np.dtype) -> np.ndarray:
    return np.frombuffer(bytes.fromhex(entry[key]), dtype=dtype)


def _where(entry: Any) -> str:
    index = entry.get("qsl_idx", "?") if isinstance(entry, dict) else "?"
    return f"qsl_idx {index}"


def eos_check(entries: Sequence[Any], eos_token_ids: frozenset[int], dtype: np.dtype) -> TokenCheck:
    """run_verification.py eos_check: from the last token back to (not including) the first, count EOS tokens
    until the first other token; two are a failure. A log it cannot decode fails, as the script's does."""
    for entry in entries:
        try:
            data = _tokens(entry, "data", dtype)
        except Exception as error:  # noqa: BLE001 - the script turns any error into a failed check
            return TokenCheck(False, f"{_where(entry)} cannot be decoded ({type(error).__name__}: {error})")
        trailing, i = 0, len(data) - 1
        while i > 0:
            if data[i].item() not in eos_token_ids:
                break
            trailing += 1
            if trailing >= 2:
                return TokenCheck(False, f"{_where(entry)} ends with {len(data) - _first_trailing(data, eos_token_ids)}"
                                         f" end-of-sequence tokens ({int(data[-1])}); at most one may end an output")
            i -= 1
    return TokenCheck(True)


def _first_trailing(data: np.ndarray, eos_token_ids: frozenset[int]) -> int:
    """Index of the first token of the run of EOS tokens that ends `data` (for the message only)."""
    i = len(data)
    while i > 0 and data[i - 1].item() in eos_token_ids:
        i -= 1
    return i


def first_token_check(entries: Sequence[Any], dtype: np.dtype) -> TokenCheck:
    """run_verification.py first_token_check: token_data, element by element, equals the start of data. An entry
    without token_data (or that cannot be decoded) fails, as the script's "Unexpected error" does."""
    for entry in entries:
        try:
            data, first = _tokens(entry, "data", dtype), _tokens(entry, "token_data", dtype)
        except Exception as error:  # noqa: BLE001 - likewise
            what = "has no token_data (the first token the SUT reported)" if isinstance(error, KeyError) \
                else f"cannot be decoded ({type(error).__name__}: {error})"
            return TokenCheck(False, f"{_where(entry)} {what}")
        for position, (output, reported) in enumerate(zip(data, first)):
            if output != reported:
                return TokenCheck(False, f"{_where(entry)}: the first token reported on its own is {int(reported)} "
                                         f"but the output's token {position} is {int(output)}")
    return TokenCheck(True)


def sample_length_check(entries: Sequence[Any], dtype: np.dtype) -> TokenCheck:
    """run_verification.py sample_len_check: token_count equals the number of tokens in data. The script stops
    with a traceback (and writes no verify_accuracy.txt) on an entry it cannot read; that fails here."""
    for entry in entries:
        try:
            data, count = _tokens(entry, "data", dtype), int(entry["token_count"])
        except Exception as error:  # noqa: BLE001 - the script crashes on these
            what = "has no token_count (the number of tokens the SUT reported)" if isinstance(error, KeyError) \
                else f"cannot be read ({type(error).__name__}: {error})"
            return TokenCheck(False, f"{_where(entry)} {what}; the official script stops on it")
        if len(data) != count:
            return TokenCheck(False, f"{_where(entry)} reports {count} tokens but its output has {len(data)}")
    return TokenCheck(True)


def verify_test06(entries: Any, scenario: Scenario, eos_token_ids: Iterable[int],
                  dtype: np.dtype | str = "int32") -> Check:
    """The TEST06 verdict of a compliance run's accuracy log entries, for a run of `scenario` (the submission
    folder's: the first-token check is skipped for Offline only), with the model's EOS token id(s) and the
    response dtype of the benchmark. The Check's text is the verify_accuracy.txt run_verification.py writes."""
    dtype = np.dtype(dtype)
    eos = frozenset(int(i) for i in eos_token_ids)
    if not eos:
        raise ValueError("TEST06 needs the model's end-of-sequence token id")
    if not isinstance(entries, list):
        entries = []
        broken = TokenCheck(False, "the accuracy log is not LoadGen's JSON array of entries")
        checks = (broken, broken, broken)
    else:
        first = TokenCheck(None) if scenario is Scenario.Offline else first_token_check(entries, dtype)
        checks = (first, eos_check(entries, eos, dtype), sample_length_check(entries, dtype))
    passed = all(check.passed is not False for check in checks)
    if passed and not entries:
        # The script passes an empty log; the toolkit does not, as nothing was checked (the run logged no response:
        # LoadGen's accuracy sampling or the SUT's responses are broken).
        return Check(False, _text(checks, False), "the accuracy log holds no sampled response, so nothing was checked")
    if passed:
        first_tokens = "first token not checked (Offline)" if checks[0].passed is None else "first tokens as reported"
        plural = "" if len(entries) == 1 else "s"
        summary = (f"{len(entries)} sampled response{plural}: {first_tokens}, at most one trailing EOS, token counts "
                   f"as reported")
    else:
        summary = "; ".join(dict.fromkeys(check.detail for check in checks if check.passed is False and check.detail))
    return Check(passed, _text(checks, passed), summary)


def _text(checks: Sequence[TokenCheck], passed: bool) -> str:
    """verify_accuracy.txt as run_verification.py writes it."""
    lines = [f"{name}: {check.shown}" for name, check in zip((FIRST_TOKEN, EOS, LENGTH), checks)]
    return "\n".join([*lines, COMPLETE if passed else FAILED]) + "\n"
