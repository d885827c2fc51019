"""A progress line while LoadGen runs: elapsed time, completed samples and the expected end."""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable


class Progress:
    """Prints from a background thread; on a terminal it rewrites one line, else a line every 10 s."""

    def __init__(self, label: str, counts: Callable[[], tuple[int, int]], min_duration_s: float,
                 min_samples: int | None = None, stream=None, clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.counts = counts                 # -> (completed, issued so far)
        self.min_duration_s = min_duration_s
        # Scenarios whose queries keep coming (SingleStream, MultiStream, Server) end when both min_duration and
        # the minimum query count are reached; None for Offline, whose one query is issued at the start.
        self.min_samples = min_samples
        self.clock = clock
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="progress")
        self._start = clock()

    def __enter__(self) -> "Progress":
        self._start = self.clock()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def line(self) -> str:
        elapsed = self.clock() - self._start
        completed, issued = self.counts()
        rate = completed / elapsed if elapsed > 0 else 0.0
        left = max(0.0, self.min_duration_s - elapsed)
        if rate > 0 and self.min_samples is None and issued > completed:
            left = (issued - completed) / rate          # the rest of Offline's one query
        elif rate > 0 and self.min_samples:
            left = max(left, (self.min_samples - completed) / rate)
        return (f"[{self.label}] {elapsed:6.1f} s elapsed, {completed} samples done ({rate:.1f}/s), "
                f"expected end in ~{left:.0f} s")

    def _loop(self) -> None:
        period = 1.0 if self.tty else 10.0
        while not self._stop.wait(period):
            if self.tty:
                self.stream.write("\r" + self.line().ljust(100))
            else:
                self.stream.write(self.line() + "\n")
            self.stream.flush()
