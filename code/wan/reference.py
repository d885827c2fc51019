"""What the round's reference fixes for wan-2.2-t2v-a14b (text_to_video/wan-2.2-t2v-a14b: inference_config.yaml,
run_inference.py, data/): the generation settings, the official files' digests and the audit ids. Data, no code."""
from __future__ import annotations

NAME = "wan-2.2-t2v-a14b"
HF_ID = "Wan-AI/Wan2.2-T2V-A14B-Diffusers"
HF_REVISION = "5be7df9619b54f4e2667b2755bc6a756675b5cd7"
OFFICIAL_FOLDER = "text_to_video/wan-2.2-t2v-a14b"     # in the mlcommons/inference repository

# inference_config.yaml, as run_inference.py passes it to WanPipeline (the negative prompt's lines joined by the
# YAML block's newlines and stripped, as yaml.safe_load and .strip() leave it).
STEPS = 20
GUIDANCE_SCALE = 4.0
GUIDANCE_SCALE_2 = 3.0
BOUNDARY_RATIO = 0.875
SEED = 42                        # a torch.Generator seeded 42 for every video (iteration 0)
FPS = 16
HEIGHT, WIDTH, FRAMES = 720, 1280, 81
NEGATIVE_PROMPT = "\n".join((
    "vivid colors, overexposed, static, blurry details, subtitles, style,",
    "work of art, painting, picture, still, overall grayish, worst quality,",
    "low quality, JPEG artifacts, ugly, deformed, extra fingers, poorly drawn hands,",
    "poorly drawn face, deformed, disfigured, deformed limbs, fused fingers,",
    "static image, cluttered background, three legs, many people in the background,",
    "walking backwards"))

# data/vbench_prompts.txt: the 248 VBench prompts, one a line (the data set, in QSL order).
PROMPTS_FILE = "vbench_prompts.txt"
PROMPT_COUNT = 248
PROMPTS_SHA256 = "f45433f7d3f6ac055613bb36ea21f38120e3cb5873d91f7e621477761b7284e8"
# data/fixed_latent.pt: the bfloat16 latent every video starts from, [1, 16, 21, 90, 160] (git blob id of the file
# in the reference's repository; it is not in every checkout of it).
FIXED_LATENT = "fixed_latent.pt"
FIXED_LATENT_SHAPE = (1, 16, 21, 90, 160)
FIXED_LATENT_GIT_BLOB = "7c88cf35aa26a98e81a432a8cea22ba5f6b8ef04"
# data/samples_filename_ids.txt: the 10 videos an accuracy folder holds, "<prompt>-0.mp4, <id>.mp4" a line.
AUDIT_IDS_FILE = "samples_filename_ids.txt"
AUDIT_IDS = (130, 106, 84, 59, 12, 123, 43, 22, 238, 32)     # the v6.1 checker's list too

def git_blob_id(data: bytes) -> str:
    """The id git gives a file of these bytes (sha1 of "blob <size>\\0" and the bytes)."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
