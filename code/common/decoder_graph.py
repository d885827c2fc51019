"""The decoder-graph contract: what an LLM decoder graph with a KV cache takes and gives, so that any runtime (ONNX
Runtime here, TensorRT) drives any benchmark's graph without knowing how it was written.

- inputs: `input_ids` int64 [batch, seq]; `position_ids` int64 [batch, seq]; `attention_mask` int64
  [batch, past_seq + seq] (1 attend, 0 padding, holes anywhere); per layer i `past_key.{i}`, `past_value.{i}`
  float32 [batch, kv_heads, past_seq, head_dim] (past_seq may be 0).
- outputs: `next_token` int64 [batch] (argmax of the last position's logits), `logits` float32 [batch, vocab]
  (the last position only: the LM head never runs over a prompt), per layer `present_key.{i}`, `present_value.{i}`
  float32 [batch, kv_heads, past_seq + seq, head_dim] = concat(past, new).
- the last position is seq - 1 in every row: batched prompts are left-padded. Query k attends key j iff
  attention_mask[j] == 1 and j <= past_seq + k.
- the graph keeps its RoPE cosine table as the initializer `rope.cos`, one row per position: a runtime reads the
  longest context it serves from its first dimension.

A benchmark that generates tokens writes its graph to this contract (e.g. code/llm/decoder_onnx.py); the
runtimes read it back with `decoder_facts`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

INPUT_IDS = "input_ids"
POSITION_IDS = "position_ids"
ATTENTION_MASK = "attention_mask"
PAST_KEY = "past_key.{}"
PAST_VALUE = "past_value.{}"
NEXT_TOKEN = "next_token"
LOGITS = "logits"
PRESENT_KEY = "present_key.{}"
PRESENT_VALUE = "present_value.{}"
ROPE_COS = "rope.cos"


def io_names(num_layers: int) -> tuple[list[str], list[str]]:
    """The graph's input and output names, in order."""
    inputs = [INPUT_IDS, POSITION_IDS, ATTENTION_MASK]
    outputs = [NEXT_TOKEN, LOGITS]
    for i in range(num_layers):
        inputs += [PAST_KEY.format(i), PAST_VALUE.format(i)]
        outputs += [PRESENT_KEY.format(i), PRESENT_VALUE.format(i)]
    return inputs, outputs


def decoder_facts(onnx_path: Path) -> dict[str, int]:
    """What a runtime needs to drive the graph, read back from it (its weights are not loaded):
    num_layers, num_kv_heads, head_dim, vocab_size, max_positions."""
    import onnx

    model = onnx.load(str(onnx_path), load_external_data=False)
    inputs = {i.name: i for i in model.graph.input}
    outputs = {o.name: o for o in model.graph.output}
    layers = sum(1 for name in inputs if name.startswith(PAST_KEY.format("")))
    expected_in, expected_out = io_names(layers)
    if layers == 0 or set(expected_in) != set(inputs) or set(expected_out) != set(outputs):
        raise ValueError(f"{onnx_path} is not a decoder graph of this toolkit (inputs {sorted(inputs)[:5]}...); "
                         "rebuild it with `make download_model`.")

    def dims(value: Any) -> list[Any]:
        return [d.dim_value if d.HasField("dim_value") else d.dim_param for d in value.type.tensor_type.shape.dim]

    cache = dims(inputs[PAST_KEY.format(0)])
    cos = next((t for t in model.graph.initializer if t.name == ROPE_COS), None)
    return {"num_layers": layers, "num_kv_heads": int(cache[1]), "head_dim": int(cache[3]),
            "vocab_size": int(dims(outputs[LOGITS])[1]), "max_positions": int(cos.dims[0]) if cos else 0}

