"""The Server scenario without LoadGen or the harness: an engine fed the arrivals LoadGen's Server issues (its Poisson
process at the target rate, drawn as LoadGen draws it: `arrivals`), batching as the harness does, judged as LoadGen
judges a Server run. `make bench` measures the raw engine's Server ceiling with it, the baseline its Server figures
are read against: what the engine itself can hold at the latency bound on this machine, with no harness in the way.

Batching, per instance, as the harness's batchers do (native/src/core/batcher.cc, harness/sut.py): an idle instance
takes the first waiting sample, then waits at most `window_ns` after taking it for more, up to `max_batch`; with no
window it takes what has arrived. Arrival times are known in advance, so an instance computes when its batch closes
instead of being woken: there is no issuing thread, no queue and no completion call, only the engine's time and
the machine's. A sample's latency runs from its scheduled arrival to the end of its batch's call, as LoadGen's runs
from the scheduled issue to the completion.

Verdict (LoadGen's results.cc): the 99th percentile of the latencies (the sorted list at index count x 0.99) within
the bound, and early stopping met: with t samples over the bound among n, n - t must reach the h that
records.early_stopping finds for t (at t = 0, 459 of them).

Pure but for the clock: `serve` takes the clock and the sleep as arguments, so that tests run it on a fake clock.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ..records.early_stopping import server_early_stopping_met
from .search import Outcome

SERVER_PERCENTILE = 0.99
SEED = 1   # arrivals' seed where none is given (tests); the bench gives the round's schedule_rng_seed

# (the batch's sample numbers in the schedule) -> nothing; returns when the engine's work on the batch is done
BatchCall = Callable[[np.ndarray], None]


def arrivals(rate: float, seconds: float, min_count: int, seed: int = SEED) -> np.ndarray:
    """LoadGen's own Server schedule for `seed` (its schedule_rng_seed), arrival times in ns from 0: as many as
    `seconds` holds, and at least `min_count` (LoadGen's Server runs for its min_duration and its min_query_count,
    whichever is longer). With the round's seed these are the arrivals a harness's Server run at `rate` gets, the
    same, not another draw of the same process: at 80 QPS on one engine, the p99s of a raw run on another draw and
    of one on LoadGen's read 10.6 and 12.4 ms, the harness's 13.0.

    LoadGen (loadgen.cc, GenerateQueries; the C++ standard library it is built with, libstdc++): a std::mt19937 seeded
    with the seed (the engine keeps its low 32 bits), the first query at 0, each next one after a gap of
    std::exponential_distribution(rate): -log(1 - u) / rate seconds, u = generate_canonical<double, 53>, which takes
    two 32-bit draws (the first the low word) over 2^64; each gap truncated to whole ns."""
    if rate <= 0:
        raise ValueError(f"the rate must be positive, not {rate}")
    count = max(int(min_count), int(np.ceil(rate * seconds)))
    engine = np.random.MT19937(0)
    engine._legacy_seeding(seed & 0xFFFF_FFFF)     # std::mt19937's seeding (numpy's legacy RandomState one)
    words = engine.random_raw(2 * count).reshape(-1, 2).astype(np.float64)
    canonical = np.minimum((words[:, 0] + words[:, 1] * 2.0 ** 32) / 2.0 ** 64, np.nextafter(1.0, 0.0))
    gaps = np.floor(-np.log(1.0 - canonical) / rate * 1e9).astype(np.int64)
    return np.concatenate([[0], np.cumsum(gaps[:-1])])


def serve(schedule_ns: np.ndarray, instances: Sequence[BatchCall], max_batch: int, window_ns: int = 0,
          clock: Callable[[], int] = time.perf_counter_ns,
          sleep_until: Callable[[int], None] | None = None) -> np.ndarray:
    """Every arrival in `schedule_ns` (ns from the start) served by `instances`, one thread each (one instance: on
    this thread); each sample's latency in ns, in schedule order."""
    if max_batch < 1 or window_ns < 0 or not instances:
        raise ValueError("serving needs an instance, a largest batch of at least 1 and a window of 0 or more")
    wait = sleep_until or _sleeper(clock)
    count = len(schedule_ns)
    done = np.zeros(count, dtype=np.int64)
    state = {"next": 0}
    lock = threading.Lock()
    start = clock()
    failures: list[BaseException] = []

    def take(now: int) -> tuple[int, int, int] | None:
        """(first, end, begins at) of the next batch: an empty one (first == end) when nothing has arrived yet,
        which begins at the next arrival; None when the schedule is served."""
        with lock:
            first = state["next"]
            if first >= count:
                return None
            arrives = start + int(schedule_ns[first])
            if arrives > now:
                return first, first, arrives
            last_possible = min(count, first + max_batch)
            closes = now
            if window_ns:
                # Wait for more until the window ends or the batch is full, whichever is first.
                full_at = start + int(schedule_ns[last_possible - 1])
                closes = max(now, min(now + window_ns, full_at))
            end = first + int(np.searchsorted(schedule_ns[first:last_possible], closes - start, side="right"))
            state["next"] = end
            return first, end, closes

    def run(call: BatchCall) -> None:
        try:
            while (taken := take(clock())) is not None:
                first, end, begins = taken
                if begins > clock():
                    wait(begins)
                if end > first:
                    call(np.arange(first, end))
                    done[first:end] = clock() - start
        except BaseException as error:  # noqa: BLE001  raised on the caller's thread below
            failures.append(error)
            with lock:
                state["next"] = count    # the other instances stop too

    if len(instances) == 1:
        run(instances[0])
    else:
        threads = [threading.Thread(target=run, args=(call,), daemon=True, name=f"poisson-{n}")
                   for n, call in enumerate(instances)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]
    return done - schedule_ns


def _sleeper(clock: Callable[[], int]) -> Callable[[int], None]:
    def sleep_until(when_ns: int) -> None:
        remaining = when_ns - clock()
        if remaining > 0:
            time.sleep(remaining / 1e9)
    return sleep_until


@dataclass(frozen=True)
class ServerVerdict:
    valid: bool
    p99_ns: float
    over_bound: int       # samples over the bound
    samples: int
    rate: float           # samples served per second of the schedule

    def outcome(self, bound_ns: float, mean_ns: float) -> Outcome:
        reason = "" if self.valid else (
            "p99 over the bound" if self.p99_ns > bound_ns else
            f"early stopping not met ({self.over_bound} of {self.samples} over the bound)")
        return Outcome(valid=self.valid, latency_ns=self.p99_ns, percentile=SERVER_PERCENTILE, bound_ns=bound_ns,
                       mean_latency_ns=mean_ns, throughput=self.rate, reason=reason)


def judge(latencies_ns: np.ndarray, schedule_ns: np.ndarray, bound_ns: float) -> ServerVerdict:
    """LoadGen's Server verdict on these latencies: the 99th percentile within `bound_ns`, early stopping met."""
    ordered = np.sort(latencies_ns)
    count = len(ordered)
    p99 = float(ordered[min(count - 1, int(count * SERVER_PERCENTILE))])
    over = int(np.count_nonzero(latencies_ns > bound_ns))
    valid = p99 <= bound_ns and server_early_stopping_met(count, over, SERVER_PERCENTILE)
    seconds = float(np.max(schedule_ns + latencies_ns)) / 1e9 if count else 0.0
    return ServerVerdict(valid, p99, over, count, count / seconds if seconds > 0 else 0.0)
