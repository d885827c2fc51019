"""whisper's data: LibriSpeech read and repacked as the official repackage_librispeech.py repacks it (byte for byte),
the shared sample repacked by the same code, and every bad input stopped with the file named, nothing half-written."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from code.common.errors import EXIT_FAILURE, UserError
from code.common.integrity import digests_of
from code.common.paths import Paths
from code.whisper import datasets, preprocessing
from code.whisper.datasets import librispeech_utterances
from code.whisper.preprocessing import REPACKED, REPACKED_MANIFEST, open_set, repack
from tests.whisper_fixtures import RATE, librispeech_tree, shared_sample, speech2text, speech_like

# Chapters that take every branch of the repacking: two clips of one chapter (the third utterance would pass 30 s),
# an utterance over 30 s dropped, a chapter of one utterance, and dev-other after dev-clean.
CHAPTERS = {
    "dev-clean": {"1272-128104": [(12.0, "mister quilter is the apostle"), (12.25, "nor is mister quilter's manner"),
                                  (8.0, "he has grave doubts")],
                  "1462-170138": [(30.5, "too long to keep"), (4.0, "kept alone")]},
    "dev-other": {"116-288045": [(3.0, "as i approached the city"), (2.5, "i heard bells ringing")]},
}

# The official script imports librosa only for librosa.load(path, sr=16000), which on a 16 kHz mono file returns the
# file's samples as float32 read through soundfile, unresampled. librosa (numba, scipy) is not in the environment:
# this module does exactly that and refuses anything else, so the script runs as it would.
LIBROSA_LOAD = '''import soundfile


def load(path, sr):
    data, rate = soundfile.read(path, dtype="float32")
    if rate != sr or data.ndim != 1:
        raise ValueError("only 16 kHz mono files load without resampling")
    return data, rate
'''


def _official_inputs(tree: Path, data_dir: Path) -> Path:
    """What the reference's convert_librispeech.py makes of the tree: 16-bit WAVs and dev-all.json (lower-cased
    transcripts, fname relative to the data folder)."""
    import soundfile

    entries = []
    for item in librispeech_utterances(tree):
        relative = item.path.relative_to(tree).with_suffix(".wav")
        (data_dir / relative).parent.mkdir(parents=True, exist_ok=True)
        samples, rate = soundfile.read(str(item.path), dtype="int16")
        soundfile.write(str(data_dir / relative), samples, rate, subtype="PCM_16")
        entries.append({"transcript": item.transcript, "files": [{"fname": relative.as_posix(), "speed": 1}],
                        "original_duration": len(samples) / rate})
    manifest = data_dir / "dev-all.json"
    manifest.write_text(json.dumps(entries, indent=2))
    return manifest


def test_repacking_equals_the_official_script(tmp_path: Path) -> None:
    script = speech2text() / "utils" / "repackage_librispeech.py"
    tree = librispeech_tree(tmp_path / "source", CHAPTERS)
    ours = tmp_path / "ours"
    plan = repack(librispeech_utterances(tree), ours, {"dataset": "test"}, "redo")
    assert [clip.name for clip in plan] == ["1272-128104_0.wav", "1272-128104_1.wav", "1462-170138_0.wav",
                                            "116-288045_0.wav"]

    official = tmp_path / "official"
    official.mkdir()
    manifest = _official_inputs(tree, official)
    (tmp_path / "stand_in").mkdir()
    (tmp_path / "stand_in" / "librosa.py").write_text(LIBROSA_LOAD)
    done = subprocess.run([sys.executable, "-B", str(script), "--manifest", str(manifest), "--data_dir", ".",
                           "--output_dir", REPACKED, "--output_json", REPACKED_MANIFEST],
                          cwd=official, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(tmp_path / "stand_in"), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert (ours / REPACKED_MANIFEST).read_bytes() == (official / REPACKED_MANIFEST).read_bytes()
    names = sorted(p.name for p in (official / REPACKED).iterdir())
    assert names == sorted(p.name for p in (ours / REPACKED).iterdir())
    for name in names:
        assert (ours / REPACKED / name).read_bytes() == (official / REPACKED / name).read_bytes(), name
    entries = json.loads((ours / REPACKED_MANIFEST).read_text())
    assert entries[0]["transcript"] == "mister quilter is the apostle nor is mister quilter's manner"
    assert entries[0]["original_num_samples"] == int((12.0 + 0.5 + 12.25) * RATE)


def test_the_shared_sample_repacks_one_chapter_into_one_clip(tmp_path: Path) -> None:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    shared_sample(paths)
    datasets.download_data("librivox_sample", paths, lambda line: None)
    clips = preprocessing.preprocess("whisper-tiny.en", "librivox_sample", paths, lambda line: None)
    assert len(clips) == datasets.SHARED_COUNT
    assert clips.path(0).name == "sense_and_sensibility_01_austen_64kb_0.wav"
    assert clips.transcript(0).startswith("and mister john dashwood had then leisure")
    assert clips.transcript(0).endswith("he might even have been made amiable himself")
    first = clips.samples(0)
    assert 26.0 < len(first) / RATE < 27.0        # 24.7 s of speech and four 0.5 s pauses
    assert clips.transcript(5) == "eight of spades four of clubs seven of hearts"
    chat = clips.load(0)
    audio = next(iter(chat.contents()))
    assert audio.media_type == "audio/wav" and audio.data == clips.path(0).read_bytes()


# -- bad input ------------------------------------------------------------------------------------------------
def _repacked(tmp_path: Path) -> tuple[Path, list]:
    tree = librispeech_tree(tmp_path / "source", {"dev-clean": {"84-121123": [(2.0, "go do you hear"),
                                                                             (1.5, "but in less than")]},
                                                  "dev-other": {"116-288045": [(1.0, "as i approached")]}})
    return tree, librispeech_utterances(tree)


def _refused(call, *names: str) -> UserError:
    with pytest.raises(UserError) as caught:
        call()
    assert caught.value.exit_code == EXIT_FAILURE      # a missing or damaged file, not a value typed
    for name in names:
        assert name in str(caught.value)
    return caught.value


def _recorded_as_is(out: Path) -> None:
    record = json.loads((out / "manifest.json").read_text())
    record["files"] = digests_of({p.name: p for p in (out / REPACKED).iterdir()})
    (out / "manifest.json").write_text(json.dumps(record))


def test_a_missing_flac_is_named_and_nothing_is_written(tmp_path: Path) -> None:
    tree, items = _repacked(tmp_path)
    items[1].path.unlink()
    out = tmp_path / "out"
    error = _refused(lambda: repack(items, out, {}, "download it again"), str(items[1].path), "missing")
    assert "download it again" in str(error)
    assert not out.exists() and not list(tmp_path.glob(".out*"))


def test_a_damaged_flac_is_named_and_the_previous_set_stays(tmp_path: Path) -> None:
    tree, items = _repacked(tmp_path)
    out = tmp_path / "out"
    repack(items, out, {"n": 1}, "redo")
    before = {p.name: p.read_bytes() for p in (out / REPACKED).iterdir()}
    items[0].path.write_bytes(b"fLaC" + bytes(100))            # a header and nothing behind it
    _refused(lambda: repack(items, out, {"n": 2}, "redo"), str(items[0].path), "not a readable WAV or FLAC")
    assert {p.name: p.read_bytes() for p in (out / REPACKED).iterdir()} == before
    assert json.loads((out / "manifest.json").read_text())["n"] == 1


def test_a_flac_not_at_16_khz_is_named(tmp_path: Path) -> None:
    import soundfile

    tree, items = _repacked(tmp_path)
    soundfile.write(str(items[0].path), speech_like(1.0, 3)[:8000], 8000, subtype="PCM_16")
    _refused(lambda: repack(items, tmp_path / "out", {}, "redo"), str(items[0].path), "8000 Hz", "16000 Hz")
    assert not (tmp_path / "out").exists()


def test_a_manifest_naming_a_missing_clip_is_refused(tmp_path: Path) -> None:
    tree, items = _repacked(tmp_path)
    out = tmp_path / "out"
    repack(items, out, {}, "redo")
    clip = out / json.loads((out / REPACKED_MANIFEST).read_text())[0]["files"][0]["fname"]
    clip.unlink()
    _refused(lambda: open_set(out, "whisper-tiny.en", "librivox_sample"), str(clip), "missing",
             "make preprocess_data")


def test_a_clip_over_30_s_is_named_before_it_reaches_an_engine(tmp_path: Path) -> None:
    import soundfile

    tree, items = _repacked(tmp_path)
    out = tmp_path / "out"
    repack(items, out, {}, "redo")
    entries = json.loads((out / REPACKED_MANIFEST).read_text())
    clip = out / entries[0]["files"][0]["fname"]
    soundfile.write(str(clip), speech_like(31.0, 5), RATE, subtype="PCM_16")
    _recorded_as_is(out)       # a wrong clip the toolkit wrote itself: the check of its content is the last guard
    clips = open_set(out, "whisper-tiny.en", "librivox_sample")
    _refused(lambda: clips.samples(0), str(clip), "31.00 s", "30 s")


def test_a_wav_of_the_wrong_rate_in_the_set_is_named(tmp_path: Path) -> None:
    import soundfile

    tree, items = _repacked(tmp_path)
    out = tmp_path / "out"
    repack(items, out, {}, "redo")
    clip = out / json.loads((out / REPACKED_MANIFEST).read_text())[0]["files"][0]["fname"]
    soundfile.write(str(clip), np.zeros(22050, np.float32), 22050, subtype="PCM_16")
    _recorded_as_is(out)
    clips = open_set(out, "whisper-tiny.en", "librivox_sample")
    _refused(lambda: clips.samples(0), str(clip), "22050 Hz")


def test_librispeech_absent_says_where_to_get_it(tmp_path: Path) -> None:
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    with pytest.raises(UserError) as caught:
        datasets.download_data("librispeech_dev", paths, lambda line: None)
    message = str(caught.value)
    assert "dev-clean.tar.gz" in message and "dev-other.tar.gz" in message and "1,633" in message
    assert str(paths.dataset_dir("librispeech_dev") / "LibriSpeech") in message
