"""The embedded default engine: CTranslate2 runs the Whisper checkpoint as it ships (its encoder on a batch of
spectrograms, then greedy decoding of every clip of the batch together)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .models import MAX_NEW_TOKENS, ModelFacts


class CTranslate2Whisper:
    name = "ctranslate2"

    def __init__(self, folder: Path, facts: ModelFacts, threads: int = 0, device: str = "cpu",
                 compute_type: str = "default") -> None:
        import ctranslate2

        self.facts = facts
        self.model = ctranslate2.models.Whisper(str(folder), device=device, intra_threads=threads,
                                                compute_type=compute_type)

    def transcribe(self, features: np.ndarray) -> list[list[int]]:
        import ctranslate2

        if not len(features):
            return []
        storage = ctranslate2.StorageView.from_array(np.ascontiguousarray(features, dtype=np.float32))
        prompt = list(self.facts.prompt)
        # max_length counts the prompt too; suppress_tokens=[-1] is the model config's list, suppress_blank the
        # first step's " " and <|endoftext|>: Whisper's own rules.
        results = self.model.generate(storage, [prompt] * len(features), beam_size=1,
                                      max_length=len(prompt) + MAX_NEW_TOKENS, suppress_blank=True,
                                      suppress_tokens=[-1], return_no_speech_prob=False)
        out = []
        for result in results:
            tokens = [t for t in result.sequences_ids[0] if t != self.facts.eot]
            out.append(tokens)
        return out

    def close(self) -> None:
        self.model = None
