"""What an LLM request asks: a prompt made of parts, as the data set gives them.

A prompt is one of two forms:
- token ids: a 1-D integer numpy array, the tokenized prompt (every text benchmark of the round: the reference feeds
  the model its data set's `tok_input`);
- a chat (`Chat`): messages whose content is a sequence of parts, each text (`Text`), an image (`Image`) or audio
  (`Audio`). Images and audio are the bytes exactly as the data set stores them, with their media type: they are never
  decoded, resized or recompressed here, so that the model sees what the reference's model sees.

Which parts a model takes is declared with the model (`ModelSpec.prompt_parts`, names from `PARTS`); the engines say
which parts they serve (the in-process decoder: token ids; a serving engine: what its API carries), and a test whose
prompts an engine cannot take is refused before it starts. Generation settings travel beside the prompt, in the
request (generation.Request).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Union

import numpy as np

TOKEN_IDS, TEXT, IMAGE, AUDIO = "token ids", "text", "image", "audio"
PARTS = (TOKEN_IDS, TEXT, IMAGE, AUDIO)
PROBE_TOKENS = 16        # a health check or warm-up sends this many of a token prompt's ids (a chat: all of it)


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Image:
    """An image as the data set stores it (e.g. its JPEG file's bytes) and its media type (e.g. image/jpeg)."""

    data: bytes
    media_type: str

    def __post_init__(self) -> None:
        _check_media(self, "image/")


@dataclass(frozen=True)
class Audio:
    """An audio clip as the data set stores it (e.g. a WAV file's bytes) and its media type (e.g. audio/wav)."""

    data: bytes
    media_type: str

    def __post_init__(self) -> None:
        _check_media(self, "audio/")


Content = Union[Text, Image, Audio]
_KIND = {Text: TEXT, Image: IMAGE, Audio: AUDIO}


@dataclass(frozen=True)
class Message:
    role: str                          # "system", "user", "assistant"
    content: tuple[Content, ...]


@dataclass(frozen=True)
class Chat:
    """A prompt of chat messages, as `/v1/chat/completions` takes them."""

    messages: tuple[Message, ...]

    @classmethod
    def user(cls, *content: Content) -> "Chat":
        """One user turn of `content`, the common case (an image and a question about it)."""
        return cls((Message("user", tuple(content)),))

    def contents(self) -> Iterable[Content]:
        for message in self.messages:
            yield from message.content


Prompt = Union[np.ndarray, Chat]       # token ids (1-D integers), or chat messages


def parts_of(prompt: Prompt) -> frozenset[str]:
    """The kinds of part in `prompt` (names from PARTS)."""
    if isinstance(prompt, Chat):
        return frozenset(_KIND[type(part)] for part in prompt.contents())
    return frozenset({TOKEN_IDS})


def checked(prompt: object, index: int) -> Prompt:
    """`prompt` (sample `index` of a preprocessed set) as a Prompt; ValueError saying what is wrong with it."""
    if isinstance(prompt, Chat):
        if not prompt.messages or not any(message.content for message in prompt.messages):
            raise ValueError(f"prompt {index} is a chat with no content")
        strange = [type(part).__name__ for part in prompt.contents() if type(part) not in _KIND]
        if strange:
            raise ValueError(f"prompt {index} has chat content that is not text, an image or audio: {strange}")
        return prompt
    ids = np.ascontiguousarray(prompt)
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or len(ids) == 0:
        raise ValueError(f"prompt {index} must be a non-empty 1-D array of integer token ids or a chat; "
                         f"it has shape {ids.shape} and dtype {ids.dtype}")
    return ids


def size(prompt: Prompt) -> int:
    """How much input `prompt` is, for spreading prefill work over servers: its token count, or for a chat (which is
    tokenized by the server) the bytes of its text and media, a measure that grows with the work."""
    if isinstance(prompt, Chat):
        return sum(len(part.text.encode()) if isinstance(part, Text) else len(part.data)
                   for part in prompt.contents())
    return len(prompt)


def probe(prompt: Prompt) -> Prompt:
    """A short request's prompt made from `prompt` (a health check, a warm-up): a token prompt's first
    PROBE_TOKENS ids; a chat whole (an image cannot be cut)."""
    if isinstance(prompt, Chat):
        return prompt
    return np.asarray(prompt).reshape(-1)[:PROBE_TOKENS]


def _check_media(part, kind: str) -> None:
    if not isinstance(part.data, bytes) or not part.data:
        raise ValueError(f"an {kind[:-1]} part needs its bytes as the data set stores them, not "
                         f"{type(part.data).__name__} of length {len(part.data or b'')}")
    if not part.media_type.startswith(kind):
        raise ValueError(f"an {kind[:-1]} part's media type must start with {kind}, not {part.media_type!r}")
