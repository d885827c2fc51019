"""The client loop's read hold (serving/read_hold.py): after a turn that read, the loop waits out the rest of the
window from that turn's first read before it polls again, once per turn however many reads it had; a turn that
took the window or longer does not wait; a window of 0 never waits; and answers read with a hold are the answers
read without one."""
from __future__ import annotations

import asyncio
import json

import pytest

from code.common.serving import read_hold
from code.common.serving.read_hold import ReadHold


class Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture()
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(read_hold.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(read_hold.time, "sleep", clock.sleep)
    return clock


def turn(loop: asyncio.AbstractEventLoop, hold: ReadHold, clock: Clock, reads: int, spent_s: float) -> None:
    """One turn of the loop: `reads` reads over `spent_s` seconds, then the callbacks they scheduled."""
    for _ in range(reads):
        if not hold.pending:
            hold.read()
        clock.now += spent_s / reads
    for _ in range(3):         # the hold runs behind what the turn scheduled
        loop.run_until_complete(asyncio.sleep(0))


def test_a_turn_that_read_waits_out_the_window_from_its_first_read_once(clock):
    loop = asyncio.new_event_loop()
    try:
        hold = ReadHold(loop, 0.0005)
        turn(loop, hold, clock, reads=3, spent_s=0.0002)
        assert clock.slept == [0.0003] and hold.holds == 1 and not hold.pending
        turn(loop, hold, clock, reads=1, spent_s=0.0)
        assert clock.slept == [0.0003, 0.0005]
        turn(loop, hold, clock, reads=40, spent_s=0.002)      # a busy turn: no wait
        assert clock.slept == [0.0003, 0.0005] and hold.holds == 2
        loop.run_until_complete(asyncio.sleep(0))            # a turn without reads: no wait
        assert hold.holds == 2
    finally:
        loop.close()


def test_a_window_of_0_never_waits(clock):
    loop = asyncio.new_event_loop()
    try:
        hold = ReadHold(loop, 0.0)
        turn(loop, hold, clock, reads=2, spent_s=0.0)
        assert clock.slept == [] and not hold.pending
    finally:
        loop.close()


def test_answers_read_with_a_hold_are_the_answers_read_without(monkeypatch):
    from code.common.serving import sse_protocol

    from . import test_sse_protocol as cases

    body = cases.chunked(cases.event(1), cases.event(2) + cases.event(3), cases.event(4), b"data: [DONE]\n\n")
    cut = [cases.HEAD + body[:20], body[20:70], body[70:]]
    plain = cases.run([list(cut)])
    told = []

    class Counted(ReadHold):
        def read(self) -> None:
            told.append(1)
            super().read()

    class Held(sse_protocol.Connections):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs, hold=Counted(asyncio.get_running_loop(), 0.002))

    monkeypatch.setattr(cases, "Connections", Held)
    held = cases.run([list(cut)])
    assert told, "the reads were not told to the hold"
    assert held[1] == plain[1] == [json.dumps({"choices": [{"token_ids": [i]}]}).encode() for i in (1, 2, 3, 4)] \
        + [b"[DONE]"]
    assert (held[0][0].status, held[0][0].result) == (plain[0][0].status, plain[0][0].result) == (200, None)
