"""Measurements side by side: several searches, each on its own thread, that take turns run by run, so that they never
run at once and each sees the machine in the same minutes as the others.

`make bench` compares the harness's Server search with the raw engine's: run one after the other, minutes apart, the
two searches met a shared VM in different phases of its speed (the same engine's batch-1 p90 at 5 ms for tens of
seconds, then at 8 ms), and their ratio measured the phases. In turns, trial by trial, both meet every phase.

A job is handed `next_turn`, which it calls before each of its runs: the others take their turns meanwhile, and the
job goes on when its turn comes round again. What a job does before its first run (loading an engine, warming it
up) happens in its first turn, before the others start theirs.
"""
from __future__ import annotations

import threading
from typing import Callable, Sequence, TypeVar

T = TypeVar("T")
Job = Callable[[Callable[[], None]], T]


class Stopped(Exception):
    """Raised in a job at its next turn once another job has failed (or was interrupted): the measurement as a whole
    has failed, and its other parts stop too."""


class Turns:
    """Whose turn it is among `count` jobs, round robin over those still running."""

    def __init__(self, count: int) -> None:
        if count < 1:
            raise ValueError("taking turns needs at least one job")
        self._running = list(range(count))
        self._turn = 0
        self._stopped = False
        self._changed = threading.Condition()

    def wait(self, me: int) -> None:
        """Until it is `me`'s turn; Stopped when another job failed."""
        with self._changed:
            self._changed.wait_for(lambda: self._turn == me or self._stopped)
            if self._stopped:
                raise Stopped("another part of the measurement failed")

    def pass_on(self, me: int, leaving: bool = False, failed: bool = False) -> None:
        """The turn to the next job still running after `me` (back to `me` when it is the only one left); `failed`:
        every other job stops at its next turn."""
        with self._changed:
            after = [n for n in self._running if n > me] + [n for n in self._running if n <= me]
            if leaving:
                self._running.remove(me)
                after.remove(me)
            self._stopped = self._stopped or failed
            self._turn = next((n for n in after if n != me), me if me in self._running else -1)
            self._changed.notify_all()


def side_by_side(jobs: Sequence[Job]) -> list:
    """Each job's result, in order. The first job runs on the calling thread (where Ctrl-C arrives), the others on
    threads of their own; one at a time, taking turns at each `next_turn` call, the first job's turn first. A job
    that ends leaves the rotation; one that fails (or is interrupted) stops the others at their next turn, and its
    failure is raised here once they have stopped."""
    turns = Turns(len(jobs))
    results: list = [None] * len(jobs)
    failures: list[BaseException] = []

    def run(me: int, job: Job) -> None:
        failed = False
        try:
            turns.wait(me)

            def next_turn() -> None:
                turns.pass_on(me)
                turns.wait(me)
            results[me] = job(next_turn)
        except Stopped:
            pass
        except BaseException as error:  # noqa: BLE001  raised on the calling thread below
            failures.append(error)
            failed = True
        finally:
            turns.pass_on(me, leaving=True, failed=failed)

    threads = [threading.Thread(target=run, args=(n, job), daemon=True, name=f"turns-{n}")
               for n, job in enumerate(jobs) if n > 0]
    for thread in threads:
        thread.start()
    run(0, jobs[0])
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return results
