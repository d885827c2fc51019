"""Prompts of parts (code/common/prompts.py) and the serving APIs that carry them (serving/payloads.py), through the
openai harness's transport (serving/client.py) to the toolkit's own test server on the loopback: token ids to
/v1/completions as before, byte for byte; a chat with an image (a real JPEG of ../shared/data) to
/v1/chat/completions, whose bytes reach the server unchanged; audio (a real WAV) to /v1/audio/transcriptions; the
transport's faults for chat too; the in-process engine refuses prompts it cannot take before any test starts; and a
chat's answer reaches LoadGen's accuracy log through the streaming system under test."""
from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest

from code.common.benchmark_api import GenerativeBenchmark
from code.common.generation import GenerationSettings, Request
from code.common.prompts import AUDIO, IMAGE, PROBE_TOKENS, TEXT, TOKEN_IDS, Audio, Chat, Image, Message, Text, \
    checked, parts_of, probe, size
from code.common.serving.client import SERVER_IDS, TEXT_IDS, ClientSettings, EndpointFailed
from code.common.serving.payloads import ChatCompletions, Completions, Transcriptions, data_url, payload_for
from code.common.serving.fake_server import ServerSettings, StreamingServer, content_key, output_ids

from .conftest import REPO
from .test_serving import EOS, GENERATION, run_client

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
IMAGES = sorted((DATA / "imagenet_sample").glob("*.JPEG"))[:3]
AUDIO_FILE = DATA / "librivox_sample" / "cards" / "001.wav"
QUESTION = "What is in this picture? Answer in one word."
RUN_TIMEOUT_S = 90


def need(path: Path) -> Path:
    if not path.exists():
        pytest.skip(f"{path} is not here (the shared sample data sets; see ../shared/data/README.md)")
    return path


def picture_chat(path: Path) -> Chat:
    return Chat.user(Text(QUESTION), Image(path.read_bytes(), "image/jpeg"))


def chat_expected(chat: Chat, count: int = GENERATION.max_new_tokens) -> list[int]:
    parts = [p.text if isinstance(p, Text) else p.data for p in chat.contents()]
    return output_ids([content_key(parts)], count)


# -- prompts -------------------------------------------------------------------------------------------------------
def test_a_prompt_is_token_ids_or_a_chat_of_text_images_and_audio():
    ids = np.arange(5, 45, dtype=np.int32)
    chat = Chat((Message("system", (Text("Be brief."),)),
                 Message("user", (Text("hi"), Image(b"\xff\xd8jpeg", "image/jpeg"), Audio(b"RIFFwav", "audio/wav")))))
    assert parts_of(ids) == {TOKEN_IDS} and parts_of(chat) == {TEXT, IMAGE, AUDIO}
    assert checked(ids, 0) is not None and checked(chat, 1) is chat
    assert size(ids) == 40 and size(chat) == len("Be brief.") + 2 + 6 + 7
    assert probe(ids).tolist() == ids[:PROBE_TOKENS].tolist() and probe(chat) is chat     # an image is never cut


@pytest.mark.parametrize("prompt, message", [
    (np.zeros((2, 3), np.int64), "1-D array of integer token ids or a chat"),
    (np.array([], np.int64), "1-D array of integer token ids or a chat"),
    (np.array([1.5, 2.0]), "dtype float64"),
    (Chat(()), "a chat with no content"),
])
def test_a_prompt_that_is_neither_is_named(prompt, message):
    with pytest.raises(ValueError, match=message) as refused:
        checked(prompt, 7)
    assert "prompt 7" in str(refused.value)


def test_media_keep_their_stored_bytes_and_type():
    with pytest.raises(ValueError, match="media type must start with image/"):
        Image(b"RIFF", "audio/wav")
    with pytest.raises(ValueError, match="needs its bytes as the data set stores them"):
        Audio(b"", "audio/wav")


# -- payload builders ------------------------------------------------------------------------------------------------
def test_a_token_prompt_makes_todays_completions_body_byte_for_byte():
    settings = GenerationSettings(max_new_tokens=128, eos_token_ids=(128001, 128009), min_new_tokens=2, seed=7,
                                  top_k=20)
    body, headers = Completions().body("m", np.array([128000, 9906, 1917], np.int32), settings, 128, True)
    assert body == (b'{"model":"m","prompt":[128000,9906,1917],"max_tokens":128,"min_tokens":2,"temperature":0.0,'
                    b'"top_p":1.0,"n":1,"stream":true,"stop_token_ids":[128001,128009],"ignore_eos":false,'
                    b'"top_k":20,"seed":7,"return_token_ids":true}')
    assert headers == {"Content-Type": "application/json", "Accept": "text/event-stream"}


def test_a_chat_with_an_image_is_a_chat_completions_body_with_a_data_url_of_the_files_bytes():
    path = need(IMAGES[0]) if IMAGES else need(DATA / "imagenet_sample")
    body, _ = ChatCompletions().body("m", picture_chat(path), GENERATION, 8, False)
    sent = json.loads(body)
    text, image = sent["messages"][0]["content"]
    assert sent["messages"][0]["role"] == "user" and text == {"type": "text", "text": QUESTION}
    assert image["type"] == "image_url" and image["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert base64.b64decode(image["image_url"]["url"].split(",", 1)[1]) == path.read_bytes()
    assert sent["max_completion_tokens"] == 8 and sent["stop_token_ids"] == [EOS] and "return_token_ids" not in sent


def _sent(body) -> dict:
    """A body as the server reads it: the JSON object, or a multipart form's fields (as strings)."""
    if isinstance(body, bytes):
        return json.loads(body)
    return {fields["name"]: value for fields, _, value in body._fields}


@pytest.mark.parametrize("server_sampling", [False, True], ids=["reference sampling", "server sampling"])
@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole answers"])
def test_every_builder_sends_the_answer_mode_it_is_asked_whatever_the_sampling(stream, server_sampling):
    """`stream` and `stream_interval` are the transport's in every API's body; server-side sampling leaves out the
    sampling fields alone (a whole answer asked under server sampling is not streamed)."""
    settings = GenerationSettings(max_new_tokens=8, eos_token_ids=(EOS,), server_sampling=server_sampling)
    prompts = {Completions: np.array([1, 2, 3], np.int32), ChatCompletions: Chat.user(Text(QUESTION)),
               Transcriptions: Chat.user(Audio(b"RIFF....WAVE", "audio/wav"))}
    for builder, prompt in prompts.items():
        body, _ = builder().body("m", prompt, settings, 8, True, stream, 4)
        sent = _sent(body)
        if builder is Transcriptions:
            assert sent["stream"] == ("true" if stream else "false")
            assert sent.get("stream_interval") == ("4" if stream else None)
            continue
        assert sent["stream"] is stream, (builder.name, sent)
        assert sent.get("stream_interval") == (4 if stream else None), (builder.name, sent)
        sampling = {"temperature", "top_p", "min_tokens", "stop_token_ids"} & set(sent)
        assert sampling == (set() if server_sampling else {"temperature", "top_p", "min_tokens", "stop_token_ids"})


def test_each_prompt_goes_to_the_api_that_carries_it():
    assert isinstance(payload_for({TOKEN_IDS}), Completions)
    assert isinstance(payload_for({TEXT, IMAGE}), ChatCompletions)
    assert isinstance(payload_for({AUDIO}), Transcriptions) and isinstance(payload_for({AUDIO, TEXT}), Transcriptions)
    assert isinstance(payload_for({AUDIO, TEXT}, "chat"), ChatCompletions)     # a model may name its API
    with pytest.raises(ValueError, match="/v1/completions cannot carry prompts of image"):
        payload_for({TEXT, IMAGE}, "completions")
    with pytest.raises(ValueError, match="no serving API is named 'embeddings'"):
        payload_for({TEXT}, "embeddings")
    with pytest.raises(ValueError, match="carries token ids, not image, text"):
        Completions().refuse(Chat.user(Text("x"), Image(b"\x89PNG", "image/png")))
    assert data_url("image/png", b"\x89PNG") == "data:image/png;base64,iVBORw=="


# -- through the transport -------------------------------------------------------------------------------------------
def chat_requests(count: int = 3) -> list[Request]:
    if not IMAGES:
        need(DATA / "imagenet_sample")
    return [Request(i, picture_chat(IMAGES[i % len(IMAGES)]), GENERATION) for i in range(count)]


@pytest.mark.parametrize("fault, ids", [("", SERVER_IDS), ("no_token_ids", TEXT_IDS), ("no_stream", SERVER_IDS),
                                        ("one_chunk", SERVER_IDS)])
def test_a_chat_with_an_image_reaches_the_server_unchanged_and_its_answer_comes_back(fault, ids):
    requests = chat_requests()
    with StreamingServer(ServerSettings(model="m", fault=fault)) as server:
        client, stream = run_client([server.url], requests, probe=requests[0].prompt)
    assert stream.error is None
    assert stream.outputs() == {r.id: chat_expected(r.prompt) for r in requests}
    record = client.records()[0]
    assert record["transport"] == "HTTP, streamed /v1/chat/completions" and record["extras"]["token_ids"] == ids
    received = {base64.b64decode(item["image_url"]["url"].split(",", 1)[1])
                for body in server.received for item in body["messages"][0]["content"] if item["type"] == "image_url"}
    assert received == {path.read_bytes() for path in IMAGES[:len(requests)]}    # probe and warm-up: image 0 again
    assert all(body["messages"][0]["content"][0] == {"type": "text", "text": QUESTION} for body in server.received)


@pytest.mark.parametrize("fault, message", [
    ("break", "closed the connection in the middle of an answer"),
    ("malformed", "sent a stream chunk that is not a completion chunk"),
    ("stall", "sent nothing for 1 s"),
])
def test_a_fault_in_the_middle_of_a_chat_fails_the_run_naming_the_endpoint(fault, message):
    """As for token prompts (test_serving.py): the probe and warm-up end before chunk 9 (a chat stream's opening
    role chunk is not counted)."""
    settings = ClientSettings(model="m", request_timeout_s=1.0, metrics_interval_s=0, in_flight=2)
    long = GenerationSettings(max_new_tokens=16, eos_token_ids=(EOS,))
    requests = [Request(r.id, r.prompt, long) for r in chat_requests(6)]
    with StreamingServer(ServerSettings(model="m")) as good, \
            StreamingServer(ServerSettings(model="m", fault=fault, fault_after=9)) as bad:
        _, stream = run_client([good.url, bad.url], requests, settings, probe=requests[0].prompt)
    assert isinstance(stream.error, EndpointFailed) and bad.url in str(stream.error) and message in str(stream.error)


def test_an_http_error_to_a_chat_is_named_before_the_test():
    requests = chat_requests(1)
    with StreamingServer(ServerSettings(model="m", fault="http_error")) as server:
        with pytest.raises(EndpointFailed, match=f"{server.url} answered HTTP 500"):
            run_client([server.url], requests, probe=requests[0].prompt)


def test_audio_goes_to_transcriptions_as_the_stored_file_and_its_text_comes_back_as_tokens():
    clip = Chat.user(Audio(need(AUDIO_FILE).read_bytes(), "audio/wav"))
    requests = [Request(0, clip, GENERATION)]
    with StreamingServer(ServerSettings(model="m")) as server:
        client, stream = run_client([server.url], requests, probe=clip)
    assert stream.error is None and stream.outputs() == {0: chat_expected(clip)}
    assert client.records()[0]["extras"]["token_ids"] == TEXT_IDS      # Whisper's endpoint streams text only
    form = server.received[-1]
    assert form["file"] == AUDIO_FILE.read_bytes() and form["model"] == "m" and form["stream"] == "true"
    assert form["max_completion_tokens"] == str(GENERATION.max_new_tokens) and form["temperature"] == "0.0"


# -- the in-process engine refuses what it cannot take, before any test --------------------------------------------
class Captions(GenerativeBenchmark):
    """A benchmark of this file alone whose model is prompted with a picture and a question."""

    name = "captions-test"
    datasets: dict = {}


def test_the_in_process_engine_refuses_chat_prompts_before_any_test_and_the_openai_harness_takes_them(tmp_path):
    from code.common.benchmark_api import IMPLEMENTATIONS, ModelSpec
    from code.common.config_registry import ConfigKey, ResolvedConfig
    from code.common.constants import LWIS, HarnessType, Scenario, WorkloadSetting
    from code.common.errors import UserError
    from code.common.harness.registry import HARNESSES, Selection
    from code.common.harness.selection import choose

    captions = Captions()
    captions.models = {"vl": ModelSpec("vl", "a vision-language model", "open", (), "", "", decoder=True,
                                       prompt_parts=(TEXT, IMAGE))}
    IMPLEMENTATIONS.register(Captions.name, captions)
    try:
        where = Selection(Captions.name, "vl", True, "lwis", tmp_path)
        assert "takes prompts of token ids, and vl's prompts are made of image, text" in \
            HARNESSES.get("llm").why_not(where)
        assert HARNESSES.get("openai").why_not(Selection(Captions.name, "vl", True, "openai", tmp_path)) is None
        config = ResolvedConfig(ConfigKey(Captions.name, Scenario.Offline, "sys", WorkloadSetting(HarnessType(LWIS))),
                                "", "", MappingProxyType({"model": "vl"}), MappingProxyType({}))
        with pytest.raises(UserError, match="--harness_type=openai") as refused:
            choose(config, "lwis", tmp_path)
        assert refused.value.exit_code == 2 and "No implementation of the lwis harness" in str(refused.value)
    finally:
        IMPLEMENTATIONS.unregister(Captions.name)


# -- a chat's answer in LoadGen's accuracy log ----------------------------------------------------------------------
class PictureSet:
    """Chat prompts of the first images of imagenet_sample, as a preprocessed set of a captioning benchmark loads."""

    directory = Path(".")

    def __len__(self) -> int:
        return len(IMAGES)

    def load(self, index: int) -> Chat:
        return picture_chat(IMAGES[index])


def child(spec: dict[str, Any]) -> None:
    from code.common.constants import Scenario, TestMode
    from code.common.harness.llm_sut import PromptLibrary
    from code.common.harness.serving_system import ServingSUT
    from code.common.serving.client import ServingClient
    from code.common.serving.endpoints import parse_endpoints

    from .test_llm_sut import run_streaming_test

    out, samples = Path(spec["out"]), PictureSet()
    prompts = PromptLibrary(samples, len(samples))
    with StreamingServer(ServerSettings(model="m", tokens_per_chunk=3)) as server:
        client = ServingClient(parse_endpoints([server.url]), ClientSettings(model="m", metrics_interval_s=0),
                               GENERATION, samples.load(0))
        sut = ServingSUT(Scenario.Offline, prompts, client, GENERATION).start()
        run_streaming_test(sut, prompts, out, Scenario.Offline, TestMode.AccuracyOnly, len(samples))
    (out / "result.json").write_text(json.dumps({"error": repr(sut.error) if sut.error else None,
                                                 "completed": sut.counters.completed}))


def test_a_chats_answer_reaches_the_accuracy_log_through_the_streaming_sut(tmp_path):
    from code.common.records.loadgen_log import read_detail

    from .test_llm_sut import accuracy_entries, tokens_of

    if len(IMAGES) < 3:
        need(DATA / "imagenet_sample" / "missing")
    (tmp_path / "spec.json").write_text(json.dumps({"out": str(tmp_path)}))
    done = subprocess.run([sys.executable, "-m", "tests.test_prompt_parts", str(tmp_path / "spec.json")], cwd=REPO,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((tmp_path / "result.json").read_text())
    assert result == {"error": None, "completed": len(IMAGES)}
    logged = {int(e["qsl_idx"]): tokens_of(e["data"]) for e in accuracy_entries(tmp_path)}
    assert logged == {i: chat_expected(picture_chat(path)) for i, path in enumerate(IMAGES)}
    assert read_detail(tmp_path).errors == ()


if __name__ == "__main__":
    child(json.loads(Path(sys.argv[1]).read_text()))
