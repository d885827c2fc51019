"""The embedded default engine: CTranslate2 runs the Whisper checkpoint as it ships (its encoder on a batch of
spectrograms, then greedy decoding of every clip of the batch together)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError
from .models import MAX_NEW_TOKENS, WEIGHTS, ModelFacts


MODEL_MAX_LENGTH = 448      # Whisper's decoder context


def capped(tokens: list[int], eot: int, cap: int = MAX_NEW_TOKENS) -> list[int]:
    """A CTranslate2 output (which drops the closing <|endoftext|>) as the reference counts it: the first `cap`
    tokens (the request's output cap, MAX_NEW_TOKENS by default), or all of them and the <|endoftext|> that ended
    them."""
    tokens = [t for t in tokens if t != eot]
    return tokens[:cap] if len(tokens) >= cap else tokens + [eot]


class CTranslate2Whisper:
    name = "ctranslate2"

    def __init__(self, folder: Path, facts: ModelFacts, *, threads: int = 0, paths=None, log=None,
                 device: str = "cpu", compute_type: str = "") -> None:
        import ctranslate2

        self.facts = facts
        # The weights ship in float16; a CPU computes in float32 (what "default" would pick, with a warning).
        compute_type = compute_type or ("float32" if device == "cpu" else "default")
        try:
            self.model = ctranslate2.models.Whisper(str(folder), device=device, intra_threads=threads,
                                                    compute_type=compute_type)
        except (RuntimeError, ValueError, UnicodeDecodeError) as error:
            # A folder recorded damaged (placed by hand that way) gets past its digests: named here, not a traceback.
            raise UserError(f"{Path(folder) / WEIGHTS} cannot be loaded by CTranslate2 ({str(error)[:200]}): it is "
                            f"damaged. Delete the folder {folder} and run `make download_model RUN_ARGS=\""
                            f"--benchmarks=whisper --model={facts.name}\"` (a model you converted: convert it again).",
                            exit_code=EXIT_FAILURE) from None

    def transcribe(self, features: np.ndarray, max_new_tokens: int = MAX_NEW_TOKENS) -> list[list[int]]:
        import ctranslate2

        if not len(features):
            return []
        storage = ctranslate2.StorageView.from_array(np.ascontiguousarray(features, dtype=np.float32))
        prompt = list(self.facts.prompt)
        # suppress_tokens=[-1] is the model config's list, suppress_blank the first step's " " and <|endoftext|>:
        # Whisper's own rules. CTranslate2's max_length does not count new tokens one for one, so it decodes up to
        # the model's own limit and the output is cut at the reference's cap (greedy: the first tokens are the same).
        results = self.model.generate(storage, [prompt] * len(features), beam_size=1, max_length=MODEL_MAX_LENGTH,
                                      suppress_blank=True, suppress_tokens=[-1])
        return [capped(list(result.sequences_ids[0]), self.facts.eot, int(max_new_tokens)) for result in results]

    def close(self) -> None:
        self.model = None
