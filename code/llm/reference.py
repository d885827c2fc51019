"""The decoder's math in plain numpy, with a KV cache: what the ONNX graph is checked against.

Written for clarity, not speed: KV heads are repeated for each query head (as Hugging Face's repeat_kv does),
where the graph groups queries instead, so the two implementations share no code beyond the weights and the RoPE
frequencies. The calling convention is the graph's (decoder_onnx.py): left-padded rows, a 0/1 attention mask over
past + new positions, logits of the last position only.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from .decoder_config import DecoderWeights, rope_inv_freq

KV = tuple[np.ndarray, np.ndarray]     # [batch, kv_heads, positions, head_dim] keys and values of one layer
MASKED = np.float32(-1e9)             # finite, so a row with no visible key stays finite (a padding row)


def _rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + np.float32(eps)) * weight


def _rotate(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


def forward(weights: DecoderWeights, input_ids: np.ndarray, position_ids: np.ndarray, attention_mask: np.ndarray,
            past: Sequence[KV] | None = None) -> tuple[np.ndarray, list[KV]]:
    """One decoder call: logits of each row's last position [batch, vocab] and every layer's cache (past + new)."""
    c = weights.config
    batch, seq = input_ids.shape
    past_len = 0 if not past else past[0][0].shape[2]
    if past is None:
        empty = np.zeros((batch, c.num_kv_heads, 0, c.head_dim), np.float32)
        past = [(empty, empty)] * c.num_layers
    angles = position_ids[..., None].astype(np.float64) * rope_inv_freq(c)
    angles = np.concatenate([angles, angles], axis=-1)[:, None]                 # [batch, 1, seq, head_dim]
    cos, sin = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    keys = np.arange(past_len + seq)
    visible = (attention_mask[:, None, None, :] == 1) & (keys <= past_len + np.arange(seq)[:, None])
    group = c.num_heads // c.num_kv_heads

    x = weights.embed[input_ids]
    presents: list[KV] = []
    for i in range(c.num_layers):
        h = _rms_norm(x, weights.layer(i, "input_layernorm.weight"), c.rms_norm_eps)
        q = (h @ weights.layer(i, "self_attn.q_proj.weight").T).reshape(batch, seq, c.num_heads, c.head_dim)
        k = (h @ weights.layer(i, "self_attn.k_proj.weight").T).reshape(batch, seq, c.num_kv_heads, c.head_dim)
        v = (h @ weights.layer(i, "self_attn.v_proj.weight").T).reshape(batch, seq, c.num_kv_heads, c.head_dim)
        q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        k = np.concatenate([past[i][0], k], axis=2)
        v = np.concatenate([past[i][1], v], axis=2)
        presents.append((k, v))
        k_all, v_all = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
        scores = q @ k_all.transpose(0, 1, 3, 2) / np.float32(np.sqrt(c.head_dim))
        scores = np.where(visible, scores, MASKED)
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        attn = (scores / scores.sum(axis=-1, keepdims=True)) @ v_all         # [batch, heads, seq, head_dim]
        attn = attn.transpose(0, 2, 1, 3).reshape(batch, seq, c.num_heads * c.head_dim)
        x = x + attn @ weights.layer(i, "self_attn.o_proj.weight").T
        h = _rms_norm(x, weights.layer(i, "post_attention_layernorm.weight"), c.rms_norm_eps)
        gate = h @ weights.layer(i, "mlp.gate_proj.weight").T
        up = h @ weights.layer(i, "mlp.up_proj.weight").T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ weights.layer(i, "mlp.down_proj.weight").T
    last = _rms_norm(x[:, -1], weights.tensors["model.norm.weight"], c.rms_norm_eps)
    return (last @ weights.lm_head.T).astype(np.float32), presents


def greedy(weights: DecoderWeights, prompt_ids: Sequence[int], max_new_tokens: int,
           eos_ids: Sequence[int] = ()) -> list[int]:
    """Greedy continuation of one prompt: up to `max_new_tokens` tokens, ending with the first of `eos_ids`."""
    ids = np.asarray(prompt_ids, dtype=np.int64)[None]
    positions = np.arange(ids.shape[1], dtype=np.int64)[None]
    mask = np.ones_like(ids)
    past: list[KV] | None = None
    out: list[int] = []
    stop = set(int(e) for e in eos_ids)
    while len(out) < max_new_tokens:
        logits, past = forward(weights, ids, positions, mask, past)
        token = int(np.argmax(logits[0]))
        out.append(token)
        if token in stop:
            break
        ids = np.array([[token]], dtype=np.int64)
        positions = positions[:, -1:] + 1
        mask = np.ones((1, mask.shape[1] + 1), dtype=np.int64)
    return out
