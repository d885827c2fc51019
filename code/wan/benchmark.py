"""Benchmark wan-2.2-t2v-a14b: text to video (MLPerf Inference v6.1, text_to_video), datacenter, Offline and
SingleStream.

Each of the reference's 248 VBench prompts (datasets.py) becomes one video, made by diffusers' WanPipeline as the
reference makes it (reference.py: the negative prompt, 20 steps, guidance 4.0 then 3.0 after the expert switch at
boundary_ratio 0.875, a generator seeded 42 per video, the fixed latent), in the diffusers environment
(models.py, pipeline_worker.py) driven as a request-level engine (request_engine.py). The LoadGen response of a
sample is its mp4 file, logged through the generation layer's media answer kind (answers.Media); a video counts as
one sample. Accuracy is VBench's score of the videos (accuracy.py), which needs checkpoints this toolkit does not
have: an accuracy run writes the videos and the checker's artefacts and says so.

The embedded default is `wan-2.2-substitute` (models.py), 64x64 videos of 9 frames of a generated-weights pipeline
of the same architecture, on the first 4 prompts: an open-division path test, never a figure of Wan 2.2.
"""
from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any, Mapping

from ..common.answers import Media
from ..common.benchmark_api import (AccuracyResult, DatasetSpec, GenerativeBenchmark, Log, Metric, ModelSpec,
                                    ResponseFormat, TensorSpec)
from ..common.config_registry import PerCore
from ..common.errors import UserError
from ..common.generation import GenerationSettings
from ..common.paths import Paths
from ..common.prompts import TEXT
from . import models as wan_models
from . import reference as ref
from .datasets import DATASET, DATASETS, prompt_set

ENGINE = "diffusers"
MAX_SEQUENCE_LENGTH = 512          # WanPipeline's: prompts are padded (and cut) to 512 UMT5 tokens


def _spec(name: str) -> ModelSpec:
    closed = name == wan_models.CLOSED
    return ModelSpec(
        name=name, division="closed" if closed else "open", prompt_parts=(TEXT,),
        # What the pipeline's text encoder takes (the prompt's UMT5 ids, padded to 512) and what a sample gives
        # back (an mp4 file's bytes); the prompts themselves go to the engine as text.
        inputs=(TensorSpec("prompt_ids", "int64", (MAX_SEQUENCE_LENGTH,)),),
        outputs=(TensorSpec("mp4", "uint8", (None,)),),
        description=f"{ref.HF_ID}: two 14B experts, UMT5-XXL, the Wan VAE (the user's diffusers folder)" if closed
        else f"Wan 2.2 A14B's architecture at toy size with generated weights, {wan_models.SUBSTITUTE_LABEL}",
        starting_weights_filename=f"{ref.HF_ID} (revision {ref.HF_REVISION})" if closed
        else "none: weights generated from fixed seeds by make download_model",
        weight_transformations="none (loaded as the reference loads it: VAE float32, the rest bfloat16)",
        served_name=ref.HF_ID if closed else name, serving_api="videogen")


class WanBenchmark(GenerativeBenchmark):
    package = "code.wan"
    name = ref.NAME
    own_engines = (ENGINE,)
    own_server = ENGINE              # video_server.py: the pipeline behind /v1/videos/generations
    # The round's NVIDIA-stack rows drive trtllm-serve with the MLCommons endpoints client (endpoints.py).
    endpoints_served = True
    models: Mapping[str, ModelSpec] = MappingProxyType({n: _spec(n) for n in (wan_models.CLOSED,
                                                                              wan_models.SUBSTITUTE)})
    datasets: Mapping[str, DatasetSpec] = MappingProxyType(DATASETS)
    # One mp4 file per sample, its bytes; a 64x64 video of 9 frames is about 9 kB.
    response = ResponseFormat(dtype="uint8", fields=("mp4 byte",), records_per_sample=None, typical_records=10_000)
    # The substitute on 2 loaded cores: tens of seconds a video (20 steps, two classifier-free passes each).
    embedded_default = MappingProxyType({"model": wan_models.SUBSTITUTE, "dataset": DATASET,
                                         "total_sample_count": 4, "offline_expected_qps": PerCore(0.02)})

    def make_environment(self, paths: Paths, log: Log) -> None:
        """The diffusers environment, and VBench's where VBENCH_CACHE_DIR asks for a score (vbench.py)."""
        from . import vbench

        wan_models.make_environment(paths, log)
        vbench.make_environment(paths, log)

    def download_model(self, model: str, paths: Paths, log: Log) -> Path:
        return wan_models.download_model(model, paths, log)

    def preprocess(self, model: str, dataset: str, paths: Paths, log: Log):
        """Nothing to compute: the prompts go to the pipeline as text."""
        return prompt_set(dataset, paths)

    def preprocessed(self, model: str, dataset: str, paths: Paths):
        return prompt_set(dataset, paths)

    def calibration_indices(self, dataset: str, count: int, paths: Paths):
        raise UserError(f"{ref.NAME} runs the weights as they are: it has no INT8 calibration here (the reference's "
                        f"49 calibration prompts are for a quantized submission's own tools).")

    def generation(self, model: str, fields: Mapping[str, Any], paths: Paths) -> GenerationSettings:
        """One 'token' per video: LoadGen counts samples; the pipeline's own settings are the reference's."""
        from .request_engine import END_TOKEN

        return GenerationSettings(max_new_tokens=1, eos_token_ids=(END_TOKEN,), max_batch=1)

    def answer(self, model: str, paths: Paths) -> Media:
        return Media()

    def engine_settings(self, model: str, paths: Paths, threads: int) -> dict[str, Any]:
        folder = wan_models.model_folder(paths, model)
        return {"repo": str(paths.repo), "model_folder": str(folder),
                "fixed_latent": str(wan_models.fixed_latent(paths, model)), "boundary_ratio": ref.BOUNDARY_RATIO,
                "negative_prompt": ref.NEGATIVE_PROMPT, "guidance_scale": ref.GUIDANCE_SCALE,
                "guidance_scale_2": ref.GUIDANCE_SCALE_2, "steps": ref.STEPS, "seed": ref.SEED, "fps": ref.FPS,
                "threads": threads}

    def request_engines(self, model: str, fields: Mapping[str, Any], paths: Paths, *, instances: int,
                        threads: int) -> list:
        """One pipeline process per instance, each making one video at a time."""
        from .request_engine import WanRequestEngine

        name = str(fields.get("inprocess_engine") or ENGINE)
        if name != ENGINE:
            raise UserError(f"--inprocess_engine={name}: {ref.NAME}'s engine is {ENGINE}.")
        wan_models.check_folder(paths, model)
        command = wan_models.worker_command(paths)
        settings = self.engine_settings(model, paths, threads)
        return [WanRequestEngine(command, settings, paths.engine_log(ENGINE, number), number)
                for number in range(max(1, instances))]

    def serving_request(self, model: str, paths: Paths) -> dict[str, Any]:
        """The reference's generation settings as the endpoints client's videogen payload carries them (its field
        order), the video's size and frames the model's fixed latent's (size as width x height, as trtllm-serve
        reads it), and the video's bytes asked back (response_format video_bytes, the client's accuracy mode)."""
        height, width, frames = wan_models.video_size(paths, model)
        return {"negative_prompt": ref.NEGATIVE_PROMPT, "size": f"{width}x{height}",
                "seconds": (frames - 1) / ref.FPS, "fps": ref.FPS, "num_inference_steps": ref.STEPS,
                "guidance_scale": ref.GUIDANCE_SCALE, "guidance_scale_2": ref.GUIDANCE_SCALE_2, "seed": ref.SEED,
                "num_frames": frames, "boundary_ratio": ref.BOUNDARY_RATIO, "output_format": "mp4",
                "response_format": "video_bytes"}

    def start_server(self, model: str, fields: Mapping[str, Any], paths: Paths, port: int, host: str, log: Log):
        """The toolkit's video server (video_server.py) for `model`, its pipeline on the threads the in-process
        engine would have (one instance's), so that both make the same bytes."""
        import os

        from ..common.backends import threads_per_instance
        from .video_server import start_server

        wan_models.check_folder(paths, model)
        cores = len(os.sched_getaffinity(0))
        threads = threads_per_instance(fields, cores) if "instances" in fields else cores
        return start_server(self.engine_settings(model, paths, threads), wan_models.worker_command(paths),
                            self.models[model].served_name, paths.serving_folder(ENGINE, port), paths.repo, host,
                            port, log)

    def endpoints_workload(self, model: str, accuracy: bool, fields: Mapping[str, Any], paths: Paths,
                           run_dir: Path, test_run: bool, *, scenario: str = ""):
        """The reference examples' videogen YAML for one test (endpoints.py)."""
        from ..common.rules import get_round
        from .endpoints import workload

        return workload(self, model, accuracy, scenario, fields, paths, run_dir, test_run, get_round())

    def endpoints_load(self, model: str, accuracy: bool, fields: Mapping[str, Any], test_run: bool, *,
                       scenario: str = ""):
        """The videos the client will ask for in one test (endpoints.py), for the plan."""
        from .endpoints import client_load

        return client_load(accuracy, scenario, fields, test_run)

    def endpoints_artefacts(self, model: str, fields: Mapping[str, Any], paths: Paths, report_dir: Path,
                            run_dir: Path) -> None:
        """The audit videos and captions.txt, from the videos the client scored."""
        from .endpoints import run_prompts, write_videos

        write_videos(report_dir, run_dir, run_prompts(run_dir))

    def score(self, model: str, dataset: str, accuracy_log: Path, paths: Paths) -> AccuracyResult:
        """The videos and the checker's artefacts beside the accuracy log, and VBench's score of the videos where
        VBench can run (vbench.py); elsewhere accuracy.txt says why there is no figure."""
        from . import vbench
        from .accuracy import VBENCH_VIDEOS, accuracy_text, parse_vbench_results, videos_of, write_artefacts

        prompts = prompt_set(dataset, paths).prompts
        videos = videos_of(accuracy_log, len(prompts))
        if not videos:
            raise UserError(f"{accuracy_log} holds no videos; run the accuracy test again.")
        folder = Path(accuracy_log).parent
        write_artefacts(folder, videos, prompts)
        why = vbench.why_not_run(paths)
        if why is None:
            results = vbench.run_vbench(paths, folder / VBENCH_VIDEOS, folder / "vbench_results")
            value, text = accuracy_text(parse_vbench_results(results), len(videos))
        else:
            value, text = accuracy_text(None, len(videos), why)
        return AccuracyResult(metrics=(Metric("vbench_score", value, unit=""),), text=text, samples=len(videos))


BENCHMARK = WanBenchmark()
