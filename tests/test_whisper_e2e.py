"""whisper through LoadGen: the engine harness (the benchmark's own in-process engines) completes every sample of an
Offline accuracy test once, each response the reference's encoding of its transcript with its token count, and the
run's accuracy is the scorer's on that log; both engines (CTranslate2 and the ONNX Runtime graphs built from the
same weights) give the same log."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from code.common.records.metadata import find_metadata, read_metadata
from code.main import main
from code.whisper import datasets, preprocessing
from code.whisper.accuracy import decode_labels
from tests.whisper_fixtures import TINY_EN, seed_normalizer, seeded_paths, shared_sample

RUN = ("--benchmarks=whisper", "--model=whisper-tiny.en", "--dataset=librivox_sample", "--scenarios=Offline",
       "--test_mode=AccuracyOnly")


@pytest.fixture(scope="module")
def whisper_paths(tmp_path_factory):
    paths = seeded_paths(tmp_path_factory.mktemp("whisper_e2e"), TINY_EN)
    shared_sample(paths)
    seed_normalizer(paths)
    datasets.download_data("librivox_sample", paths, lambda line: None)
    preprocessing.preprocess("whisper-tiny.en", "librivox_sample", paths, lambda line: None)
    return paths


def _accuracy_run(paths, log_dir: Path, engine: str):
    lines: list[str] = []
    code = main(["--action=run_harness", f"--scratch_path={paths.scratch}", f"--log_dir={log_dir}", *RUN,
                 f"--inprocess_engine={engine}"], log=lines.append)
    assert code == 0, "\n".join(lines)
    (record,) = [read_metadata(m) for m in find_metadata(log_dir)]
    return record, "\n".join(lines)


def test_every_clip_is_transcribed_once_through_loadgen_by_either_engine(whisper_paths, tmp_path: Path) -> None:
    samples = preprocessing.preprocessed("whisper-tiny.en", "librivox_sample", whisper_paths)
    logs = []
    for engine in ("ctranslate2", "onnxruntime"):
        record, out = _accuracy_run(whisper_paths, tmp_path / engine, engine)
        entries = json.loads((Path(record.log_dir) / "mlperf_log_accuracy.json").read_text())
        assert sorted(e["qsl_idx"] for e in entries) == list(range(len(samples)))
        texts = [decode_labels(np.frombuffer(bytes.fromhex(e["data"]), dtype=np.int64)) for e in entries]
        assert all(text.strip() for text in texts)            # every clip is speech: no empty transcript
        assert "Word Error Rate: " in out and ", accuracy=" in out
        assert record.accuracy.metric == "ACCURACY" and record.accuracy.value > 90.0   # tiny.en: 96.70 here
        logs.append(sorted((e["qsl_idx"], e["data"]) for e in entries))
    assert logs[0] == logs[1]


def test_max_output_tokens_caps_the_answers(whisper_paths, tmp_path: Path) -> None:
    """--max_output_tokens reaches the engines through the requests' settings: no answer is longer than the cap, and
    the clip of 26.7 s (about 100 tokens uncapped) is cut at it; the record says the cap the run had."""
    lines: list[str] = []
    code = main(["--action=run_harness", f"--scratch_path={whisper_paths.scratch}", f"--log_dir={tmp_path}", *RUN,
                 "--max_output_tokens=50"], log=lines.append)
    assert code == 0, "\n".join(lines)
    (record,) = [read_metadata(m) for m in find_metadata(tmp_path)]
    entries = json.loads((Path(record.log_dir) / "mlperf_log_accuracy.json").read_text())
    counts = [e["token_count"] for e in entries]
    assert max(counts) == 50 and min(counts) < 50, counts
    assert record.config.fields["max_output_tokens"] == 50
