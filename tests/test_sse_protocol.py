"""The serving client's protocol-level reader (serving/sse_protocol.py) against a raw TCP server that writes exact
bytes: events cut anywhere by the reads (inside a chunk's size line, between CR and LF, several events in a read)
read as the whole answer does; a whole JSON answer and an HTTP error come back whole; a keep-alive connection
the server closed while it was idle is replaced; an answer that is not HTTP, a connection closed in the middle of
an answer, a connection refused and a silent server fail as aiohttp's errors do."""
from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from code.common.serving.sse_protocol import ConnectFailed, Connections, new_event_loop

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def chunked(*parts: bytes) -> bytes:
    return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts) + b"0\r\n\r\n"


def event(i: int) -> bytes:
    return b"data: " + json.dumps({"choices": [{"token_ids": [i]}]}).encode() + b"\n\n"


def run(answers: list[list[bytes]], requests: int = 1, *, close_after: bool = False, timeout_s: float = 5.0,
        pause_s: float = 0.0) -> tuple[list, list[int]]:
    """Serve each request's answer as the given writes (a short pause between them, so that each is a read of
    its own; no writes: the connection closes unanswered); `close_after`: close each connection after its answer.
    Returns each request's Answer or exception, the events taken in order, and the connections the server saw."""
    async def main():
        connections = []

        async def serve(reader, writer):
            connections.append(writer)
            while answers:
                try:
                    await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                writes = answers.pop(0)
                if not writes:
                    writer.close()
                    return
                for write in writes:
                    if write is None:          # closed in the middle of the answer
                        writer.close()
                        return
                    writer.write(write)
                    await writer.drain()
                    await asyncio.sleep(0.01)
                if pause_s:
                    await asyncio.sleep(pause_s)
                if close_after:
                    writer.close()
                    return

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        pool = Connections("127.0.0.1", port, read_timeout_s=timeout_s)
        results, taken = [], []
        for _ in range(requests):
            try:
                results.append(await pool.post("/v1/completions", b"{}", {"Content-Type": "application/json"},
                                               lambda events: taken.extend(events) or None))
            except Exception as error:  # noqa: BLE001
                results.append(error)
            await asyncio.sleep(0.05)
        pool.close()
        server.close()
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()
        return results, taken, len(connections)

    loop = new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_events_cut_anywhere_by_the_reads_are_read_whole_and_in_order():
    body = chunked(event(1), event(2) + b": a comment\r\n" + event(3).replace(b"\n", b"\r\n"), event(4),
                   b"data: [DONE]\n\n")
    cut = [HEAD + body[:3], body[3:9], body[9:40], body[40:41], body[41:120], body[120:]]
    results, taken, _ = run([cut])
    assert results[0].status == 200 and results[0].streamed and results[0].result is None
    assert taken == [json.dumps({"choices": [{"token_ids": [i]}]}).encode() for i in (1, 2, 3, 4)] + [b"[DONE]"]


def test_an_answer_without_a_length_or_chunks_ends_with_its_connection():
    results, taken, _ = run([[b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
                              event(1), event(2) + b"data: [DONE]\n\n"]], close_after=True)
    assert results[0].status == 200 and results[0].result is None and len(taken) == 3


def test_a_whole_json_answer_and_an_http_error_come_back_whole_on_one_kept_connection():
    whole = b'{"choices": [{"token_ids": [5]}]}'
    error = b'{"error": "busy"}'
    results, taken, connections = run([
        [b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(whole), whole)],
        [b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
         % (len(error), error)]], requests=2)
    assert (results[0].status, results[0].streamed, results[0].body) == (200, False, whole)
    assert (results[1].status, results[1].body) == (503, error) and taken == [] and connections == 1


def test_a_kept_connection_the_server_closed_is_replaced():
    results, taken, connections = run([[HEAD + chunked(event(1))], [HEAD + chunked(event(2))]], requests=2,
                                      close_after=True)      # closed while idle: the pool forgets it
    assert [r.status for r in results] == [200, 200] and len(taken) == 2 and connections == 2
    results, taken, connections = run([[HEAD + chunked(event(1))], [], [HEAD + chunked(event(2))]], requests=2)
    assert [r.status for r in results] == [200, 200] and len(taken) == 2 and connections == 2   # closed unanswered
    results, _, _ = run([[], [HEAD + chunked(event(2))]])     # ... but a new connection's failure is the request's
    assert isinstance(results[0], aiohttp.ServerDisconnectedError)
    results, taken, connections = run([[HEAD + chunked(event(1))], [HEAD + b"5\r\ndata:", None]], requests=2)
    # ... and so is the failure of a kept connection that had begun to answer
    assert isinstance(results[1], aiohttp.ServerDisconnectedError) and len(taken) == 1 and connections == 1


def test_failures_are_aiohttps():
    broken = run([[HEAD + b"5\r\ndata:"]], close_after=True)[0][0]
    assert isinstance(broken, aiohttp.ServerDisconnectedError)
    garbage = run([[b"this is not HTTP\r\n\r\n"]])[0][0]
    assert isinstance(garbage, aiohttp.ClientPayloadError)
    silent = run([[HEAD]], timeout_s=0.3, pause_s=1.0)[0][0]
    assert isinstance(silent, asyncio.TimeoutError)

    async def refused():
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        with pytest.raises(ConnectFailed) as caught:
            await Connections("127.0.0.1", port).post("/", b"", {}, lambda events: None)
        return caught.value

    assert isinstance(asyncio.run(refused()).os_error, OSError)
