"""wan-2.2-t2v-a14b's pipeline, run in the diffusers environment (.venv-diffusers), never imported by the toolkit.

Standard library, torch and diffusers only: the toolkit starts this module as a child process
(`.venv-diffusers/bin/python -m code.wan.pipeline_worker <command>`) and talks to it in JSON lines:

- `make-substitute <folder>`: writes the embedded substitute, a diffusers folder of the real Wan 2.2 A14B
  architecture (WanPipeline: UMT5 text encoder, two WanTransformer3DModel experts switched at boundary_ratio, an
  AutoencoderKLWan, a tokenizer trained on the 248 prompts) with generated weights, plus its fixed latent. Made from
  fixed seeds: the same files every time on the same versions.
- `serve <settings.json>`: loads the folder as the reference loads the real model (the VAE in float32, the rest in
  bfloat16, boundary_ratio given at load) and then, for each request line {"id", "prompt", "out"}, generates the
  video with the reference's settings (negative prompt, steps, guidance 4.0 / 3.0, a generator seeded 42 per video,
  the fixed latent), writes it as an mp4 to "out" and answers {"id", "frames", "height", "width"}; a failure
  answers {"id", "error"} and ends the process. The first line it writes is {"ready": ...} once the model is loaded.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

# The substitute's shape: the A14B layout at toy size (a 2-layer expert of 2 heads, a 2-layer UMT5, a Wan VAE of
# base width 8). The real model: 40-layer experts of 40 heads of 128, UMT5-XXL, base width 96.
TEXT_WIDTH = 32
LATENT_CHANNELS = 16                  # the real VAE's z_dim: the transformer's in/out channels match it
SEED = 0                              # of the generated weights (the videos' generator seed is the reference's 42)


def _train_tokenizer(prompts: list[str]):
    """A unigram tokenizer of the 248 prompts, with T5's special tokens (<pad> 0, </s> 1, <unk> 2)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.Unigram())
    tokenizer.normalizer = normalizers.NFKC()
    tokenizer.pre_tokenizer = pre_tokenizers.Metaspace()
    tokenizer.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(vocab_size=512, special_tokens=["<pad>", "</s>", "<unk>"], unk_token="<unk>",
                                      show_progress=False)
    tokenizer.train_from_iterator(prompts, trainer=trainer)
    # The trainer runs on several threads, whose sums differ in the last bits from run to run: the pieces' scores
    # rounded, and ordered by them, make the same file every time.
    trained = json.loads(tokenizer.to_str())["model"]["vocab"]
    special, pieces = trained[:3], sorted(((p, round(s, 6)) for p, s in trained[3:]), key=lambda e: (-e[1], e[0]))
    tokenizer.model = models.Unigram([(p, s) for p, s in special] + pieces, unk_id=2, byte_fallback=False)
    tokenizer.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    return tokenizer


def make_substitute(folder: Path, prompts_file: Path, height: int, width: int, frames: int) -> None:
    # The tokenizer's trainer on one thread: on several, pieces of equal frequency come out in another order.
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    os.environ["RAYON_NUM_THREADS"] = "1"
    import torch
    from diffusers import AutoencoderKLWan, FlowMatchEulerDiscreteScheduler, WanPipeline, WanTransformer3DModel
    from transformers import PreTrainedTokenizerFast, UMT5Config, UMT5EncoderModel

    torch.manual_seed(SEED)
    prompts = [line.strip() for line in prompts_file.read_text().splitlines() if line.strip()]
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=_train_tokenizer(prompts), pad_token="<pad>",
                                        eos_token="</s>", unk_token="<unk>", model_max_length=512)
    text_encoder = UMT5EncoderModel(UMT5Config(vocab_size=tokenizer.vocab_size, d_model=TEXT_WIDTH, d_kv=8,
                                               d_ff=64, num_layers=2, num_heads=4,
                                               relative_attention_num_buckets=8))
    experts = [WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=8,
                                     in_channels=LATENT_CHANNELS, out_channels=LATENT_CHANNELS,
                                     text_dim=TEXT_WIDTH, freq_dim=32, ffn_dim=32, num_layers=2,
                                     rope_max_seq_len=32) for _ in range(2)]
    vae = AutoencoderKLWan(base_dim=8, z_dim=LATENT_CHANNELS, dim_mult=[1, 2, 2, 2], num_res_blocks=1,
                           temperal_downsample=[False, True, True])
    scheduler = FlowMatchEulerDiscreteScheduler(shift=12.0)     # the A14B scheduler's flow shift
    pipe = WanPipeline(tokenizer=tokenizer, text_encoder=text_encoder, vae=vae, scheduler=scheduler,
                       transformer=experts[0], transformer_2=experts[1], boundary_ratio=0.875)
    folder.mkdir(parents=True, exist_ok=True)
    pipe.save_pretrained(str(folder))
    # The substitute's fixed latent, of the shape the pipeline makes for this size (the official one is
    # [1, 16, 21, 90, 160] for 81 frames of 720x1280), in bfloat16 as the official one is.
    shape = (1, LATENT_CHANNELS, (frames - 1) // 4 + 1, height // 8, width // 8)
    latent = torch.randn(shape, generator=torch.Generator("cpu").manual_seed(SEED)).to(torch.bfloat16)
    torch.save(latent, str(folder / "fixed_latent.pt"))


class Generator:
    def __init__(self, settings: dict) -> None:
        import torch
        from diffusers import AutoencoderKLWan, WanPipeline

        _check_ffmpeg()
        torch.set_num_threads(int(settings.get("threads") or 1))
        self.torch, self.settings = torch, settings
        folder = settings["model_folder"]
        vae = AutoencoderKLWan.from_pretrained(folder, subfolder="vae", torch_dtype=torch.float32)
        self.pipe = WanPipeline.from_pretrained(folder, boundary_ratio=settings["boundary_ratio"], vae=vae,
                                                torch_dtype=torch.bfloat16)
        self.pipe.set_progress_bar_config(disable=True)
        self.latent = torch.load(settings["fixed_latent"])
        channels = self.pipe.transformer.config.in_channels
        if self.latent.dim() != 5 or self.latent.shape[0] != 1 or self.latent.shape[1] != channels:
            raise ValueError(f"the fixed latent {settings['fixed_latent']} is {list(self.latent.shape)}, not "
                             f"[1, {channels}, t, h, w]")
        # The latent decides the video's size as the pipeline's VAE compresses it (4 frames, 8x8 pixels a cell).
        _, _, t, h, w = self.latent.shape
        self.shape = {"num_frames": (t - 1) * self.pipe.vae_scale_factor_temporal + 1,
                      "height": h * self.pipe.vae_scale_factor_spatial, "width": w * self.pipe.vae_scale_factor_spatial}

    def video(self, prompt: str, out: Path) -> dict:
        from diffusers.utils import export_to_video

        s = self.settings
        frames = self.pipe(prompt=prompt, negative_prompt=s["negative_prompt"], **self.shape,
                           guidance_scale=s["guidance_scale"],
                           guidance_scale_2=s["guidance_scale_2"], num_inference_steps=s["steps"],
                           generator=self.torch.Generator(device="cpu").manual_seed(s["seed"]),
                           latents=self.latent).frames[0]
        export_to_video(list(frames), str(out), fps=s["fps"])
        return {"frames": int(frames.shape[0]), "height": int(frames.shape[1]), "width": int(frames.shape[2])}


def _check_ffmpeg() -> None:
    """That the ffmpeg which writes each video's mp4 runs, before minutes go into loading the model."""
    import subprocess

    import imageio_ffmpeg

    try:
        exe = imageio_ffmpeg.get_ffmpeg_exe()
        subprocess.run([exe, "-version"], capture_output=True, check=True, timeout=60)
    except (RuntimeError, OSError, subprocess.SubprocessError) as error:
        raise RuntimeError(f"ffmpeg, which writes each video's mp4 file, cannot run ({error}); make download_model "
                           f"installs imageio-ffmpeg's own into the diffusers environment, or set IMAGEIO_FFMPEG_EXE "
                           f"to a working ffmpeg") from None


def serve(settings_file: Path) -> int:
    try:
        generator = Generator(json.loads(settings_file.read_text()))
    except Exception as error:              # noqa: BLE001 - reported to the toolkit, which fails the run
        print(json.dumps({"error": f"{type(error).__name__}: {error}"}), flush=True)
        return 1
    print(json.dumps({"ready": True, **generator.shape}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        try:
            answer = {"id": request["id"], **generator.video(request["prompt"], Path(request["out"]))}
        except Exception as error:          # noqa: BLE001 - reported to the toolkit, which fails the run
            print(json.dumps({"id": request["id"], "error": f"{type(error).__name__}: {error}"}), flush=True)
            return 1
        print(json.dumps(answer), flush=True)
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["make-substitute"] and len(argv) == 6:
        make_substitute(Path(argv[1]), Path(argv[2]), int(argv[3]), int(argv[4]), int(argv[5]))
        return 0
    if argv[:1] == ["serve"] and len(argv) == 2:
        return serve(Path(argv[1]))
    print("usage: pipeline_worker make-substitute <folder> <prompts> <height> <width> <frames> | serve <settings>",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
