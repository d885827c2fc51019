"""Reads gathered per wake-up of the client's event loop, as a network card moderates its interrupts.

A real engine ends a decode step with one event for every running sequence, and its server writes them one
connection after another over a millisecond or so. A loop that sleeps in the kernel until a socket is readable
wakes for the first of them, reads the one or two that have arrived, sleeps again, and wakes for the next: a
wake-up (the kernel's poll, a context switch, the loop's turn) for nearly every token, which costs more than the
token's own parsing. The hold keeps the loop off the kernel's poll for a short window after a turn that read
something (`time.sleep` in the loop's thread, where it holds no lock), so that the next poll finds the rest of the
step's events ready at once: one wake-up for many tokens. The hold comes after what the turn's reads scheduled (a
worker's frame of what they reported), and a read of an answer's headers alone starts none.

What it costs is latency, and only to events that arrive while the loop holds: such an event is read at most
`window_s` after it arrived. An event that arrives while the loop sleeps in its poll (one request at a time, a
sequence's first token after a quiet spell) is read at once, as without the hold; what a turn reads is reported
in that turn, before the hold. A loop that is busy (a turn that lasts the window or longer) does not hold at all,
so that the hold never takes throughput from a loop that has no time to spare. A window of 0 turns it off.

Where it pays: the worker processes (workers.py), which the client runs where one loop is not enough, so that
several loops share the machine's cores. Measured on the toolkit's test server paced at shared decode steps (one
event per read, 2 quiet cores, the server's 2 processes on them too): 2 workers cost 10.5 to 11.0 us of CPU per
token in all without the hold (3.4 tokens per wake-up) and 9.2 to 9.6 with a window of 0.5 to 1 ms (15 to 19); one
loop alone 8.1 to 9.1 either way (5 tokens per wake-up without, 20 with), as a loop that has the core to itself
loses little to waking. So only the workers hold by default (ClientSettings.worker_read_hold_us).
"""
from __future__ import annotations

import asyncio
import time

DEFAULT_WINDOW_US = 500      # the longest an event waits for the loop's next poll (0: no hold)


class ReadHold:
    """The hold of one event loop: `read()` is called by every read of an answer, on the loop."""

    __slots__ = ("loop", "window_s", "pending", "first_read_at", "holds")

    def __init__(self, loop: asyncio.AbstractEventLoop, window_s: float) -> None:
        self.loop, self.window_s = loop, window_s
        self.pending = False          # a hold is scheduled after this turn's reads
        self.first_read_at = 0.0      # ... since the first of them
        self.holds = 0                # holds slept so far

    def read(self) -> None:
        if not self.pending and self.window_s > 0:
            self.pending = True
            self.first_read_at = time.monotonic()
            self.loop.call_soon(self._last)

    def _last(self) -> None:
        """Behind whatever this turn's reads scheduled (a worker's frame of reports goes out before the hold)."""
        self.loop.call_soon(self._hold)

    def _hold(self) -> None:
        self.pending = False
        rest = self.window_s - (time.monotonic() - self.first_read_at)
        if rest > 0:
            self.holds += 1
            time.sleep(rest)
