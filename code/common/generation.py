"""Token generation: what the LLM system under test drives, whatever runs the model. Two levels:

- a request-level engine (`RequestEngine`): submit one prompt (prompts.py: token ids, or chat messages of text,
  images and audio) with its generation settings, receive its output as a stream of token chunks (the first, more, the final), as a serving engine (vLLM, SGLang,
  TensorRT-LLM's trtllm-serve, through an HTTP client) offers. The LLM system under test (harness/llm_sut.py)
  drives any number of them.
- a step-level decoder (`Decoder`, below): the harness batches continuously itself, in this process
  (harness/batching_engine.py, which is itself offered as a request-level engine).

A backend that runs a decoder (ONNX Runtime here, TensorRT on NVIDIA GPUs) gives a `Decoder`; the harness asks it
for a `DecodeBatch` per instance and runs continuous (in-flight) batching on it: new sequences are prefilled and
join between decode steps, each step advances every running sequence by one token, finished sequences leave at
once. Decoding is greedy (the reference runs temperature 0). Tokens are int64 numpy arrays throughout.

A prompt joins in one of two ways: `DecodeBatch.add` prefills whole prompts in one call, or (chunked prefill)
`DecodeBatch.begin` returns a `Prefill` that the harness advances a chunk of tokens at a time between decode
steps, so that the running sequences never wait for more than one chunk per step; the prompt becomes a row after
its last chunk. A chunk attends to the prompt's earlier chunks through its own cache, so the prompt's cache is
the one a whole-prompt prefill computes (up to the order of floating-point sums) and greedy decoding gives the same
tokens.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from .prompts import TOKEN_IDS, Prompt


@dataclass(frozen=True)
class GenerationSettings:
    """How the harness generates for one benchmark and model."""

    max_new_tokens: int                  # output tokens per sample at most (the reference: 128)
    eos_token_ids: tuple[int, ...]       # a sequence ends with the first of these (kept as its last output token)
    max_batch: int = 8                   # sequences decoded together per instance
    min_new_tokens: int = 1              # the reference's min_tokens
    # New sequences prefilled together when several wait: a larger value raises throughput, a smaller one keeps
    # the running sequences' time per output token low (their step waits for the prefill).
    prefill_batch: int = 1
    # Chunked prefill: > 0 prefills a joining prompt this many tokens at a time (one prompt at a time, one chunk
    # between two decode steps of the running rows; prefill_batch is then not used); 0 prefills whole prompts.
    prefill_chunk_tokens: int = 0
    # Sampling, as the reference sets it: temperature 0 is greedy (every benchmark but gpt-oss-120b, whose reference
    # samples at temperature 1, top_p 1, no top-k). Serving engines get these in every request; the in-process
    # decoder graph picks the most likely token (its `next_token`), so it decodes greedily whatever they say.
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1                      # -1: no top-k cut
    seed: int | None = None              # the sampler's seed per request, where the reference fixes one
    # Where the reference sends no sampling parameter (a vision-language one): serving engines get the output cap
    # alone and sample with their defaults, the model's generation_config.json (the fields above are not sent).
    server_sampling: bool = False
    # Guided decoding (the reference's use_guided_decoding): the chat request's response_format as JSON text (a
    # JSON schema each answer is constrained to; text keeps the settings hashable and picklable); None: free text.
    response_format: str | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0


class Prefill(Protocol):
    """One prompt being prefilled in chunks (`DecodeBatch.begin`). Until its last chunk it is not a row of the
    batch: the batch steps and removes its rows as usual in between, and a Prefill that is dropped unfinished
    leaves the batch as it was."""

    first_token: int     # the prompt's first generated token; valid once `advance` has returned True

    def advance(self) -> bool:
        """Prefill the next chunk. True when the whole prompt is prefilled and has joined the batch as its new last
        row (fed with `first_token` at the next step); False while chunks remain. Once True, it does nothing and
        returns True again."""


class DecodeBatch(Protocol):
    """The sequences one instance generates together. Rows keep their order; new rows are appended at the end."""

    def __len__(self) -> int: ...

    def add(self, prompts: Sequence[np.ndarray]) -> np.ndarray:
        """Prefill `prompts` (1-D integer token arrays) and append them as new rows; return each one's first
        generated token (int64, one per prompt)."""

    def begin(self, prompt: np.ndarray, chunk_tokens: int) -> Prefill:
        """Start prefilling `prompt` (a 1-D integer token array) `chunk_tokens` tokens per `Prefill.advance`; nothing
        runs until the first `advance`. The batch must have room for one more row when the last chunk joins.
        The harness keeps one Prefill in progress per batch at a time."""

    def step(self) -> np.ndarray:
        """One decode step of every row, fed with the row's last generated token; return each row's next token
        (int64, one per row, in row order)."""

    def remove(self, rows: Sequence[int]) -> None:
        """Rows that finished leave and free their cache; the others keep their relative order."""

    def close(self) -> None: ...


class Decoder(Protocol):
    """A loaded decoder model (one per instance)."""

    vocab_size: int

    def new_batch(self) -> DecodeBatch: ...

    def close(self) -> None: ...


# -- the request level ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Request:
    """One prompt to generate for: `id` is the caller's (the SUT's) and comes back with every chunk."""

    id: int
    prompt: Prompt                       # token ids (1-D integers) or a chat (prompts.py)
    settings: GenerationSettings         # output cap, EOS ids, min_new_tokens: where the output ends


class TokenStream(Protocol):
    """Where a request-level engine reports, from any thread (an HTTP client's event loop, a scheduler thread).

    Each request's chunks come in order, one call at a time: the first chunk holds its first generated token (and
    possibly more), the last has `final` True (it may be the first too); nothing comes after it. An output ends as
    its settings say (an EOS token, kept as the last token, once min_new_tokens are out; or max_new_tokens)."""

    def chunk(self, request_id: int, tokens: Sequence[int] | np.ndarray, final: bool) -> None: ...

    def answer(self, request_id: int, content: object) -> None:
        """A request's answer beyond its token ids, just before its final chunk: its whole text (from an engine
        that has it, where the benchmark's answer kind takes text) or what the benchmark's own engine made (a
        tensor, a file's bytes); the benchmark's answer kind (answers.py) logs it."""

    def failed(self, error: BaseException) -> None:
        """The engine failed: none of its outstanding requests will finish (the caller completes them)."""


class RequestEngine(Protocol):
    """An engine that takes whole requests: `open` once (before the first submit; a failure there stops the run
    before it starts), `submit` without blocking, `cancel` requests whose chunks are no longer wanted, `close`
    once at the end (outstanding requests are dropped; a second close does nothing)."""

    name: str                            # for messages: which engine failed
    # The parts of a prompt it takes (prompts.PARTS): a test whose model is prompted otherwise is refused before it
    # starts, never failed request by request.
    prompt_parts: frozenset[str] = frozenset({TOKEN_IDS})

    def open(self, stream: TokenStream) -> None: ...

    def submit(self, requests: Sequence[Request]) -> None: ...

    def cancel(self, request_ids: Sequence[int]) -> None: ...

    def close(self) -> None: ...
