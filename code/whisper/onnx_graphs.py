"""Whisper as two ONNX graphs, written from a CTranslate2 model folder's weights with the `onnx` package alone.

Standard ONNX ops only (opset 17): ONNX Runtime runs them on the CPU, TensorRT could take the same files.

- `encoder.onnx`: `features` float32 [batch, n_mels, frames] (frames = 3000, 30 s) -> two Conv1d with GELU (the
  second of stride 2), the positions table, pre-LN transformer layers, the final LayerNorm; then, for every
  decoder layer, the cross-attention keys and values of that layer, projected once per clip:
  `cross_key.{i}` [batch, heads, head_dim, 1500] (already transposed for the score MatMul) and `cross_value.{i}`
  [batch, heads, 1500, head_dim]. Projecting them here rather than in a third graph keeps the encoder's hidden
  state inside ONNX Runtime (one call per batch, no host round trip of [batch, 1500, width]), and every decode
  step then reads them as they are.
- `decoder.onnx`: `input_ids` int64 [batch, seq], per layer `past_key.{i}` / `past_value.{i}` float32
  [batch, heads, past_seq, head_dim] (past_seq may be 0) and the encoder's `cross_key.{i}` / `cross_value.{i}`
  -> `logits` float32 [batch, vocab] of the last position, per layer `present_key.{i}` / `present_value.{i}`
  = concat(past, new). Positions are past_seq .. past_seq + seq - 1 for every row (a batch shares its prompt, so
  no padding mask); token embedding + learned positions, pre-LN self-attention (causal within the call),
  cross-attention, GELU feed-forward, final LayerNorm, logits through the tied token embedding (Gemm, transB).

Weights: every variable is read as float32; where the folder ships float16 (tiny.en) it is widened exactly, where
it ships int8 with per-row scales (the base model) it is dequantized (int8 / scale), so the graphs compute in
float32 what CTranslate2 computes with compute_type="float32". The attention scale 1/sqrt(head_dim) is folded
into the query weights and bias. GELU is the exact (erf) form, written in the pattern ONNX Runtime fuses.

The graphs fit one protobuf each (tiny.en: 150 MB of float32, base: 290 MB). They are written into a fresh folder
swapped in as a whole, with `source.json` naming the model.bin digest and this writer's version:
`graphs_when_stale` rebuilds them when either changes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from ..common.fileio import atomic_dir, write_atomically
from ..common.integrity import digests_of, files_problem
from ..llm.decoder_onnx import GraphNodes
from .ct2_weights import Ct2Model, WhisperFolder, read_whisper_folder

ENCODER_FILE = "encoder.onnx"
DECODER_FILE = "decoder.onnx"
STAMP_FILE = "source.json"
WRITER_VERSION = 1                  # bump when the graphs change: stale folders are then rebuilt
OPSET = 17
LAYER_NORM_EPS = 1e-5               # Whisper's and CTranslate2's LayerNorm epsilon
MASK_BIAS = -1e9                    # added to the scores of keys a query must not see (finite: no NaN)
ENCODER_FRAMES = 3000               # 30 s of 10 ms mel frames; the encoder halves it to 1500 positions

FEATURES = "features"
INPUT_IDS = "input_ids"
LOGITS = "logits"
CROSS_KEY = "cross_key.{}"
CROSS_VALUE = "cross_value.{}"
PAST_KEY = "past_key.{}"
PAST_VALUE = "past_value.{}"
PRESENT_KEY = "present_key.{}"
PRESENT_VALUE = "present_value.{}"


@dataclass(frozen=True)
class GraphShape:
    """What a runtime needs to drive the graphs, read from the weights."""
    n_mels: int
    width: int
    encoder_layers: int
    decoder_layers: int
    encoder_heads: int
    decoder_heads: int
    encoder_positions: int
    decoder_positions: int
    vocab_size: int

    @property
    def head_dim(self) -> int:
        return self.width // self.decoder_heads

    @classmethod
    def of(cls, weights: WhisperFolder) -> "GraphShape":
        m = weights.model
        embed = m.raw("decoder/embeddings/weight")
        return cls(n_mels=int(m.raw("encoder/conv1/weight").shape[1]), width=int(embed.shape[1]),
                   encoder_layers=weights.num_encoder_layers, decoder_layers=weights.num_decoder_layers,
                   encoder_heads=m.scalar("encoder/num_heads"), decoder_heads=m.scalar("decoder/num_heads"),
                   encoder_positions=int(m.raw("encoder/position_encodings/encodings").shape[0]),
                   decoder_positions=int(m.raw("decoder/position_encodings/encodings").shape[0]),
                   vocab_size=int(embed.shape[0]))


class _Graph(GraphNodes):
    """The graph being built (in memory: a Whisper graph fits one protobuf)."""

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.initializers.append(numpy_helper.from_array(np.asarray(array, order="C"), name))
        return name

    # -- the blocks both graphs use -------------------------------------------------------------------
    def layer_norm(self, x: str, m: Ct2Model, scope: str) -> str:
        gamma = self.const(scope + ".gamma", m.float32(scope + "/gamma"))
        beta = self.const(scope + ".beta", m.float32(scope + "/beta"))
        return self.op("LayerNormalization", [x, gamma, beta], axis=-1, epsilon=LAYER_NORM_EPS)

    def linear(self, x: str, m: Ct2Model, scope: str, scale: float = 1.0) -> str:
        """x @ W^T + b (W stored [out, in], as CTranslate2 keeps it); `scale` multiplies W and b."""
        weight = m.float32(scope + "/weight") * np.float32(scale)
        out = self.op("MatMul", [x, self.const(scope + ".weight_t", np.ascontiguousarray(weight.T))])
        if scope + "/bias" in m:
            out = self.op("Add", [out, self.const(scope + ".bias", m.float32(scope + "/bias") * np.float32(scale))])
        return out

    def gelu(self, x: str) -> str:
        """x * 0.5 * (1 + erf(x / sqrt 2)): the exact GELU, in the pattern ONNX Runtime fuses into one Gelu."""
        erf = self.op("Erf", [self.op("Div", [x, "c_sqrt2"])])
        return self.op("Mul", [self.op("Mul", [x, self.op("Add", [erf, "c_one_f"])]), "c_half"])

    def feed_forward(self, x: str, m: Ct2Model, scope: str) -> str:
        h = self.layer_norm(x, m, scope + "/layer_norm")
        h = self.linear(self.gelu(self.linear(h, m, scope + "/linear_0")), m, scope + "/linear_1")
        return self.op("Add", [x, h])

    def heads(self, x: str, perm: list[int], name: str | None = None) -> str:
        """[b, t, width] -> [b, t, heads, d] -> transposed by `perm` (into `name` when given)."""
        return self.op("Transpose", [self.op("Reshape", [x, "c_shape_heads"])], [name] if name else 1, perm=perm)

    def attend(self, q: str, keys_t: str, values: str, bias: str | None) -> str:
        """softmax(q @ keys_t (+ bias)) @ values, heads merged back: [b, h, s, d] x [b, h, d, t] -> [b, s, width]."""
        scores = self.op("MatMul", [q, keys_t])
        if bias is not None:
            scores = self.op("Add", [scores, bias])
        attn = self.op("MatMul", [self.op("Softmax", [scores], axis=-1), values])
        return self.op("Reshape", [self.op("Transpose", [attn], perm=[0, 2, 1, 3]), "c_shape_merge"])

    def common_constants(self, heads: int, head_dim: int) -> None:
        f32 = np.float32
        self.const("c_sqrt2", np.array(np.sqrt(2.0), f32))
        self.const("c_one_f", np.array(1.0, f32))
        self.const("c_half", np.array(0.5, f32))
        self.const("c_shape_heads", np.array([0, 0, heads, head_dim], np.int64))
        self.const("c_shape_merge", np.array([0, 0, heads * head_dim], np.int64))

    def cross_key_value(self, encoded: str, m: Ct2Model, layer: int) -> tuple[str, str]:
        """Decoder layer `layer`'s cross-attention keys [b, h, d, t] and values [b, h, t, d] of the encoder output."""
        kv = self.linear(encoded, m, f"decoder/layer_{layer}/attention/linear_1")
        k, v = self.op("Split", [kv, "c_split_kv"], 2, axis=2)
        return (self.heads(k, [0, 2, 3, 1], CROSS_KEY.format(layer)),
                self.heads(v, [0, 2, 1, 3], CROSS_VALUE.format(layer)))


def _write_encoder(weights: WhisperFolder, shape: GraphShape) -> tuple[_Graph, list, list]:
    from onnx import TensorProto, helper

    m, g = weights.model, _Graph()
    heads, d, width = shape.encoder_heads, shape.width // shape.encoder_heads, shape.width
    if shape.decoder_heads != heads:          # Whisper's stacks share the head count; the reshapes rely on it
        raise ValueError(f"encoder heads {heads} differ from decoder heads {shape.decoder_heads}")
    g.common_constants(heads, d)
    g.const("c_split_qkv", np.array([width, width, width], np.int64))
    g.const("c_split_kv", np.array([width, width], np.int64))

    x = FEATURES
    for conv, stride in (("conv1", 1), ("conv2", 2)):
        w = g.const(f"encoder.{conv}.weight", m.float32(f"encoder/{conv}/weight"))
        b = g.const(f"encoder.{conv}.bias", m.float32(f"encoder/{conv}/bias"))
        x = g.gelu(g.op("Conv", [x, w, b], kernel_shape=[3], pads=[1, 1], strides=[stride]))
    x = g.op("Transpose", [x], perm=[0, 2, 1])                                     # [b, 1500, width]
    x = g.op("Add", [x, g.const("encoder.positions", m.float32("encoder/position_encodings/encodings"))])

    scale = 1.0 / np.sqrt(d)
    for i in range(shape.encoder_layers):
        p = f"encoder/layer_{i}"
        h = g.layer_norm(x, m, p + "/self_attention/layer_norm")
        qkv = _scaled_qkv(g, h, m, p + "/self_attention/linear_0", width, scale)
        q, k, v = g.op("Split", [qkv, "c_split_qkv"], 3, axis=2)
        attn = g.attend(g.heads(q, [0, 2, 1, 3]), g.heads(k, [0, 2, 3, 1]), g.heads(v, [0, 2, 1, 3]), None)
        x = g.op("Add", [x, g.linear(attn, m, p + "/self_attention/linear_1")])
        x = g.feed_forward(x, m, p + "/ffn")
    encoded = g.layer_norm(x, m, "encoder/layer_norm")

    dh = shape.head_dim
    outputs = []
    for i in range(shape.decoder_layers):
        key, value = g.cross_key_value(encoded, m, i)
        outputs += [helper.make_tensor_value_info(key, TensorProto.FLOAT, ["batch", shape.decoder_heads, dh, "frames"]),
                    helper.make_tensor_value_info(value, TensorProto.FLOAT,
                                                  ["batch", shape.decoder_heads, "frames", dh])]
    inputs = [helper.make_tensor_value_info(FEATURES, TensorProto.FLOAT, ["batch", shape.n_mels, ENCODER_FRAMES])]
    return g, inputs, outputs


def _scaled_qkv(g: _Graph, h: str, m: Ct2Model, scope: str, width: int, scale: float) -> str:
    """The fused q/k/v projection with the attention scale folded into the query rows."""
    weight = m.float32(scope + "/weight").copy()
    bias = m.float32(scope + "/bias").copy()
    weight[:width] *= np.float32(scale)
    bias[:width] *= np.float32(scale)
    name = scope.replace("/", ".")
    out = g.op("MatMul", [h, g.const(name + ".weight_t", np.ascontiguousarray(weight.T))])
    return g.op("Add", [out, g.const(name + ".bias", bias)])


def _write_decoder(weights: WhisperFolder, shape: GraphShape) -> tuple[_Graph, list, list]:
    from onnx import TensorProto, helper

    m, g = weights.model, _Graph()
    heads, d, width = shape.decoder_heads, shape.head_dim, shape.width
    g.common_constants(heads, d)
    g.const("c_split_qkv", np.array([width, width, width], np.int64))
    g.const("c_zero_f", np.array(0.0, np.float32))
    g.const("c_mask_bias", np.array(MASK_BIAS, np.float32))
    g.const("c_one", np.array(1, np.int64))
    g.const("c_two", np.array(2, np.int64))
    g.const("c_last", np.array(-1, np.int64))
    g.const("c_axis0", np.array([0], np.int64))
    g.const("c_axis1", np.array([1], np.int64))

    # Positions and the causal bias, once per call: query k of this call sits at past_seq + k.
    seq = g.op("Gather", [g.op("Shape", [INPUT_IDS]), "c_one"], axis=0)
    past = g.op("Gather", [g.op("Shape", [PAST_KEY.format(0)]), "c_two"], axis=0)
    total = g.op("Add", [past, seq])
    query_pos = g.op("Range", [past, total, "c_one"])
    key_pos = g.op("Range", [g.op("Sub", [past, past]), total, "c_one"])
    visible = g.op("LessOrEqual", [g.op("Unsqueeze", [key_pos, "c_axis0"]), g.op("Unsqueeze", [query_pos, "c_axis1"])])
    bias = g.op("Where", [visible, "c_zero_f", "c_mask_bias"])                     # [seq, total]

    embed = g.const("decoder.embeddings", m.float32("decoder/embeddings/weight"))
    positions = g.const("decoder.positions", m.float32("decoder/position_encodings/encodings"))
    x = g.op("Add", [g.op("Gather", [embed, INPUT_IDS], axis=0), g.op("Gather", [positions, query_pos], axis=0)])

    scale = 1.0 / np.sqrt(d)
    for i in range(shape.decoder_layers):
        p = f"decoder/layer_{i}"
        h = g.layer_norm(x, m, p + "/self_attention/layer_norm")
        q, k, v = g.op("Split", [_scaled_qkv(g, h, m, p + "/self_attention/linear_0", width, scale), "c_split_qkv"],
                       3, axis=2)
        keys = g.op("Concat", [PAST_KEY.format(i), g.heads(k, [0, 2, 1, 3])], [PRESENT_KEY.format(i)], axis=2)
        values = g.op("Concat", [PAST_VALUE.format(i), g.heads(v, [0, 2, 1, 3])], [PRESENT_VALUE.format(i)], axis=2)
        attn = g.attend(g.heads(q, [0, 2, 1, 3]), g.op("Transpose", [keys], perm=[0, 1, 3, 2]), values, bias)
        x = g.op("Add", [x, g.linear(attn, m, p + "/self_attention/linear_1")])

        h = g.layer_norm(x, m, p + "/attention/layer_norm")
        q = g.heads(g.linear(h, m, p + "/attention/linear_0", scale=scale), [0, 2, 1, 3])
        attn = g.attend(q, CROSS_KEY.format(i), CROSS_VALUE.format(i), None)
        x = g.op("Add", [x, g.linear(attn, m, p + "/attention/linear_2")])
        x = g.feed_forward(x, m, p + "/ffn")

    last = g.layer_norm(g.op("Gather", [x, "c_last"], axis=1), m, "decoder/layer_norm")    # [b, width]
    g.op("Gemm", [last, embed], [LOGITS], transB=1)

    cache: list[str | int] = ["batch", heads, "past_seq", d]
    present: list[str | int] = ["batch", heads, "total_seq", d]
    inputs = [helper.make_tensor_value_info(INPUT_IDS, TensorProto.INT64, ["batch", "seq"])]
    outputs = [helper.make_tensor_value_info(LOGITS, TensorProto.FLOAT, ["batch", shape.vocab_size])]
    for i in range(shape.decoder_layers):
        inputs += [helper.make_tensor_value_info(PAST_KEY.format(i), TensorProto.FLOAT, cache),
                   helper.make_tensor_value_info(PAST_VALUE.format(i), TensorProto.FLOAT, cache)]
        outputs += [helper.make_tensor_value_info(PRESENT_KEY.format(i), TensorProto.FLOAT, present),
                    helper.make_tensor_value_info(PRESENT_VALUE.format(i), TensorProto.FLOAT, present)]
    for i in range(shape.decoder_layers):
        inputs += [helper.make_tensor_value_info(CROSS_KEY.format(i), TensorProto.FLOAT, ["batch", heads, d, "frames"]),
                   helper.make_tensor_value_info(CROSS_VALUE.format(i), TensorProto.FLOAT,
                                                 ["batch", heads, "frames", d])]
    return g, inputs, outputs


def _save(graph: _Graph, name: str, inputs: list, outputs: list, target: Path, props: dict[str, str]) -> None:
    import onnx
    from onnx import helper

    model = helper.make_model(helper.make_graph(graph.nodes, name, inputs, outputs, graph.initializers),
                              opset_imports=[helper.make_opsetid("", OPSET)], producer_name="mlperf-inference-toolkit")
    model.ir_version = 8
    helper.set_model_props(model, props)
    onnx.checker.check_model(model)
    onnx.save_model(model, str(target))


def stamp_text(digest: str, shape: GraphShape, folder: Path) -> str:
    """source.json: what the graphs were built from, and the digests of the graphs as written (a graph changed
    since is built again)."""
    return json.dumps({"model_bin_sha256": digest, "writer_version": WRITER_VERSION, "shape": shape.__dict__,
                       "files": digests_of({name: folder / name for name in (ENCODER_FILE, DECODER_FILE)})},
                      sort_keys=True) + "\n"


def build_graphs(weights: WhisperFolder, out_dir: Path) -> Path:
    """Write encoder.onnx, decoder.onnx and source.json into `out_dir`, built in a fresh folder beside it and
    swapped in as a whole (a half-written pair is never visible under `out_dir`); returns `out_dir`."""
    out_dir = Path(out_dir)
    shape = GraphShape.of(weights)
    props = {"whisper_shape": json.dumps(shape.__dict__), "source_sha256": weights.digest}
    with atomic_dir(out_dir) as work:
        graph, inputs, outputs = _write_encoder(weights, shape)
        _save(graph, "whisper_encoder", inputs, outputs, work / ENCODER_FILE, props)
        del graph
        graph, inputs, outputs = _write_decoder(weights, shape)
        _save(graph, "whisper_decoder", inputs, outputs, work / DECODER_FILE, props)
        del graph
        write_atomically(work / STAMP_FILE, stamp_text(weights.digest, shape, work))
    return out_dir


def stale_because(out_dir: Path, digest: str) -> str | None:
    """Why the graphs in `out_dir` must be (re)built for the model.bin of sha256 `digest` (absent, built from other
    weights or by another writer, or a graph changed since it was written); None when they are current."""
    stamp = Path(out_dir) / STAMP_FILE
    if not (stamp.is_file() and all((Path(out_dir) / name).is_file() for name in (ENCODER_FILE, DECODER_FILE))):
        return "they are not built yet"
    try:
        facts = json.loads(stamp.read_text())
        if facts.get("model_bin_sha256") != digest or facts.get("writer_version") != WRITER_VERSION:
            return "they were built from other weights or by another version"
        GraphShape(**facts["shape"])
    except (ValueError, TypeError, KeyError, AttributeError):
        return f"{stamp} is not readable"
    return files_problem({name: Path(out_dir) / name for name in (ENCODER_FILE, DECODER_FILE)}, facts.get("files"))


def current_shape(out_dir: Path, digest: str) -> GraphShape | None:
    """The shape of the graphs in `out_dir` when both are there, their stamp names `digest` and this writer's
    version, and both are as written; None when they must be (re)built."""
    if stale_because(out_dir, digest) is not None:
        return None
    return GraphShape(**json.loads((Path(out_dir) / STAMP_FILE).read_text())["shape"])


def graphs_when_stale(model_folder: Path, out_dir: Path, log: Callable[[str], None]) -> tuple[Path, GraphShape]:
    """The graph folder for `model_folder` at `out_dir`, rebuilt unless its stamp names the same model.bin digest
    and this writer's version; returns the folder and the graphs' shape."""
    from ..common.fileio import sha256_file
    from .ct2_weights import MODEL_BIN

    digest = sha256_file(Path(model_folder) / MODEL_BIN)
    why = stale_because(out_dir, digest)
    if why is None:
        return Path(out_dir), GraphShape(**json.loads((Path(out_dir) / STAMP_FILE).read_text())["shape"])
    log(f"building the ONNX encoder and decoder graphs (float32) of {Path(model_folder).name} into {out_dir} "
        f"({why}) ...")
    weights = read_whisper_folder(model_folder, digest)
    build_graphs(weights, out_dir)
    return Path(out_dir), GraphShape.of(weights)
