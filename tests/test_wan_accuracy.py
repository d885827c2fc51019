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
from code.common.paths import Paths
from code.common.rules import get_round
from code.wan import accuracy, vbench
from code.wan import models as wan_models
from code.wan import reference as ref

PATTERN = get_round().benchmark("wan-2.2-t2v-a14b").accuracy_pattern
# VBench's results file as VBench.evaluate saves it (save_json, indent 4) for three videos: each dimension's
# [mean, [per-video entries]] with the keys its compute_<dimension> records (dynamic_degree's per-video result a
# boolean, scene's success counts, appearance_style's frame results); the figures are invented.
RECORDED = Path(__file__).parent / "fixtures" / "wan" / "vbench_eval_results.json"
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


def test_vbench_results_of_the_recorded_layout(tmp_path: Path) -> None:
    """The newest results_<time>_eval_results.json of VBench's output folder, as run_evaluation.py picks it, read
    into the checker's line: the mean of the six dimensions' means x 100."""
    output = tmp_path / "vbench_results"
    output.mkdir()
    (output / "results_2026-01-01-09:00:00_eval_results.json").write_text("{}")
    (output / "results_2026-01-02-09:00:00_eval_results.json").write_text(RECORDED.read_text())
    (output / "results_2026-01-02-09:00:00_full_info.json").write_text("[]")
    found = vbench.results_file(output)
    assert found is not None and found.name == "results_2026-01-02-09:00:00_eval_results.json"
    scores = accuracy.parse_vbench_results(found)
    recorded = json.loads(RECORDED.read_text())
    assert scores == {d: recorded[d][0] for d in accuracy.DIMENSIONS}
    value, text = accuracy.accuracy_text(scores, 3)
    assert value == pytest.approx(64.6311, abs=1e-4)
    assert accuracy_value(text, PATTERN) == pytest.approx(value, abs=1e-4)
    assert "'dynamic_degree': 66.6667" in text and "'scene': 8.3333" in text
    assert vbench.results_file(tmp_path) is None


def test_vbench_says_why_it_does_not_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No checkpoint folder, one lacking checkpoints, then all checkpoints but no VBench environment: each a
    reason, which accuracy.txt carries; the command is the reference's, the six dimensions from local files."""
    paths = Paths.create(scratch=tmp_path / "scratch", repo=tmp_path / "repo")
    monkeypatch.delenv(vbench.CACHE_VARIABLE, raising=False)
    assert "VBENCH_CACHE_DIR names no folder" in vbench.why_not_run(paths)
    cache = tmp_path / "cache"
    monkeypatch.setenv(vbench.CACHE_VARIABLE, str(cache))
    (cache / "clip_model").mkdir(parents=True)
    (cache / "clip_model" / "ViT-B-32.pt").write_bytes(b"x")
    why = vbench.why_not_run(paths)
    assert f"VBENCH_CACHE_DIR={cache} lacks dino_model/dino_vitbase16_pretrain.pth" in why and "ViT-B-32" not in why
    for path in vbench.missing_checkpoints(cache):
        (cache / path).parent.mkdir(parents=True, exist_ok=True)
        (cache / path).write_bytes(b"x")
    why = vbench.why_not_run(paths)
    assert "VBench's own environment" in why and ".venv-vbench" in why and "with VBENCH_CACHE_DIR set" in why
    value, text = accuracy.accuracy_text(None, 4, why)
    assert math.isnan(value) and text.startswith(f"no accuracy figure was computed: {why}")
    command = vbench.evaluate_command(paths, tmp_path / "videos", tmp_path / "out")
    assert set(vbench.CHECKPOINTS) == set(accuracy.DIMENSIONS)
    assert command[-7:] == ["--dimension", *vbench.CHECKPOINTS]
    assert "--load_ckpt_from_local=True" in command and "vbench.launch.evaluate" in command


def test_vbenchs_environment_is_made_only_where_a_score_is_asked_for(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """wan's make_environment (what make build and make run call) installs the diffusers environment always and
    VBench's (gigabytes) only where VBENCH_CACHE_DIR names its checkpoints, each through the locked bootstrap."""
    from code.wan.benchmark import BENCHMARK

    paths = Paths.create(scratch=tmp_path / "scratch", repo=tmp_path / "repo")
    (paths.diffusers_venv / "bin").mkdir(parents=True)
    (paths.diffusers_venv / "bin" / "python").write_text("")
    made: list[tuple[str, str]] = []

    def install(paths_: Paths, name: str, venv: Path, log) -> None:
        made.append((name, venv.name))

    monkeypatch.setattr(wan_models, "install_environment", install)
    monkeypatch.setattr(vbench, "install_environment", install)
    said: list[str] = []
    monkeypatch.delenv(vbench.CACHE_VARIABLE, raising=False)
    BENCHMARK.make_environment(paths, said.append)
    assert made == [("diffusers", ".venv-diffusers")] and not said
    monkeypatch.setenv(vbench.CACHE_VARIABLE, str(tmp_path / "cache"))
    made.clear()
    BENCHMARK.make_environment(paths, said.append)
    assert made == [("diffusers", ".venv-diffusers"), ("vbench", ".venv-vbench")]
    assert said and "VBENCH_CACHE_DIR is set" in said[0]


def test_a_vbench_failure_names_its_root_cause() -> None:
    """VBench's output where it ran in its environment on a machine without a GPU (recorded here): the message
    names NCCL's error, not torchrun's summary that ends the output."""
    recorded = (Path(__file__).parent / "fixtures" / "wan" / "vbench_no_gpu.log").read_text()
    assert recorded.rstrip().endswith("=" * 60)
    assert vbench.root_cause(recorded) == "ValueError: ProcessGroupNCCL is only supported with GPUs, no GPUs found!"
    assert vbench.root_cause("ok\n") is None
