"""Searches side by side (tuning/turns.py): jobs on their own threads that run one at a time, in turns."""
from __future__ import annotations

import threading

import pytest

from code.common.tuning.turns import side_by_side


def recorder(name: str, runs: int, events: list, running: list, before=None):
    """A job of `runs` runs that records when each starts and ends, and whether another job ran meanwhile."""
    def job(next_turn):
        if before:
            before(name, events)
        for number in range(runs):
            next_turn()
            running.append(name)
            events.append((name, number, "start"))
            assert running == [name], f"{running} ran at once"
            threading.Event().wait(0.002)     # let any other thread that could run, run
            events.append((name, number, "end"))
            running.remove(name)
        return f"{name} done"
    return job


def test_jobs_alternate_run_by_run_and_never_overlap():
    events: list = []
    running: list = []
    results = side_by_side([recorder("harness", 3, events, running), recorder("raw", 3, events, running)])
    assert results == ["harness done", "raw done"]
    starts = [(name, number) for name, number, what in events if what == "start"]
    assert starts == [("harness", 0), ("raw", 0), ("harness", 1), ("raw", 1), ("harness", 2), ("raw", 2)]


def test_what_a_job_does_before_its_first_run_happens_in_its_own_turn():
    events: list = []
    running: list = []

    def load(name, log):   # loading an engine: never beside the other job's run
        log.append((name, -1, "load"))
    side_by_side([recorder("harness", 2, events, running), recorder("raw", 2, events, running, before=load)])
    order = [(name, what) for name, _, what in events]
    # The harness job hands the turn on before its first run: the raw job loads then, before any run starts.
    assert order[0] == ("raw", "load") and order[1] == ("harness", "start")


def test_a_job_that_ends_early_leaves_the_other_to_go_on_alone():
    events: list = []
    running: list = []
    side_by_side([recorder("short", 1, events, running), recorder("long", 4, events, running)])
    starts = [(name, number) for name, number, what in events if what == "start"]
    assert starts == [("short", 0), ("long", 0), ("long", 1), ("long", 2), ("long", 3)]


def test_a_failing_job_stops_the_others_at_their_next_turn_and_is_raised():
    events: list = []
    running: list = []

    def failing(next_turn):
        next_turn()
        next_turn()
        raise RuntimeError("the engine failed")
    with pytest.raises(RuntimeError, match="the engine failed"):
        side_by_side([recorder("harness", 3, events, running), failing])
    # harness run 0, the failing job's first turn, harness run 1, then the failure: no harness run 2
    assert [number for name, number, what in events if what == "end"] == [0, 1]


def test_the_first_job_runs_on_the_calling_thread():
    seen = []
    side_by_side([lambda next_turn: seen.append(threading.current_thread()),
                  lambda next_turn: seen.append(threading.current_thread())])
    assert seen[0] is threading.main_thread() and seen[1] is not threading.main_thread()


def test_no_jobs_is_an_error():
    with pytest.raises(ValueError):
        side_by_side([])
