"""A Hugging Face model folder of a decoder, for OpenAI-compatible serving engines (vLLM, SGLang, trtllm-serve).

Serving engines load a model as a Hugging Face folder: config.json (LlamaForCausalLM), generation_config.json,
tokenizer.json with tokenizer_config.json (special tokens, the chat template) and the weights as safetensors. The
embedded substitute exists only as a GGUF file, so the folder is written here from the same float32 weights the
ONNX decoder is built from (Q4_1/Q8_0 dequantized, llama.cpp's Q/K row permutation undone: the Hugging Face
layout) and from the same tokenizer: a served model and the in-process decoder are the same model.

The safetensors file is written with numpy (the `safetensors` package is not in the toolkit's environment): an
8-byte little-endian header size, a JSON header (name -> dtype, shape, [begin, end) byte offsets after the
header; padded with spaces to a multiple of 8 bytes), then the raw little-endian tensors.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..common.fileio import atomic_dir
from .decoder_config import DecoderWeights
from .tokenizer import TextTokenizer

WEIGHTS_FILE = "model.safetensors"
CONFIG_FILE = "config.json"
GENERATION_CONFIG_FILE = "generation_config.json"
TOKENIZER_FILE = "tokenizer.json"
TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
FILES = (WEIGHTS_FILE, CONFIG_FILE, GENERATION_CONFIG_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE)
_DTYPE_CODES = {np.dtype("float32"): "F32", np.dtype("float16"): "F16", np.dtype("int64"): "I64",
                np.dtype("int32"): "I32"}
_ALIGN = 8


def hf_config(weights: DecoderWeights, tokenizer: TextTokenizer) -> dict[str, Any]:
    """config.json of a Llama-architecture decoder (transformers' LlamaConfig), float32."""
    c = weights.config
    if c.rope_scaling is not None:
        raise ValueError("the folder writer writes unscaled RoPE only; a Llama 3.1 checkpoint is served as it is")
    eos = list(tokenizer.eos_token_ids)
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": c.vocab_size,
        "hidden_size": c.hidden_size,
        "intermediate_size": c.intermediate_size,
        "num_hidden_layers": c.num_layers,
        "num_attention_heads": c.num_heads,
        "num_key_value_heads": c.num_kv_heads,
        "head_dim": c.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": c.max_positions,
        "rms_norm_eps": float(str(np.float32(c.rms_norm_eps))),   # 1e-05, not its float32 widened
        "rope_theta": c.rope_theta,
        "rope_scaling": None,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": c.tie_embeddings,
        "initializer_range": 0.02,
        "pretraining_tp": 1,
        "use_cache": True,
        "bos_token_id": tokenizer.bos_token_id,
        "eos_token_id": eos[0] if len(eos) == 1 else eos,
        "pad_token_id": eos[0],
        "torch_dtype": "float32",
    }


def generation_config(tokenizer: TextTokenizer) -> dict[str, Any]:
    """generation_config.json: the special ids only, no sampling defaults (servers would apply them)."""
    eos = list(tokenizer.eos_token_ids)
    return {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": eos[0] if len(eos) == 1 else eos,
            "pad_token_id": eos[0]}


def tokenizer_config(tokenizer: TextTokenizer, max_positions: int) -> dict[str, Any]:
    """tokenizer_config.json for transformers' fast tokenizer over tokenizer.json, with the chat template."""
    bos = tokenizer.token_text(tokenizer.bos_token_id) or None
    eos = tokenizer.token_text(tokenizer.eos_token_ids[0])
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": bos,
        "eos_token": eos,
        "pad_token": eos,
        "add_bos_token": tokenizer.adds_bos,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": tokenizer.clean_up_spaces,
        "model_max_length": max_positions,
    }
    if tokenizer.chat_template:
        config["chat_template"] = tokenizer.chat_template
    return config


def write_safetensors(path: Path, tensors: Mapping[str, np.ndarray], metadata: Mapping[str, str] | None = None) -> None:
    """Write `tensors` (names sorted, C order, little-endian) as one safetensors file."""
    header: dict[str, Any] = {"__metadata__": dict(metadata or {"format": "pt"})}
    offset = 0
    names = sorted(tensors)
    for name in names:
        array = tensors[name]
        code = _DTYPE_CODES.get(array.dtype)
        if code is None:
            raise ValueError(f"tensor {name}: dtype {array.dtype} is not written here")
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + array.nbytes]}
        offset += array.nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % _ALIGN)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for name in names:
            array = np.ascontiguousarray(tensors[name])
            f.write(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes())


def read_safetensors_header(path: Path) -> dict[str, Any]:
    """The JSON header of a safetensors file."""
    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        return json.loads(f.read(size))


def write_folder(weights: DecoderWeights, tokenizer: TextTokenizer, folder: Path) -> Path:
    """The decoder's Hugging Face folder: fp32 safetensors, config, generation config, tokenizer (write_files)."""
    tensors = dict(weights.tensors)
    if weights.config.tie_embeddings:
        tensors.pop("lm_head.weight", None)
    return write_files(folder, tensors, ((CONFIG_FILE, hf_config(weights, tokenizer)),
                                         (GENERATION_CONFIG_FILE, generation_config(tokenizer)),
                                         (TOKENIZER_CONFIG_FILE,
                                          tokenizer_config(tokenizer, weights.config.max_positions))), tokenizer)


def write_files(folder: Path, tensors: Mapping[str, np.ndarray], configs: Iterable[tuple[str, Any]],
                tokenizer: TextTokenizer) -> Path:
    """Write a Hugging Face folder (the weights, each (file name, JSON body) of `configs`, tokenizer.json) whole or
    not at all (fileio.atomic_dir: an existing `folder` is replaced; a failure leaves it as it was)."""
    with atomic_dir(folder) as work:
        write_safetensors(work / WEIGHTS_FILE, tensors)
        for name, body in configs:
            (work / name).write_text(json.dumps(body, indent=2) + "\n")
        (work / TOKENIZER_FILE).write_text(tokenizer.to_json())
    return Path(folder)
