"""A CTranslate2 Whisper model folder read into numpy: `model.bin`'s variables, `config.json` and the vocabulary.

`model.bin` (binary version 6, as ctranslate2/specs/model_spec.py `_serialize` writes it), little-endian:

    u32 binary version, string spec name, u32 spec revision, u32 variable count,
    per variable: string name, u8 rank, u32 x rank shape, u8 dtype id, u32 byte count, the raw bytes;
    u32 alias count, per alias: string alias, string name of the variable it repeats.

A string is a u16 length (counting a trailing NUL), the UTF-8 bytes and the NUL. Dtype ids follow CTranslate2's
`DataType` enum: float32, int8, int16, int32, float16, bfloat16. A quantized weight `<scope>/weight` comes with
`<scope>/weight_scale`: int8 rows carry one float32 scale each (weight = int8 / scale, over the row: a conv1d
kernel is a row of in_channels x width values), int16 one scale for the whole tensor.
"""
from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..common.errors import EXIT_FAILURE, UserError
from ..common.fileio import sha256_file

MODEL_BIN = "model.bin"
CONFIG_JSON = "config.json"
VOCABULARY_FILES = ("vocabulary.json", "vocabulary.txt")
WHISPER_SPEC = "WhisperSpec"
BINARY_VERSIONS = (5, 6)            # 5 and 6 differ only in what the C++ reader accepts, not in this layout
_DTYPES = ("float32", "int8", "int16", "int32", "float16", "bfloat16")


@dataclass
class Ct2Model:
    """The variables of one model.bin, aliases resolved (an alias is the same array, not a copy)."""
    spec: str
    revision: int
    variables: dict[str, np.ndarray]
    aliases: dict[str, str] = field(default_factory=dict)

    def raw(self, name: str) -> np.ndarray:
        return self.variables[self.aliases.get(name, name)]

    def __contains__(self, name: str) -> bool:
        return self.aliases.get(name, name) in self.variables

    def float32(self, name: str) -> np.ndarray:
        """The variable as float32, dequantized where it ships int8/int16 with a `_scale` beside it."""
        name = self.aliases.get(name, name)          # an alias shares its target's scale too
        value = self.raw(name)
        scale_name = name + "_scale"
        if value.dtype in (np.int8, np.int16) and scale_name in self:
            if name + "_zero" in self:
                raise ValueError(f"{name} carries a zero point (AWQ-style quantization), which this reader does "
                                 "not dequantize")
            scale = self.float32(scale_name)
            values = value.astype(np.float32)
            if scale.size == 1:                             # int16: one scale for the tensor
                return values / scale.reshape(())
            return (values.reshape(scale.size, -1) / scale[:, None]).reshape(value.shape)
        if value.dtype == np.uint16:                        # bfloat16: the high half of a float32
            return (value.astype(np.uint32) << 16).view(np.float32)
        return value.astype(np.float32)

    def scalar(self, name: str) -> int:
        return int(self.raw(name).reshape(-1)[0])

    def stored_dtype(self, name: str) -> str:
        value = self.raw(name)
        return "bfloat16" if value.dtype == np.uint16 else str(value.dtype)


def read_model_bin(path: Path) -> Ct2Model:
    """Every variable of a CTranslate2 model.bin, as numpy arrays over a copy of the file's bytes."""
    path = Path(path)
    data = path.read_bytes()
    try:
        return _parse(data)
    except (struct.error, UnicodeDecodeError, ValueError) as error:
        raise UserError(f"{path} is not a readable CTranslate2 model ({error}); remove it and run "
                        "`make download_model` again.", exit_code=EXIT_FAILURE) from None


def _parse(data: bytes) -> Ct2Model:
    offset = 0

    def unpack(fmt: str) -> int:
        nonlocal offset
        (value,) = struct.unpack_from("<" + fmt, data, offset)
        offset += struct.calcsize("<" + fmt)
        return value

    def string() -> str:
        nonlocal offset
        length = unpack("H")
        if length < 1 or offset + length > len(data) or data[offset + length - 1] != 0:
            raise ValueError(f"a malformed name at byte {offset}")
        text = data[offset:offset + length - 1].decode("utf-8")
        offset += length
        return text

    version = unpack("I")
    if version not in BINARY_VERSIONS:
        raise ValueError(f"binary version {version}, not one of {BINARY_VERSIONS}")
    spec, revision = string(), unpack("I")
    variables: dict[str, np.ndarray] = {}
    for _ in range(unpack("I")):
        name = string()
        shape = tuple(unpack("I") for _ in range(unpack("B")))
        dtype_id, size = unpack("B"), unpack("I")
        if dtype_id >= len(_DTYPES):
            raise ValueError(f"{name} has the unknown dtype id {dtype_id}")
        dtype = np.dtype("uint16" if _DTYPES[dtype_id] == "bfloat16" else _DTYPES[dtype_id]).newbyteorder("<")
        if size != dtype.itemsize * int(np.prod(shape, dtype=np.int64)) or offset + size > len(data):
            raise ValueError(f"{name} declares {size} bytes for shape {shape} of {_DTYPES[dtype_id]}")
        variables[name] = np.frombuffer(data, dtype=dtype, count=size // dtype.itemsize, offset=offset).reshape(shape)
        offset += size
    aliases = {}
    for _ in range(unpack("I")):
        alias = string()
        aliases[alias] = string()
    if offset != len(data):
        raise ValueError(f"{len(data) - offset} bytes left after the last alias")
    missing = sorted(a for a, target in aliases.items() if target not in variables)
    if missing:
        raise ValueError(f"aliases {missing} name no variable")
    return Ct2Model(spec, revision, variables, aliases)


@dataclass
class WhisperFolder:
    """A CTranslate2 Whisper model folder: its weights, config.json and vocabulary (token text by id)."""
    folder: Path
    model: Ct2Model
    config: dict
    vocabulary: list[str]
    digest: str                                  # sha256 of model.bin: what graphs built from it are stamped with

    @property
    def num_encoder_layers(self) -> int:
        return _count_layers(self.model, "encoder")

    @property
    def num_decoder_layers(self) -> int:
        return _count_layers(self.model, "decoder")

    def token_id(self, text: str) -> int:
        return self.vocabulary.index(text)


def _count_layers(model: Ct2Model, stack: str) -> int:
    return sum(1 for name in model.variables if name.startswith(f"{stack}/layer_") and name.endswith("ffn/linear_0/bias"))


def read_whisper_folder(folder: Path, digest: str | None = None) -> WhisperFolder:
    """Read `folder` (model.bin, config.json, vocabulary.json or vocabulary.txt); `digest`, when the caller has
    it, spares hashing model.bin again."""
    folder = Path(folder)
    bin_path = folder / MODEL_BIN
    vocabulary_path = next((folder / name for name in VOCABULARY_FILES if (folder / name).is_file()), None)
    for needed in (bin_path, folder / CONFIG_JSON, vocabulary_path or folder / VOCABULARY_FILES[-1]):
        if not needed.is_file():
            raise UserError(f"The Whisper model folder has no {needed.name} ({needed}); run `make download_model "
                            "RUN_ARGS=--benchmarks=whisper` to fetch it again.", exit_code=EXIT_FAILURE)
    model = read_model_bin(bin_path)
    if model.spec != WHISPER_SPEC:
        raise UserError(f"{bin_path} holds a {model.spec}, not a Whisper model; point the toolkit at a CTranslate2 "
                        "Whisper folder.", exit_code=EXIT_FAILURE)
    config = json.loads((folder / CONFIG_JSON).read_text(encoding="utf-8"))
    assert vocabulary_path is not None
    if vocabulary_path.suffix == ".json":
        vocabulary = list(json.loads(vocabulary_path.read_text(encoding="utf-8")))
    else:
        vocabulary = vocabulary_path.read_text(encoding="utf-8").split("\n")
        if vocabulary and vocabulary[-1] == "":
            vocabulary.pop()
    return WhisperFolder(folder, model, config, vocabulary, digest or sha256_file(bin_path))
