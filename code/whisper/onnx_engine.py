"""The ONNX Runtime engine: the encoder and decoder-with-cache graphs the toolkit builds from the CTranslate2
folder's weights (onnx_graphs.py), driven with greedy decoding under the rules CTranslate2 applies to Whisper.

The rules, as CTranslate2 4.8's WhisperReplica::generate sets them for greedy search (beam_size=1,
suppress_blank=True, suppress_tokens=[-1]): the model config's `suppress_ids` are never generated; at the first
step `suppress_ids_begin` (" " and <|endoftext|>) are not generated either; <|endoftext|> ends a clip. The output
is what engines.py asks for, as vLLM's token ids are for the reference: at most MAX_NEW_TOKENS decoding steps, each
step's token kept, the closing <|endoftext|> included when it came within them. With a prompt that ends in <|notimestamps|> CTranslate2
applies no timestamp rule at all (its ApplyTimestampRules runs only for a prompt without it), so the timestamp
tokens stay possible, as they do in openai-whisper with without_timestamps; `suppress_timestamps=True` forbids
them as well, for engines that must never emit one.

Batched: the encoder runs once on the whole batch and gives every decoder layer's cross-attention keys and
values; the decoder runs the batch step by step with its cache, and a clip that has ended leaves the batch (its
rows of the cache and of the cross-attention inputs are dropped, as CTranslate2 drops finished rows), so it
costs nothing further.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np

from ..common.paths import Paths
from .models import BENCHMARK, FRAMES, MAX_NEW_TOKENS, ModelFacts
from .onnx_graphs import (CROSS_KEY, CROSS_VALUE, DECODER_FILE, ENCODER_FILE, FEATURES, INPUT_IDS, LOGITS, PAST_KEY,
                          PAST_VALUE, PRESENT_KEY, PRESENT_VALUE, GraphShape, graphs_when_stale)

Log = Callable[[str], None]


class OnnxWhisper:
    """`transcribe(features)` with ONNX Runtime on the CPU; the graphs are built on first use (and rebuilt when the
    weights or the graph writer change) into paths.onnx_graph_dir("whisper", facts.name)."""

    name = "onnxruntime"

    def __init__(self, model_folder: Path, facts: ModelFacts, paths: Paths, log: Log | None = None,
                 threads: int = 0, suppress_timestamps: bool = False,
                 max_new_tokens: int = MAX_NEW_TOKENS) -> None:
        import onnxruntime as ort

        from ..common.engines.onnxruntime_session import session_options

        graphs, shape = graphs_when_stale(Path(model_folder), paths.onnx_graph_dir(BENCHMARK, facts.name),
                                          log or (lambda line: None))
        if shape.n_mels != facts.n_mels:
            raise ValueError(f"the graphs of {facts.name} take {shape.n_mels} mel bins, the model facts say "
                             f"{facts.n_mels}")
        self.facts = facts
        self.shape: GraphShape = shape
        self.max_new_tokens = int(max_new_tokens)
        if len(facts.prompt) + self.max_new_tokens > shape.decoder_positions:
            raise ValueError(f"a {len(facts.prompt)}-token prompt and {self.max_new_tokens} new tokens pass the "
                             f"decoder's {shape.decoder_positions} positions")
        self._suppress = np.array(sorted(set(facts.suppress_tokens)), dtype=np.int64)
        self._suppress_first = np.array(sorted(set(facts.suppress_blank)), dtype=np.int64)
        self._suppress_timestamps = bool(suppress_timestamps)
        self._cross_names = [name.format(i) for i in range(shape.decoder_layers) for name in (CROSS_KEY, CROSS_VALUE)]
        self._past_names = [name.format(i) for i in range(shape.decoder_layers) for name in (PAST_KEY, PAST_VALUE)]
        self._present_names = [name.format(i) for i in range(shape.decoder_layers)
                               for name in (PRESENT_KEY, PRESENT_VALUE)]
        providers = ["CPUExecutionProvider"]
        self._encoder: ort.InferenceSession | None = ort.InferenceSession(
            str(graphs / ENCODER_FILE), session_options(threads), providers=providers)
        self._decoder: ort.InferenceSession | None = ort.InferenceSession(
            str(graphs / DECODER_FILE), session_options(threads), providers=providers)

    def _sessions(self):
        if self._encoder is None or self._decoder is None:
            raise RuntimeError("the ONNX Runtime whisper engine is closed")
        return self._encoder, self._decoder

    def transcribe(self, features: np.ndarray, max_new_tokens: int | None = None) -> list[list[int]]:
        """Greedy decoding of a batch, at most `max_new_tokens` steps (the engine's own cap by default)."""
        encoder, decoder = self._sessions()
        steps = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        if len(self.facts.prompt) + steps > self.shape.decoder_positions:
            raise ValueError(f"a {len(self.facts.prompt)}-token prompt and {steps} new tokens pass the decoder's "
                             f"{self.shape.decoder_positions} positions")
        features = np.ascontiguousarray(features, dtype=np.float32)
        if features.ndim != 3 or features.shape[1:] != (self.facts.n_mels, FRAMES):
            raise ValueError(f"features of shape {features.shape}; the engine takes [batch, {self.facts.n_mels}, "
                             f"{FRAMES}]")
        batch = len(features)
        if batch == 0:
            return []
        cross = dict(zip(self._cross_names, encoder.run(self._cross_names, {FEATURES: features})))
        heads, head_dim = self.shape.decoder_heads, self.shape.head_dim
        past = {name: np.zeros((batch, heads, 0, head_dim), np.float32) for name in self._past_names}
        ids = np.tile(np.asarray(self.facts.prompt, dtype=np.int64), (batch, 1))
        rows = np.arange(batch)                            # the clip of each row still in the batch
        tokens: list[list[int]] = [[] for _ in range(batch)]
        for step in range(steps):
            logits, *present = decoder.run([LOGITS, *self._present_names], {INPUT_IDS: ids, **past, **cross})
            logits[:, self._suppress] = -np.inf
            if step == 0:
                logits[:, self._suppress_first] = -np.inf
            if self._suppress_timestamps:
                logits[:, self.facts.timestamp_begin:] = -np.inf
            chosen = logits.argmax(axis=1)
            for row, token in zip(rows, chosen):
                tokens[row].append(int(token))
            alive = chosen != self.facts.eot
            if not alive.any():
                break
            if not alive.all():                            # ended clips leave the batch
                rows, chosen = rows[alive], chosen[alive]
                present = [value[alive] for value in present]
                cross = {name: value[alive] for name, value in cross.items()}
            past = dict(zip(self._past_names, present))
            ids = chosen[:, None].astype(np.int64)
        return tokens

    def close(self) -> None:
        self._encoder = None
        self._decoder = None
