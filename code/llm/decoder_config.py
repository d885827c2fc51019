"""The shape of a Llama-family decoder and its weights, in Hugging Face naming, whatever file they came from.

Both the embedded substitute (SmolLM2-135M-Instruct, read from a GGUF file) and the real Llama-3.1-8B-Instruct
(a Hugging Face safetensors checkpoint) become one `DecoderWeights`; the ONNX builder and the numpy reference read
nothing else, so the two models go through the same graph and the same checks.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's "llama3" RoPE scaling: long wavelengths are slowed down by `factor`, short ones kept, the band
    between interpolated smoothly (Hugging Face `rope_scaling` with rope_type "llama3")."""

    factor: float                    # 8.0 for Llama 3.1
    low_freq_factor: float           # 1.0
    high_freq_factor: float          # 4.0
    original_max_positions: int      # 8192: the context the model was pre-trained with


@dataclass(frozen=True)
class DecoderConfig:
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    max_positions: int
    tie_embeddings: bool
    rope_scaling: RopeScaling | None = None

    def __post_init__(self) -> None:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{self.num_heads} query heads cannot be shared evenly by {self.num_kv_heads} KV heads")
        if self.head_dim % 2:
            raise ValueError(f"head_dim {self.head_dim} is odd: rotary embeddings rotate pairs of dimensions")

    @property
    def group_size(self) -> int:
        """Query heads per KV head (grouped-query attention)."""
        return self.num_heads // self.num_kv_heads

    def expected_shapes(self) -> dict[str, tuple[int, ...]]:
        """Every weight this config needs, Hugging Face name -> [out, in] shape (lm_head only when untied)."""
        h, kv, d, f = self.hidden_size, self.num_kv_heads, self.head_dim, self.intermediate_size
        shapes: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (self.vocab_size, h),
                                              "model.norm.weight": (h,)}
        for i in range(self.num_layers):
            p = f"model.layers.{i}."
            shapes |= {
                p + "self_attn.q_proj.weight": (self.num_heads * d, h),
                p + "self_attn.k_proj.weight": (kv * d, h),
                p + "self_attn.v_proj.weight": (kv * d, h),
                p + "self_attn.o_proj.weight": (h, self.num_heads * d),
                p + "mlp.gate_proj.weight": (f, h),
                p + "mlp.up_proj.weight": (f, h),
                p + "mlp.down_proj.weight": (h, f),
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
            }
        if not self.tie_embeddings:
            shapes["lm_head.weight"] = (self.vocab_size, h)
        return shapes


@dataclass(frozen=True)
class DecoderWeights:
    """A config and its float32 weights, Hugging Face names and [out, in] layouts (DecoderConfig.expected_shapes)."""

    config: DecoderConfig
    tensors: Mapping[str, np.ndarray] = field(repr=False)

    def __post_init__(self) -> None:
        problems = []
        for name, shape in self.config.expected_shapes().items():
            array = self.tensors.get(name)
            if array is None:
                problems.append(f"{name} is missing")
            elif tuple(array.shape) != shape or array.dtype != np.float32:
                problems.append(f"{name} is {array.dtype}{list(array.shape)}, expected float32{list(shape)}")
        if problems:
            shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
            raise ValueError(f"The decoder weights do not match their config: {shown}. The file is damaged or "
                             "holds another architecture.")

    def layer(self, i: int, name: str) -> np.ndarray:
        """`name` of layer i, e.g. layer(3, "self_attn.q_proj.weight")."""
        return self.tensors[f"model.layers.{i}.{name}"]

    @property
    def embed(self) -> np.ndarray:
        return self.tensors["model.embed_tokens.weight"]

    @property
    def lm_head(self) -> np.ndarray:
        """[vocab, hidden]: the token embedding itself when tied."""
        return self.tensors["model.embed_tokens.weight" if self.config.tie_embeddings else "lm_head.weight"]


def rope_inv_freq(config: DecoderConfig) -> np.ndarray:
    """The rotary inverse frequencies (float64, head_dim / 2 of them), with Llama 3.1's scaling when configured.

    The "llama3" rule, as Meta's reference and Hugging Face apply it: wavelengths shorter than
    original_max_positions / high_freq_factor keep their frequency, longer than original / low_freq_factor are
    divided by `factor`, and those between blend the two linearly in original / wavelength."""
    d = config.head_dim
    inv_freq = 1.0 / (config.rope_theta ** (np.arange(0, d, 2, dtype=np.float64) / d))
    scaling = config.rope_scaling
    if scaling is None:
        return inv_freq
    wavelen = 2 * math.pi / inv_freq
    low_freq_wavelen = scaling.original_max_positions / scaling.low_freq_factor
    high_freq_wavelen = scaling.original_max_positions / scaling.high_freq_factor
    smooth = (scaling.original_max_positions / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor)
    blended = (1 - smooth) * inv_freq / scaling.factor + smooth * inv_freq
    return np.where(wavelen < high_freq_wavelen, inv_freq,
                    np.where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, blended))


def rope_tables(config: DecoderConfig, positions: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin, float32 [positions, head_dim], in the rotate-half layout (each frequency twice: first half, then
    second half of the head), as Hugging Face's Llama applies them."""
    angles = np.outer(np.arange(positions, dtype=np.float64), rope_inv_freq(config))
    angles = np.concatenate([angles, angles], axis=1)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
