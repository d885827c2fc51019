"""The serving client's fast paths on the toolkit's streaming test server: the server's ways of writing (one
chunk per read, paced at shared decode steps or not, or an answer's chunks coalesced) and its several processes on
one port give the same answers; the client's reader gives the same tokens in both; whole (non-streamed) answers give
the streamed ones' accuracy log."""
from __future__ import annotations

import http.client
import json
import subprocess
import sys
import time

import pytest

from code.common.serving.fake_server import ServerSettings, StreamingServer, output_ids

from .conftest import REPO


def stream_of(url: str, body: dict) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    connection.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    answer = connection.getresponse().read()
    connection.close()
    return answer


BODY = {"model": "test-model", "prompt": [3, 7], "max_tokens": 6, "return_token_ids": True, "stream": True,
        "stop_token_ids": [2]}


def test_the_test_servers_writes_change_how_chunks_travel_not_what_they_say():
    answers = {}
    for writes, steps in (("chunk", False), ("answer", False), ("chunk", True)):
        with StreamingServer(ServerSettings(writes=writes, chunk_delay_s=0.01 if steps else 0.0, steps=steps)) \
                as server:
            answers[writes, steps] = stream_of(server.url, BODY)
    assert answers["chunk", False] == answers["answer", False] == answers["chunk", True]
    events = [line for line in answers["chunk", False].split(b"\n\n") if line]
    assert len(events) == 7 and events[-1] == b"data: [DONE]"
    assert [json.loads(e[6:])["choices"][0]["token_ids"] for e in events[:-1]] == [[i] for i in output_ids([3, 7], 6)]


def test_an_unknown_way_of_writing_is_refused():
    with pytest.raises(ValueError, match="writes must be one of chunk, answer"):
        StreamingServer(ServerSettings(writes="bulk"))


def test_several_test_server_processes_serve_one_port_and_end_with_the_first():
    process = subprocess.Popen([sys.executable, "-m", "code.common.serving.fake_server", "--processes=3",
                                "--writes=answer"], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        url = process.stdout.readline().split()[-1]
        children = [int(pid) for pid in subprocess.run(["pgrep", "-P", str(process.pid)], capture_output=True,
                                                       text=True).stdout.split()]
        assert len(children) == 2
        with StreamingServer(ServerSettings(writes="chunk")) as one:
            expected = stream_of(one.url, BODY)
        assert all(stream_of(url, BODY) == expected for _ in range(6))
    finally:
        process.terminate()
        process.wait(timeout=10)
    for child in children:
        for _ in range(50):
            if subprocess.run(["kill", "-0", str(child)], capture_output=True).returncode:
                break
            time.sleep(0.1)
        else:
            pytest.fail(f"test server process {child} outlived the first")


# -- the client's reading of chunks ----------------------------------------------------------------------------------
def test_events_are_the_data_lines_whatever_the_reads_cut_and_the_line_ends():
    from code.common.serving.chunks import events

    stream = b'data: {"a": 1}\r\n\r\n: a comment\nevent: x\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
    for cut in range(1, len(stream)):
        first, rest = events(b"", stream[:cut])
        second, rest = events(rest, stream[cut:])
        assert first + second == [b'{"a": 1}', b'{"b": 2}', b"[DONE]"] and rest == b""


@pytest.mark.parametrize("api, payload, expected", [
    ("completions", b'{"choices": [{"text": " t5", "token_ids": [5], "finish_reason": null, "logprobs": null}]}',
     [([5], " t5", None)]),
    ("chat", b'{"choices": [{"delta": {"role": "assistant", "content": ""}, "finish_reason": null}]}', [None]),
    ("chat", b'{"choices": [{"message": {"content": " t5"}, "token_ids": [5], "finish_reason": "stop"}]}',
     [([5], " t5", "stop")]),
])
def test_a_chunk_reads_as_its_apis_builder_reads_it(api, payload, expected):
    from code.common.serving.chunks import decode
    from code.common.serving.payloads import PAYLOADS

    builder = PAYLOADS[api]()
    general = [builder.read(choice) for choice in builder.choices(json.loads(payload))]
    assert decode(payload, api).choices == general == expected


@pytest.mark.parametrize("payload", [b"{not json", b'{"choices": [{"token_ids": "5"}]}', b'{"text": " t5"}',
                                     b'{"choices": [{"token_ids": [5.5]}]}'])
def test_a_chunk_of_another_shape_is_left_to_the_general_reading(payload):
    from code.common.serving.chunks import decode

    assert decode(payload, "completions") is None


def test_an_error_in_a_chunk_is_read():
    from code.common.serving.chunks import decode

    assert decode(b'{"error": {"message": "out of memory"}}', "completions").error == {"message": "out of memory"}


# -- whole answers and stream intervals ------------------------------------------------------------------------------
@pytest.mark.parametrize("fault, eos_every", [("", 3), ("no_token_ids", 3)])
def test_whole_answers_and_stream_intervals_give_the_streamed_outputs_and_the_record_says_which(fault, eos_every):
    from code.common.serving.client import ClientSettings

    from .test_serving import Recorder, prompts, run_client  # noqa: F401

    requests = prompts(16)
    outputs, transports = {}, {}
    with StreamingServer(ServerSettings(model="m", fault=fault, eos_every=eos_every)) as server:
        for answers, interval in (("streamed", 0), ("whole", 0), ("streamed", 4)):
            client, stream = run_client([server.url], requests, ClientSettings(
                model="m", metrics_interval_s=0, answers=answers, stream_interval=interval))
            assert stream.error is None
            outputs[answers, interval] = stream.outputs()
            record = client.records()[0]
            transports[answers, interval] = (record["transport"], record["extras"]["answers"],
                                             record["extras"]["stream_interval"])
            if answers == "whole":
                assert all(final for _, _, final in stream.calls)    # one call per request, its completion
            else:
                assert len(stream.calls) > len(requests)            # the first token before the completion
    assert outputs["streamed", 0] == outputs["whole", 0] == outputs["streamed", 4]
    assert transports == {("streamed", 0): ("HTTP, streamed /v1/completions", "streamed", 0),
                          ("whole", 0): ("HTTP, whole answers /v1/completions", "whole", 0),
                          ("streamed", 4): ("HTTP, streamed /v1/completions", "streamed", 4)}


def test_the_test_server_honours_a_stream_interval():
    with StreamingServer(ServerSettings()) as server:
        answer = stream_of(server.url, {**BODY, "max_tokens": 10, "stream_interval": 4})
    chunks = [json.loads(e[6:])["choices"][0]["token_ids"] for e in answer.split(b"\n\n") if e and b"[DONE]" not in e]
    assert [len(c) for c in chunks] == [1, 4, 4, 1]


def test_a_text_prompt_is_answered_on_all_of_its_text_and_a_stream_that_asks_ends_with_its_usage():
    from code.common.serving.fake_server import content_key

    def answer(prompt, **more) -> list[dict]:
        body = stream_of(server.url, {**BODY, "prompt": prompt, **more})
        return [json.loads(e[6:]) for e in body.split(b"\n\n") if e and b"[DONE]" not in e]

    with StreamingServer(ServerSettings()) as server:
        first, other = answer("Summarize: the cat sat."), answer("Summarise: the cat sat.")
        counted = answer("Summarize: the cat sat.", stream_options={"include_usage": True})
        refused = stream_of(server.url, {**BODY, "prompt": [1, "two"]})
    ids = [chunk["choices"][0]["token_ids"][0] for chunk in first]
    # keyed on the whole text: one letter at the start gives another answer (swapped answers show)
    assert ids == output_ids([content_key(["Summarize: the cat sat."])], 6)
    assert ids != [chunk["choices"][0]["token_ids"][0] for chunk in other]
    assert "usage" not in first[-1] and counted[:-1] == first
    assert counted[-1]["choices"] == [] and counted[-1]["usage"]["completion_tokens"] == 6
    assert b"prompt must be text or a list of token ids" in refused


def test_only_offline_takes_whole_answers():
    from code.common.constants import Scenario
    from code.common.harness.serving_system import client_settings

    fields = {"openai_in_flight": 8, "openai_scheduler": "fewest_requests", "openai_request_timeout_s": 60.0,
              "openai_metrics_interval_s": 2.0, "openai_warmup_requests": 1, "openai_token_ids": "auto",
              "openai_offline_answers": "whole", "openai_stream_interval": 0}
    assert client_settings(fields, "m", Scenario.Offline).answers == "whole"
    assert client_settings(fields, "m", Scenario.Server).answers == "streamed"
    assert client_settings({**fields, "openai_offline_answers": "streamed"}, "m", Scenario.Offline).answers \
        == "streamed"
