"""What a generative benchmark's answer is and how it goes into the accuracy log: one declared kind per benchmark
(`GenerativeBenchmark.answer`), the only place where an answer becomes a response.

An engine reports a request's output as token ids in chunks (generation.TokenStream); LoadGen counts them
(n_tokens) and times the first. Where an answer is more than its ids, the engine also reports its content just
before the final chunk (`TokenStream.answer`): a serving engine the answer's text, a benchmark's own engine what it
made (a tensor, a media file's bytes). The kind turns (token ids, content) into the sample's response:

- `TOKEN_IDS`: the token ids as int32, as the LLM references write them (every text benchmark);
- `Text`: the answer's text as UTF-8 bytes (a vision-language model's JSON answer, as its reference logs it);
- `TextLabels`: labels made from the text (whisper: each character as its index in the reference's label set);
- `Media`: the bytes the engine made, as they are (e.g. one video file per sample).

A text kind reads the text the engine reported, or, from an engine that reports ids only (an in-process decoder),
the ids decoded with the kind's `decode`. A benchmark with another kind of answer subclasses `AnswerKind` in its own
package: nothing else changes (tests/answer_benchmark.py logs a fixed-size tensor that way).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

TOKEN = np.dtype(np.int32)     # the reference SUTs write token ids as int32


class AnswerKind:
    """How one kind of answer is logged. `takes_text`: engines that have the answer's text (serving engines)
    report it; `takes_content`: the benchmark's engines report content of their own (a tensor, a file's bytes)."""

    name: str = ""
    takes_text: bool = False
    takes_content: bool = False

    def response(self, tokens: Sequence[int], content: Any) -> np.ndarray:
        """The sample's response in the accuracy log (a contiguous array, read as bytes) from the output's token ids
        (as LoadGen counts them) and the content its engine reported (None where it reported none)."""
        raise NotImplementedError

    @property
    def reported(self) -> bool:
        """Whether engines report content besides the token ids."""
        return self.takes_text or self.takes_content


class TokenIds(AnswerKind):
    name = "token ids"

    def response(self, tokens: Sequence[int], content: Any) -> np.ndarray:
        return np.asarray(tokens, dtype=TOKEN)


TOKEN_IDS = TokenIds()


class Text(AnswerKind):
    """The answer's text as UTF-8 bytes; from an engine without text, `decode(ids)` ("" without a decoder)."""

    name = "text"
    takes_text = True

    def __init__(self, decode: Callable[[Sequence[int]], str] | None = None) -> None:
        self.decode = decode

    def text(self, tokens: Sequence[int], content: Any) -> str:
        if content is not None:
            return str(content)
        return self.decode([int(t) for t in tokens]) if self.decode is not None else ""

    def response(self, tokens: Sequence[int], content: Any) -> np.ndarray:
        return np.frombuffer(self.text(tokens, content).encode("utf-8"), dtype=np.uint8).copy()


class TextLabels(Text):
    """Labels made from the answer's text by `labels` (text -> a 1-D array); the text as `Text` finds it."""

    name = "labels made from text"

    def __init__(self, labels: Callable[[str], np.ndarray],
                 decode: Callable[[Sequence[int]], str] | None = None) -> None:
        super().__init__(decode)
        self.labels = labels

    def response(self, tokens: Sequence[int], content: Any) -> np.ndarray:
        return np.ascontiguousarray(self.labels(self.text(tokens, content)))


class Media(AnswerKind):
    """What the benchmark's engine made, logged byte for byte (e.g. an mp4 file per sample); an engine that made
    nothing gives an empty response."""

    name = "media"
    takes_content = True

    def response(self, tokens: Sequence[int], content: Any) -> np.ndarray:
        if content is None:
            return np.zeros(0, np.uint8)
        return np.frombuffer(bytes(content), dtype=np.uint8).copy()
