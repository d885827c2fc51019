"""Responses and scoring of benchmark whisper, as the reference does them.

A response is the transcript's text lower-cased and stripped, each character replaced by its index in the
reference's 42-symbol label list (characters not in it dropped), as int64 (reference_SUT.py). Scoring is
speech2text/accuracy_eval.py's: the responses and the manifest's transcripts mapped back through the labels,
both normalized by openai-whisper's EnglishTextNormalizer, each pair aligned word by word with concatenations of
up to three words taken as matches (helpers.compute_wer_with_concatenation), and the word error rate summed over
the corpus. openai-whisper (which pulls torch) is not installed: its normalizers package, which needs only regex
and more-itertools, is imported from its source archive fetched from the package registry.
"""
from __future__ import annotations

import array
import importlib.util
import json
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Sequence

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError
from ..common.paths import Paths

# speech2text/accuracy_eval.py's `labels`: space, a-z, apostrophe, digits, $ % + -.
LABELS = (" ", *"abcdefghijklmnopqrstuvwxyz", "'", *"0123456789", "$", "%", "+", "-")
LABEL_INDEX = {label: index for index, label in enumerate(LABELS)}
RESPONSE_DTYPE = np.dtype(np.int64)        # accuracy_eval.py --output_dtype int64 (its default)
NORMALIZER_PACKAGE = ("openai-whisper", "20250625")
NORMALIZER_FOLDER = "whisper/normalizers"  # inside the package's source tree
_MODULE = "_toolkit_openai_whisper_normalizers"


def encode_text(text: str) -> np.ndarray:
    """The reference SUT's response of a transcript: lower-cased, stripped, label indices, int64."""
    return np.fromiter((LABEL_INDEX[c] for c in text.lower().strip() if c in LABEL_INDEX), dtype=RESPONSE_DTYPE)


def decode_labels(indices: Sequence[int]) -> str:
    """legacy_helpers.__whisper_decoder_predictions_tensor: label indices back to characters (an index outside the
    list is an error there too)."""
    return "".join(LABELS[int(i)] for i in indices)


def label_transcript(transcript: str) -> list[int]:
    """manifest.Manifest.parse_transcript: a reference transcript as label indices, characters outside the labels
    dropped (not lower-cased: the manifest's transcripts are lower case already)."""
    return [LABEL_INDEX[c] for c in transcript if c in LABEL_INDEX]


def normalizer_root(paths: Paths) -> Path:
    """A folder holding openai-whisper's `whisper/normalizers` (and nothing else of it), fetched the first time: put
    it on PYTHONPATH and `from whisper.normalizers import EnglishTextNormalizer` works without torch."""
    from ..common.registry_fetch import extract_tree, fetch_sdist

    package, version = NORMALIZER_PACKAGE
    root = paths.download_cache / f"{package}-{version}"
    if (root / NORMALIZER_FOLDER / "__init__.py").is_file():
        return root
    try:
        archive = fetch_sdist(package, version, paths.download_cache)
        extract_tree(archive, f"{package.replace('-', '_')}-{version}/{NORMALIZER_FOLDER}", root / NORMALIZER_FOLDER)
    except RuntimeError as error:
        raise UserError(f"whisper: could not get {package}=={version}'s text normalizer, which the official scoring "
                        f"uses: {error}. Rerun when the package registry is reachable.", exit_code=EXIT_FAILURE) \
            from None
    return root


@lru_cache(maxsize=1)
def _normalizers(root: str) -> ModuleType:
    init = Path(root) / NORMALIZER_FOLDER / "__init__.py"
    spec = importlib.util.spec_from_file_location(_MODULE, init, submodule_search_locations=[str(init.parent)])
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE] = module
    spec.loader.exec_module(module)
    return module


def english_normalizer(paths: Paths):
    return _normalizers(str(normalizer_root(paths))).EnglishTextNormalizer()


def levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """Edit distance of two word lists (legacy_helpers.__levenshtein)."""
    if len(a) > len(b):
        a, b = b, a
    current = list(range(len(a) + 1))
    for i in range(1, len(b) + 1):
        previous, current = current, [i] + [0] * len(a)
        for j in range(1, len(a) + 1):
            change = previous[j - 1] + (a[j - 1] != b[i - 1])
            current[j] = min(previous[j] + 1, current[j - 1] + 1, change)
    return current[len(a)]


def wer_with_concatenation(hypothesis: list[str], reference: list[str]) -> tuple[int, int]:
    """(errors, reference words) of one pair, as helpers.compute_wer_with_concatenation counts them: a greedy walk
    that takes up to three words of one side joined as a match of one word of the other, then the edit distance of
    the two aligned lists."""
    i = j = 0
    aligned: list[tuple[str | None, str | None]] = []
    while i < len(reference) and j < len(hypothesis):
        if reference[i] == hypothesis[j]:
            aligned.append((reference[i], hypothesis[j]))
            i, j = i + 1, j + 1
            continue
        ref_len = hyp_len = 1
        match = False
        for k in range(1, 4):
            if i + k <= len(reference) and "".join(reference[i:i + k]) == hypothesis[j]:
                ref_len, hyp_len, match = k, 1, True
                break
            if j + k <= len(hypothesis) and "".join(hypothesis[j:j + k]) == reference[i]:
                ref_len, hyp_len, match = 1, k, True
                break
        if match:
            aligned.append((" ".join(reference[i:i + ref_len]), " ".join(hypothesis[j:j + hyp_len])))
            i, j = i + ref_len, j + hyp_len
        else:
            aligned.append((reference[i], hypothesis[j]))
            i, j = i + 1, j + 1
    aligned += [(word, None) for word in reference[i:]]
    aligned += [(None, word) for word in hypothesis[j:]]
    ref_aligned = [r.replace(" ", "") for r, _ in aligned if r is not None]
    hyp_aligned = [h.replace(" ", "") for _, h in aligned if h is not None]
    return levenshtein(ref_aligned, hyp_aligned), len(reference)


def word_error_rate(hypotheses: Sequence[str], references: Sequence[str], normalizer) -> tuple[float, int, int]:
    """(corpus WER, errors, reference words) of accuracy_eval.word_error_rate."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses for {len(references)} references")
    errors = words = 0
    for hypothesis, reference in zip(hypotheses, references):
        e, w = wer_with_concatenation(normalizer(hypothesis).split(), normalizer(reference).split())
        errors, words = errors + e, words + w
    if not words:
        raise ValueError("the references hold no words")
    return errors / words, errors, words


def accuracy_line(wer: float) -> str:
    """accuracy_eval.py's line, formatted as it prints it (Python's repr of the floats)."""
    return "Word Error Rate: {:}%, accuracy={:}%".format(wer * 100, (1 - wer) * 100)


def read_accuracy_log(accuracy_log: Path, count: int) -> list[tuple[int, str]]:
    """(qsl_idx, hypothesis text) of every entry of an mlperf_log_accuracy.json, in its order (duplicates kept, as
    accuracy_eval.py keeps them); UserError naming the file when it cannot be read."""
    try:
        entries = json.loads(Path(accuracy_log).read_text())
    except OSError:
        raise UserError(f"{accuracy_log} is missing; run the accuracy test again.", exit_code=EXIT_FAILURE) from None
    except ValueError as error:
        raise UserError(f"{accuracy_log} is not JSON ({error}); run the accuracy test again.",
                        exit_code=EXIT_FAILURE) from None
    out = []
    for entry in entries:
        index = int(entry["qsl_idx"])
        if not 0 <= index < count:
            raise UserError(f"{accuracy_log} names sample {index}, and the data set has {count}; score it with the "
                            f"data set it was run on.", exit_code=EXIT_FAILURE)
        values = array.array("q", bytes.fromhex(entry["data"])).tolist()
        if any(not 0 <= v < len(LABELS) for v in values):
            raise UserError(f"{accuracy_log}: the response of sample {index} holds values outside the "
                            f"{len(LABELS)} labels; it was not written by a whisper run.", exit_code=EXIT_FAILURE)
        out.append((index, decode_labels(values)))
    return out
