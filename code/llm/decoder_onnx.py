"""The decoder as one ONNX graph with a KV cache, written from numpy weights with the `onnx` package alone.

Standard ONNX ops only (opset 17, no com.microsoft contrib ops): ONNX Runtime runs this graph on the CPU and
TensorRT takes the same file as its input. One graph serves prefill (seq > 1) and decode (seq == 1).

The graph keeps the decoder-graph contract of code/common/decoder_graph.py (its input and output names, shapes
and masking rule), which the runtimes depend on.

Inside: the query, key and value projections are one MatMul (as are gate and up), the attention scale is folded
into the query weights, RoPE gathers precomputed cos/sin tables at position_ids (the rotate-half sign folded into
the sin table), grouped-query attention reshapes the queries of a KV head into the rows of one MatMul against
that head's keys (no repeated keys), and masking adds a finite large negative bias (a padding row with nothing
visible stays finite, so no NaN ever reaches the cache). The LM head reads the token embedding's initializer when
the two are tied (Gemm with transB), so the weights are stored once.

Weights are streamed into the external-data file `decoder.onnx.data` as they are converted, each at a 4 KiB
aligned offset (ONNX Runtime can map them), so no 2 GB protobuf is ever built in memory.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..common.decoder_graph import (ATTENTION_MASK, INPUT_IDS, LOGITS, NEXT_TOKEN, PAST_KEY, PAST_VALUE,
                                     POSITION_IDS, PRESENT_KEY, PRESENT_VALUE, ROPE_COS)
from ..common.fileio import atomic_dir, external_data
from .decoder_config import DecoderWeights, rope_tables

MODEL_FILE = "decoder.onnx"
OPSET = 17
MASK_BIAS = -1e9           # added to the scores of keys a query must not see
_ALIGN = 4096


class GraphNodes:
    """Nodes and initializers of a graph being built with onnx's helper API, each node named by its op and number
    (the whisper graphs are built on it too); `const` is the subclass's: where the initializers' bytes go."""

    def __init__(self) -> None:
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self._count = 0

    def const(self, name: str, array: np.ndarray) -> str:
        raise NotImplementedError

    def op(self, op_type: str, inputs: list[str], outputs: int | list[str] = 1, **attrs: Any) -> Any:
        """Add a node; returns its output name (or the list of them when there are several)."""
        from onnx import helper

        self._count += 1
        if isinstance(outputs, int):
            outputs = [f"{op_type.lower()}_{self._count}" + (f"_{k}" if outputs > 1 else "") for k in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=f"{op_type}_{self._count}", **attrs))
        return outputs[0] if len(outputs) == 1 else outputs


class _GraphWriter(GraphNodes):
    """The decoder graph being built; large initializers go straight to the data file."""

    def __init__(self, data: BinaryIO, data_name: str) -> None:
        super().__init__()
        self._data = data
        self._data_name = data_name

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import TensorProto, helper, numpy_helper

        array = np.asarray(array, order="C")           # (ascontiguousarray would make a scalar 1-D)
        if array.nbytes < 1024:
            self.initializers.append(numpy_helper.from_array(array, name))
            return name
        offset = (self._data.tell() + _ALIGN - 1) // _ALIGN * _ALIGN
        self._data.seek(offset)
        self._data.write(array.tobytes())
        tensor = TensorProto(name=name, dims=array.shape, data_type=helper.np_dtype_to_tensor_dtype(array.dtype))
        for key, value in (("location", self._data_name), ("offset", offset), ("length", array.nbytes)):
            tensor.external_data.add(key=key, value=str(value))
        tensor.data_location = TensorProto.EXTERNAL
        self.initializers.append(tensor)
        return name


def _rms_norm(g: _GraphWriter, x: str, weight: str, eps: str) -> str:
    """x / sqrt(mean(x^2) + eps) * weight, in the pattern ONNX Runtime fuses (SimplifiedLayerNormalization)."""
    square = g.op("Pow", [x, "c_two"])
    mean = g.op("ReduceMean", [square], axes=[-1], keepdims=1)
    root = g.op("Sqrt", [g.op("Add", [mean, eps])])
    return g.op("Mul", [g.op("Div", [x, root]), weight])


def _write_graph(weights: DecoderWeights, g: _GraphWriter, max_positions: int) -> tuple[list, list]:
    from onnx import TensorProto, helper

    c = weights.config
    d, kv, group, heads = c.head_dim, c.num_kv_heads, c.group_size, c.num_heads
    f32 = np.float32

    # Constants shared by all layers.
    g.const("c_two", np.array(2.0, f32))
    g.const("c_eps", np.array(c.rms_norm_eps, f32))
    g.const("c_zero_f", np.array(0.0, f32))
    g.const("c_mask_bias", np.array(MASK_BIAS, f32))
    g.const("c_zero", np.array(0, np.int64))
    g.const("c_one", np.array(1, np.int64))
    g.const("c_last", np.array(-1, np.int64))
    g.const("c_axis0", np.array([0], np.int64))
    g.const("c_axis1", np.array([1], np.int64))
    g.const("c_axis2", np.array([2], np.int64))
    g.const("c_split_qkv", np.array([(heads + kv) * d, kv * d], np.int64))
    g.const("c_split_qk", np.array([heads, kv], np.int64))
    g.const("c_split_half", np.array([d // 2, d // 2], np.int64))
    g.const("c_split_ffn", np.array([c.intermediate_size, c.intermediate_size], np.int64))
    g.const("c_shape_qk", np.array([0, 0, heads + kv, d], np.int64))
    g.const("c_shape_heads", np.array([0, 0, kv, d], np.int64))
    g.const("c_shape_group", np.array([0, 0, kv, group, d], np.int64))
    g.const("c_shape_rows", np.array([0, 0, -1, d], np.int64))
    g.const("c_shape_merge", np.array([0, 0, -1], np.int64))
    g.const("c_group_tiles", np.array([1, group, 1], np.int64))
    g.const("c_kv_group", np.array([kv, group], np.int64))
    g.const("c_head_dim", np.array([d], np.int64))
    cos, sin = rope_tables(c, max_positions)
    half = d // 2
    sin[:, :half] *= -1                   # rotate_half(x) * sin == concat(x2, x1) * [-sin, sin]
    g.const(ROPE_COS, cos)
    g.const("rope.sin_signed", sin)

    # Sizes, RoPE and the attention bias, once per call.
    ids_shape = g.op("Shape", [INPUT_IDS])
    batch = g.op("Gather", [ids_shape, "c_axis0"], axis=0)               # [1]
    seq = g.op("Gather", [ids_shape, "c_one"], axis=0)                   # scalar
    total = g.op("Gather", [g.op("Shape", [ATTENTION_MASK]), "c_one"], axis=0)
    past = g.op("Sub", [total, seq])
    query_pos = g.op("Range", [past, total, "c_one"])                    # [seq]: past_seq .. total - 1
    key_pos = g.op("Range", ["c_zero", total, "c_one"])                  # [total]
    causal = g.op("LessOrEqual", [g.op("Unsqueeze", [key_pos, "c_axis0"]),
                                  g.op("Unsqueeze", [query_pos, "c_axis1"])])          # [seq, total]
    padding = g.op("Unsqueeze", [g.op("Cast", [ATTENTION_MASK], to=TensorProto.BOOL), "c_axis1"])  # [b, 1, total]
    visible = g.op("And", [causal, padding])                                              # [b, seq, total]
    bias = g.op("Where", [visible, "c_zero_f", "c_mask_bias"])
    # Query rows of a KV head are ordered (group member, position): the bias repeats per member.
    bias = g.op("Unsqueeze", [g.op("Tile", [bias, "c_group_tiles"]), "c_axis1"])          # [b, 1, g*seq, total]
    cos_at = g.op("Unsqueeze", [g.op("Gather", [ROPE_COS, POSITION_IDS], axis=0), "c_axis2"])   # [b, seq, 1, d]
    sin_at = g.op("Unsqueeze", [g.op("Gather", ["rope.sin_signed", POSITION_IDS], axis=0), "c_axis2"])
    # [b, kv, group, seq, d]: attention output back to heads (Reshape cannot infer two dimensions).
    seq_1d = g.op("Unsqueeze", [seq, "c_axis0"])
    shape_out = g.op("Concat", [batch, "c_kv_group", seq_1d, "c_head_dim"], axis=0)

    scale = f32(1.0 / np.sqrt(d))
    x = g.op("Gather", [g.const("model.embed_tokens.weight", weights.embed), INPUT_IDS], axis=0)
    for i in range(c.num_layers):
        def w(name: str, i: int = i) -> np.ndarray:
            return weights.layer(i, name)

        p = f"layers.{i}."
        qkv = np.concatenate([w("self_attn.q_proj.weight") * scale, w("self_attn.k_proj.weight"),
                              w("self_attn.v_proj.weight")], axis=0).T
        h = _rms_norm(g, x, g.const(p + "input_layernorm", w("input_layernorm.weight")), "c_eps")
        qk, v = g.op("Split", [g.op("MatMul", [h, g.const(p + "qkv_proj", qkv)]), "c_split_qkv"], 2, axis=2)
        qk = g.op("Reshape", [qk, "c_shape_qk"])                                   # [b, seq, heads + kv, d]
        first, second = g.op("Split", [qk, "c_split_half"], 2, axis=3)
        rotated = g.op("Concat", [second, first], axis=3)
        qk = g.op("Add", [g.op("Mul", [qk, cos_at]), g.op("Mul", [rotated, sin_at])])
        q, k = g.op("Split", [qk, "c_split_qk"], 2, axis=2)
        k = g.op("Transpose", [k], perm=[0, 2, 1, 3])                              # [b, kv, seq, d]
        v = g.op("Transpose", [g.op("Reshape", [v, "c_shape_heads"])], perm=[0, 2, 1, 3])
        keys = g.op("Concat", [PAST_KEY.format(i), k], [PRESENT_KEY.format(i)], axis=2)
        values = g.op("Concat", [PAST_VALUE.format(i), v], [PRESENT_VALUE.format(i)], axis=2)
        q = g.op("Transpose", [g.op("Reshape", [q, "c_shape_group"])], perm=[0, 2, 3, 1, 4])  # [b, kv, g, seq, d]
        q = g.op("Reshape", [q, "c_shape_rows"])                                   # [b, kv, g * seq, d]
        scores = g.op("MatMul", [q, g.op("Transpose", [keys], perm=[0, 1, 3, 2])])  # [b, kv, g * seq, total]
        probs = g.op("Softmax", [g.op("Add", [scores, bias])], axis=-1)
        attn = g.op("Reshape", [g.op("MatMul", [probs, values]), shape_out])       # [b, kv, g, seq, d]
        attn = g.op("Reshape", [g.op("Transpose", [attn], perm=[0, 3, 1, 2, 4]), "c_shape_merge"])
        x = g.op("Add", [x, g.op("MatMul", [attn, g.const(p + "o_proj", w("self_attn.o_proj.weight").T)])])

        h = _rms_norm(g, x, g.const(p + "post_attention_layernorm", w("post_attention_layernorm.weight")), "c_eps")
        gate_up = np.concatenate([w("mlp.gate_proj.weight"), w("mlp.up_proj.weight")], axis=0).T
        gate, up = g.op("Split", [g.op("MatMul", [h, g.const(p + "gate_up_proj", gate_up)]), "c_split_ffn"], 2,
                        axis=2)
        act = g.op("Mul", [g.op("Mul", [gate, g.op("Sigmoid", [gate])]), up])
        x = g.op("Add", [x, g.op("MatMul", [act, g.const(p + "down_proj", w("mlp.down_proj.weight").T)])])

    last = g.op("Gather", [x, "c_last"], axis=1)                                  # [b, hidden]
    last = _rms_norm(g, last, g.const("model.norm", weights.tensors["model.norm.weight"]), "c_eps")
    head = "model.embed_tokens.weight" if c.tie_embeddings else g.const("lm_head.weight", weights.lm_head)
    g.op("Gemm", [last, head], [LOGITS], transB=1)
    g.op("ArgMax", [LOGITS], [NEXT_TOKEN], axis=1, keepdims=0)

    cache: list[str | int] = ["batch", kv, "past_seq", d]
    present: list[str | int] = ["batch", kv, "total_seq", d]
    inputs = [helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info(POSITION_IDS, TensorProto.INT64, ["batch", "seq"]),
              helper.make_tensor_value_info(ATTENTION_MASK, TensorProto.INT64, ["batch", "total_seq"])]
    outputs = [helper.make_tensor_value_info(NEXT_TOKEN, TensorProto.INT64, ["batch"]),
               helper.make_tensor_value_info(LOGITS, TensorProto.FLOAT, ["batch", c.vocab_size])]
    for i in range(c.num_layers):
        inputs += [helper.make_tensor_value_info(PAST_KEY.format(i), TensorProto.FLOAT, cache),
                   helper.make_tensor_value_info(PAST_VALUE.format(i), TensorProto.FLOAT, cache)]
        outputs += [helper.make_tensor_value_info(PRESENT_KEY.format(i), TensorProto.FLOAT, present),
                    helper.make_tensor_value_info(PRESENT_VALUE.format(i), TensorProto.FLOAT, present)]
    return inputs, outputs


def build_decoder(weights: DecoderWeights, out_dir: Path, *, max_positions: int | None = None) -> Path:
    """Write `out_dir`/decoder.onnx and its data file `decoder.onnx.data`; returns the graph's path.

    The folder is written fresh beside `out_dir` and then swapped in as a whole (the previous one, if any, goes):
    a half-written decoder is never visible under `out_dir`. `max_positions` caps the RoPE tables (default: the
    model's context, e.g. 8192 for SmolLM2; Llama 3.1's 131072 would make 128 MB tables)."""
    import onnx
    from onnx import helper

    c = weights.config
    out_dir = Path(out_dir)
    positions = int(max_positions or c.max_positions)
    with atomic_dir(out_dir) as work:
        graph_file = work / MODEL_FILE
        data_name = external_data(graph_file).name
        with open(work / data_name, "wb") as data:
            writer = _GraphWriter(data, data_name)
            inputs, outputs = _write_graph(weights, writer, positions)
        graph = helper.make_graph(writer.nodes, "decoder", inputs, outputs, writer.initializers)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="mlperf-inference-toolkit")
        model.ir_version = 8
        helper.set_model_props(model, {"decoder_config": json.dumps(dataclasses.asdict(c)),
                                       "max_positions": str(positions)})
        onnx.save_model(model, str(graph_file))
        onnx.checker.check_model(str(graph_file))
    return out_dir / MODEL_FILE



