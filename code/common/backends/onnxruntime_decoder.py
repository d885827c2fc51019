"""An LLM decoder graph (the contract of code/common/decoder_graph.py) on ONNX Runtime, with continuous batching.

A `DecodeBatch` keeps one KV cache per layer for all its rows, [rows, kv_heads, cache_len, head_dim], and a 0/1
mask [rows, cache_len]: rows with a shorter history are left-padded (mask 0), which the graph's attention skips.
Each decode step is one `run` for every row; the graph's present outputs become the cache as they are. New
prompts are prefilled and their caches merged in, padded on the left to the common length; finished rows leave,
and the leading columns that are padding for every remaining row are cut, so the cache never outgrows the
longest running history. The Python work per step is a handful of numpy calls, whatever the number of rows.

Chunked prefill (`DecodeBatch.begin`): the prompt is run `chunk_tokens` at a time as a batch of one with a cache
of its own (positions continuing from the previous chunk, the mask covering every token so far: the graph's
causal rule attends each query to the earlier chunks and to its chunk's earlier tokens), and after the last chunk
that cache is merged into the batch exactly as `add` merges a prefilled prompt. Until then the running rows step
and leave without it; the chunks cost each step's rows one chunk's time instead of a whole prompt's.

Choices, measured on a 2-core Xeon VM shared with other work (SmolLM2-135M fp32, 30 layers; decode steps with a
~300-token context: 1 thread 22 / 67 / 94 tokens/s at batch 1 / 4 / 8, 2 threads 39 / 119 / 170; an 800-token
prompt prefills in 2.2 s on 1 thread, 1.2 s on 2):
- plain `run`, not IOBinding: `run` hands back ORT's output buffers wrapped as numpy arrays without a copy, and
  takes contiguous numpy inputs without a copy; with the presents fed back as OrtValues through IOBinding a step
  took the same time (46.3 ms both, batch 8, 2 threads).
- prompts are prefilled one by one by default: the GEMMs of one prompt already fill the cores, and a left-padded
  batch of unequal prompts computes the padding (4 prompts of 120-300 tokens: 0.93 s one by one, 1.25 s batched;
  equal lengths: the same). `batched_prefill=True` prefills each `add` as one left-padded call.
- ORT_ENABLE_ALL: its fusions (SimplifiedLayerNormalization, MatMul + Transpose into FusedMatMul, ...) apply to
  the graph at load, which stays standard ONNX on disk for TensorRT; ORT_ENABLE_EXTENDED ran at the same speed.
- each step copies the whole cache once, in the graph's Concat (present = concat(past, new) is the graph's
  contract): about a quarter of a batch-8 step at this context, the weights' reads most of the rest.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..engines.onnxruntime_session import session_options
from ..errors import EXIT_FAILURE, UserError
from .onnxruntime_backend import CPU

if TYPE_CHECKING:
    import onnxruntime


class OnnxRuntimeDecoder:
    """A decoder graph loaded in one ONNX Runtime session (CPU), giving DecodeBatch objects that share it."""

    def __init__(self, engine: Path, *, threads: int, max_batch: int, level: str = "ORT_ENABLE_ALL") -> None:
        import onnxruntime as ort

        from ..decoder_graph import decoder_facts, io_names

        engine = Path(engine)
        if not engine.is_file():
            raise UserError(f"No decoder graph at {engine}; build it with `make download_model` and "
                            "`make generate_engines`.", exit_code=EXIT_FAILURE)
        try:
            facts = decoder_facts(engine)
        except ValueError as error:
            raise UserError(str(error), exit_code=EXIT_FAILURE) from None
        self.num_layers = facts["num_layers"]
        self.num_kv_heads = facts["num_kv_heads"]
        self.head_dim = facts["head_dim"]
        self.vocab_size: int = facts["vocab_size"]
        self.max_positions = facts["max_positions"]
        self.max_batch = max(1, int(max_batch))
        self.input_names, self.output_names = io_names(self.num_layers)
        # The path, not bytes: ORT finds the external-data file beside the graph.
        self._session: ort.InferenceSession | None = ort.InferenceSession(
            str(engine), session_options(threads, level), providers=[CPU])

    @property
    def session(self) -> "onnxruntime.InferenceSession":
        if self._session is None:
            raise RuntimeError("the decoder is closed")
        return self._session

    def new_batch(self) -> "OnnxRuntimeDecodeBatch":
        return OnnxRuntimeDecodeBatch(self)

    def empty_cache(self, rows: int, length: int = 0) -> list[np.ndarray]:
        """Zeroed cache tensors (keys and values of every layer, in input order) of `rows` x `length` positions."""
        shape = (rows, self.num_kv_heads, length, self.head_dim)
        return [np.zeros(shape, np.float32) for _ in range(2 * self.num_layers)]

    def run(self, ids: np.ndarray, positions: np.ndarray, mask: np.ndarray,
            cache: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        """One graph call: each row's next token and the presents (the new cache), all of ORT's own buffers."""
        if positions.size and int(positions.max()) >= self.max_positions:
            raise UserError(f"A sequence reached position {int(positions.max())}, past the decoder's "
                            f"{self.max_positions} positions: shorten the prompts or max_new_tokens.",
                            exit_code=EXIT_FAILURE)
        feed = dict(zip(self.input_names, (ids, positions, mask, *cache)))
        outputs = self.session.run(self.output_names, feed)
        return outputs[0], outputs[2:]

    def prefill(self, prompts: Sequence[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
        """Prefill prompts together, left-padded to the longest: first tokens, cache and mask [n, longest].
        Positions count from each row's first real token; padding is token 0 at position 0, masked out."""
        lengths = np.array([len(p) for p in prompts], dtype=np.int64)
        if lengths.min(initial=1) < 1:
            raise ValueError("a prompt has no tokens; every prompt needs at least one")
        width = int(lengths.max())
        offsets = width - lengths
        mask = (np.arange(width) >= offsets[:, None]).astype(np.int64)
        ids = np.zeros((len(prompts), width), dtype=np.int64)
        ids[mask.astype(bool)] = np.concatenate([np.asarray(p, dtype=np.int64).ravel() for p in prompts])
        positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)
        first, cache = self.run(ids, positions, mask, self.empty_cache(len(prompts)))
        return first, cache, mask

    def close(self) -> None:
        self._session = None


class OnnxRuntimeDecodeBatch:
    """The running sequences of one instance (see the module docstring for the cache layout)."""

    def __init__(self, decoder: OnnxRuntimeDecoder, *, batched_prefill: bool = False) -> None:
        self._decoder = decoder
        self.batched_prefill = batched_prefill
        self._cache: list[np.ndarray] = decoder.empty_cache(0)
        self._mask = np.zeros((0, 0), dtype=np.int64)
        self._positions = np.zeros(0, dtype=np.int64)     # each row's next position
        self._last = np.zeros(0, dtype=np.int64)          # each row's last generated token

    def __len__(self) -> int:
        return len(self._last)

    @property
    def cache_length(self) -> int:
        """Columns of the running cache (the longest history, once padding is trimmed)."""
        return self._mask.shape[1]

    def add(self, prompts: Sequence[np.ndarray]) -> np.ndarray:
        if not prompts:
            return np.zeros(0, dtype=np.int64)
        if len(self) + len(prompts) > self._decoder.max_batch:
            raise RuntimeError(f"{len(prompts)} new sequences would make {len(self) + len(prompts)} rows, over the "
                               f"batch's maximum of {self._decoder.max_batch}")
        groups = [list(prompts)] if self.batched_prefill else [[p] for p in prompts]
        for group in groups:
            first, cache, mask = self._decoder.prefill(group)
            self._join(first, cache, mask)
        return self._last[len(self._last) - len(prompts):].copy()

    def begin(self, prompt: np.ndarray, chunk_tokens: int) -> "OnnxRuntimePrefill":
        return OnnxRuntimePrefill(self, prompt, chunk_tokens)

    def _join(self, first: np.ndarray, cache: Sequence[np.ndarray], mask: np.ndarray) -> None:
        """Append prefilled rows: their cache and mask, next positions (the tokens so far) and first tokens."""
        self._merge(cache, mask)
        self._positions = np.concatenate([self._positions, mask.sum(axis=1)])
        self._last = np.concatenate([self._last, first])

    def _merge(self, cache: Sequence[np.ndarray], mask: np.ndarray) -> None:
        """Append rows to the running cache, left-padding whichever side is shorter."""
        width = max(self.cache_length, mask.shape[1])
        pad_old, pad_new = width - self.cache_length, width - mask.shape[1]
        self._mask = np.concatenate([np.pad(self._mask, ((0, 0), (pad_old, 0))),
                                     np.pad(mask, ((0, 0), (pad_new, 0)))])
        widths = ((0, 0), (0, 0), (pad_old, 0), (0, 0)), ((0, 0), (0, 0), (pad_new, 0), (0, 0))
        self._cache = [np.concatenate([np.pad(old, widths[0]) if pad_old else old,
                                       np.pad(new, widths[1]) if pad_new else new])
                       for old, new in zip(self._cache, cache)]

    def step(self) -> np.ndarray:
        if not len(self):
            return np.zeros(0, dtype=np.int64)
        mask = np.concatenate([self._mask, np.ones((len(self), 1), dtype=np.int64)], axis=1)
        tokens, self._cache = self._decoder.run(self._last[:, None], self._positions[:, None], mask, self._cache)
        self._mask = mask
        self._positions = self._positions + 1
        self._last = tokens
        return tokens.copy()

    def remove(self, rows: Sequence[int]) -> None:
        if not len(rows):
            return
        keep = np.ones(len(self), dtype=bool)
        keep[np.asarray(rows, dtype=np.int64)] = False
        mask = self._mask[keep]
        # Leading columns that no remaining row attends to are dropped with the rows, in the same copy.
        used = mask.any(axis=0)
        start = int(np.argmax(used)) if used.any() else mask.shape[1]
        self._mask = np.ascontiguousarray(mask[:, start:])
        self._cache = [np.ascontiguousarray(tensor[keep, :, start:]) for tensor in self._cache]
        self._positions = self._positions[keep]
        self._last = self._last[keep]

    def close(self) -> None:
        self._cache = self._decoder.empty_cache(0)
        self._mask = np.zeros((0, 0), dtype=np.int64)
        self._positions = np.zeros(0, dtype=np.int64)
        self._last = np.zeros(0, dtype=np.int64)


class OnnxRuntimePrefill:
    """One prompt prefilled a chunk per `advance` (see the module docstring); joins its batch after the last one."""

    def __init__(self, batch: OnnxRuntimeDecodeBatch, prompt: np.ndarray, chunk_tokens: int) -> None:
        self._ids = np.ascontiguousarray(prompt, dtype=np.int64).ravel()
        if not len(self._ids):
            raise ValueError("a prompt has no tokens; every prompt needs at least one")
        if int(chunk_tokens) < 1:
            raise ValueError(f"chunk_tokens must be at least 1, not {chunk_tokens}")
        self._batch = batch
        self._chunk = int(chunk_tokens)
        self._cache: list[np.ndarray] | None = batch._decoder.empty_cache(1)
        self._done = 0                     # prompt tokens prefilled so far
        self.first_token = -1

    def advance(self) -> bool:
        if self._cache is None:
            return True
        batch = self._batch
        start, end = self._done, min(self._done + self._chunk, len(self._ids))
        last = end == len(self._ids)
        if last and len(batch) >= batch._decoder.max_batch:
            raise RuntimeError(f"a prefilled prompt would make {len(batch) + 1} rows, over the batch's maximum of "
                               f"{batch._decoder.max_batch}")
        mask = np.ones((1, end), dtype=np.int64)
        positions = np.arange(start, end, dtype=np.int64)[None]
        first, self._cache = batch._decoder.run(self._ids[None, start:end], positions, mask, self._cache)
        self._done = end
        if not last:
            return False
        batch._join(first, self._cache, mask)
        self._cache = None
        self.first_token = int(first[0])
        return True
