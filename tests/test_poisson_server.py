"""The raw engine's Server runs (tuning/poisson_server.py): batching as the harness batches, on a fake clock with
known engine costs, and LoadGen's Server verdict on the latencies."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from code.common.records.early_stopping import server_early_stopping_met, server_min_queries
from code.common.tuning.poisson_server import arrivals, judge, serve

MS = 1_000_000


class FakeEngine:
    """A clock that only moves when the engine works (cost per call, by batch size) or an instance sleeps."""

    def __init__(self, cost_ms) -> None:
        self.now = 0
        self.cost_ms = cost_ms
        self.batches: list[list[int]] = []

    def clock(self) -> int:
        return self.now

    def sleep_until(self, when: int) -> None:
        self.now = max(self.now, when)

    def call(self, samples: np.ndarray) -> None:
        self.batches.append(samples.tolist())
        self.now += int(self.cost_ms(len(samples)) * MS)


def test_without_a_window_an_instance_takes_what_has_arrived():
    engine = FakeEngine(lambda size: 10)
    schedule = np.array([0, 1, 2, 30], dtype=np.int64) * MS
    latencies = serve(schedule, [engine.call], max_batch=8, clock=engine.clock, sleep_until=engine.sleep_until)
    assert engine.batches == [[0], [1, 2], [3]]
    assert (latencies // MS).tolist() == [10, 19, 18, 10]


def test_a_window_waits_from_the_first_sample_taken_until_full_or_over():
    engine = FakeEngine(lambda size: 10)
    schedule = np.array([0, 3, 4, 20], dtype=np.int64) * MS
    latencies = serve(schedule, [engine.call], max_batch=2, window_ns=5 * MS, clock=engine.clock,
                      sleep_until=engine.sleep_until)
    # [0, 1]: full at 3 ms; [2]: taken at 13 ms, its window ends at 18 ms before sample 3 arrives (20 ms);
    # [3]: taken at 28 ms, already late, so it runs at once.
    assert engine.batches == [[0, 1], [2], [3]]
    assert (latencies // MS).tolist() == [13, 10, 24, 18]


def test_the_largest_batch_caps_what_a_busy_instance_takes():
    engine = FakeEngine(lambda size: 2 * size)
    schedule = np.zeros(5, dtype=np.int64)
    serve(schedule, [engine.call], max_batch=2, clock=engine.clock, sleep_until=engine.sleep_until)
    assert engine.batches == [[0, 1], [2, 3], [4]]


def test_several_instances_serve_every_sample_once_on_the_real_clock():
    seen: list[int] = []
    lock = threading.Lock()

    def call(samples: np.ndarray) -> None:
        with lock:
            seen.extend(samples.tolist())

    schedule = arrivals(rate=20_000, seconds=0.01, min_count=200)
    latencies = serve(schedule, [call, call, call], max_batch=4, window_ns=50_000)
    assert sorted(seen) == list(range(len(schedule)))
    assert len(latencies) == len(schedule) and (latencies >= 0).all()


def test_a_failing_engine_stops_the_run_and_raises_on_the_caller():
    def call(samples: np.ndarray) -> None:
        raise RuntimeError("engine broke")

    with pytest.raises(RuntimeError, match="engine broke"):
        serve(np.zeros(10, dtype=np.int64), [call, call], max_batch=1)


def test_arrivals_are_poisson_at_the_rate_for_the_longer_of_duration_and_count():
    schedule = arrivals(rate=1000, seconds=20, min_count=500)
    assert len(schedule) == 20_000 and (np.diff(schedule) >= 0).all()
    assert abs(schedule[-1] / 1e9 - 20) < 0.5             # mean gap 1 ms
    gaps = np.diff(schedule) / 1e6
    assert abs(gaps.std() / gaps.mean() - 1) < 0.05        # exponential: standard deviation = mean
    assert len(arrivals(rate=10, seconds=1, min_count=500)) == 500
    with pytest.raises(ValueError):
        arrivals(rate=0, seconds=1, min_count=1)


def test_server_early_stopping_is_loadgens():
    # results.cc: met when queries >= h + t, h the smallest passing h for t over-bound queries; at t = 0 that is
    # the 459 of server_min_queries, at t = 1 the 662 LoadGen prints for SingleStream-style p99 early stopping.
    assert server_min_queries() == 459
    assert server_early_stopping_met(459, 0) and not server_early_stopping_met(458, 0)
    assert server_early_stopping_met(662, 1) and not server_early_stopping_met(661, 1)
    with pytest.raises(ValueError):
        server_early_stopping_met(10, 11)


def test_the_verdict_is_the_p99_within_the_bound_and_early_stopping():
    bound = 15 * MS
    schedule = np.arange(1000, dtype=np.int64) * 10 * MS
    quick = np.full(1000, 5 * MS, dtype=np.int64)
    verdict = judge(quick, schedule, bound)
    assert verdict.valid and verdict.over_bound == 0 and verdict.p99_ns == 5 * MS
    assert verdict.rate == pytest.approx(1000 / (9.99 + 0.005), rel=1e-6)

    slow_tail = quick.copy()
    slow_tail[:11] = 20 * MS     # 11 of 1000 over: the p99 (index 990 of the sorted) is over the bound
    assert not judge(slow_tail, schedule, bound).valid
    assert judge(slow_tail, schedule, bound).outcome(bound, 5 * MS).reason == "p99 over the bound"

    few = quick[:500].copy()
    few[:3] = 20 * MS            # p99 within, but 3 over among 500 fails early stopping
    verdict = judge(few, schedule[:500], bound)
    assert verdict.p99_ns <= bound and not verdict.valid
    assert "early stopping" in verdict.outcome(bound, 5 * MS).reason


def test_a_raw_server_run_feeds_the_engine_every_arrival_and_postprocesses_each_batch():
    from code.actions.bench_raw import RawEngine, server_run

    batches, postprocessed = [], []

    class Backend:
        def infer(self, inputs):
            batches.append(inputs["x"].copy())
            return [inputs["x"] * 2]

        def close(self):
            pass

    raw = RawEngine(postprocess=lambda outputs, indices: postprocessed.extend(indices.tolist()),
                    batch=lambda indices: {"x": np.asarray(indices, dtype=np.int64)}, count=7,
                    backends=[Backend()])
    outcome = server_run(raw, rate=20_000, batch_size=4, window_us=0, bound_ms=15.0, seconds=0.001,
                         min_queries=500)
    # 500 arrivals, each a sample drawn from the 7 held, in batches of at most 4, each batch holding the samples it
    # postprocesses; the verdict is LoadGen's on those 500.
    assert len(postprocessed) == 500 and set(postprocessed) == set(range(7))
    assert np.concatenate(batches).tolist() == postprocessed
    assert max(len(b) for b in batches) <= 4 and sum(len(b) for b in batches) == 500
    assert outcome.percentile == 0.99 and outcome.bound_ns == 15e6 and outcome.throughput > 0
    assert outcome.latency_ns is not None and outcome.mean_latency_ns is not None


def test_the_raw_throughput_loop_takes_the_held_samples_in_order_and_postprocesses_each_batch():
    from code.actions.bench_raw import RawEngine, loaded_throughput

    told = []

    class Backend:
        def infer(self, inputs):
            return [inputs["x"].copy()]

        def close(self):
            pass

    raw = RawEngine(postprocess=lambda outputs, indices: told.append((outputs[0], indices.copy())),
                    batch=lambda indices: {"x": np.asarray(indices, dtype=np.int64) * 10}, count=7,
                    backends=[Backend()])
    assert loaded_throughput(raw, batch_size=3, seconds=0.05) > 0
    # The next 3 of the 7 held samples each time, round again (a batch across the end copied), each batch holding
    # the samples its postprocessing is told.
    assert [indices.tolist() for _, indices in told[:3]] == [[0, 1, 2], [3, 4, 5], [6, 0, 1]]
    assert all(outputs.tolist() == (indices * 10).tolist() for outputs, indices in told)


def test_the_raw_batch_sizes_take_turns_of_the_same_samples_each(monkeypatch):
    """Each turn every size serves one batch of the largest (the order reversed every other turn), each size takes
    the held samples in order across its turns, and its figure is its samples over its time in all turns."""
    from types import SimpleNamespace

    from code.actions import bench_raw
    from code.actions.bench_raw import RawEngine, throughput_in_turns

    clock = {"now": 0.0}
    cost = {1: 0.010, 2: 0.015, 4: 0.020}          # seconds a call takes, by batch size
    calls: list[tuple[int, list[int]]] = []

    class Backend:
        def infer(self, inputs):
            clock["now"] += cost[len(inputs["x"])]
            calls.append((len(inputs["x"]), inputs["x"].tolist()))
            return [inputs["x"]]

        def close(self):
            pass

    monkeypatch.setattr(bench_raw, "time", SimpleNamespace(monotonic=lambda: clock["now"]))
    raw = RawEngine(postprocess=lambda outputs, indices: None,
                    batch=lambda indices: {"x": np.asarray(indices, dtype=np.int64)}, count=7, backends=[Backend()])
    rates = throughput_in_turns(raw, [1, 2, 4], seconds=0.1)
    sizes = [size for size, _ in calls]
    # One unmeasured call per size, then two turns (90 ms each: 0.1 s has passed after the second), forth and back.
    assert sizes == [1, 2, 4] + [1] * 4 + [2] * 2 + [4] + [4] + [2] * 2 + [1] * 4
    assert [held for size, held in calls[3:] if size == 2] == [[0, 1], [2, 3], [4, 5], [6, 0]]
    assert rates == pytest.approx({1: 100.0, 2: 2 / 0.015, 4: 200.0})
