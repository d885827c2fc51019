"""A Hugging Face folder of an Idefics3 (SmolVLM) vision-language model, as vLLM serves it, from a decoder's text
weights and tokenizer plus a vision tower (vision_tower.py).

What vLLM's idefics3.py and transformers' Idefics3Processor read from it:
- config.json: Idefics3ForConditionalGeneration with text_config (Llama), vision_config, scale_factor and
  image_token_id;
- model.safetensors: model.text_model.* (the decoder's weights under the text model's prefix), model.vision_model.*
  and model.connector.*; the head is tied to the embedding, as SmolLM2's is;
- tokenizer.json with the special tokens the processor looks up (<fake_token_around_image>, <image>,
  <end_of_utterance>, <global-img> and the 36 <row_i_col_j> tile tags), tokenizer_config.json with the chat
  template;
- preprocessor_config.json (Idefics3ImageProcessor: no image splitting, every image resized to the tower's square)
  and processor_config.json (image_seq_len: the visual tokens of one image).

The new tokens get embedding rows (and so, tied, head rows) copied from a text token of the same role: the tags
from the newline, <end_of_utterance> from <|im_end|>. The text model reads the tags around an image as line breaks,
and never prefers a new token over the older one it copies (equal logits: the lower id wins). <image> stands only
in the prompt, where vLLM puts the visual tokens in its place.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .decoder_config import DecoderWeights
from .hf_folder import (CONFIG_FILE, GENERATION_CONFIG_FILE, TOKENIZER_CONFIG_FILE, TOKENIZER_FILE, WEIGHTS_FILE,
                        hf_config, tokenizer_config, write_files)
from .tokenizer import TextTokenizer
from .vision_tower import TowerConfig, tower_tensors

PREPROCESSOR_CONFIG_FILE = "preprocessor_config.json"
PROCESSOR_CONFIG_FILE = "processor_config.json"
FILES = (WEIGHTS_FILE, CONFIG_FILE, GENERATION_CONFIG_FILE, TOKENIZER_FILE, TOKENIZER_CONFIG_FILE,
         PREPROCESSOR_CONFIG_FILE, PROCESSOR_CONFIG_FILE)

IMAGE_TOKEN = "<image>"
FAKE_IMAGE_TOKEN = "<fake_token_around_image>"
GLOBAL_IMAGE_TOKEN = "<global-img>"
END_OF_UTTERANCE = "<end_of_utterance>"
TILE_TOKENS = tuple(f"<row_{i}_col_{j}>" for i in range(1, 7) for j in range(1, 7))
NEW_TOKENS = (FAKE_IMAGE_TOKEN, IMAGE_TOKEN, END_OF_UTTERANCE, GLOBAL_IMAGE_TOKEN, *TILE_TOKENS)
NEWLINE = "Ċ"            # "\n" as byte-level BPE writes it
TEXT_PREFIX = "model.text_model."

# SmolLM2's ChatML with OpenAI-style content: a message's content is a string, or a list of parts whose images
# stand as <image> where they come among the text, which is where Idefics3's processor looks for them (vLLM renders
# content lists as they are, "openai" content format, because the template loops over them). Without a system
# message, SmolLM2's own default one leads, as its template has it.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% elif part['type'] in ('image', 'image_url') %}" + IMAGE_TOKEN +
    "{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def vision_tokenizer(tokenizer: TextTokenizer) -> TextTokenizer:
    """`tokenizer` with Idefics3's special tokens appended (ids after the text vocabulary, in NEW_TOKENS order) and
    the image-aware chat template."""
    from tokenizers import AddedToken, Tokenizer

    inner = Tokenizer.from_str(tokenizer.to_json())
    first = inner.get_vocab_size(with_added_tokens=True)
    inner.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in NEW_TOKENS])
    ids = [inner.token_to_id(t) for t in NEW_TOKENS]
    if ids != list(range(first, first + len(NEW_TOKENS))):
        raise ValueError(f"the tokenizer already has some of Idefics3's tokens ({NEW_TOKENS[0]} ...)")
    return TextTokenizer(inner, bos_token_id=tokenizer.bos_token_id, eos_token_ids=tokenizer.eos_token_ids,
                         adds_bos=tokenizer.adds_bos, chat_template=CHAT_TEMPLATE, source=tokenizer.source,
                         clean_up_spaces=tokenizer.clean_up_spaces)


def _role_model_ids(text: TextTokenizer) -> list[int]:
    """For each new token, the text token whose embedding row it copies."""
    newline, im_end = text.token_to_id(NEWLINE), text.eos_token_ids[0]
    if newline is None:
        raise ValueError("the text tokenizer has no newline token to model the image tags on")
    return [im_end if t == END_OF_UTTERANCE else newline for t in NEW_TOKENS]


def text_tensors(weights: DecoderWeights, text: TextTokenizer, vocab_size: int) -> dict[str, np.ndarray]:
    """The decoder's tensors under the text model's prefix, the embedding grown to `vocab_size` rows."""
    if not weights.config.tie_embeddings:
        raise ValueError("the vision-language folder is written for a decoder whose head is its embedding")
    tensors = {TEXT_PREFIX + name.removeprefix("model."): array for name, array in weights.tensors.items()
               if name != "lm_head.weight"}
    embed = tensors[TEXT_PREFIX + "embed_tokens.weight"]
    rows = embed[_role_model_ids(text)]
    if embed.shape[0] + len(rows) != vocab_size:
        raise ValueError(f"the embedding has {embed.shape[0]} rows, the tokenizer {vocab_size - len(rows)} tokens")
    tensors[TEXT_PREFIX + "embed_tokens.weight"] = np.concatenate([embed, rows]).astype(np.float32)
    return tensors


def vlm_config(weights: DecoderWeights, tokenizer: TextTokenizer, tower: TowerConfig) -> dict[str, Any]:
    """config.json: Idefics3 around the decoder's Llama config."""
    text_config = hf_config(weights, tokenizer)
    text_config["vocab_size"] = tokenizer.vocab_size
    del text_config["architectures"]
    return {"architectures": ["Idefics3ForConditionalGeneration"], "model_type": "idefics3",
            "image_token_id": tokenizer.token_to_id(IMAGE_TOKEN), "scale_factor": tower.scale_factor,
            "tie_word_embeddings": True, "torch_dtype": "float32", "use_cache": True,
            "bos_token_id": text_config["bos_token_id"], "eos_token_id": text_config["eos_token_id"],
            "pad_token_id": text_config["pad_token_id"],
            "text_config": text_config, "vision_config": tower.hf_config()}


def preprocessor_config(tower: TowerConfig) -> dict[str, Any]:
    """preprocessor_config.json: Idefics3's image processor without image splitting, so every image becomes one
    square of the tower's size (SmolVLM's rescaling and normalisation, Lanczos resampling)."""
    edge = {"longest_edge": tower.image_size}
    return {"image_processor_type": "Idefics3ImageProcessor", "processor_class": "Idefics3Processor",
            "do_convert_rgb": True, "do_resize": True, "size": dict(edge), "resample": 1,
            "do_image_splitting": False, "max_image_size": dict(edge), "do_rescale": True,
            "rescale_factor": 1 / 255, "do_normalize": True, "image_mean": [0.5, 0.5, 0.5],
            "image_std": [0.5, 0.5, 0.5], "do_pad": True}


def processor_config(tower: TowerConfig) -> dict[str, Any]:
    return {"processor_class": "Idefics3Processor", "image_seq_len": tower.visual_tokens}


def generation_config(tokenizer: TextTokenizer, sampling: dict[str, Any]) -> dict[str, Any]:
    """generation_config.json: the special ids and the model's own sampling defaults (`sampling`), which a server
    started to apply them (vLLM --generation-config auto) uses where a request sets none."""
    eos = list(tokenizer.eos_token_ids)
    return {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": eos[0] if len(eos) == 1 else eos,
            "pad_token_id": eos[0], **sampling}


def write_vlm_folder(weights: DecoderWeights, text: TextTokenizer, folder: Path, sampling: dict[str, Any],
                     tower: TowerConfig = TowerConfig()) -> Path:
    """The whole folder, written as hf_folder.write_files writes one (never seen half written)."""
    tokenizer = vision_tokenizer(text)
    tensors = text_tensors(weights, text, tokenizer.vocab_size)
    tensors.update(tower_tensors(tower, weights.config.hidden_size))
    return write_files(folder, tensors, ((CONFIG_FILE, vlm_config(weights, tokenizer, tower)),
                                         (GENERATION_CONFIG_FILE, generation_config(tokenizer, sampling)),
                                         (TOKENIZER_CONFIG_FILE,
                                          tokenizer_config(tokenizer, weights.config.max_positions)),
                                         (PREPROCESSOR_CONFIG_FILE, preprocessor_config(tower)),
                                         (PROCESSOR_CONFIG_FILE, processor_config(tower))), tokenizer)
