"""Fault injection, damaged inputs: a file a run depends on that is no longer the one the toolkit made (same size,
other bytes) is never used. The run stops naming the file and the make target that makes it again, and that
target makes it again instead of saying it is ready."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest

from code.common import integrity
from code.common.engines.onnxruntime_builder import build_decoder_engine
from code.common.errors import UserError
from code.common.fileio import external_data, model_sha256
from code.common.native.build import STAMP, lib_dir, not_ready
from code.common.paths import Paths
from code.common.preprocessed_store import set_identity
from code.main import main
from code.resnet50.benchmark import BENCHMARK
from tests.conftest import EMBEDDED, SHARED, SMOLLM2, seed_downloads

MODEL, DATASET = "mobilenet_v2", "foolbox20"
QUIET = lambda _: None  # noqa: E731


def _flip_middle_byte(path: Path) -> None:
    """Same size, other bytes, a later modification time: what an overwrite in place leaves."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.fixture
def scratch_copy(scratch: Path, tmp_path: Path) -> Paths:
    """A copy of the session's embedded-default scratch, free to damage."""
    copy = tmp_path / "scratch"
    shutil.copytree(scratch, copy, symlinks=True)
    return Paths.create(scratch=copy, log_dir=tmp_path / "logs")


def _main(paths: Paths, action: str, *extra: str) -> int:
    return main([f"--action={action}", f"--scratch_path={paths.scratch}", f"--log_dir={paths.log_dir}", *EMBEDDED,
                 "--scenarios=offline", *extra], log=print)


# -- preprocessed samples -----------------------------------------------------------------------------------

def test_a_sample_overwritten_in_place_stops_the_accuracy_run(scratch_copy: Paths,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Another image's tensor written over a sample (same shape, same size): the accuracy run would score 45 %
    instead of 90 %. It stops before any test, naming the file and make preprocess_data, which repairs it."""
    images = BENCHMARK.preprocessed(MODEL, DATASET, scratch_copy)
    victim = images.directory / images.file_names[4]
    np.save(victim, images.load(9))
    assert _main(scratch_copy, "run_harness", "--test_run", "--test_mode=AccuracyOnly") == 1
    err = capsys.readouterr().err
    assert f"{victim} does not match the sha256 recorded when it was made" in err
    assert f'make preprocess_data RUN_ARGS="--benchmarks=resnet50 --model={MODEL} --dataset={DATASET}"' in err
    assert "internal error" not in err and not list(scratch_copy.log_dir.rglob("metadata.json"))

    assert _main(scratch_copy, "preprocess_data") == 0
    out = capsys.readouterr().out
    assert f"(first: {victim.name} does not match the sha256" in out and "up to date" not in out
    repaired = BENCHMARK.preprocessed(MODEL, DATASET, scratch_copy)
    assert not np.array_equal(repaired.load(4), repaired.load(9))


def test_samples_touched_but_unchanged_are_hashed_then_their_times_recorded(scratch_copy: Paths) -> None:
    images = BENCHMARK.preprocessed(MODEL, DATASET, scratch_copy)
    identity = set_identity(images.directory)
    for name in images.file_names:
        os.utime(images.directory / name)          # same bytes, new times (a copy without -p does this)
    BENCHMARK.preprocessed(MODEL, DATASET, scratch_copy)   # hashed: the bytes are as written, so it opens
    lines: list[str] = []
    BENCHMARK.preprocess(MODEL, DATASET, scratch_copy, lines.append)
    assert any("up to date" in line for line in lines)
    manifest = json.loads((images.directory / "manifest.json").read_text())
    assert all(manifest["files"][name]["mtime_ns"] == (images.directory / name).stat().st_mtime_ns
               for name in images.file_names)
    assert set_identity(images.directory) == identity     # runs before and after read the same data


def test_an_image_replaced_after_preprocessing_stops_the_run_and_is_preprocessed_again(
        scratch_copy: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    """Another photograph copied over a source image once went unnoticed: its sample was the old image's."""
    images = BENCHMARK.preprocessed(MODEL, DATASET, scratch_copy)
    source_dir = scratch_copy.dataset_dir(DATASET)
    victim, other = (source_dir / name.removesuffix(".npy") for name in images.file_names[3:5])
    before = images.load(3)
    victim.unlink()                                       # a link into the download cache: replaced, not written
    shutil.copyfile(other, victim)
    assert _main(scratch_copy, "run_harness", "--test_run", "--test_mode=AccuracyOnly") == 1
    err = capsys.readouterr().err
    assert f"{victim} is " in err and "since" in err and "internal error" not in err
    assert f'make preprocess_data RUN_ARGS="--benchmarks=resnet50 --model={MODEL} --dataset={DATASET}"' in err

    assert _main(scratch_copy, "preprocess_data") == 0
    assert "preprocessing 1 samples" in capsys.readouterr().out
    repaired = BENCHMARK.preprocessed(MODEL, DATASET, scratch_copy)
    assert not np.array_equal(repaired.load(3), before) and np.array_equal(repaired.load(3), repaired.load(4))


def test_a_downloaded_image_changed_at_the_same_size_is_extracted_again_by_download_data(scratch_copy: Paths) -> None:
    """foolbox20 is extracted by the toolkit: download_data compares each image with the wheel's CRC-32, so a copy
    changed in place (same size) is replaced, not reported ready."""
    image = sorted(scratch_copy.dataset_dir(DATASET).glob("*.jpg"))[1]
    original = image.read_bytes()
    damaged = bytearray(original)
    damaged[len(damaged) // 2] ^= 0xFF
    image.unlink()                                        # never written through a link
    image.write_bytes(bytes(damaged))
    assert _main(scratch_copy, "download_data") == 0
    assert image.read_bytes() == original


def test_a_partial_data_set_is_a_labelled_subset_and_refused_for_the_closed_division(
        scratch_copy: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    """18 of foolbox20's 20 images prepared: the plan, the record and the report say so; a closed-division model
    on them is refused before any test starts."""
    from code.common.records.metadata import find_metadata, read_metadata
    from code.common.report.collect import read_rows

    val_map = scratch_copy.dataset_dir(DATASET) / "val_map.txt"
    val_map.write_text("".join(val_map.read_text().splitlines(keepends=True)[:18]))
    assert _main(scratch_copy, "preprocess_data") == 0
    assert _main(scratch_copy, "run_harness", "--test_run", "--test_mode=AccuracyOnly") == 0
    out = capsys.readouterr().out
    assert "18 samples in 1 query" in out and f"{DATASET} is a subset: 18 of the published 20 samples" in out
    (record,) = [read_metadata(m) for m in find_metadata(scratch_copy.log_dir)]
    assert (record.data.samples, record.data.published_samples) == (18, 20)
    (row,) = read_rows([scratch_copy.log_dir], lambda path, why: None)
    assert "a subset: 18 of the published 20 samples" in row.verdict_text

    closed = ["--benchmarks=resnet50", "--model=resnet50_v1.5", f"--dataset={DATASET}", "--scenarios=offline",
              f"--scratch_path={scratch_copy.scratch}", f"--log_dir={scratch_copy.log_dir / 'closed'}"]
    assert main(["--action=preprocess_data", *closed], log=print) == 0
    assert main(["--action=run_harness", "--test_mode=AccuracyOnly", *closed], log=print) == 1
    err = capsys.readouterr().err
    assert "a closed-division run needs the whole published set" in err and "internal error" not in err
    assert not (scratch_copy.log_dir / "closed").exists()


# -- models ---------------------------------------------------------------------------------------------------

def test_a_model_whose_weights_changed_is_never_built_from_and_is_made_again(
        scratch_copy: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    model = scratch_copy.model_file("resnet50", MODEL)
    original = model_sha256(model)
    _flip_middle_byte(model)                          # a weight of the converted model
    assert _main(scratch_copy, "generate_engines") == 1
    err = capsys.readouterr().err
    assert f"{model} does not match the sha256 recorded when it was made" in err
    assert f'make download_model RUN_ARGS="--benchmarks=resnet50 --model={MODEL}"' in err

    assert _main(scratch_copy, "download_model") == 0
    out = capsys.readouterr().out
    assert f"making {MODEL} again" in out and "already present" not in out
    assert model.with_name(model.name + ".changed").is_file()   # the changed file is kept, not deleted
    assert model_sha256(model) == original                       # the conversion is deterministic
    assert _main(scratch_copy, "generate_engines") == 0


def test_a_model_found_without_a_record_is_recorded_at_first_use(scratch_copy: Paths) -> None:
    """A model placed by hand (or made by an older version): recorded the first time, then held to it."""
    from code.common.model_files import verified_model

    model = scratch_copy.model_file("resnet50", MODEL)
    integrity.forget_record(model)
    path, digest = verified_model("resnet50", MODEL, scratch_copy)
    assert path == model and digest == model_sha256(model) and integrity.read_record(model) is not None
    _flip_middle_byte(model)
    with pytest.raises(UserError, match="does not match the sha256 recorded"):
        verified_model("resnet50", MODEL, scratch_copy)


# -- LLM engines and prompts ------------------------------------------------------------------------------------

def _decoder_with_external_data(folder: Path) -> Path:
    """A one-node graph whose weight lives in an external-data file, as LLM decoders keep theirs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    folder.mkdir(parents=True)
    weight = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "weight")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "weight"], ["y"])], "decoder",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])], [weight])
    model = folder / "decoder.onnx"
    onnx.save(helper.make_model(graph), str(model), save_as_external_data=True, all_tensors_to_one_file=True,
              location=external_data(model).name, size_threshold=0)
    return model


def test_an_llm_engine_shares_no_storage_with_its_model(tmp_path: Path) -> None:
    model = _decoder_with_external_data(tmp_path / "models")
    engine = tmp_path / "engines" / "decoder-engine.onnx"
    build_decoder_engine(model, engine, "fp32")
    assert os.stat(external_data(engine)).st_ino != os.stat(external_data(model)).st_ino
    before = model_sha256(engine)
    _flip_middle_byte(external_data(model))           # damage to the model's weights ...
    assert model_sha256(engine) == before             # ... is not damage to the engine's


def test_damaged_prompts_are_named_and_made_again(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not (SHARED / "data" / "cnndm_sample").is_dir():
        pytest.skip(f"{SHARED / 'data' / 'cnndm_sample'} is absent: the LLM prompts are made from its articles")
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    seed_downloads(paths, SMOLLM2)
    args = [f"--scratch_path={paths.scratch}", "--benchmarks=llama3.1-8b", "--scenarios=offline",
            "--model=smollm2-135m-instruct", "--dataset=cnndm_sample"]
    for action in ("download_model", "download_data", "preprocess_data"):
        assert main([f"--action={action}", *args], log=QUIET) == 0, action
    prompts = paths.preprocessed_dir("llama3.1-8b", "smollm2-135m-instruct", "cnndm_sample") / "prompts.all.npz"
    _flip_middle_byte(prompts)
    capsys.readouterr()
    assert main(["--action=run_harness", *args, "--test_run", "--total_sample_count=2", "--max_output_tokens=2",
                 f"--log_dir={paths.log_dir}"], log=print) == 1
    err = capsys.readouterr().err
    assert f"{prompts} does not match the sha256 recorded when it was made" in err and "BadZipFile" not in err
    assert 'make preprocess_data RUN_ARGS="--benchmarks=llama3.1-8b --model=smollm2-135m-instruct ' \
           '--dataset=cnndm_sample"' in err
    lines: list[str] = []
    assert main(["--action=preprocess_data", *args], log=lines.append) == 0
    assert any("tokenizing the prompts again" in line for line in lines)
    assert not any("up to date" in line for line in lines)

    prompts.write_bytes(b"PK\x03\x04 not a zip archive")   # unreadable, and its size changed too
    with pytest.raises(UserError, match=r"prompts.all.npz is \d+ bytes"):
        get_prompts(paths)


def get_prompts(paths: Paths):
    from code.common.benchmark_api import get_benchmark

    return get_benchmark("llama3.1-8b").preprocessed("smollm2-135m-instruct", "cnndm_sample", paths)


# -- the native core ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("damage", ["deleted", "truncated", "changed"])
def test_a_damaged_native_build_is_not_ready_and_names_the_file(native_lib: Path, tmp_path: Path,
                                                                damage: str) -> None:
    """A copy of the session's native build: each damage to a built file makes it not ready (the harness then
    does not load it, make build rebuilds it) with the file named."""
    build_root = tmp_path / "build"
    shutil.copytree(native_lib, lib_dir(build_root))
    assert not_ready(build_root) is None
    victim = lib_dir(build_root) / next(name for name in json.loads((native_lib / STAMP).read_text())["files"]
                                        if name.startswith("toolkit_native"))
    if damage == "deleted":
        victim.unlink()
    elif damage == "truncated":
        victim.write_bytes(victim.read_bytes()[:1000])
    else:
        _flip_middle_byte(victim)
    why = not_ready(build_root)
    assert why is not None and str(victim) in why and "`make build` rebuilds it" in why


def test_the_native_build_is_judged_by_content_not_by_time(native_lib: Path, tmp_path: Path) -> None:
    """Every built file touched but unchanged: still ready (nothing rebuilt). The largest one (libloadgen.so, over
    the size below which every file is hashed anyway) changed with its size and recorded time put back: not ready."""
    build_root = tmp_path / "build"
    shutil.copytree(native_lib, lib_dir(build_root))
    recorded = json.loads((native_lib / STAMP).read_text())["files"]
    later = time.time_ns() + 10**9
    for name in recorded:
        os.utime(lib_dir(build_root) / name, ns=(later, later))
    assert not_ready(build_root) is None
    largest = max(recorded, key=lambda name: recorded[name]["size"])
    victim = lib_dir(build_root) / largest
    _flip_middle_byte(victim)
    os.utime(victim, ns=(recorded[largest]["mtime_ns"], recorded[largest]["mtime_ns"]))
    assert victim.stat().st_size == recorded[largest]["size"]
    why = not_ready(build_root)
    assert why is not None and str(victim) in why and "sha256" in why
