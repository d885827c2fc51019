"""The vision tower and connector of the vision-language substitute (Idefics3, as SmolVLM has them), with generated
weights.

No vision-language model can be had from a package registry, so the substitute (smolvlm.py) joins SmolLM2-135M's
real text weights to a small SigLIP-style tower whose weights are drawn from a fixed seed: images travel the real
path (the image processor, the tower, the pixel shuffle and projection into visual tokens, the per-prompt limits)
at little cost on two cores, and the answers come from the text weights. The tower has never been trained: its
visual tokens carry no meaning, and a score reached with it is a figure of the path, not of a model.

The names and shapes are those of transformers' Idefics3ForConditionalGeneration (model.vision_model.*,
model.connector.modality_projection.proj.weight), which vLLM's idefics3.py loads.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

SEED = 20240708            # fixed: the same folder (and digest) wherever it is written
INITIALIZER_RANGE = 0.02   # transformers' default std of an untrained Idefics3's linear layers


@dataclass(frozen=True)
class TowerConfig:
    """A SigLIP-style encoder small enough to be cheap on two cores: a 256 x 256 image in 16 x 16 patches (256 of
    them), pixel-shuffled by 2 into 64 visual tokens, as many as one SmolVLM-256M tile gives."""

    image_size: int = 256
    patch_size: int = 16
    hidden_size: int = 64
    intermediate_size: int = 128
    num_layers: int = 2
    num_heads: int = 2
    scale_factor: int = 2
    layer_norm_eps: float = 1e-6

    @property
    def patches_per_side(self) -> int:
        return self.image_size // self.patch_size

    @property
    def visual_tokens(self) -> int:
        """Visual tokens per image: the processor's image_seq_len."""
        return (self.patches_per_side // self.scale_factor) ** 2

    def hf_config(self) -> dict[str, Any]:
        """vision_config of an Idefics3 config.json (transformers' Idefics3VisionConfig)."""
        return {"model_type": "idefics3_vision", "hidden_size": self.hidden_size,
                "intermediate_size": self.intermediate_size, "num_hidden_layers": self.num_layers,
                "num_attention_heads": self.num_heads, "num_channels": 3, "image_size": self.image_size,
                "patch_size": self.patch_size, "hidden_act": "gelu_pytorch_tanh",
                "layer_norm_eps": self.layer_norm_eps, "attention_dropout": 0.0,
                "initializer_range": INITIALIZER_RANGE}


def tower_tensors(config: TowerConfig, text_hidden_size: int, seed: int = SEED) -> dict[str, np.ndarray]:
    """The tower's and connector's weights (float32), drawn from `seed`: linear layers and embeddings normal with
    the initializer's std, biases zero, layer norms the identity."""
    rng = np.random.default_rng(seed)
    d, f = config.hidden_size, config.intermediate_size

    def normal(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) * INITIALIZER_RANGE).astype(np.float32)

    def zeros(n: int) -> np.ndarray:
        return np.zeros((n,), np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones((n,), np.float32)

    tower = "model.vision_model"
    tensors = {f"{tower}.embeddings.patch_embedding.weight": normal(d, 3, config.patch_size, config.patch_size),
               f"{tower}.embeddings.patch_embedding.bias": zeros(d),
               f"{tower}.embeddings.position_embedding.weight": normal(config.patches_per_side ** 2, d),
               f"{tower}.post_layernorm.weight": ones(d), f"{tower}.post_layernorm.bias": zeros(d)}
    for i in range(config.num_layers):
        layer = f"{tower}.encoder.layers.{i}"
        for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
            tensors[f"{layer}.self_attn.{name}.weight"] = normal(d, d)
            tensors[f"{layer}.self_attn.{name}.bias"] = zeros(d)
        for name in ("layer_norm1", "layer_norm2"):
            tensors[f"{layer}.{name}.weight"] = ones(d)
            tensors[f"{layer}.{name}.bias"] = zeros(d)
        tensors[f"{layer}.mlp.fc1.weight"], tensors[f"{layer}.mlp.fc1.bias"] = normal(f, d), zeros(f)
        tensors[f"{layer}.mlp.fc2.weight"], tensors[f"{layer}.mlp.fc2.bias"] = normal(d, f), zeros(d)
    tensors["model.connector.modality_projection.proj.weight"] = normal(text_hidden_size,
                                                                        d * config.scale_factor ** 2)
    return tensors
