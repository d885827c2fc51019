"""wan-2.2-t2v-a14b on the MLCommons endpoints client (`--harness_type=endpoints`), as the round's reference examples
run it (examples/09_Wan22_VideoGen_Example of mlcommons/endpoints: offline_wan22_submission.yaml,
single_stream_wan22_submission.yaml, offline_wan22_accuracy.yaml):

- `api_type: videogen`: one `POST /v1/videos/generations` a prompt (the client's VideoGenAdapter), not streamed,
  `max_new_tokens: 1` (the adapter ignores it);
- the prompts as a JSONL the client reads (`wan22_prompts.jsonl` in the run folder): each row the prompt and the
  request fields of the toolkit's videogen payload (`serving_request`: the negative prompt, the size and frames of
  the model's fixed latent, the reference's steps, guidance, seed), `response_format: video_path` (the server writes
  the mp4 where the client reads it, as the examples run trtllm-serve);
- Offline: `type: offline`, `max_throughput`; SingleStream: `type: online`, concurrency 1;
- an accuracy test: the reference's accuracy block (`eval_method: vbench`, `ground_truth: prompt`), beside the
  performance block the client's set-up requires. The client stages the videos as VBench names them
  (`<report>/vbench_videos/<prompt>-0.mp4`) and calls its VBench runner as `<uv> run --project <folder> python
  <folder>/vbench_runner.py --videos-dir ... --out-dir ... --name ... --dims ...`; the block's `extras` point that
  call (`vbench_project_path`, `uv_executable`, the scorer's own arguments) at the toolkit's VBench (vbench.py: the
  reference's command in `.venv-vbench`, checkpoints from VBENCH_CACHE_DIR), never at a network install. Where VBench
  cannot run the runner says why and the client's run fails with it.

After an accuracy run `write_videos` copies the round's audit videos and their captions from the client's staged
videos into `videos/` of the run folder, which an endpoints tree's accuracy/ carries (the checker's extra files).
"""
from __future__ import annotations

import json
import re
import stat
import sys
from pathlib import Path
from typing import Any, Mapping

from ..common.errors import EXIT_BAD_INPUT, EXIT_FAILURE, UserError
from ..common.fileio import write_atomically
from ..common.paths import Paths
from . import reference as ref
from .accuracy import CAPTIONS, VIDEOS

PROMPTS_JSONL = "wan22_prompts.jsonl"
PERFORMANCE_BLOCK, ACCURACY_BLOCK = "wan22_perf", "wan22_vbench"
VBENCH_PROJECT = "vbench_project"             # in the run folder: the runner the client's scorer calls
RUNNER, LAUNCHER = "vbench_runner.py", "uv"
CLIENT_VIDEOS = "vbench_videos"               # the client's VBenchScorer stages the videos here, in its report
# The test run's prompts: one video for Offline, two queries for SingleStream (its percentile needs more than one).
TEST_RUN_PERFORMANCE = {"Offline": 1, "SingleStream": 2}
# The v6.1 checker's fewest queries of a wan SingleStream run (constants.py: 50); Offline asks every prompt once
# (mlperf.conf's Offline min_query_count 248, the reference's offline_wan22.yaml).
SINGLE_STREAM_QUERIES = 50
# The reference's audit blocks (offline_wan22_submission.yaml, single_stream_wan22_submission.yaml): the client's
# output-caching audit (MLPerf TEST04) after the performance phase, a reference phase of distinct prompts then an
# audit phase repeating prompt `sample_index` (audit.config's performance_issue_same_index), each of its own count.
AUDIT_TEST = "output_caching_test"
AUDIT_SAMPLE_INDEX = 3
REFERENCE_AUDIT = {"Offline": {"samples": 144, "audit_samples": 144, "threshold": 0.10},
                   "SingleStream": {"samples": 20, "audit_samples": 20, "threshold": 0.20}}
TEST_RUN_AUDIT_SAMPLES = 4   # a test run's phases: four videos each (one alone times its own start-up noise)
# The client's VBenchScorer: `_sanitize_prompt_for_filename` (control characters and slashes become "_").
_UNSAFE = re.compile(r"[\x00-\x1f/\\]")


def prompt_rows(prompts: list[str], request: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The JSONL rows: each prompt with the request fields every video is made with (the client's ColumnFilter
    takes VideoPathRequest's fields as optional columns); the server writes the video and returns its path."""
    fields = {key: value for key, value in request.items() if key != "response_format"}
    return [{"prompt": prompt, **fields, "response_format": "video_path"} for prompt in prompts]


def performance_count(scenario: str, prompts: int, test_run: bool) -> int:
    """How many videos a performance test asks: every prompt once offline, the checker's minimum for SingleStream
    (the prompts again from the first where it has fewer), a few for a test run."""
    if test_run:
        return min(prompts, TEST_RUN_PERFORMANCE.get(scenario, 1))
    return prompts if scenario == "Offline" else SINGLE_STREAM_QUERIES


def client_load(accuracy: bool, scenario: str, fields: Mapping[str, Any], test_run: bool):
    """What the client will ask for in one test, for the plan: every prompt's video for accuracy (VBench's scoring
    after them is not counted); else performance_count's videos and the TEST04 audit's two phases after them. The
    counts, not min_duration_ms, end the pass."""
    from ..common.endpoints_client.workload import ClientLoad

    prompts = max(1, min(int(fields.get("total_sample_count") or ref.PROMPT_COUNT), ref.PROMPT_COUNT))
    if accuracy:
        return ClientLoad(prompts, f"video{'s' if prompts != 1 else ''} of the VBench prompts, one each (VBench's "
                                   "scoring after them is not counted)", one_pass="the client asks each prompt once")
    videos = performance_count(scenario, prompts, test_run)
    what = f"{videos} of the performance phase ({scenario}: " \
           f"{'every prompt once' if scenario == 'Offline' else 'one at a time'})"
    total = videos
    if prompts > AUDIT_SAMPLE_INDEX:
        audit = audit_block(scenario, prompts, test_run)
        total += audit["samples"] + audit["audit_samples"]
        what += f", then the TEST04 audit's {audit['samples']} + {audit['audit_samples']}"
    return ClientLoad(total, f"video{'s' if total != 1 else ''}: {what}",
                      one_pass="the client's counts (n_samples_to_issue, the audit's) end the pass, not min_duration_ms")


def audit_block(scenario: str, prompts: int, test_run: bool) -> dict[str, Any]:
    """The YAML's audit block: the reference's counts and threshold, four videos a phase for a test run; UserError
    (exit 2) where the prompts stop before the one the audit phase repeats."""
    if prompts <= AUDIT_SAMPLE_INDEX:
        raise UserError(f"The client's TEST04 audit repeats prompt {AUDIT_SAMPLE_INDEX} and this run has {prompts} "
                        f"prompt(s); run it with --total_sample_count={AUDIT_SAMPLE_INDEX + 1} or more.",
                        exit_code=EXIT_BAD_INPUT)
    counts = dict(REFERENCE_AUDIT.get(scenario, REFERENCE_AUDIT["Offline"]))
    if test_run:
        counts |= {"samples": TEST_RUN_AUDIT_SAMPLES, "audit_samples": TEST_RUN_AUDIT_SAMPLES}
    return {"test": AUDIT_TEST, "samples": counts["samples"], "audit_samples": counts["audit_samples"],
            "sample_index": AUDIT_SAMPLE_INDEX, "threshold": counts["threshold"]}


def vbench_block(path: Path, samples: int, project: Path, launcher: Path) -> dict[str, Any]:
    """The reference's accuracy block (offline_wan22_accuracy.yaml), its scorer pointed at the toolkit's VBench."""
    return {"name": ACCURACY_BLOCK, "path": str(path), "type": "accuracy", "samples": samples,
            "accuracy_config": {"eval_method": "vbench", "ground_truth": "prompt", "num_repeats": 1,
                                "extras": {"vbench_project_path": str(project), "uv_executable": str(launcher)}}}


def write_vbench_project(folder: Path, paths: Paths) -> tuple[Path, Path]:
    """The folder the client's VBenchScorer is pointed at: its `vbench_runner.py` (which the scorer checks exists)
    and the launcher it calls in uv's place, which runs code/wan/client_vbench.py in the toolkit's interpreter."""
    folder.mkdir(parents=True, exist_ok=True)
    runner = write_atomically(folder / RUNNER, "# The MLCommons endpoints client's VBenchScorer calls this folder's "
                                               "launcher (./uv), which runs the toolkit's VBench: "
                                               "code/wan/client_vbench.py.\n")
    launcher = folder / LAUNCHER
    write_atomically(launcher, "#!/bin/sh\n# Called by the client's VBenchScorer as its uv: runs the toolkit's "
                               "VBench (code/wan/client_vbench.py) on the videos it staged.\n"
                               f"cd '{paths.repo}' && PYTHONPATH='{paths.repo}' exec '{sys.executable}' "
                               "-m code.wan.client_vbench \"$@\"\n")
    launcher.chmod(launcher.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return runner.parent, launcher


def workload(benchmark: Any, model: str, accuracy: bool, scenario: str, fields: Mapping[str, Any], paths: Paths,
             run_dir: Path, test_run: bool, rules: Any):
    """The client's workload of one wan test (see the module's docstring)."""
    from ..common.endpoints_client.workload import ClientWorkload
    from .datasets import prompt_set

    prompts = list(prompt_set(str(fields.get("dataset") or "vbench_prompts"), paths).prompts)
    total = int(fields.get("total_sample_count") or len(prompts))
    prompts = prompts[:max(1, min(total, len(prompts)))]
    run_dir = Path(run_dir)
    jsonl = run_dir / PROMPTS_JSONL
    rows = prompt_rows(prompts, benchmark.serving_request(model, paths))
    write_atomically(jsonl, "".join(json.dumps(row) + "\n" for row in rows))
    bench_rules = rules.benchmark(ref.NAME)
    issued = performance_count(scenario, len(prompts), test_run)
    datasets: list[dict[str, Any]] = [{"name": PERFORMANCE_BLOCK, "path": str(jsonl), "type": "performance",
                                       "samples": len(prompts)}]
    notes = [f"{len(prompts)} of the {ref.PROMPT_COUNT} VBench prompts ({jsonl.name}), the request fields of "
             f"{model}'s videos ({rows[0].get('size')}, {rows[0].get('num_frames')} frames)"]
    if model != ref.NAME and not model.startswith(ref.NAME):
        notes.append(f"the substitute {model} stands in for {ref.HF_ID}: not a {ref.NAME} result")
    targets: dict[str, float] = {}
    if accuracy:
        project, launcher = write_vbench_project(run_dir / VBENCH_PROJECT, paths)
        datasets.append(vbench_block(jsonl, len(prompts), project, launcher))
        # The client's score is the mean of the six dimensions as VBench gives them (0..1); the reference's
        # vbench_score is that x 100, held to 99 % of 70.48.
        targets = {"score": bench_rules.accuracy_threshold(bench_rules.accuracy_targets[0]) / 100}
        notes.append("the client's VBench scorer runs the toolkit's VBench (vbench_project/, code/wan/vbench.py); "
                     f"its score (0..1) is held to {targets['score']:.6f}, the round's vbench_score target / 100")
        from .vbench import why_not_run

        why = why_not_run(paths)
        if why is not None:
            notes.append(f"VBench cannot run here ({why}): the client makes the videos, then its scorer stops with "
                         f"that reason and the test fails")
    audit = None
    if not accuracy:
        audit = audit_block(scenario, len(prompts), test_run)
        notes.append(f"after the performance phase the client runs its TEST04 audit ({AUDIT_TEST}: "
                     f"{audit['samples']} distinct prompt(s), then prompt {AUDIT_SAMPLE_INDEX} "
                     f"{audit['audit_samples']} time(s), threshold {audit['threshold']:g}) into audit/ of its report")
    offline = scenario == "Offline"
    return ClientWorkload(
        datasets=tuple(datasets), model_params={"max_new_tokens": 1, "streaming": "off"},
        load_pattern={"type": "max_throughput"} if offline else {"type": "concurrency", "target_concurrency": 1},
        test_type="offline" if offline else "online", api_type="videogen",
        n_samples_to_issue=None if accuracy else issued, targets=targets,
        samples_required=ref.PROMPT_COUNT if accuracy else None, notes=tuple(notes), audit=audit)


def run_prompts(run_dir: Path) -> list[str]:
    """The prompts of the JSONL a test on the client read, in its order (the sample indices)."""
    path = Path(run_dir) / PROMPTS_JSONL
    try:
        return [json.loads(line)["prompt"] for line in path.read_text().splitlines() if line.strip()]
    except (OSError, ValueError, KeyError) as error:
        raise UserError(f"{path} cannot be read ({error}); run the test again.", exit_code=EXIT_FAILURE) from None


def staged_name(prompt: str) -> str:
    """The file the client's VBenchScorer stages a prompt's first video as."""
    return f"{_UNSAFE.sub('_', prompt)[:200]}-0.mp4"


def write_videos(report_dir: Path, run_dir: Path, prompts: list[str]) -> list[Path]:
    """videos/<id>.mp4 for each audit id among the run's prompts and videos/captions.txt, from the videos the
    client staged for VBench (links to the server's files); UserError naming a video that is missing."""
    staged = Path(report_dir) / CLIENT_VIDEOS
    audited = [index for index in ref.AUDIT_IDS if index < len(prompts)]
    written = []
    for index in audited:
        source = staged / staged_name(prompts[index])
        if not source.is_file():
            raise UserError(f"The client's accuracy run has no video of prompt {index} ({source} is missing), so "
                            f"its audit videos cannot be written; run the accuracy test again.",
                            exit_code=EXIT_FAILURE)
        data = source.read_bytes()
        if data[4:8] != b"ftyp":
            raise UserError(f"{source} is not an mp4 file; run the accuracy test again.", exit_code=EXIT_FAILURE)
        written.append(write_atomically(Path(run_dir) / VIDEOS / f"{index}.mp4", data))
    if audited:
        written.append(write_atomically(Path(run_dir) / VIDEOS / CAPTIONS,
                                        "".join(f"{index}: {prompts[index]}\n" for index in audited)))
    return written

