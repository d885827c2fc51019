"""Decoder weights from a file: a llama.cpp GGUF (the embedded SmolLM2) or a Hugging Face safetensors checkpoint.

Both become `DecoderWeights`: float32, Hugging Face names, [out, in] layouts. Two facts of llama.cpp's GGUF matter:
its quantized blocks (Q4_1, Q8_0, ...) are dequantized with the `gguf` package, and its converter permuted the
rows of the query and key projections so that RoPE rotates adjacent pairs (interleaved); the graph rotates halves
(Hugging Face's rotate_half), so the permutation is undone here. Without that the model's text is garbage.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Container, Mapping

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError
from .decoder_config import DecoderConfig, DecoderWeights, RopeScaling

# GGUF tensor name (within a block "blk.{i}.") -> Hugging Face name (within "model.layers.{i}.").
_LAYER_TENSORS = {
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
}
_GLOBAL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}


def _reader(path: Path):
    import gguf

    path = Path(path)
    if not path.is_file():
        raise UserError(f"No GGUF file at {path}; fetch the model again with `make download_model`.",
                        exit_code=EXIT_FAILURE)
    try:
        return gguf.GGUFReader(str(path))
    except (ValueError, OSError) as error:
        raise UserError(f"{path} is not a readable GGUF file ({error}); delete it and run `make download_model` "
                        "again.", exit_code=EXIT_FAILURE) from error


def gguf_metadata(path: Path) -> dict[str, Any]:
    """Every key-value field of a GGUF file as Python values (strings, numbers, lists), tokenizer arrays included."""
    return {name: field.contents() for name, field in _reader(path).fields.items()}


def unpermute_rope_rows(weight: np.ndarray, num_heads: int) -> np.ndarray:
    """Undo llama.cpp's row permutation of a query or key projection ([heads * head_dim, in]).

    llama.cpp's converter does `w.reshape(heads, 2, head_dim // 2, in).swapaxes(1, 2)`: row 2k of a head becomes
    the head's row k and row 2k+1 its row head_dim/2 + k, so interleaved RoPE rotates the pairs that
    rotate_half rotates. This is the inverse."""
    rows, cols = weight.shape
    half = rows // num_heads // 2
    return np.ascontiguousarray(weight.reshape(num_heads, half, 2, cols).swapaxes(1, 2).reshape(rows, cols))


def _config_from_gguf(fields: Mapping[str, Any], tensor_names: set[str], path: Path) -> DecoderConfig:
    arch = fields.get("general.architecture")
    if arch != "llama":
        raise UserError(f"{path} holds a '{arch}' model; the decoder graph is built for the Llama architecture "
                        "(Llama, SmolLM2, ...).", exit_code=EXIT_FAILURE)

    def need(key: str) -> Any:
        value = fields.get(f"llama.{key}")
        if value is None:
            raise UserError(f"{path} lacks the metadata llama.{key}; the file is incomplete or damaged.",
                            exit_code=EXIT_FAILURE)
        return value

    if "rope_freqs.weight" in tensor_names:
        raise UserError(f"{path} carries precomputed RoPE frequency factors (Llama 3.1's scaling), which this "
                        "converter does not read from GGUF; convert the model from its Hugging Face checkpoint.",
                        exit_code=EXIT_FAILURE)
    hidden, heads = int(need("embedding_length")), int(need("attention.head_count"))
    head_dim = int(fields.get("llama.attention.key_length") or fields.get("llama.rope.dimension_count")
                   or hidden // heads)
    vocab = fields.get("llama.vocab_size")
    if vocab is None:
        vocab = len(fields.get("tokenizer.ggml.tokens") or [])
    return DecoderConfig(
        vocab_size=int(vocab),
        hidden_size=hidden,
        num_layers=int(need("block_count")),
        num_heads=heads,
        num_kv_heads=int(fields.get("llama.attention.head_count_kv") or heads),
        head_dim=head_dim,
        intermediate_size=int(need("feed_forward_length")),
        rope_theta=float(fields.get("llama.rope.freq_base") or 10000.0),
        rms_norm_eps=float(need("attention.layer_norm_rms_epsilon")),
        max_positions=int(need("context_length")),
        tie_embeddings="output.weight" not in tensor_names,
    )


_SMALL_FIELDS = ("general.", "llama.")


def read_gguf(path: Path) -> DecoderWeights:
    """Dequantized float32 weights of a Llama-architecture GGUF, Q/K un-permuted, in Hugging Face naming."""
    from gguf.quants import dequantize

    path = Path(path)
    reader = _reader(path)
    fields = {name: field.contents() for name, field in reader.fields.items()
              if name.startswith(_SMALL_FIELDS) or name == "tokenizer.ggml.tokens"}
    config = _config_from_gguf(fields, {t.name for t in reader.tensors}, path)
    tensors: dict[str, np.ndarray] = {}
    for tensor in reader.tensors:
        block, _, rest = tensor.name.partition(".")
        if block == "blk":
            index, _, local = rest.partition(".")
            if local not in _LAYER_TENSORS:
                continue
            name = f"model.layers.{int(index)}.{_LAYER_TENSORS[local]}"
        elif tensor.name in _GLOBAL_TENSORS:
            name = _GLOBAL_TENSORS[tensor.name]
        else:
            continue
        # numpy's shape is GGUF's dimensions reversed: [out, in] for a projection, as in Hugging Face.
        array = np.asarray(dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        if name.endswith("q_proj.weight"):
            array = unpermute_rope_rows(array, config.num_heads)
        elif name.endswith("k_proj.weight"):
            array = unpermute_rope_rows(array, config.num_kv_heads)
        tensors[name] = np.ascontiguousarray(array)
    try:
        return DecoderWeights(config, tensors)
    except ValueError as error:
        raise UserError(f"{path}: {error}", exit_code=EXIT_FAILURE) from error


# --- Hugging Face safetensors checkpoints --------------------------------------------------------------------------

_SAFETENSORS_DTYPES = {"F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64"}


def _numpy_dtype(code: str, file: Path, name: str) -> np.dtype:
    if code not in _SAFETENSORS_DTYPES:
        raise UserError(f"{file}: tensor {name} has dtype {code}; the converter reads {', '.join(_SAFETENSORS_DTYPES)} "
                        "weights (an unquantized checkpoint).", exit_code=EXIT_FAILURE)
    if code == "BF16":
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(_SAFETENSORS_DTYPES[code])


def read_safetensors(file: Path, names: Container[str] | None = None) -> dict[str, np.ndarray]:
    """The tensors of one .safetensors file (those in `names`, or all) as float32, bf16 and fp16 widened.

    The format is an 8-byte little-endian header size, a JSON header (name -> dtype, shape, [begin, end) byte
    offsets after the header), then the raw little-endian tensors. The `safetensors` package reads it when it is
    installed and the file has no bf16 (numpy has no bf16 type of its own); otherwise the file is memory-mapped
    here and bf16 read through `ml_dtypes`. Either way each tensor is widened once, one at a time."""
    file = Path(file)
    header = _header(file)
    entries = {name: entry for name, entry in header.items()
               if name != "__metadata__" and (names is None or name in names)}
    try:
        from safetensors import safe_open
    except ImportError:
        safe_open = None
    if safe_open is not None and all(entry.get("dtype") != "BF16" for entry in entries.values()):
        with safe_open(str(file), framework="numpy") as opened:
            return {name: np.asarray(opened.get_tensor(name), dtype=np.float32) for name in entries}
    start = 8 + int.from_bytes(file.open("rb").read(8), "little")
    raw = np.memmap(file, dtype=np.uint8, mode="r")
    tensors: dict[str, np.ndarray] = {}
    for name, entry in entries.items():
        begin, end = (int(x) for x in entry["data_offsets"])
        dtype = _numpy_dtype(entry["dtype"], file, name)
        shape = tuple(int(x) for x in entry["shape"])
        if end - begin != int(np.prod(shape)) * dtype.itemsize or start + end > raw.size:
            raise UserError(f"{file}: tensor {name}'s byte range does not match its shape {list(shape)}; the file is "
                            "truncated or damaged: download it again.", exit_code=EXIT_FAILURE)
        tensors[name] = np.array(raw[start + begin:start + end].view(dtype).reshape(shape), dtype=np.float32)
    return tensors


def _header(file: Path) -> dict[str, Any]:
    with file.open("rb") as f:
        size_bytes = f.read(8)
        if len(size_bytes) != 8:
            raise UserError(f"{file} is too short to be a safetensors file; download it again.", exit_code=EXIT_FAILURE)
        size = int.from_bytes(size_bytes, "little")
        if size > 100_000_000 or size > file.stat().st_size - 8:
            raise UserError(f"{file} is not a safetensors file (header size {size}); download it again.",
                            exit_code=EXIT_FAILURE)
        try:
            return json.loads(f.read(size))
        except ValueError as error:
            raise UserError(f"{file}: its safetensors header is not JSON ({error}); download it again.",
                            exit_code=EXIT_FAILURE) from error


def config_from_hf(config: Mapping[str, Any], where: str = "config.json") -> DecoderConfig:
    """A DecoderConfig from a Hugging Face LlamaConfig (config.json)."""
    if config.get("model_type", "llama") != "llama":
        raise UserError(f"{where} describes a '{config.get('model_type')}' model; the decoder graph is built for "
                        "Llama-architecture checkpoints.", exit_code=EXIT_FAILURE)
    try:
        heads = int(config["num_attention_heads"])
        hidden = int(config["hidden_size"])
        scaling = config.get("rope_scaling")
        rope_scaling = None
        if scaling:
            kind = scaling.get("rope_type", scaling.get("type"))
            if kind == "llama3":
                rope_scaling = RopeScaling(
                    factor=float(scaling["factor"]), low_freq_factor=float(scaling["low_freq_factor"]),
                    high_freq_factor=float(scaling["high_freq_factor"]),
                    original_max_positions=int(scaling["original_max_position_embeddings"]))
            elif kind != "default":
                raise UserError(f"{where}: rope_scaling type '{kind}' is not supported (only Llama 3.1's "
                                "'llama3').", exit_code=EXIT_FAILURE)
        return DecoderConfig(
            vocab_size=int(config["vocab_size"]), hidden_size=hidden, num_layers=int(config["num_hidden_layers"]),
            num_heads=heads, num_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or hidden // heads),
            intermediate_size=int(config["intermediate_size"]), rope_theta=float(config.get("rope_theta", 10000.0)),
            rms_norm_eps=float(config.get("rms_norm_eps", 1e-6)),
            max_positions=int(config.get("max_position_embeddings", 2048)),
            tie_embeddings=bool(config.get("tie_word_embeddings", False)), rope_scaling=rope_scaling)
    except KeyError as error:
        raise UserError(f"{where} lacks {error}; it is not a complete Hugging Face Llama config.",
                        exit_code=EXIT_FAILURE) from None


def read_safetensors_checkpoint(folder: Path) -> DecoderWeights:
    """A Hugging Face Llama checkpoint folder (config.json and one or more *.safetensors) as float32 weights."""
    folder = Path(folder)
    config_file = folder / "config.json"
    files = sorted(folder.glob("*.safetensors"))
    if not config_file.is_file() or not files:
        raise UserError(f"{folder} is not a Hugging Face checkpoint: it needs config.json and *.safetensors files.",
                        exit_code=EXIT_FAILURE)
    config = config_from_hf(json.loads(config_file.read_text()), str(config_file))
    wanted = config.expected_shapes()
    tensors: dict[str, np.ndarray] = {}
    for file in files:
        tensors |= read_safetensors(file, wanted)
    if config.tie_embeddings:
        tensors.pop("lm_head.weight", None)
    try:
        return DecoderWeights(config, tensors)
    except ValueError as error:
        raise UserError(f"{folder}: {error}", exit_code=EXIT_FAILURE) from error
