"""The Hugging Face folder serving engines load: config values, the safetensors file read back with numpy, the
tokenizer files, digests recorded and a damaged folder written again."""
from __future__ import annotations

import json

import numpy as np
import pytest

from code.common.paths import Paths
from code.llm import hf_folder
from code.llm.decoder_config import DecoderConfig, DecoderWeights
from code.llm.gguf_weights import read_safetensors


def _tiny_weights(tied: bool = True) -> DecoderWeights:
    config = DecoderConfig(vocab_size=16, hidden_size=8, num_layers=2, num_heads=2, num_kv_heads=1, head_dim=4,
                           intermediate_size=12, rope_theta=100000.0, rms_norm_eps=float(np.float32(1e-5)),
                           max_positions=64, tie_embeddings=tied)
    rng = np.random.default_rng(0)
    tensors = {name: rng.standard_normal(shape).astype(np.float32) for name, shape in config.expected_shapes().items()}
    return DecoderWeights(config, tensors)


def _tiny_tokenizer():
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers

    from code.llm.tokenizer import TextTokenizer

    vocab = {t: i for i, t in enumerate(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "a", "b", "ab"])}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[("a", "b")]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(t, special=True) for t in ("<|endoftext|>", "<|im_start|>", "<|im_end|>")])
    template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    return TextTokenizer(tok, bos_token_id=1, eos_token_ids=[2], adds_bos=False, chat_template=template,
                         source="test")


def test_safetensors_round_trip_with_numpy(tmp_path):
    tensors = {"b": np.arange(6, dtype=np.float32).reshape(2, 3), "a": np.ones((5,), np.float32)}
    path = tmp_path / "x.safetensors"
    hf_folder.write_safetensors(path, tensors)
    size = int.from_bytes(path.read_bytes()[:8], "little")
    assert size % 8 == 0                                   # the header is padded to 8 bytes
    header = hf_folder.read_safetensors_header(path)
    assert header["__metadata__"] == {"format": "pt"}
    assert header["a"] == {"dtype": "F32", "shape": [5], "data_offsets": [0, 20]}
    assert header["b"] == {"dtype": "F32", "shape": [2, 3], "data_offsets": [20, 44]}
    assert path.stat().st_size == 8 + size + 44
    back = read_safetensors(path)
    for name, array in tensors.items():
        np.testing.assert_array_equal(back[name], array)


def test_the_folder_holds_a_llama_config_weights_and_tokenizer(tmp_path):
    weights, tokenizer = _tiny_weights(), _tiny_tokenizer()
    folder = hf_folder.write_folder(weights, tokenizer, tmp_path / "model-hf")
    assert sorted(p.name for p in folder.iterdir()) == sorted(hf_folder.FILES)
    config = json.loads((folder / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert (config["hidden_size"], config["num_hidden_layers"], config["num_attention_heads"],
            config["num_key_value_heads"], config["head_dim"], config["intermediate_size"]) == (8, 2, 2, 1, 4, 12)
    assert config["rms_norm_eps"] == 1e-05 and config["rope_theta"] == 100000.0
    assert config["tie_word_embeddings"] is True and config["torch_dtype"] == "float32"
    assert (config["bos_token_id"], config["eos_token_id"]) == (1, 2)
    assert json.loads((folder / "generation_config.json").read_text()) == {"bos_token_id": 1, "eos_token_id": 2,
                                                                           "pad_token_id": 2}
    tok_config = json.loads((folder / "tokenizer_config.json").read_text())
    assert tok_config["eos_token"] == "<|im_end|>" and tok_config["bos_token"] == "<|im_start|>"
    assert tok_config["chat_template"] == tokenizer.chat_template and tok_config["add_bos_token"] is False
    from tokenizers import Tokenizer

    reloaded = Tokenizer.from_file(str(folder / "tokenizer.json"))
    assert reloaded.encode("ab<|im_end|>", add_special_tokens=False).ids == tokenizer.encode("ab<|im_end|>")
    stored = read_safetensors(folder / "model.safetensors")
    assert "lm_head.weight" not in stored                   # tied: the embedding is the head
    assert set(stored) == set(weights.config.expected_shapes())
    for name, array in weights.tensors.items():
        np.testing.assert_array_equal(stored[name], array)


def test_an_untied_model_keeps_its_head(tmp_path):
    folder = hf_folder.write_folder(_tiny_weights(tied=False), _tiny_tokenizer(), tmp_path / "m")
    assert "lm_head.weight" in hf_folder.read_safetensors_header(folder / "model.safetensors")
    assert json.loads((folder / "config.json").read_text())["tie_word_embeddings"] is False


class _FolderBenchmark:
    """A benchmark whose serving folder is written by the toolkit, counting the writes."""

    name = "fake"

    def __init__(self, root):
        self.root, self.writes = root, 0

    def serving_folder(self, model, paths, log, remake=False):
        from code.common.benchmark_api import ServingFolder

        folder = self.root / f"{model}-hf"
        if remake or not (folder / "model.safetensors").is_file():
            self.writes += 1
            hf_folder.write_folder(_tiny_weights(), _tiny_tokenizer(), folder)
        return ServingFolder(folder, hf_folder.FILES, "float32", 64, made_by_toolkit=True)


def test_the_folder_is_digest_recorded_and_written_again_when_changed(tmp_path):
    from code.common.integrity import read_record
    from code.common.model_files import ensure_serving_folder

    bench, paths, said = _FolderBenchmark(tmp_path), Paths.create(scratch=tmp_path), []
    served = ensure_serving_folder(bench, "m", paths, said.append)
    record = read_record(served.folder / "model.safetensors")
    assert set(record) == set(hf_folder.FILES) and bench.writes == 1
    ensure_serving_folder(bench, "m", paths, said.append)
    assert bench.writes == 1                                # unchanged: nothing written
    (served.folder / "config.json").write_text("{}")
    ensure_serving_folder(bench, "m", paths, said.append)
    assert bench.writes == 2 and "config.json" in said[-1]
    assert json.loads((served.folder / "config.json").read_text())["model_type"] == "llama"


def test_the_folder_digest_that_runs_are_paired_by_follows_its_files(tmp_path):
    """A local server's record keeps one digest of the folder it served: equal for the same files, different once a
    file changed (staging then never pairs a run of the old folder with one of the new)."""
    from code.common.model_files import ensure_serving_folder, serving_folder_sha256

    bench, paths = _FolderBenchmark(tmp_path), Paths.create(scratch=tmp_path)
    served = ensure_serving_folder(bench, "m", paths, lambda _: None)
    first = serving_folder_sha256(served)
    assert len(first) == 64 and serving_folder_sha256(ensure_serving_folder(bench, "m", paths, lambda _: None)) == first
    tokenizer = served.folder / "tokenizer.json"
    tokenizer.write_text(tokenizer.read_text().replace("\"", "\" ", 1))   # the user's folder edited: written again
    assert serving_folder_sha256(ensure_serving_folder(bench, "m", paths, lambda _: None)) == first   # the same files
    from code.common.integrity import forget_record

    forget_record(served.folder / served.files[0])
    assert serving_folder_sha256(served) == ""               # no record: nothing to pair by


def test_the_substitutes_folder_path_is_under_its_model_folder(tmp_path):
    paths = Paths.create(scratch=tmp_path)
    assert paths.serving_model_dir("llama3.1-8b", "smollm2-135m-instruct") == \
        tmp_path / "models" / "llama3.1-8b" / "smollm2-135m-instruct-hf"


def test_a_benchmark_that_generates_nothing_has_no_serving_folder(tmp_path):
    from code.common.benchmark_api import get_benchmark
    from code.common.errors import UserError

    with pytest.raises(UserError, match="does not generate tokens"):
        get_benchmark("resnet50").serving_folder("mobilenet_v2", Paths.create(scratch=tmp_path), print)
