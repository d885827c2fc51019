"""wan-2.2-t2v-a14b over the videogen API: the openai harness sends each prompt to `POST /v1/videos/generations` in the
MLCommons endpoints client's wire format and logs each answer's mp4 through the benchmark's answer kind (answers.Media),
as an in-process run does. The same 3 prompts at 32x32 through the toolkit's own video server (code/wan/video_server.py,
started by the harness) give byte-identical videos to the in-process engine, both through real LoadGen. Bad input: a
server that does not serve video, an unreachable endpoint, an answer that is not an mp4; each fails the run naming
the endpoint, nothing staged.

Facts of the wire format relied on (mlcommons/endpoints, src/inference_endpoint/videogen/: VideoPathRequest and
VideoGenAdapter; TensorRT-LLM's openai_video_routes.py): the body is JSON of `prompt`, `negative_prompt`, `size`
("WxH"), `seconds`, `fps`, `num_inference_steps`, `guidance_scale`, `guidance_scale_2`, `seed`, `num_frames`,
`boundary_ratio`, optional `latent_path`, `output_format` and `response_format` (video_bytes or video_path), with
no `stream` (the adapter refuses one) and no `model`; the answer is the mp4 itself (trtllm-serve's sync route answers
a video/mp4 file; the adapter tells it by the `ftyp` box at byte 4), or JSON {"video_id", "video_bytes": base64} or
{"video_id", "video_path"}. trtllm-serve reads `size` as width x height (parse_visual_gen_params: `params.width,
params.height = map(int, request.size.split("x"))`), so the reference's 720-high, 1280-wide video is "1280x720"."""
from __future__ import annotations

import base64
import json
import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from code.common.errors import UserError
from code.common.generation import GenerationSettings
from code.main import main
from code.common.prompts import Chat, Text
from code.common.records.metadata import find_metadata, read_metadata
from code.common.serving.fake_server import ServerSettings, StreamingServer
from code.common.serving.payloads import VideoGenerations, payload_for
from code.wan import models
from code.wan import reference as ref
from code.wan.benchmark import BENCHMARK

from .test_wan_e2e import FRAMES, HEIGHT, RUN, WIDTH, wan_paths  # noqa: F401 - the substitute at 32x32, 5 frames

MP4 = b"\x00\x00\x00\x20ftypisom" + b"\x00" * 24        # an mp4's first box, as a file of the API's answers opens
WIRE_FIELDS = ["prompt", "negative_prompt", "size", "seconds", "fps", "num_inference_steps", "guidance_scale",
               "guidance_scale_2", "seed", "num_frames", "boundary_ratio", "output_format", "response_format"]


def test_the_videogen_body_is_the_endpoints_clients_and_answers_read_as_its_adapter_reads_them(wan_paths,
                                                                                               tmp_path) -> None:
    fields = BENCHMARK.serving_request(models.SUBSTITUTE, wan_paths)
    payload = payload_for(frozenset({"text"}), "videogen", fields)
    settings = GenerationSettings(max_new_tokens=1, eos_token_ids=(1,))
    data, headers = payload.body("ignored", Chat.user(Text("a cat")), settings, 1, False)
    body = json.loads(data)
    assert list(body) == WIRE_FIELDS and headers["Content-Type"] == "application/json"
    assert body["prompt"] == "a cat" and body["response_format"] == "video_bytes"
    assert (body["size"], body["num_frames"], body["seconds"]) == (f"{WIDTH}x{HEIGHT}", FRAMES, (FRAMES - 1) / 16)
    assert (body["num_inference_steps"], body["guidance_scale"], body["guidance_scale_2"], body["seed"],
            body["boundary_ratio"], body["fps"], body["negative_prompt"]) == \
        (20, 4.0, 3.0, 42, 0.875, 16, ref.NEGATIVE_PROMPT)
    # The answer: the mp4 itself, or JSON with its base64, or a path this node can read.
    assert payload.media_file(MP4, "video/mp4") == MP4
    assert payload.media_file(json.dumps({"video_id": "v", "video_bytes": base64.b64encode(MP4).decode()}).encode(),
                              "application/json") == MP4
    (tmp_path / "v.mp4").write_bytes(MP4)
    assert payload.media_file(json.dumps({"video_id": "v", "video_path": str(tmp_path / "v.mp4")}).encode(),
                              "application/json") == MP4
    for answer, why in ((b"<html>no</html>", "neither an mp4 file nor JSON"),
                        (b'{"video_id": "v"}', "carries no video"),
                        (json.dumps({"video_bytes": base64.b64encode(b"AVI LIST....").decode()}).encode(),
                         "not an mp4 file"),
                        (b'{"video_path": "/nowhere/v.mp4"}', "cannot read")):
        with pytest.raises(ValueError, match=why):
            payload.media_file(answer, "application/json")
    with pytest.raises(ValueError, match="carries text, not image"):
        VideoGenerations().refuse(Chat.user(Text("a"), _image()))


def test_the_closed_models_request_asks_the_references_video(wan_paths, tmp_path) -> None:
    """The reference's latent [1, 16, 21, 90, 160] (read without torch: its shape from the pickle) asks 81 frames of
    1280 wide x 720 high, 5.0 s at 16 fps: the endpoints client's seconds and num_frames."""
    import subprocess

    from code.common.paths import Paths

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    latent = models.fixed_latent(paths, models.CLOSED)
    latent.parent.mkdir(parents=True)
    subprocess.run([str(models.python(wan_paths)), "-c", "import sys, torch; torch.save(torch.zeros(1, dtype="
                    "torch.bfloat16).expand(1, 16, 21, 90, 160), sys.argv[1])", str(latent)], check=True)
    assert models.video_size(paths, models.CLOSED) == (ref.HEIGHT, ref.WIDTH, ref.FRAMES)
    fields = BENCHMARK.serving_request(models.CLOSED, paths)
    assert (fields["size"], fields["num_frames"], fields["seconds"], fields["fps"]) == ("1280x720", 81, 5.0, 16)
    latent.write_bytes(b"not a latent")
    with pytest.raises(UserError, match="cannot be read"):
        models.video_size(paths, models.CLOSED)


def _image():
    from code.common.prompts import Image

    return Image(b"\x89PNG", "image/png")


def _run(paths, log_dir: Path, *extra: str) -> tuple[int, str]:
    lines: list[str] = []
    code = main(["--action=run_harness", f"--scratch_path={paths.scratch}", f"--log_dir={log_dir}", *RUN,
                 "--scenarios=Offline", "--total_sample_count=3", *extra], log=lines.append)
    return code, "\n".join(lines)


def _videos(log_dir: Path) -> dict[int, bytes]:
    (record,) = [read_metadata(m) for m in find_metadata(log_dir)]
    entries = json.loads((Path(record.log_dir) / "mlperf_log_accuracy.json").read_text())
    return {e["qsl_idx"]: bytes.fromhex(e["data"]) for e in entries}


def test_the_toolkits_video_server_gives_the_in_process_videos_byte_for_byte(wan_paths, tmp_path: Path,
                                                                            capfd) -> None:
    code, out = _run(wan_paths, tmp_path / "inprocess", "--intra_op_threads=1")
    assert code == 0, out
    code, out = _run(wan_paths, tmp_path / "served", "--intra_op_threads=1", "--harness_type=openai",
                     "--openai_warmup_requests=0")
    assert code == 0, out
    started = re.search(r"starting the wan video server \(diffusers\) for wan-2.2-substitute on port (\d+); "
                        r"log: (\S+)", capfd.readouterr().out)
    assert started, "the harness did not start the toolkit's video server"
    inprocess, served = _videos(tmp_path / "inprocess"), _videos(tmp_path / "served")
    assert sorted(served) == [0, 1, 2] and all(video[4:8] == b"ftyp" for video in served.values())
    assert served == inprocess
    assert len(set(served.values())) == 3
    # It is stopped with the test, and its pipeline process with it.
    log = Path(started.group(2))
    assert "listening on" in log.read_text() and (log.parent / "pipeline.log").is_file()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{started.group(1)}/v1/models", timeout=5)


class VideoTestServer(StreamingServer):
    """The test server serving the model's name, with `/v1/videos/generations` answering `answer` (bytes, a
    content type) where given; without it, a server of completions only (what vLLM is)."""

    def __init__(self, answer: tuple[bytes, str] | None = None) -> None:
        super().__init__(ServerSettings(model=models.SUBSTITUTE))
        self.answer = answer

    def app(self):
        from aiohttp import web

        app = super().app()
        if self.answer is not None:
            async def videos(request):
                await request.json()
                return web.Response(body=self.answer[0], content_type=self.answer[1])

            app.router.add_post("/v1/videos/generations", videos)
        return app


@pytest.mark.parametrize("answer, why", [
    (None, "answered HTTP 404.*is it a video generation server"),
    ((b"<html>a page</html>", "text/html"), "neither an mp4 file nor JSON"),
    ((json.dumps({"video_id": "v", "video_bytes": base64.b64encode(b"RIFF....AVI ").decode()}).encode(),
      "application/json"), "not an mp4 file"),
])
def test_a_server_without_videos_or_with_another_answer_fails_the_run_naming_it(wan_paths, tmp_path, answer,
                                                                               why) -> None:
    with VideoTestServer(answer) as server:
        code, out = _run(wan_paths, tmp_path / "logs", "--harness_type=openai", f"--endpoints={server.url}",
                         "--openai_warmup_requests=0")
    assert code == 1
    assert server.url in out and re.search(why, out), out
    _nothing_logged(tmp_path / "logs")


def _nothing_logged(log_dir: Path) -> None:
    """The failed test left its error record, and no LoadGen log that staging could take."""
    assert list(log_dir.rglob("harness_error.txt"))
    assert not list(log_dir.rglob("mlperf_log_accuracy.json")) and not list(log_dir.rglob("mlperf_log_detail.txt"))


def test_an_unreachable_endpoint_fails_the_run_naming_it(wan_paths, tmp_path) -> None:
    from code.common.processes import free_port

    url = f"http://127.0.0.1:{free_port()}"
    code, out = _run(wan_paths, tmp_path / "logs", "--harness_type=openai", f"--endpoints={url}")
    assert code == 1 and url in out and "cannot connect" in out, out
    _nothing_logged(tmp_path / "logs")


def test_make_build_makes_the_diffusers_environment_for_the_engine_and_for_the_toolkits_server(monkeypatch) -> None:
    """make build of wan (its in-process engine, or the openai harness's local server) makes .venv-diffusers through
    the benchmark, as make download_model and make run do; an LLM's openai harness still makes vLLM's."""
    from types import SimpleNamespace

    from code.common.arguments import parse_run_args
    from code.common.benchmark_api import IMPLEMENTATIONS
    from code.common.harness.registry import HARNESSES
    from code.common.serving import environment

    made: list[str] = []
    monkeypatch.setattr(BENCHMARK, "make_environment", lambda paths, log: made.append("diffusers"))
    monkeypatch.setattr(environment, "make_vllm_environment", lambda ctx: made.append("vllm"))

    def build(*flags: str) -> list[str]:
        made.clear()
        args = parse_run_args(["--action=build", *flags], ["build"], sorted(IMPLEMENTATIONS))
        for name in ("engine", "openai"):
            plugin = HARNESSES.get(name)
            if args.workload.harness_type.value == plugin.harness_type and plugin.needs_environment(args, False):
                plugin.make_environment(SimpleNamespace(args=args, paths=None, log=print))
        return made

    assert build("--benchmarks=wan-2.2-t2v-a14b") == ["diffusers"]
    assert build("--benchmarks=wan-2.2", "--harness_type=openai") == ["diffusers"]
    assert build("--benchmarks=llama3.1-8b", "--harness_type=openai") == ["vllm"]


def test_make_serve_llm_serves_the_toolkits_video_server_until_ctrl_c(wan_paths, tmp_path) -> None:
    """make serve_llm of wan starts its video server (no vLLM asked for), which answers the videogen API and refuses
    a request for another size; Ctrl-C (SIGINT to the command's process group, as a terminal sends it) stops it and
    its pipeline process, and the command ends 0."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from code.common.processes import free_port

    port = free_port()
    command = subprocess.Popen(
        [sys.executable, "-m", "code.main", "--action=serve_llm", f"--scratch_path={wan_paths.scratch}",
         f"--run_args=--benchmarks=wan-2.2 --model={models.SUBSTITUTE} --port={port}"],
        cwd=str(wan_paths.repo), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        lines = []
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and not any("Ctrl-C stops it" in line for line in lines):
            line = command.stdout.readline()
            assert line, "make serve_llm ended before it served:\n" + "".join(lines)
            lines.append(line)
        out = "".join(lines)
        assert f"serves wan-2.2-t2v-a14b's model {models.SUBSTITUTE}" in out and f":{port}" in out, out
        url = f"http://127.0.0.1:{port}/v1/videos/generations"

        def post(body: dict):
            request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
            return urllib.request.urlopen(request, timeout=300)

        with post({"prompt": "a cat", "size": f"{WIDTH}x{HEIGHT}", "num_frames": FRAMES}) as answer:
            assert answer.headers["Content-Type"] == "video/mp4" and answer.read()[4:8] == b"ftyp"
        with pytest.raises(urllib.error.HTTPError) as refused:
            post({"prompt": "a cat", "size": "1280x720"})
        assert refused.value.code == 400 and "makes 32x32 videos" in refused.value.read().decode()
        server_log = Path(re.search(r"log (\S+)\.\n", out).group(1))
        server = _pids("-f", str(server_log.parent / "server.json"))
        pipeline = [pid for parent in server for pid in _pids("-P", parent)]
        assert len(server) == 1 and len(pipeline) == 1, (server, pipeline)
        os.killpg(command.pid, signal.SIGINT)
        assert command.wait(timeout=60) == 0
        assert "Stopping the diffusers server" in command.stdout.read()
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5)
    left = [pid for pid in server + pipeline if Path(f"/proc/{pid}").exists()]
    assert not left, f"processes of the server are left: {left}"


def _pids(*pgrep: str) -> list[str]:
    import subprocess

    return subprocess.run(["pgrep", *pgrep], capture_output=True, text=True).stdout.split()
