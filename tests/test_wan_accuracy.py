"""wan-2.2-t2v-a14b's accuracy files: the videos of an accuracy log written under VBench's names and the checker's
audit names with captions; VBench's results JSON read into accuracy.txt's `'vbench_score'` line that the round's
pattern reads; without VBench, a plain no-figure line that the pattern does not take for a figure."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from code.common.audit.verify import accuracy_value
from code.common.errors import UserError
from code.common.rules import get_round
from code.wan import accuracy
from code.wan import reference as ref

PATTERN = get_round().benchmark("wan-2.2-t2v-a14b").accuracy_pattern
# VBench's <name>_eval_results.json layout: per dimension [mean, [per-video entries]] (figures made up for the test).
VBENCH_RESULTS = {
    "subject_consistency": [0.9512, [{"video_path": "a-0.mp4", "video_results": 0.95}]],
    "background_consistency": [0.9633, []],
    "motion_smoothness": [0.9841, []],
    "dynamic_degree": [0.4722, []],
    "appearance_style": [0.2201, []],
    "scene": [0.3340, []],
}


def _mp4(tag: int) -> bytes:
    return b"\x00\x00\x00\x18ftypisom" + bytes([tag]) * 20


def test_vbench_results_become_the_checker_line(tmp_path: Path) -> None:
    path = tmp_path / "results_x_eval_results.json"
    path.write_text(json.dumps(VBENCH_RESULTS))
    scores = accuracy.parse_vbench_results(path)
    value, text = accuracy.accuracy_text(scores, 248)
    expected = sum(v[0] for v in VBENCH_RESULTS.values()) / 6 * 100
    assert value == pytest.approx(expected)
    assert accuracy_value(text, PATTERN) == pytest.approx(expected, abs=1e-4)
    assert "'dynamic_degree': 47.2200" in text
    broken = dict(VBENCH_RESULTS)
    broken.pop("scene")
    path.write_text(json.dumps(broken))
    with pytest.raises(UserError, match="no score for scene"):
        accuracy.parse_vbench_results(path)


def test_without_vbench_accuracy_txt_says_so_and_holds_no_figure() -> None:
    value, text = accuracy.accuracy_text(None, 4)
    assert math.isnan(value)
    assert text.startswith("no accuracy figure was computed") and "VBench" in text
    assert accuracy_value(text, PATTERN) is None


def test_artefacts_of_an_accuracy_log(tmp_path: Path) -> None:
    prompts = [f"prompt number {i}" for i in range(ref.PROMPT_COUNT)]
    log = tmp_path / "mlperf_log_accuracy.json"
    indices = [0, 130, 12, 130]                       # 130 logged twice: the first one counts
    log.write_text(json.dumps([{"seq_id": n, "qsl_idx": i, "data": _mp4(n).hex().upper()}
                               for n, i in enumerate(indices)]))
    videos = accuracy.videos_of(log, len(prompts))
    assert sorted(videos) == [0, 12, 130] and videos[130] == _mp4(1)
    accuracy.write_artefacts(tmp_path, videos, prompts)
    assert (tmp_path / "vbench_videos" / "prompt number 130-0.mp4").read_bytes() == _mp4(1)
    assert sorted(p.name for p in (tmp_path / "videos").iterdir()) == ["12.mp4", "130.mp4", "captions.txt"]
    assert (tmp_path / "videos" / "captions.txt").read_text() == "130: prompt number 130\n12: prompt number 12\n"
    log.write_text(json.dumps([{"seq_id": 0, "qsl_idx": 3, "data": "00010203"}]))
    with pytest.raises(UserError, match="not an mp4"):
        accuracy.videos_of(log, len(prompts))
