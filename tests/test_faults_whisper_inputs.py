"""Fault injection, whisper's inputs: every file a whisper run reads (the CTranslate2 folder, the ONNX graphs built
from it, the repacked clips and their transcripts, the source audio they were repacked from) is known by its
sha256. A file changed in place at the same size is never used: the run's plan stops naming the file and the make
target that makes it again, and that target makes it again instead of saying it is ready or up to date."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from code.common.errors import EXIT_FAILURE, UserError
from code.common.model_files import ensure_model
from code.common.paths import Paths
from code.main import main
from code.whisper import datasets, preprocessing
from code.whisper.benchmark import BENCHMARK
from code.whisper.models import model_folder
from tests.whisper_fixtures import TINY_EN, librispeech_tree, seeded_paths, shared_sample

MODEL, DATASET = "whisper-tiny.en", "librivox_sample"
RUN = ("--benchmarks=whisper", f"--model={MODEL}", f"--dataset={DATASET}", "--scenarios=Offline",
       "--test_mode=AccuracyOnly", "--test_run")
HINT_PREPROCESS = f'make preprocess_data RUN_ARGS="--benchmarks=whisper --model={MODEL} --dataset={DATASET}"'
QUIET = lambda _: None  # noqa: E731


def _overwrite_in_place(path: Path, offset: int, count: int = 64) -> None:
    """Other bytes at the same size, a later modification time: what an overwrite in place leaves."""
    with open(path, "r+b") as file:
        file.seek(offset)
        data = bytearray(file.read(count))
        file.seek(offset)
        file.write(bytes(b ^ 0x5A for b in data))


@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Paths:
    """The model fetched and the shared sample repacked, as `make download_model download_data preprocess_data`
    leave them; the sample's folders are copies (not links into ../shared), free to damage in a copy."""
    paths = seeded_paths(tmp_path_factory.mktemp("whisper_faults"), TINY_EN)
    source = shared_sample(paths)
    for part in datasets.SHARED_PARTS:
        shutil.copytree(source / part, paths.dataset_dir(DATASET) / part)
    ensure_model(BENCHMARK, MODEL, paths, QUIET)
    preprocessing.preprocess(MODEL, DATASET, paths, QUIET)
    return paths


@pytest.fixture
def scratch(prepared: Paths, tmp_path: Path) -> Paths:
    copy = tmp_path / "scratch"
    shutil.copytree(prepared.scratch, copy, symlinks=True)
    return Paths.create(scratch=copy, log_dir=tmp_path / "logs")


def _main(paths: Paths, action: str, *extra: str) -> int:
    return main([f"--action={action}", f"--scratch_path={paths.scratch}", f"--log_dir={paths.log_dir}", *RUN,
                 *extra], log=print)


def test_a_model_file_changed_in_place_stops_the_plan_and_download_model_fetches_it_again(
        scratch: Paths, capsys: pytest.CaptureFixture[str]) -> None:
    """model.bin overwritten at the same size once gave a plausible WER or a bare UnicodeDecodeError."""
    folder = scratch.model_dir("whisper") / MODEL
    _overwrite_in_place(folder / "model.bin", 40_000_000, 4096)
    assert _main(scratch, "run_harness") == EXIT_FAILURE
    err = capsys.readouterr().err
    assert f"{folder / 'model.bin'} does not match the sha256 recorded when it was made" in err
    assert f'make download_model RUN_ARGS="--benchmarks=whisper --model={MODEL}"' in err
    assert "internal error" not in err and not list(scratch.log_dir.rglob("metadata.json"))   # no test started

    assert _main(scratch, "download_model") == 0
    out = capsys.readouterr().out
    assert f"making {MODEL} again" in out and (folder / "model.bin.changed").is_file()
    assert model_folder(scratch, MODEL) == folder          # checked: as fetched


def test_a_tokenizer_changed_in_place_is_refused_too(scratch: Paths) -> None:
    folder = scratch.model_dir("whisper") / MODEL
    _overwrite_in_place(folder / "tokenizer.json", 1000)
    with pytest.raises(UserError) as caught:
        BENCHMARK.generation(MODEL, {}, scratch)
    assert caught.value.exit_code == EXIT_FAILURE and str(folder / "tokenizer.json") in str(caught.value)


def test_an_onnx_graph_changed_in_place_is_built_again(scratch: Paths) -> None:
    """A damaged decoder.onnx once gave WER 100 % with exit status 0."""
    from code.whisper.onnx_graphs import DECODER_FILE, STAMP_FILE, graphs_when_stale

    folder, out = scratch.model_dir("whisper") / MODEL, scratch.onnx_graph_dir("whisper", MODEL)
    graphs_when_stale(folder, out, QUIET)
    _overwrite_in_place(out / DECODER_FILE, 10_000_000, 4096)
    lines: list[str] = []
    graphs_when_stale(folder, out, lines.append)
    assert any(f"{out / DECODER_FILE} does not match the sha256" in line for line in lines), lines
    recorded = json.loads((out / STAMP_FILE).read_text())["files"][DECODER_FILE]
    from code.common.fileio import sha256_file
    assert recorded["sha256"] == sha256_file(out / DECODER_FILE)
    lines.clear()
    graphs_when_stale(folder, out, lines.append)
    assert lines == []                                      # current now: nothing built


def _refused(paths: Paths, *names: str) -> str:
    with pytest.raises(UserError) as caught:
        preprocessing.preprocessed(MODEL, DATASET, paths)
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_FAILURE and HINT_PREPROCESS in message
    for name in names:
        assert name in message, message
    return message


def _repacked_again(paths: Paths, why: str) -> None:
    lines: list[str] = []
    preprocessing.preprocess(MODEL, DATASET, paths, lines.append)
    assert any(line.startswith("whisper: repacking") and why in line for line in lines), lines
    assert not any("up to date" in line for line in lines)
    preprocessing.preprocessed(MODEL, DATASET, paths)        # opens: as repacked


def test_a_clip_or_a_transcript_changed_in_the_repacked_set_is_refused_then_repacked(scratch: Paths) -> None:
    """A clip damaged at the same size once scored WER 34 % instead of 3.30 %; an edited transcript was scored
    against."""
    folder = preprocessing.preprocessed_folder(DATASET, scratch)
    clip = preprocessing.preprocessed(MODEL, DATASET, scratch).path(0)
    _overwrite_in_place(clip, 200_000, 20_000)
    _refused(scratch, str(clip), "does not match the sha256")
    _repacked_again(scratch, str(clip))

    manifest = folder / preprocessing.REPACKED_MANIFEST
    text = manifest.read_text()
    word = json.loads(text)[0]["transcript"].split()[0]
    manifest.write_text(text.replace(word, word[::-1], 1))  # the same length: the same size
    _refused(scratch, str(manifest))
    _repacked_again(scratch, str(manifest))
    assert manifest.read_text() == text


def test_a_source_changed_at_the_same_size_or_cut_is_repacked(scratch: Paths) -> None:
    source = scratch.dataset_dir(DATASET) / "cards" / "003.wav"
    _overwrite_in_place(source, 20_000, 5_000)
    _refused(scratch, str(source), "repacked from it")
    _repacked_again(scratch, str(source))

    size = source.stat().st_size
    with open(source, "r+b") as file:
        file.truncate(size // 2)
    _refused(scratch, str(source), f"{size // 2} bytes, {size} were recorded")
    _repacked_again(scratch, str(source))


def test_a_transcript_that_is_not_utf8_is_named_and_download_data_does_not_say_ready(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A LibriSpeech transcript with a byte that is not UTF-8 once ended in a bare UnicodeDecodeError."""
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    tree = librispeech_tree(paths.dataset_dir("librispeech_dev"), {
        "dev-clean": {"84-121123": [(1.0, "go do you hear")]}, "dev-other": {"116-288045": [(1.0, "as i")]}})
    listing = next(tree.rglob("*.trans.txt"))
    listing.write_bytes(listing.read_bytes().replace(b"GO", b"G\xff"))
    for action in ("download_data", "preprocess_data"):
        code = main([f"--action={action}", f"--scratch_path={paths.scratch}", "--benchmarks=whisper",
                     f"--model={MODEL}", "--dataset=librispeech_dev"], log=print)
        out, err = capsys.readouterr()
        assert code == EXIT_FAILURE and f"{listing} is not UTF-8 text" in err, (out, err)
        assert "internal error" not in err and "ready" not in out


def test_a_changed_model_the_user_converted_is_refused_never_moved_aside(scratch: Paths) -> None:
    """whisper-large-v3 is converted by the user: download_model cannot fetch it again, so it says what to do
    (restore, or convert again and delete the record) and leaves the file where it is."""
    tiny, user = scratch.model_dir("whisper") / MODEL, scratch.model_dir("whisper") / "whisper-large-v3"
    user.mkdir()
    for name in ("model.bin", "config.json", "tokenizer.json", "vocabulary.txt"):
        shutil.copyfile(tiny / name, user / name)
    assert model_folder(scratch, "whisper-large-v3") == user       # recorded at its first use
    _overwrite_in_place(user / "model.bin", 30_000_000)
    with pytest.raises(UserError) as caught:
        ensure_model(BENCHMARK, "whisper-large-v3", scratch, QUIET)
    message = str(caught.value)
    assert caught.value.exit_code == EXIT_FAILURE and f"{user / 'model.bin'} does not match" in message
    assert "restore the file, or convert the model again" in message and "model.bin.sha256.json" in message
    assert (user / "model.bin").is_file() and not (user / "model.bin.changed").exists()


def test_a_model_damaged_before_it_was_ever_recorded_is_named_not_a_traceback(scratch: Paths) -> None:
    """A folder placed by hand already damaged gets past its digests (recorded at first use): CTranslate2's own
    error (once a bare RuntimeError or UnicodeDecodeError) becomes one sentence naming model.bin, exit status 1."""
    from code.whisper.ctranslate2_engine import CTranslate2Whisper
    from code.whisper.models import model_facts

    folder = scratch.model_dir("whisper") / MODEL
    (folder / "model.bin.sha256.json").unlink()
    with open(folder / "model.bin", "r+b") as file:
        file.seek(100)
        file.write(bytes(range(256)) * 2)
    with pytest.raises(UserError) as caught:
        CTranslate2Whisper(folder, model_facts(MODEL, folder))
    assert caught.value.exit_code == EXIT_FAILURE and f"{folder / 'model.bin'} cannot be loaded" in str(caught.value)
    (folder / "tokenizer.json").write_bytes(b"\xff{not json")
    with pytest.raises(UserError) as caught:
        model_facts(MODEL, folder)
    assert caught.value.exit_code == EXIT_FAILURE and f"{folder / 'tokenizer.json'} is not readable JSON" in \
        str(caught.value)
