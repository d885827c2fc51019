"""The toolkit's own video generation server for wan-2.2-t2v-a14b: diffusers' WanPipeline (the pipeline process of
request_engine.PipelineChild, the one the in-process engine runs) behind `POST /v1/videos/generations`, the API
TensorRT-LLM's trtllm-serve VisualGen serves and the MLCommons endpoints client's `videogen` payload drives. The openai
harness starts it for a test without --endpoints; `make serve_llm RUN_ARGS="--benchmarks=wan-2.2"` serves it until
stopped. Run in the toolkit's environment (aiohttp); the pipeline runs in the diffusers environment.

    python -m code.wan.video_server --settings <server.json> --port 8000 [--host 127.0.0.1]

It prints "listening on <url>" once the model is loaded and it accepts connections. It answers:
- `GET /v1/models`: the model under its served name (owned by "diffusers"), `GET /version`, `GET /health`;
- `POST /v1/videos/generations` (JSON): one video at a time, made with the reference's settings. A field the request
  sets must be what this server makes (size as WxH and num_frames: its model's fixed latent; negative_prompt, steps,
  both guidance scales, seed, boundary_ratio, fps: the reference's), else HTTP 400 naming it, as an unknown field
  is (trtllm-serve refuses unknown fields too); `stream: true` is refused. `response_format` says what comes back:
  `video_bytes` JSON `{"video_id", "video_bytes": base64}`, `video_path` JSON `{"video_id", "video_path"}` (a file
  in its media folder), none the mp4 itself (`video/mp4`, as trtllm-serve's route answers).

A stop signal (Ctrl-C, SIGTERM) stops the pipeline process and ends the server.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import signal
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any, Callable, Mapping

from ..common.errors import EXIT_FAILURE, UserError
from ..common.processes import ServerProcess
from ..common.serving.local_server import LocalServer
from .request_engine import EngineFailed, PipelineChild

ENGINE = "diffusers"
PATH = "/v1/videos/generations"
READY_TIMEOUT_S = 600.0
# The request fields this server makes as its settings say (request field -> settings key), and the ones it takes
# without effect on the video: `seconds` (num_frames decides; the endpoints client always sends 5.0), `model`
# (checked against the served name), `output_format` (mp4 or auto), `response_format`.
FIXED = {"negative_prompt": "negative_prompt", "num_inference_steps": "steps", "guidance_scale": "guidance_scale",
         "guidance_scale_2": "guidance_scale_2", "seed": "seed", "boundary_ratio": "boundary_ratio", "fps": "fps"}
TAKEN = frozenset({"prompt", "size", "num_frames", "seconds", "model", "output_format", "response_format",
                   "latent_path", "stream"})
RESPONSE_FORMATS = ("video_bytes", "video_path")


class BadRequest(ValueError):
    pass


class VideoService:
    """What the routes do, over one started PipelineChild."""

    def __init__(self, pipeline: PipelineChild, settings: Mapping[str, Any], served_name: str,
                 media_folder: Path) -> None:
        self.pipeline, self.settings, self.served_name = pipeline, dict(settings), served_name
        self.media_folder = media_folder
        self.lock = asyncio.Lock()
        self.count = 0
        self.latent_sha256 = hashlib.sha256(Path(settings["fixed_latent"]).read_bytes()).hexdigest()

    @property
    def size(self) -> str:
        return f"{self.pipeline.shape['width']}x{self.pipeline.shape['height']}"

    def check(self, body: Any) -> dict:
        """The request's fields, checked against what this server makes; BadRequest naming the first that is not."""
        if not isinstance(body, dict) or not isinstance(body.get("prompt"), str) or not body["prompt"].strip():
            raise BadRequest("the request must be a JSON object with a non-empty 'prompt'")
        unknown = sorted(set(body) - TAKEN - set(FIXED))
        if unknown:
            raise BadRequest(f"unknown field(s) {', '.join(unknown)}")
        if body.get("stream"):
            raise BadRequest("video generation is not streamed; leave 'stream' out")
        if body.get("model") not in (None, self.served_name):
            raise BadRequest(f"this server serves {self.served_name}, not {body['model']}")
        for field, key in FIXED.items():
            if field in body and body[field] is not None and body[field] != self.settings[key]:
                raise BadRequest(f"{field}={body[field]!r}: this server makes videos with {field}="
                                 f"{self.settings[key]!r} (the reference's)")
        if body.get("size") not in (None, self.size):
            raise BadRequest(f"size={body['size']!r}: this server's model makes {self.size} videos (width x height, "
                             f"its fixed latent's)")
        if body.get("num_frames") not in (None, self.pipeline.shape["num_frames"]):
            raise BadRequest(f"num_frames={body['num_frames']!r}: this server's model makes videos of "
                             f"{self.pipeline.shape['num_frames']} frames (its fixed latent's)")
        if body.get("output_format") not in (None, "mp4", "auto"):
            raise BadRequest(f"output_format={body['output_format']!r}: this server writes mp4")
        if body.get("response_format") not in (None, *RESPONSE_FORMATS):
            raise BadRequest(f"response_format={body['response_format']!r}: one of {', '.join(RESPONSE_FORMATS)}")
        latent = body.get("latent_path")
        if latent is not None and self._sha256(latent) != self.latent_sha256:
            raise BadRequest(f"latent_path={latent!r} is not this server's fixed latent "
                             f"({self.settings['fixed_latent']})")
        return body

    @staticmethod
    def _sha256(path: str) -> str:
        try:
            return hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            return ""

    async def generate(self, body: dict) -> tuple[str, bytes]:
        async with self.lock:          # one video at a time, as the in-process engine makes them
            self.count += 1
            number = self.count
            video = await asyncio.get_running_loop().run_in_executor(None, self.pipeline.video, number,
                                                                     body["prompt"])
        return f"video_{number:06d}", video

    def app(self):
        from aiohttp import web

        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/version", self._version)
        app.router.add_get("/health", self._health)
        app.router.add_post(PATH, self._videos)
        return app

    async def _models(self, request):
        from aiohttp import web

        return web.json_response({"object": "list", "data": [
            {"id": self.served_name, "object": "model", "owned_by": ENGINE}]})

    async def _version(self, request):
        from aiohttp import web

        return web.json_response({"version": self.settings.get("engine_version", "")})

    async def _health(self, request):
        from aiohttp import web

        return web.Response(text="ok")

    async def _videos(self, request):
        from aiohttp import web

        try:
            body = self.check(await request.json())
        except ValueError as error:         # BadRequest, or a body that is not JSON
            return web.json_response({"error": {"message": str(error), "type": "BadRequestError", "code": 400}},
                                     status=400)
        try:
            video_id, video = await self.generate(body)
        except EngineFailed as error:
            return web.json_response({"error": {"message": str(error), "type": "InternalServerError",
                                                "code": 500}}, status=500)
        if body.get("response_format") == "video_bytes":
            return web.json_response({"video_id": video_id, "video_bytes": base64.b64encode(video).decode("ascii")})
        if body.get("response_format") == "video_path":
            path = self.media_folder / f"{video_id}.mp4"
            path.write_bytes(video)
            return web.json_response({"video_id": video_id, "video_path": str(path)})
        return web.Response(body=video, content_type="video/mp4")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m code.wan.video_server", description=__doc__.split("\n\n")[0])
    parser.add_argument("--settings", required=True, help="the server's settings (JSON, written by start_server)")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    ns = parser.parse_args(argv)
    spec = json.loads(Path(ns.settings).read_text())
    pipeline = PipelineChild(spec["command"], spec["engine"], Path(spec["pipeline_log"]), "the wan pipeline")
    media = Path(spec["media_folder"])
    media.mkdir(parents=True, exist_ok=True)
    # A stop signal while the model loads ends the process through the finally below, stopping the pipeline.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    try:
        pipeline.start()
        asyncio.run(_serve(VideoService(pipeline, spec["engine"], spec["served_name"], media), ns.host, ns.port))
    except EngineFailed as error:
        print(f"error: {error}", file=sys.stderr, flush=True)
        return EXIT_FAILURE
    finally:
        pipeline.stop()
    return 0


async def _serve(service: VideoService, host: str, port: int) -> None:
    from aiohttp import web

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(service.app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    print(f"listening on http://{host}:{port} ({service.served_name}, {service.size}, "
          f"{service.pipeline.shape['num_frames']} frames)", flush=True)
    await stop.wait()
    await runner.cleanup()


# -- the toolkit's side ---------------------------------------------------------------------------------------------
class VideoServer(ServerProcess):
    """The server started by the toolkit (start_server): its own process group, the pipeline process's log beside
    its own; `endpoint`, `served_name`."""

    started = LocalServer.started      # stopped with the openai harness's local servers (local_server.stop_all)
    log_lines = 30
    model_folder_sha256 = ""       # the model's files are checked by the benchmark (models.check_folder)

    def __init__(self, settings_file: Path, served_name: str, host: str, port: int, log_path: Path) -> None:
        super().__init__(log_path)
        self.settings_file, self.served_name, self.host, self.port = settings_file, served_name, host, port

    @property
    def endpoint(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self, repo: Path) -> "VideoServer":
        command = [sys.executable, "-m", "code.wan.video_server", "--settings", str(self.settings_file),
                   "--port", str(self.port), "--host", self.host]
        self.launch(command, env=_environment(), cwd=repo, header=f"$ {' '.join(command)}\n")
        return self

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> "VideoServer":
        """Until /v1/models lists the model; the server stopped and UserError with its log's end where it exits
        first or the time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                status = self.process.returncode if self.process is not None else None
                self.stop()
                raise UserError(f"The wan video server on port {self.port} exited (status {status}) before it "
                                f"answered. The end of its log ({self.log_path}):\n{self.log_tail()}",
                                exit_code=EXIT_FAILURE)
            try:
                with urllib.request.urlopen(f"{self.endpoint}/v1/models", timeout=5.0) as answer:
                    if any(m.get("id") == self.served_name for m in json.loads(answer.read()).get("data", [])):
                        return self
            except (OSError, ValueError):
                pass
            time.sleep(0.5)
        self.stop()
        raise UserError(f"The wan video server on port {self.port} did not answer within {timeout_s:.0f} s. The end "
                        f"of its log ({self.log_path}):\n{self.log_tail()}", exit_code=EXIT_FAILURE)


def _environment() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def start_server(settings: Mapping[str, Any], command: list[str], served_name: str, folder: Path, repo: Path,
                 host: str, port: int, log: Callable[[str], None]) -> VideoServer:
    """The server for one model, started and answering (`folder`: its settings, logs and media files)."""
    folder.mkdir(parents=True, exist_ok=True)
    settings_file = folder / "server.json"
    # What /version says: the diffusers release of the pipeline's environment (its dist-info beside the interpreter).
    found = sorted(Path(command[0]).parent.parent.glob("lib/python3*/site-packages/diffusers-*.dist-info"))
    version = f"diffusers {found[-1].name.removesuffix('.dist-info').split('-', 1)[1]}" if found else ""
    settings_file.write_text(json.dumps({"engine": {**settings, "engine_version": version}, "command": command,
                                         "served_name": served_name, "pipeline_log": str(folder / "pipeline.log"),
                                         "media_folder": str(folder / "videos")}, indent=1))
    server = VideoServer(settings_file, served_name, host, port, folder / "server.log")
    log(f"starting the wan video server ({ENGINE}) for {served_name} on port {port}; log: {server.log_path}")
    server.start(repo)
    try:
        return server.wait_ready()
    except BaseException:
        server.stop()
        raise


if __name__ == "__main__":
    sys.exit(main())
