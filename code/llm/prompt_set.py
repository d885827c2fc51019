"""Tokenized prompts, back to back: what an LLM benchmark's preprocessed set is."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError


@dataclass(frozen=True)
class PromptSet:
    """The preprocessed prompts of one (model, data set), in QSL order. `load(i)` is prompt i (int64 tokens)."""

    directory: Path
    tokens: np.ndarray           # int32, every prompt back to back
    offsets: np.ndarray          # int64, len + 1
    article_spans: np.ndarray    # int64 [n, 2]: the article's tokens within each prompt; -1 where unknown
    max_input_tokens: int = 0    # 0: prompts as preprocessed; else each capped to this many tokens

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def load(self, index: int) -> np.ndarray:
        prompt = self.tokens[self.offsets[index]:self.offsets[index + 1]].astype(np.int64)
        cap = self.max_input_tokens
        if not cap or len(prompt) <= cap:
            return prompt
        start, end = (int(v) for v in self.article_spans[index])
        excess = len(prompt) - cap
        if start < 0 or end - start <= excess:
            raise UserError(f"Prompt {index} has {len(prompt)} tokens, more than max_input_tokens={cap}, and its "
                            f"article cannot be cut to fit (its span in the prompt is unknown or too short). Raise "
                            f"max_input_tokens or set it to 0.", exit_code=EXIT_FAILURE)
        return np.concatenate([prompt[:end - excess], prompt[end:]])

    def capped(self, max_input_tokens: int) -> "PromptSet":
        """The same prompts, each cut to at most `max_input_tokens` (0: no cap) by shortening its article."""
        return PromptSet(self.directory, self.tokens, self.offsets, self.article_spans, int(max_input_tokens))

    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)
