"""The vision-language substitute's Hugging Face folder (Idefics3 with a decoder's text weights and a generated
vision tower): config keys as vLLM's idefics3.py and transformers' Idefics3Processor read them, the weights under
their Idefics3 names, the tokenizer's image tokens, the image processor's settings, the chat template rendered with
an image by jinja2 as Hugging Face renders it, and a current folder left as it is. The real server on it:
tests/test_vllm_vision_server.py (slow)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from code.common.paths import Paths
from code.llm.decoder_config import DecoderWeights
from code.llm import smolvlm, vlm_folder
from code.llm.gguf_weights import read_safetensors
from code.llm.tokenizer import render_chat, render_chat_jinja
from code.llm.vision_tower import TowerConfig, tower_tensors
from tests.test_serving_folder import _tiny_tokenizer, _tiny_weights

TOWER = TowerConfig()


def _tokenizer_with_newline():
    """The tiny ChatML tokenizer of test_serving_folder with a newline token (byte-level "Ċ") added."""
    from tokenizers import AddedToken, Tokenizer

    from code.llm.tokenizer import TextTokenizer

    base = _tiny_tokenizer()
    inner = Tokenizer.from_str(base.to_json())
    inner.add_tokens([AddedToken(vlm_folder.NEWLINE, normalized=False)])
    return TextTokenizer(inner, bos_token_id=base.bos_token_id, eos_token_ids=base.eos_token_ids,
                         adds_bos=base.adds_bos, chat_template=base.chat_template, source="test")


def _weights(vocab: int):
    """Tiny tied decoder weights for a vocabulary of `vocab` tokens."""
    config = replace(_tiny_weights().config, vocab_size=vocab)
    rng = np.random.default_rng(1)
    return DecoderWeights(config, {n: rng.standard_normal(s).astype(np.float32)
                                   for n, s in config.expected_shapes().items()})


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    text = _tokenizer_with_newline()
    weights = _weights(text.vocab_size)
    path = vlm_folder.write_vlm_folder(weights, text, tmp_path_factory.mktemp("vlm") / "model-hf",
                                       smolvlm.SAMPLING_DEFAULTS)
    return path, weights, text


def _json(path):
    return json.loads(path.read_text())


def test_the_config_is_idefics3_around_the_text_model(folder):
    path, weights, text = folder
    assert sorted(p.name for p in path.iterdir()) == sorted(vlm_folder.FILES)
    config = _json(path / "config.json")
    assert config["architectures"] == ["Idefics3ForConditionalGeneration"] and config["model_type"] == "idefics3"
    tokenizer = vlm_folder.vision_tokenizer(text)
    assert config["image_token_id"] == tokenizer.token_to_id("<image>") == text.vocab_size + 1
    assert config["scale_factor"] == 2 and config["tie_word_embeddings"] is True
    text_config, vision = config["text_config"], config["vision_config"]
    assert text_config["model_type"] == "llama" and "architectures" not in text_config
    assert text_config["vocab_size"] == text.vocab_size + len(vlm_folder.NEW_TOKENS)
    assert (text_config["hidden_size"], text_config["num_hidden_layers"]) == (8, 2)
    assert vision["model_type"] == "idefics3_vision"
    assert (vision["image_size"], vision["patch_size"], vision["hidden_size"]) == (256, 16, 64)
    # vLLM's Idefics3Model: image_seq_len = (image_size // patch_size) ** 2 / scale_factor ** 2
    visual = (vision["image_size"] // vision["patch_size"]) ** 2 // config["scale_factor"] ** 2
    assert _json(path / "processor_config.json") == {"processor_class": "Idefics3Processor", "image_seq_len": visual}
    assert visual == TOWER.visual_tokens == 64
    generation = _json(path / "generation_config.json")
    assert generation == {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2, "do_sample": True, "top_k": 1}


def test_the_image_processor_makes_one_square_of_the_towers_size(folder):
    pre = _json(folder[0] / "preprocessor_config.json")
    assert pre["image_processor_type"] == "Idefics3ImageProcessor" and pre["processor_class"] == "Idefics3Processor"
    assert pre["do_image_splitting"] is False                         # one tile per image, no sub-images
    assert pre["max_image_size"] == {"longest_edge": TOWER.image_size} == pre["size"]
    assert pre["do_resize"] and pre["do_rescale"] and pre["do_normalize"] and pre["do_convert_rgb"]


def test_the_weights_have_idefics3s_names_and_the_text_models_values(folder):
    path, weights, text = folder
    stored = read_safetensors(path / "model.safetensors")
    assert not any(name.startswith("lm_head") for name in stored)         # tied to the embedding
    for name, array in weights.tensors.items():
        if name == "model.embed_tokens.weight":
            continue
        np.testing.assert_array_equal(stored["model.text_model." + name.removeprefix("model.")], array)
    embed = stored["model.text_model.embed_tokens.weight"]
    old = weights.tensors["model.embed_tokens.weight"]
    np.testing.assert_array_equal(embed[:len(old)], old)
    newline, im_end = text.token_to_id(vlm_folder.NEWLINE), text.eos_token_ids[0]
    for i, token in enumerate(vlm_folder.NEW_TOKENS):       # each new row is its role model's
        np.testing.assert_array_equal(embed[len(old) + i], old[im_end if token == "<end_of_utterance>" else newline])
    tower = tower_tensors(TOWER, weights.config.hidden_size)
    assert {n for n in stored if not n.startswith("model.text_model.")} == set(tower)
    assert stored["model.connector.modality_projection.proj.weight"].shape == (8, 64 * 4)
    assert stored["model.vision_model.embeddings.patch_embedding.weight"].shape == (64, 3, 16, 16)
    assert stored["model.vision_model.embeddings.position_embedding.weight"].shape == (256, 64)
    for name, array in tower.items():
        np.testing.assert_array_equal(stored[name], array)
    again = tower_tensors(TOWER, weights.config.hidden_size)            # the seed fixes them
    assert all(np.array_equal(again[n], tower[n]) for n in tower)


def test_the_tokenizer_has_the_image_tokens_as_special_tokens(folder):
    from tokenizers import Tokenizer

    path, _, text = folder
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    first = text.vocab_size
    for i, token in enumerate(vlm_folder.NEW_TOKENS):
        assert tokenizer.token_to_id(token) == first + i
    assert len(vlm_folder.NEW_TOKENS) == 4 + 36                            # 6 x 6 tile tags
    ids = tokenizer.encode("ab<fake_token_around_image><global-img><image><image>ab", add_special_tokens=False).ids
    assert ids[1:5] == [first, first + 3, first + 1, first + 1]           # one id each, never split
    assert tokenizer.decode(ids, skip_special_tokens=True) == "abab"
    config = _json(path / "tokenizer_config.json")
    assert config["chat_template"] == vlm_folder.CHAT_TEMPLATE and config["eos_token"] == "<|im_end|>"


def _hf_render(template: str, messages: list) -> str:
    """Render as Hugging Face's apply_chat_template does (jinja2's sandbox, trim_blocks, lstrip_blocks)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True)


def test_the_chat_template_puts_the_image_where_the_processor_looks_for_it():
    messages = [{"role": "system", "content": "Answer in JSON."},
                {"role": "user", "content": [{"type": "text", "text": "Title: shoe\n"}, {"type": "image"},
                                             {"type": "text", "text": "Which category?"}]}]
    assert _hf_render(vlm_folder.CHAT_TEMPLATE, messages) == (
        "<|im_start|>system\nAnswer in JSON.<|im_end|>\n<|im_start|>user\nTitle: shoe\n<image>Which category?"
        "<|im_end|>\n<|im_start|>assistant\n")
    # vLLM hands the template an image_url part as {"type": "image"}; either stands as one <image>
    one = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]
    assert _hf_render(vlm_folder.CHAT_TEMPLATE, one).count("<image>") == 1


def test_text_alone_renders_as_smollm2s_chatml():
    """A plain string renders as the text substitute's prompt (SmolLM2's default system message first)."""
    for system in ("", "Be brief."):
        assert render_chat_jinja(vlm_folder.CHAT_TEMPLATE, "What is the capital of France?", system=system) == \
            render_chat(vlm_folder.CHAT_TEMPLATE, "What is the capital of France?", system=system)
    assert render_chat(vlm_folder.CHAT_TEMPLATE, "Hi").startswith(
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n")


def test_a_tokenizer_that_already_has_image_tokens_is_refused():
    text = _tokenizer_with_newline()
    with pytest.raises(ValueError, match="already has some of Idefics3's tokens"):
        vlm_folder.vision_tokenizer(vlm_folder.vision_tokenizer(text))


def test_a_current_folder_is_left_as_it_is(tmp_path):
    """Its stamp says what it was written from and every file is there: nothing is fetched or written."""
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    folder = paths.serving_model_dir("vlm-bench", smolvlm.SMOLVLM)
    folder.mkdir(parents=True)
    for name in vlm_folder.FILES:
        (folder / name).write_text(name)
    (folder / smolvlm.SERVING_STAMP).write_text(smolvlm.identity())
    said = []
    served = smolvlm.serving_folder(paths, said.append, "vlm-bench")
    assert said == [] and (folder / "model.safetensors").read_text() == "model.safetensors"
    assert (served.folder, served.files[0], served.dtype) == (folder, "model.safetensors", "float32")
    assert served.made_by_toolkit and served.max_model_len == smolvlm.SERVING_MAX_MODEL_LEN
    assert "tower TowerConfig(image_size=256" in smolvlm.identity()     # a new tower shape rewrites the folder


def test_a_decoder_it_cannot_join_to_the_tower_is_refused_before_anything_is_written(tmp_path):
    """An untied head, or a tokenizer without the newline the image tags copy: refused, no folder left."""
    text = _tokenizer_with_newline()
    untied = _weights(text.vocab_size)
    untied = DecoderWeights(replace(untied.config, tie_embeddings=False),
                            {**untied.tensors, "lm_head.weight": untied.tensors["model.embed_tokens.weight"]})
    with pytest.raises(ValueError, match="head is its embedding"):
        vlm_folder.write_vlm_folder(untied, text, tmp_path / "untied-hf", smolvlm.SAMPLING_DEFAULTS)
    plain = _tiny_tokenizer()
    with pytest.raises(ValueError, match="no newline token"):
        vlm_folder.write_vlm_folder(_weights(plain.vocab_size), plain, tmp_path / "plain-hf", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == []
