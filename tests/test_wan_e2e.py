"""wan-2.2-t2v-a14b through LoadGen on diffusers' WanPipeline: a substitute of the real architecture written for 32x32
videos of 5 frames, 3 prompts through an Offline accuracy run and 2 through a SingleStream one, each response an mp4
that decodes to the configured frames and size; the same prompt gives the same bytes in both runs; the accuracy
run writes the videos and says that no VBench figure was computed. Bad input: a prompt file that is not the 248, a
model folder of another architecture, a latent of the wrong shape."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from code.common.errors import UserError
from code.common.paths import Paths
from code.common.records.metadata import find_metadata, read_metadata
from code.main import main
from code.wan import datasets, models
from code.wan import reference as ref

from .wan_fixtures import wan_substitute_paths

HEIGHT, WIDTH, FRAMES = 32, 32, 5
RUN = ("--benchmarks=wan-2.2", f"--model={models.SUBSTITUTE}", "--dataset=vbench_prompts",
       "--test_mode=AccuracyOnly")


@pytest.fixture(scope="module")
def wan_paths(tmp_path_factory) -> Paths:
    return wan_substitute_paths(tmp_path_factory.mktemp("wan_e2e"), HEIGHT, WIDTH, FRAMES)


def _decode(paths: Paths, video: Path) -> list[int]:
    """[frames, height, width, channels] of an mp4, decoded by imageio's ffmpeg in the diffusers environment."""
    code = ("import sys, json, imageio, numpy; r = imageio.get_reader(sys.argv[1], 'ffmpeg'); "
            "a = numpy.stack([f for f in r]); print(json.dumps(list(a.shape)))")
    done = subprocess.run([str(models.python(paths)), "-c", code, str(video)], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout)


def _run(paths: Paths, log_dir: Path, *extra: str):
    lines: list[str] = []
    code = main(["--action=run_harness", f"--scratch_path={paths.scratch}", f"--log_dir={log_dir}", *RUN, *extra],
                log=lines.append)
    assert code == 0, "\n".join(lines)
    (record,) = [read_metadata(m) for m in find_metadata(log_dir)]
    entries = json.loads((Path(record.log_dir) / "mlperf_log_accuracy.json").read_text())
    return record, {e["qsl_idx"]: bytes.fromhex(e["data"]) for e in entries}, "\n".join(lines)


def test_videos_through_loadgen_decode_to_the_size_and_repeat_byte_for_byte(wan_paths, tmp_path: Path) -> None:
    record, videos, out = _run(wan_paths, tmp_path / "offline", "--scenarios=Offline", "--total_sample_count=3")
    assert sorted(videos) == [0, 1, 2]
    folder = Path(record.log_dir)
    for index, data in videos.items():
        assert data[4:8] == b"ftyp"
        written = folder / "vbench_videos" / f"{datasets.prompt_set(datasets.DATASET, wan_paths).text(index)}-0.mp4"
        assert written.read_bytes() == data
    assert _decode(wan_paths, written) == [FRAMES, HEIGHT, WIDTH, 3]
    assert len(set(videos.values())) == 3                      # three prompts, three videos
    assert "no accuracy figure was computed" in out and "VBench" in out
    assert "no accuracy figure was computed" in (folder / "accuracy.txt").read_text()
    # A second run, SingleStream, of the first two prompts: the same bytes for the same prompt.
    _, again, _ = _run(wan_paths, tmp_path / "single", "--scenarios=SingleStream", "--total_sample_count=2")
    assert sorted(again) == [0, 1] and all(again[i] == videos[i] for i in again)


def test_generate_engines_takes_the_pipeline_folder_as_its_engine(wan_paths) -> None:
    """make generate_engines (a step of make run) on a diffusers folder: the folder is the engine, checked by the
    benchmark (its architecture and latent), not taken for a missing model file."""
    lines: list[str] = []
    assert main(["--action=generate_engines", f"--scratch_path={wan_paths.scratch}", *RUN[:3],
                 "--scenarios=Offline"], log=lines.append) == 0, "\n".join(lines)
    assert "no engine file: the engines load" in "\n".join(lines)


def test_a_model_folder_changed_since_it_was_made_or_first_used_is_known(wan_paths, tmp_path: Path) -> None:
    """Every file of the pipeline folder is known by its content: the substitute changed in place at the same size
    is written again; the closed model's folder changed since its first use stops the run, naming the file."""
    import shutil

    from code.common.integrity import record_path

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    folder = models.model_folder(paths, models.SUBSTITUTE)
    shutil.copytree(models.model_folder(wan_paths, models.SUBSTITUTE), folder)
    lines: list[str] = []
    assert models.download_model(models.SUBSTITUTE, paths, lines.append) == folder
    assert record_path(folder).is_file()                          # recorded at first use, nothing written again
    assert not any("writing" in line for line in lines)
    config = folder / "transformer_2" / "config.json"
    config.write_text(config.read_text().replace(" ", "\t"))      # the same size, other bytes
    lines.clear()
    models.download_model(models.SUBSTITUTE, paths, lines.append)
    said = "\n".join(lines)
    assert f"{config} does not match the sha256 recorded" in said and f"writing the {models.SUBSTITUTE} again" in said
    assert "\t" not in config.read_text()

    # The user's own folder: recorded at first use, then a changed file stops it (exit 1), nothing rewritten.
    user = tmp_path / "user" / "wan-2.2-t2v-a14b"
    shutil.copytree(folder, user)
    lines.clear()
    models.verify_folder(user, models.CLOSED, lines.append)
    assert "recording the sha256" in lines[0] and record_path(user).is_file()
    models.verify_folder(user, models.CLOSED, lines.append)      # unchanged: taken as it is
    latent = user / ref.FIXED_LATENT
    data = bytearray(latent.read_bytes())
    data[len(data) // 2] ^= 0xFF                                  # one byte flipped, the same size
    latent.write_bytes(bytes(data))
    with pytest.raises(UserError) as refused:
        models.verify_folder(user, models.CLOSED, lines.append)
    assert refused.value.exit_code == 1 and str(latent) in str(refused.value)
    assert f"delete {record_path(user)}" in str(refused.value)


def test_a_prompt_file_that_is_not_the_248_is_refused(tmp_path: Path) -> None:
    short = tmp_path / "vbench_prompts.txt"
    short.write_text("a cat\na dog\n")
    with pytest.raises(UserError, match="holds 2 prompts.*248"):
        datasets.check_prompts(short)
    official = datasets.official_file(Paths.create(scratch=tmp_path / "s"), ref.PROMPTS_FILE)
    if official.is_file():
        edited = official.read_text().replace("pixel art", "pixel arts", 1)
        short.write_text(edited)
        with pytest.raises(UserError, match="not the reference's word for word"):
            datasets.check_prompts(short)


def test_a_folder_of_another_architecture_or_latent_is_refused(tmp_path: Path) -> None:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    with pytest.raises(UserError, match="holds no diffusers pipeline.*does not download"):
        models.check_folder(paths, models.CLOSED)
    folder = models.model_folder(paths, models.CLOSED)
    folder.mkdir(parents=True)
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "WanPipeline", "transformer": ["x", "y"]}))
    with pytest.raises(UserError, match="without the A14B layout"):
        models.check_folder(paths, models.CLOSED)
    (folder / "model_index.json").write_text(json.dumps({"_class_name": "WanPipeline", "transformer_2": ["x", "y"],
                                                         "boundary_ratio": 0.875}))
    for name in models.COMPONENTS[1:]:
        (folder / name).mkdir()
    with pytest.raises(UserError, match="fixed latent .* is missing"):
        models.check_folder(paths, models.CLOSED)
    (folder / ref.FIXED_LATENT).write_bytes(b"not the latent")
    with pytest.raises(UserError, match="is not the reference's fixed latent"):
        models.check_folder(paths, models.CLOSED)


def test_an_engine_that_dies_mid_run_fails_the_run_with_its_log(tmp_path: Path) -> None:
    """A pipeline process that ends after loading (killed, out of memory) fails the run: the stream hears why, with
    the end of the process's log, and no answer is reported."""
    import sys
    import threading

    from code.common.generation import GenerationSettings, Request
    from code.common.prompts import Chat, Text
    from code.wan.request_engine import EngineFailed, WanRequestEngine

    dies = ("import json, sys; print(json.dumps({'ready': True, 'num_frames': 5, 'height': 32, 'width': 32}), "
            "flush=True); sys.stdin.readline(); print('out of memory', file=sys.stderr); sys.exit(9)")

    class Stream:
        def __init__(self) -> None:
            self.errors: list[BaseException] = []
            self.answers: list[int] = []
            self.done = threading.Event()

        def answer(self, request_id, content) -> None:
            self.answers.append(request_id)

        def chunk(self, request_id, tokens, final) -> None:
            self.done.set()

        def failed(self, error) -> None:
            self.errors.append(error)
            self.done.set()

    engine = WanRequestEngine([sys.executable, "-c", dies], {"repo": str(tmp_path)}, tmp_path / "engine.log")
    stream = Stream()
    engine.open(stream)
    try:
        engine.submit([Request(7, Chat.user(Text("a cat")), GenerationSettings(max_new_tokens=1,
                                                                                eos_token_ids=(1,)))])
        assert stream.done.wait(60)
    finally:
        engine.close()
    assert stream.answers == [] and len(stream.errors) == 1
    error = stream.errors[0]
    assert isinstance(error, EngineFailed) and "exit status 9" in str(error) and "out of memory" in str(error)


@pytest.mark.parametrize("fault", ["latent_of_another_shape", "no_ffmpeg"])
def test_a_latent_of_another_shape_or_no_ffmpeg_stops_the_pipeline_with_why(wan_paths, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch,
                                                                             fault: str) -> None:
    """The real pipeline process refuses, before its first video, a fixed latent the pipeline cannot start from and
    an ffmpeg that does not run; the engine fails with the reason, and the run with it."""
    from code.wan.benchmark import BENCHMARK
    from code.wan.request_engine import EngineFailed, WanRequestEngine

    settings = BENCHMARK.engine_settings(models.SUBSTITUTE, wan_paths, 1)
    if fault == "no_ffmpeg":
        monkeypatch.setenv("IMAGEIO_FFMPEG_EXE", str(tmp_path / "no" / "ffmpeg"))
        expected = "ffmpeg, which writes each video's mp4 file, cannot run"
    else:
        bad = tmp_path / "latent.pt"
        subprocess.run([str(models.python(wan_paths)), "-c", "import sys, torch; torch.save(torch.zeros(1, 4, 2, 4, 4, "
                        "dtype=torch.bfloat16), sys.argv[1])", str(bad)], check=True, capture_output=True)
        settings["fixed_latent"] = str(bad)
        expected = "is [1, 4, 2, 4, 4], not [1, 16, t, h, w]"
    engine = WanRequestEngine(models.worker_command(wan_paths), settings, tmp_path / "engine.log")
    try:
        with pytest.raises(EngineFailed, match=re.escape(expected)):
            engine.open(_NoStream())
        assert engine.pipeline._child is None and engine.pipeline._folder is None   # nothing left of it
    finally:
        engine.close()


class _NoStream:
    def answer(self, request_id, content) -> None:
        raise AssertionError("no answer expected")

    chunk = answer

    def failed(self, error) -> None:
        raise AssertionError(f"failed before a request: {error}")
