"""A progress line while LoadGen runs: elapsed time, completed samples and the expected end."""
from __future__ import annotations

import sys
import threading
import time
from typing import Callable


class Progress:
    """Prints from a background thread; on a terminal it rewrites one line, else a line every 10 s."""

    def __init__(self, label: str, counts: Callable[[], tuple[int, int]], min_duration_s: float,
                 stream=None) -> None:
        self.label = label
        self.counts = counts                 # -> (completed, issued so far)
        self.min_duration_s = min_duration_s
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="progress")
        self._start = 0.0

    def __enter__(self) -> "Progress":
        self._start = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def line(self) -> str:
        elapsed = time.monotonic() - self._start
        completed, issued = self.counts()
        rate = completed / elapsed if elapsed > 0 else 0.0
        if issued > completed and rate > 0:
            left = (issued - completed) / rate
        else:
            left = max(0.0, self.min_duration_s - elapsed)
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
