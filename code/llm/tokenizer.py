"""The decoder's tokenizer: byte-level BPE rebuilt from a GGUF file, or a Hugging Face tokenizer.json.

The `tokenizers` package runs it either way. A GGUF carries what llama.cpp needs (vocabulary, merges, token types,
the name of its pre-tokenizer, special ids, the chat template); the same pieces make a `tokenizers.Tokenizer`.
Special tokens (<|im_start|>, <|eot_id|>, ...) are added tokens, so they encode to their single id wherever they
appear in text: chat prompts are rendered as text and encoded in one go.

The beginning-of-sequence token is added here, not by the tokenizer's post-processor, and only where the model's
own tokenizer adds one (Llama 3 does, SmolLM2 does not), never twice.

Decoding cleans up tokenization spaces where the model's tokenizer asks for it, as the reference evaluation's
Hugging Face tokenizer does (`clean_up_tokenization_spaces` in tokenizer_config.json; Llama 3.1 sets it, so " ."
decodes as "." and " 's" as "'s"). A GGUF does not carry the setting: llama.cpp decides it from the pre-tokenizer
name, following each model family's tokenizer_config, and so does this module.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from ..common.errors import EXIT_FAILURE, UserError

if TYPE_CHECKING:
    import tokenizers

# Llama 3's pre-tokenizer split (llama.cpp "llama-bpe"), as in its tokenizer.json.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                 r"|\s*[\r\n]+|\s+(?!\S)|\s+")
_CONTROL, _USER_DEFINED = 3, 4      # llama.cpp token types of special and added tokens

# transformers' PreTrainedTokenizerBase.clean_up_tokenization (4.46.2, the version the llama3.1-8b reference pins):
# these replacements, in this order, on the decoded text.
CLEAN_UP_REPLACEMENTS = ((" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"), (" n't", "n't"),
                         (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"))
# transformers' value when tokenizer_config.json does not name it (4.46.2: False).
CLEAN_UP_DEFAULT = False
# Whether a GGUF's tokenizer cleans up spaces, by its pre-tokenizer (llama.cpp's llama-vocab.cpp `clean_spaces`:
# true for BPE unless the family's tokenizer_config says otherwise, as SmolLM's does).
CLEAN_UP_BY_PRE_TOKENIZER = {"smollm": False, "gpt-2": True, "gpt2": True, "default": True,
                             "llama-bpe": True, "llama3": True, "llama-v3": True}


def _pre_tokenizer(name: str, where: Path):
    """The `tokenizers` pre-tokenizer of a llama.cpp pre-tokenizer name (tokenizer.ggml.pre)."""
    from tokenizers import Regex, pre_tokenizers

    if name == "smollm":          # digits one by one, then GPT-2's byte-level split
        return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    if name in ("gpt-2", "gpt2", "default"):
        return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if name in ("llama-bpe", "llama3", "llama-v3"):
        return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), behavior="isolated"),
                                        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    raise UserError(f"{where} uses the llama.cpp pre-tokenizer '{name}', which this toolkit does not rebuild "
                    "(known: smollm, gpt-2, llama-bpe).", exit_code=EXIT_FAILURE)


class TextTokenizer:
    """Text <-> token ids of one model, its end-of-sequence ids and its chat template for one user turn."""

    def __init__(self, tokenizer: "tokenizers.Tokenizer", *, bos_token_id: int | None, eos_token_ids: Sequence[int],
                 adds_bos: bool, chat_template: str | None, source: str, clean_up_spaces: bool = False) -> None:
        if not eos_token_ids:
            raise UserError(f"The tokenizer from {source} names no end-of-sequence token; generation could not stop.",
                            exit_code=EXIT_FAILURE)
        self._tokenizer = tokenizer
        self.bos_token_id = bos_token_id
        self.eos_token_ids: tuple[int, ...] = tuple(dict.fromkeys(int(i) for i in eos_token_ids))
        self.adds_bos = adds_bos and bos_token_id is not None
        self.chat_template = chat_template
        self.source = source
        self.clean_up_spaces = bool(clean_up_spaces)
        self.vocab_size: int = tokenizer.get_vocab_size(with_added_tokens=True)

    # --- constructors ---------------------------------------------------------------------------------------------

    @classmethod
    def from_gguf(cls, path: Path) -> "TextTokenizer":
        """The tokenizer a llama.cpp GGUF file carries (byte-level BPE, tokenizer.ggml.model "gpt2")."""
        from tokenizers import AddedToken, Tokenizer, decoders, models

        from .gguf_weights import gguf_metadata

        path = Path(path)
        meta = gguf_metadata(path)
        kind = meta.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise UserError(f"{path} holds a '{kind}' tokenizer; only byte-level BPE ('gpt2', as SmolLM2 and Llama 3 "
                            "use) is rebuilt here.", exit_code=EXIT_FAILURE)
        tokens: list[str] = list(meta["tokenizer.ggml.tokens"])
        types: list[int] = list(meta.get("tokenizer.ggml.token_type") or [1] * len(tokens))
        merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges") or []]
        tokenizer = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, fuse_unk=False,
                                         byte_fallback=False))
        pre = str(meta.get("tokenizer.ggml.pre", "default"))
        tokenizer.pre_tokenizer = _pre_tokenizer(pre, path)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.add_tokens([AddedToken(t, special=(k == _CONTROL), normalized=False)
                              for t, k in zip(tokens, types) if k in (_CONTROL, _USER_DEFINED)])
        tokenizer.add_special_tokens([AddedToken(t, special=True, normalized=False)
                                      for t, k in zip(tokens, types) if k == _CONTROL])
        eos = [meta[key] for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                                     "tokenizer.ggml.eom_token_id") if meta.get(key) is not None]
        return cls(tokenizer, bos_token_id=meta.get("tokenizer.ggml.bos_token_id"), eos_token_ids=eos,
                   adds_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
                   chat_template=meta.get("tokenizer.chat_template"), source=str(path),
                   clean_up_spaces=CLEAN_UP_BY_PRE_TOKENIZER[pre])

    @classmethod
    def from_tokenizer_json(cls, path: Path, *, bos_token_id: int | None = None,
                            eos_token_ids: Sequence[int] | None = None) -> "TextTokenizer":
        """A Hugging Face tokenizer.json; BOS, EOS, whether BOS is added, whether decoding cleans up tokenization
        spaces and the chat template come from tokenizer_config.json and generation_config.json beside it when
        present (generation_config's EOS list first: Llama 3.1 Instruct ends a turn with <|eot_id|> as well as
        <|end_of_text|>)."""
        from tokenizers import Tokenizer

        path = Path(path)
        if not path.is_file():
            raise UserError(f"No tokenizer.json at {path}; the checkpoint folder is incomplete.",
                            exit_code=EXIT_FAILURE)
        tokenizer = Tokenizer.from_file(str(path))
        config = _read_json(path.with_name("tokenizer_config.json"))
        generation = _read_json(path.with_name("generation_config.json"))

        def token_id(value: Any) -> int | None:
            if isinstance(value, dict):
                value = value.get("content")
            return tokenizer.token_to_id(value) if isinstance(value, str) else None

        if bos_token_id is None:
            bos_token_id = generation.get("bos_token_id")
            if bos_token_id is None:
                bos_token_id = token_id(config.get("bos_token"))
        if eos_token_ids is None:
            found = generation.get("eos_token_id")
            ids = found if isinstance(found, list) else [found] if found is not None else []
            config_eos = token_id(config.get("eos_token"))
            eos_token_ids = [int(i) for i in ids] + ([config_eos] if config_eos is not None else [])
        if "add_bos_token" in config:
            adds_bos = bool(config["add_bos_token"])
        else:   # the post-processor decides (Llama 3's TemplateProcessing adds <|begin_of_text|>)
            probe = tokenizer.encode("a", add_special_tokens=True).ids
            adds_bos = bool(probe) and probe[0] == bos_token_id
        template = config.get("chat_template")
        if isinstance(template, list):      # named templates: the default one
            template = next((t.get("template") for t in template if t.get("name") == "default"), None)
        clean_up = config.get("clean_up_tokenization_spaces", CLEAN_UP_DEFAULT)
        return cls(tokenizer, bos_token_id=bos_token_id, eos_token_ids=eos_token_ids, adds_bos=adds_bos,
                   chat_template=template, source=str(path), clean_up_spaces=bool(clean_up))

    # --- use --------------------------------------------------------------------------------------------------------

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        """Token ids of `text`; special tokens written in the text become their ids. With `add_bos`, the BOS token
        leads where the model's tokenizer adds one and the text does not already start with it."""
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        if add_bos and self.adds_bos and (not ids or ids[0] != self.bos_token_id):
            ids.insert(0, int(self.bos_token_id))       # type: ignore[arg-type]
        return ids

    def decode(self, ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        """The text of `ids`, as the model's Hugging Face tokenizer decodes it (tokenization spaces cleaned up
        where the tokenizer says so)."""
        text = self._tokenizer.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)
        return clean_up_tokenization(text) if self.clean_up_spaces else text

    def token_to_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def chat_prompt(self, user_message: str, system: str = "") -> str:
        """The chat template rendered for one user turn and the start of the assistant's answer, as text: encode it
        with add_bos=True. `system` is the system message; empty: the template's default one, if it has one."""
        if not self.chat_template:
            raise UserError(f"The tokenizer from {self.source} has no chat template; use the plain prompt.",
                            exit_code=EXIT_FAILURE)
        return render_chat(self.chat_template, user_message, bos_token=self.token_text(self.bos_token_id),
                           eos_token=self.token_text(self.eos_token_ids[0]), system=system)

    def fingerprint(self) -> str:
        """sha256 of everything that decides the ids and the prompts: the full tokenizer definition, BOS/EOS and
        the chat template. Two tokenizers with the same fingerprint tokenize identically."""
        facts = json.dumps({"bos": self.bos_token_id, "eos": list(self.eos_token_ids), "adds_bos": self.adds_bos,
                            "chat_template": self.chat_template}, sort_keys=True)
        digest = hashlib.sha256(self._tokenizer.to_str().encode())
        digest.update(facts.encode())
        return digest.hexdigest()

    def to_json(self) -> str:
        """The whole tokenizer as a Hugging Face tokenizer.json."""
        return self._tokenizer.to_str()

    def token_text(self, token_id: int | None) -> str:
        """The text of one token id ("" for None)."""
        return "" if token_id is None else (self._tokenizer.id_to_token(int(token_id)) or "")


def clean_up_tokenization(text: str) -> str:
    """transformers' clean_up_tokenization: spaces before punctuation and English contractions removed."""
    for old, new in CLEAN_UP_REPLACEMENTS:
        text = text.replace(old, new)
    return text


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as error:
        raise UserError(f"{path} is not valid JSON ({error}); restore it from the checkpoint.",
                        exit_code=EXIT_FAILURE) from None
    return data if isinstance(data, dict) else {}


# --- chat templates ------------------------------------------------------------------------------------------------

def render_chat(template: str, user_message: str, *, bos_token: str = "", eos_token: str = "",
                system: str = "") -> str:
    """Render a chat template for one user message (after a system message, where `system` is given) plus the
    generation prompt.

    The two families the benchmark uses are rendered here without a template engine, so that prompts never depend
    on whether jinja2 happens to be installed: ChatML (SmolLM2: <|im_start|>role\\n...<|im_end|>, with the
    template's default system message) and Llama 3 (header ids, <|eot_id|>; Llama 3.1's system block with its
    knowledge cutoff and default date). Any other template is rendered with jinja2, as Hugging Face does, if it
    is installed."""
    if "<|im_start|>" in template:
        default = re.search(r"<\|im_start\|>system\n(.*?)<\|im_end\|>", template, re.DOTALL)
        message = system or (default.group(1) if default else "")
        head = f"<|im_start|>system\n{message}<|im_end|>\n" if message else ""
        return f"{head}<|im_start|>user\n{user_message}<|im_end|>\n<|im_start|>assistant\n"
    if "<|start_header_id|>" in template and not system:
        head = bos_token if "bos_token" in template else ""
        if "Cutting Knowledge Date" in template:
            cutoff = re.search(r"Cutting Knowledge Date: ([^\\\"'\n]*)", template)
            date = re.search(r"set date_string = [\"']([^\"']*)[\"']", template)
            head += ("<|start_header_id|>system<|end_header_id|>\n\n"
                     f"Cutting Knowledge Date: {cutoff.group(1) if cutoff else 'December 2023'}\n"
                     f"Today Date: {date.group(1) if date else '26 Jul 2024'}\n\n<|eot_id|>")
        content = user_message.strip() if "| trim" in template else user_message
        return (f"{head}<|start_header_id|>user<|end_header_id|>\n\n{content}<|eot_id|>"
                "<|start_header_id|>assistant<|end_header_id|>\n\n")
    return render_chat_jinja(template, user_message, bos_token=bos_token, eos_token=eos_token, system=system)


def render_chat_jinja(template: str, user_message: str, *, bos_token: str = "", eos_token: str = "",
                      system: str = "") -> str:
    """Render with jinja2 as Hugging Face's apply_chat_template does (sandboxed, trim_blocks, lstrip_blocks)."""
    try:
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise UserError("This model's chat template is not ChatML or Llama 3, and rendering it needs the jinja2 "
                        "package, which is not installed: install jinja2, or use a model of a known family.",
                        exit_code=EXIT_FAILURE) from None

    def raise_exception(message: str) -> None:
        raise UserError(f"The chat template refused the prompt: {message}", exit_code=EXIT_FAILURE)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = raise_exception
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": user_message}]
    return env.from_string(template).render(messages=messages,
                                            add_generation_prompt=True, bos_token=bos_token, eos_token=eos_token)
