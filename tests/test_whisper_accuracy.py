"""whisper's responses and scoring: the reference SUT's label encoding, the official alignment, and the official
accuracy_eval.py run on the toolkit's accuracy logs giving exactly the toolkit's line."""
from __future__ import annotations

import io
import json
import random
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pytest

from code.whisper import accuracy, datasets, preprocessing
from code.whisper.benchmark import BENCHMARK
from code.whisper.engines import mel_filters
from tests.official_tools import load_official_module
from tests.whisper_fixtures import seed_normalizer, seeded_paths, shared_sample, speech2text

RECORDED_LOG = Path(__file__).parent / "fixtures" / "whisper" / "tiny_en_librivox_sample_accuracy.json"


def test_a_response_is_the_lower_cased_text_as_label_indices() -> None:
    encoded = accuracy.encode_text("  Mr. Dashwood's 5% share + -€, Ünder!  ")
    assert encoded.dtype == np.int64
    assert accuracy.decode_labels(encoded) == "mr dashwood's 5% share + - nder"
    assert len(accuracy.LABELS) == 42 and accuracy.LABELS[0] == " " and accuracy.LABELS[27] == "'"
    assert accuracy.encode_text("").size == 0


def test_the_alignment_counts_as_the_official_helpers() -> None:
    folder = speech2text()
    sys.path.insert(0, str(folder))
    try:
        helpers = load_official_module(folder / "helpers.py", "official_speech2text_helpers")
    finally:
        sys.path.remove(str(folder))
    words = ["cold", "hearted", "coldhearted", "ill", "disposed", "a", "more", "amiable", "to", "day", "today", "he"]
    rng = random.Random(7)
    for _ in range(400):
        reference = [rng.choice(words) for _ in range(rng.randint(0, 12))]
        hypothesis = [rng.choice(words) for _ in range(rng.randint(0, 12))]
        assert accuracy.wer_with_concatenation(hypothesis, reference) == \
            helpers.compute_wer_with_concatenation(hypothesis, reference), (hypothesis, reference)


def _official_line(folder: Path, log_dir: Path, clips_dir: Path, normalizer_root: Path) -> str:
    done = subprocess.run([sys.executable, "-B", str(folder / "accuracy_eval.py"), "--log_dir", str(log_dir),
                           "--dataset_dir", str(clips_dir), "--manifest",
                           str(clips_dir / preprocessing.REPACKED_MANIFEST)],
                          capture_output=True, text=True, timeout=120, cwd=log_dir,
                          env={"PYTHONPATH": f"{folder}:{normalizer_root}", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def sample_paths(tmp_path_factory):
    paths = seeded_paths(tmp_path_factory.mktemp("whisper_accuracy"))
    shared_sample(paths)
    seed_normalizer(paths)
    datasets.download_data("librivox_sample", paths, lambda line: None)
    preprocessing.preprocess("whisper-tiny.en", "librivox_sample", paths, lambda line: None)
    return paths


def _log(entries: list[tuple[int, str]], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "mlperf_log_accuracy.json"
    log.write_text(json.dumps([{"seq_id": n, "qsl_idx": index, "data": accuracy.encode_text(text).tobytes().hex()}
                               for n, (index, text) in enumerate(entries)]))
    return log


@pytest.mark.parametrize("case", ["recorded", "edited"])
def test_the_official_script_gives_the_toolkits_line(case: str, sample_paths, tmp_path: Path) -> None:
    """On the accuracy log of a toolkit run of tiny.en (recorded), and on transcripts edited to take every branch of
    the alignment and the normalizer (joined and split words, numbers, contractions, a duplicate entry)."""
    folder = speech2text()
    clips = preprocessing.preprocessed("whisper-tiny.en", "librivox_sample", sample_paths)
    log_dir = tmp_path / "log"
    if case == "recorded":
        log_dir.mkdir()
        (log_dir / "mlperf_log_accuracy.json").write_bytes(RECORDED_LOG.read_bytes())
    else:
        first = clips.transcript(0).replace("cold hearted", "coldhearted").replace("ill disposed", "ill-disposed")
        _log([(0, "And Mr. " + first.removeprefix("and mister ")), (1, "10 of clubs."), (2, "Four, Queen of Clubs!"),
              (3, "seventh of clubs"), (4, "five"), (5, "8 of spades, 4 of clubs, 7 of hearts; it's done"),
              (1, "ten of clubs")], log_dir)
    ours = BENCHMARK.score("whisper-tiny.en", "librivox_sample", log_dir / "mlperf_log_accuracy.json", sample_paths)
    line = ours.text.splitlines()[0]
    assert line.startswith("Word Error Rate: ") and ", accuracy=" in line
    assert _official_line(folder, log_dir, clips.directory, accuracy.normalizer_root(sample_paths)) == line
    wer = float(line.removeprefix("Word Error Rate: ").split("%")[0])
    assert ours.value == pytest.approx(100 - wer) and ours.metric == "ACCURACY"


def test_the_scorer_refuses_a_log_of_another_data_set(sample_paths, tmp_path: Path) -> None:
    from code.common.errors import UserError

    log = _log([(6, "one too many")], tmp_path)
    with pytest.raises(UserError, match="names sample 6, and the data set has 6"):
        BENCHMARK.score("whisper-tiny.en", "librivox_sample", log, sample_paths)


def test_the_mel_filters_are_whispers_own(sample_paths) -> None:
    """engines.mel_filters against the filters openai-whisper ships (whisper/assets/mel_filters.npz)."""
    archive = next(sample_paths.download_cache.glob("openai_whisper-*.tar.gz"))
    with tarfile.open(archive) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("whisper/assets/mel_filters.npz"))
        shipped = np.load(io.BytesIO(tar.extractfile(member).read()))
    for n_mels in (80, 128):
        np.testing.assert_allclose(mel_filters(n_mels), shipped[f"mel_{n_mels}"], rtol=1e-5, atol=1e-7)
