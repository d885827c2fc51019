"""Read PyTorch state dicts into numpy arrays without torch, and without running pickled code.

`torch.save` output is a pickle whose tensors point ("persistent ids") at storages kept
outside the pickle. Unpickling it with plain `pickle` would execute whatever callables the
file names, so every pickle here goes through `_RestrictedUnpickler`: it resolves only the
few globals a state dict needs, to inert stand-ins, and refuses all others.

Two layouts exist:
- legacy (torch < 1.6, and `_use_new_zipfile_serialization=False`): five pickles in a row
  (magic number, protocol version, system info, the object, the list of storage keys), then
  for each key in that order an int64 element count and the storage's raw bytes;
- zip (torch >= 1.6): `<name>/data.pkl` plus one raw file `<name>/data/<key>` per storage.
"""
from __future__ import annotations

import pickle
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL_VERSION = 1001


@dataclass(frozen=True)
class _StorageType:
    """Stand-in for a `torch.<X>Storage` class: all we need from it is the element type."""

    name: str
    dtype: np.dtype


_STORAGE_TYPES = {
    name: _StorageType(name, np.dtype(dtype))
    for name, dtype in {
        "DoubleStorage": np.float64, "FloatStorage": np.float32, "HalfStorage": np.float16,
        "LongStorage": np.int64, "IntStorage": np.int32, "ShortStorage": np.int16,
        "CharStorage": np.int8, "ByteStorage": np.uint8, "BoolStorage": np.bool_,
    }.items()
}


@dataclass(frozen=True)
class _StorageRef:
    """A storage named by a persistent id; legacy files may name a slice (view) of one."""

    key: str
    dtype: np.dtype
    start: int = 0            # in elements, for legacy storage views
    length: int | None = None  # None: to the end of the storage


@dataclass(frozen=True)
class _TensorRef:
    """What `torch._utils._rebuild_tensor_v2` received; materialised once storages are read."""

    storage: _StorageRef
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...]


def _rebuild_tensor_v2(storage: _StorageRef, storage_offset: int, size: tuple[int, ...],
                       stride: tuple[int, ...], requires_grad: bool = False,
                       backward_hooks: Any = None, metadata: Any = None) -> _TensorRef:
    # Storage bytes come after the pickle (legacy) or live in other files (zip): defer.
    return _TensorRef(storage, int(storage_offset), tuple(size), tuple(stride))


def _rebuild_parameter(data: _TensorRef, requires_grad: bool = False, backward_hooks: Any = None) -> _TensorRef:
    return data  # an nn.Parameter is its tensor, for our purposes


# The only globals a state dict may name, each mapped to an inert replacement.
_SAFE_GLOBALS: dict[tuple[str, str], Any] = {
    ("collections", "OrderedDict"): OrderedDict,
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor_v2,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    **{("torch", name): storage_type for name, storage_type in _STORAGE_TYPES.items()},
}


def _no_persistent_ids(pid: Any) -> Any:
    raise pickle.UnpicklingError(f"unexpected persistent id {pid!r} outside the main pickle")


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file: IO[bytes], persistent_load: Callable[[Any], Any] = _no_persistent_ids) -> None:
        super().__init__(file)
        self._persistent_load = persistent_load

    def find_class(self, module: str, name: str) -> Any:
        try:
            return _SAFE_GLOBALS[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(
                f"refusing to load global '{module}.{name}': not something a plain state dict "
                "contains, and unpickling it could run arbitrary code"
            ) from None

    def persistent_load(self, pid: Any) -> Any:
        return self._persistent_load(pid)


def _storage_type(value: Any) -> _StorageType:
    if not isinstance(value, _StorageType):
        raise pickle.UnpicklingError(f"unsupported storage type {value!r}")
    return value


def _materialise(ref: _TensorRef, storages: dict[str, np.ndarray]) -> np.ndarray:
    if ref.storage.key not in storages:
        raise ValueError(f"tensor refers to storage {ref.storage.key!r}, which the checkpoint lacks")
    flat = storages[ref.storage.key]
    stop = None if ref.storage.length is None else ref.storage.start + ref.storage.length
    flat = flat[ref.storage.start:stop]
    if any(n == 0 for n in ref.shape):
        return np.empty(ref.shape, dtype=flat.dtype)
    # Bounds check before as_strided, which would otherwise read outside the buffer.
    last = ref.offset + sum((n - 1) * s for n, s in zip(ref.shape, ref.stride))
    if ref.offset < 0 or min(ref.stride, default=0) < 0 or last >= flat.size:
        raise ValueError(f"tensor view (offset {ref.offset}, shape {ref.shape}, stride {ref.stride}) "
                         f"exceeds its storage of {flat.size} elements")
    view = np.lib.stride_tricks.as_strided(
        flat[ref.offset:], shape=ref.shape, strides=tuple(s * flat.itemsize for s in ref.stride))
    # Copy: own the memory (not the whole file buffer), contiguous, native byte order, writable.
    return np.array(view, dtype=flat.dtype.newbyteorder("="), order="C", copy=True)


def _to_state_dict(obj: Any, storages: dict[str, np.ndarray], path: Path) -> dict[str, np.ndarray]:
    if not isinstance(obj, dict):
        raise ValueError(f"{path} holds a {type(obj).__name__}, not a state dict")
    state: dict[str, np.ndarray] = {}
    for name, value in obj.items():
        if not isinstance(value, _TensorRef):
            raise ValueError(f"{path}: entry {name!r} is a {type(value).__name__}, not a tensor")
        state[str(name)] = _materialise(value, storages)
    return state


def _load_legacy(path: Path) -> dict[str, np.ndarray]:
    refs: dict[str, _StorageRef] = {}

    def persistent_load(pid: Any) -> _StorageRef:
        # ('storage', storage type, key, location, size in elements, view metadata or None)
        if not (isinstance(pid, tuple) and len(pid) == 6 and pid[0] == "storage"):
            raise pickle.UnpicklingError(f"unsupported persistent id {pid!r} (only storages are)")
        _, storage_type, key, _location, _size, view = pid
        root = _StorageRef(str(key), _storage_type(storage_type).dtype)
        refs.setdefault(root.key, root)
        if view is None:
            return root
        _view_key, start, length = view
        return _StorageRef(root.key, root.dtype, int(start), int(length))

    with open(path, "rb") as f:
        if _RestrictedUnpickler(f).load() != _LEGACY_MAGIC:
            raise ValueError(f"{path} is neither a zip nor a legacy torch checkpoint (bad magic number)")
        version = _RestrictedUnpickler(f).load()
        if version != _LEGACY_PROTOCOL_VERSION:
            raise ValueError(f"{path}: unsupported legacy protocol version {version!r}")
        sys_info = _RestrictedUnpickler(f).load()
        # Note: sys_info's type_sizes says long=4 even on Linux (torch used struct's standard
        # sizes); LongStorage elements are int64 regardless, so only the byte order matters.
        byteorder = "<" if sys_info.get("little_endian", True) else ">"
        obj = _RestrictedUnpickler(f, persistent_load).load()
        keys = _RestrictedUnpickler(f).load()
        storages: dict[str, np.ndarray] = {}
        for key in keys:
            key = str(key)
            if key not in refs:
                raise ValueError(f"{path}: storage {key!r} is listed but no tensor names its type")
            dtype = refs[key].dtype.newbyteorder(byteorder)
            header = f.read(8)
            if len(header) != 8:
                raise ValueError(f"{path} is truncated (storage {key!r} header)")
            (count,) = struct.unpack(f"{byteorder}q", header)
            data = f.read(count * dtype.itemsize)
            if len(data) != count * dtype.itemsize:
                raise ValueError(f"{path} is truncated (storage {key!r}: {count} elements expected)")
            storages[key] = np.frombuffer(data, dtype=dtype)
    return _to_state_dict(obj, storages, path)


def _load_zip(path: Path) -> dict[str, np.ndarray]:
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise ValueError(f"{path} is a zip but not a torch checkpoint (no single '<name>/data.pkl')")
        prefix = pickles[0][: -len("data.pkl")]
        byteorder = "<"
        if f"{prefix}byteorder" in archive.namelist():
            byteorder = "<" if archive.read(f"{prefix}byteorder").strip() == b"little" else ">"
        storages: dict[str, np.ndarray] = {}

        def persistent_load(pid: Any) -> _StorageRef:
            # ('storage', storage type, key, location, number of elements)
            if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
                raise pickle.UnpicklingError(f"unsupported persistent id {pid!r} (only storages are)")
            _, storage_type, key, _location, _numel = pid
            ref = _StorageRef(str(key), _storage_type(storage_type).dtype)
            if ref.key not in storages:
                raw = archive.read(f"{prefix}data/{ref.key}")
                storages[ref.key] = np.frombuffer(raw, dtype=ref.dtype.newbyteorder(byteorder))
            return ref

        with archive.open(pickles[0]) as f:
            obj = _RestrictedUnpickler(f, persistent_load).load()
    return _to_state_dict(obj, storages, path)


def load_legacy_state_dict(path: Path) -> dict[str, np.ndarray]:
    """Load a `torch.save`d state dict as {name: numpy array}, never importing torch.

    Reads the legacy (pre-1.6) layout, and the zip layout too. Raises
    `pickle.UnpicklingError` naming any global outside the state-dict whitelist.
    """
    path = Path(path)
    if zipfile.is_zipfile(path):
        return _load_zip(path)
    return _load_legacy(path)


class _ShapeUnpickler(_RestrictedUnpickler):
    """Reads what a tensor's pickle says of it whatever its storage's element type (bfloat16 too): the storages
    themselves are never read."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "torch" and name.endswith("Storage") and name.isidentifier():
            return _STORAGE_TYPES.get(name) or _StorageType(name, np.dtype(np.uint8))
        return super().find_class(module, name)


def tensor_shape(path: Path) -> tuple[int, ...]:
    """The shape of the one tensor a `torch.save(tensor)` file (zip layout) holds, from its pickle alone, never
    importing torch. ValueError for a file that is not one saved tensor."""
    path = Path(path)
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a torch.save file of the zip layout")
    with zipfile.ZipFile(path) as archive:
        pickles = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if len(pickles) != 1:
            raise ValueError(f"{path} is a zip but not a torch checkpoint (no single '<name>/data.pkl')")
        with archive.open(pickles[0]) as f:
            obj = _ShapeUnpickler(f, lambda pid: _StorageRef(str(pid[2]), np.dtype(np.uint8))).load()
    if not isinstance(obj, _TensorRef):
        raise ValueError(f"{path} holds a {type(obj).__name__}, not one tensor")
    return obj.shape
