"""The openai harness's reader of one streamed answer (transport.py: a read's lines in one call where the server
returns token ids, sse_protocol.py: llhttp's framing of them), fed exact bytes on one connection, without a network:
wherever the reads cut the answer (inside an event, its chunk's size line, between CR and LF), however many events a
read carries, the stream hears what one read of the whole answer gives it: the first token at once, the rest with
the final chunk; [DONE] ends the answer; an error chunk, a chunk that is not JSON and ids that stop in the middle fail
the request naming the endpoint."""
from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

from code.common.generation import GenerationSettings, Request
from code.common.serving.endpoints import parse_endpoints
from code.common.serving.sse_protocol import Connections, _Connection
from code.common.serving.transport import SERVER_IDS, ClientSettings, EndpointFailed, Transport, _Output

URL = "http://127.0.0.1:9"
HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
DONE = b"data: [DONE]\n\n"


class Heard:
    """A token stream that keeps what it hears."""

    def __init__(self) -> None:
        self.chunks: list[tuple[int, list[int], bool]] = []

    def chunk(self, request_id, tokens, final) -> None:
        self.chunks.append((request_id, list(tokens), final))


class Wire:
    def write(self, data) -> None:
        pass

    def close(self) -> None:
        pass


def event(ids: list[int], finish: str | None = None, api: str = "completions", line_end: bytes = b"\n") -> bytes:
    choice = {"index": 0, "token_ids": ids, "finish_reason": finish, "logprobs": None}
    choice.update({"text": "".join(f" t{i}" for i in ids)} if api == "completions" else
                  {"delta": {"content": "".join(f" t{i}" for i in ids)}})
    return b"data: " + json.dumps({"id": "x", "object": "chunk", "choices": [choice]}).encode() + line_end * 2


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def read(reads: list[bytes], api: str = "completions") -> tuple[list, object]:
    """Feed the reads to one connection as one request's answer (the reader of a run's requests: token ids from the
    server, reported); (what the stream heard, the answer or the request's failure)."""
    from code.common.serving.payloads import payload_for

    generation = GenerationSettings(max_new_tokens=8, eos_token_ids=())
    transport = Transport(parse_endpoints([URL]), ClientSettings(model="m"), generation, np.arange(4),
                          api=payload_for(set(), api))
    transport.stream = heard = Heard()
    state = transport.endpoints[0]
    state.token_ids = SERVER_IDS
    request, output = Request(7, np.arange(4), generation), _Output()

    def take(payloads):
        return transport._take_events(state, request, output, payloads, True, True)

    loop = asyncio.new_event_loop()
    try:
        done = loop.create_future()
        connection = _Connection(Connections("127.0.0.1", 9))
        connection.connection_made(Wire())
        connection.start(b"", take, output.fast(take, heard, request.id, state), done)
        for data in reads:
            connection.data_received(data)
        outcome = done.exception() or done.result() if done.done() else None
    finally:
        loop.close()
    if output.finish is None and not isinstance(outcome, BaseException):
        outcome = "no finish"
    return heard.chunks, outcome


ANSWER = HEAD + chunked(event([11]), event([12]), event([13, 14]), event([15], "length"),
                        b'data: {"choices": [], "usage": {"completion_tokens": 5}}\n\n', DONE)
HEARD = [(7, [11], False), (7, [12, 13, 14, 15], True)]


def test_one_read_of_the_whole_answer_and_one_read_per_event_are_heard_alike():
    chunks, answer = read([ANSWER])
    assert chunks == HEARD and answer.status == 200 and answer.result is False      # [DONE] ended it
    events = ANSWER[len(HEAD):].split(b"\r\n\r\n")
    chunks, answer = read([HEAD] + [part + b"\r\n\r\n" for part in events[:-1]] + [events[-1]])
    assert chunks == HEARD and answer.result is False


def test_reads_cut_anywhere_are_heard_as_the_whole_answer():
    for cut in range(1, len(ANSWER)):
        chunks, answer = read([ANSWER[:cut], ANSWER[cut:]])
        assert chunks == HEARD and answer.result is False, cut
    for cut in range(len(HEAD) + 5, len(ANSWER) - 40, 3):     # a read of several events, cut on both sides
        chunks, answer = read([ANSWER[:len(HEAD) + 3], ANSWER[len(HEAD) + 3:cut], ANSWER[cut:]])
        assert chunks == HEARD and answer.result is False, cut


def test_byte_by_byte_crlf_line_ends_comments_and_chat_are_heard_alike():
    answer = HEAD + chunked(b": keep-alive\r\n\r\n", event([11], api="chat", line_end=b"\r\n"),
                            event([12, 13], api="chat") + event([14], api="chat") + event([15], "stop", api="chat"),
                            DONE)
    chunks, result = read([answer[i:i + 1] for i in range(len(answer))], api="chat")
    assert chunks == [(7, [11], False), (7, [12, 13, 14, 15], True)] and result.result is False
    role = b'data: {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}\n\n'     # no ids yet
    chunks, _ = read([HEAD, chunked(role, event([11], api="chat"), event([12], "stop", api="chat"), DONE)],
                     api="chat")
    assert chunks == [(7, [11], False), (7, [12], True)]


def test_an_answer_without_done_ends_with_its_final_chunk_and_one_without_a_final_chunk_does_not():
    chunks, answer = read([HEAD + chunked(event([11]), event([12], "length"))])
    assert chunks == [(7, [11], False), (7, [12], True)] and answer.result is None
    chunks, outcome = read([HEAD + chunked(event([11]), event([12]), DONE)])
    assert chunks == [(7, [11], False)] and outcome == "no finish"


@pytest.mark.parametrize(("bad", "says"), [
    (b'data: {"error": {"message": "out of memory"}}\n\n', "reported an error in the middle of a completion"),
    (b"data: {not json\n\n", "sent a stream chunk that is not a completion chunk"),
    (b'data: {"choices": [{"index": 0, "text": " t", "finish_reason": null}]}\n\n',
     "stopped returning token ids in the middle of the run"),
    (b'data: {"choices": [{"index": 0, "token_ids": "12", "finish_reason": null}]}\n\n', "token_ids that are not a list"),
])
def test_a_bad_chunk_fails_the_request_naming_the_endpoint(bad, says):
    for reads in ([HEAD + chunked(event([11]), bad, event([12], "length"), DONE)],
                  [HEAD, chunked(event([11]))[:-5], b"%x\r\n%s\r\n" % (len(bad), bad)]):
        chunks, failure = read(reads)
        assert isinstance(failure, EndpointFailed) and str(failure).startswith(URL) and says in str(failure)
        assert chunks == [(7, [11], False)]
