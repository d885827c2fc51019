"""The TensorRT runner's logic (buffers, streams, batching, output mapping) on host-memory implementations of the
two interfaces it talks to: CUDA calls (`CudaCalls`, tests/fake_cuda.py) and the execution context
(`ExecutionContext`).

The fake CUDA keeps device and pinned memory as real host allocations addressed by integers, and queues every
asynchronous operation on its stream until the host waits for it, as a GPU does: a runner that read its outputs
before waiting, copied the wrong byte counts or bound the wrong addresses gets wrong numbers here.
"""
from __future__ import annotations

import threading
from typing import Sequence

import numpy as np
import pytest

from code.common.backends.cuda_runtime import CudaError
from code.common.backends.tensorrt_loader import TensorInfo, numpy_dtype
from code.common.backends.tensorrt_runner import StreamRunner
from code.common.errors import UserError
from tests.fake_cuda import FakeCuda
from tests.fake_engine import SAMPLE, TENSORS, WEIGHTS, FakeContext

def _runner(max_batch: int = 4, cuda: FakeCuda | None = None, gpu: int = 0) -> tuple[StreamRunner, FakeCuda,
                                                                                        FakeContext]:
    cuda = cuda or FakeCuda()
    context = FakeContext(cuda, max_batch)
    return StreamRunner(TENSORS, context, cuda, max_batch, ["input"], gpu), cuda, context


def _batch(count: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 1, (count, *SAMPLE)).astype(np.float32)


def _expected(batch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    flat = batch.reshape(len(batch), -1)
    return flat @ WEIGHTS, flat.sum(axis=1, keepdims=True).astype(np.float16)


@pytest.mark.parametrize("count", [1, 3, 4, 9])
def test_outputs_in_engine_order_for_every_batch_size(count: int) -> None:
    runner, _, _ = _runner(max_batch=4)
    batch = _batch(count)
    features, total = runner.infer({"input": batch})
    want_features, want_total = _expected(batch)
    assert features.shape == (count, 5) and features.dtype == np.float32
    assert total.shape == (count, 1) and total.dtype == np.float16
    np.testing.assert_allclose(features, want_features, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(total.astype(np.float32), want_total.astype(np.float32), rtol=1e-2, atol=1e-2)


def test_buffers_and_addresses_are_set_up_once() -> None:
    runner, cuda, context = _runner(max_batch=8)
    # Two buffer sets, each a device and a pinned buffer per tensor sized for the largest batch.
    assert cuda.names().count("malloc") == 6 and cuda.names().count("malloc_host") == 6
    sizes = sorted(len(cuda.memory[a]) for a, kind in cuda.kinds.items() if kind == "malloc")
    assert sizes == sorted(2 * [8 * 12 * 4, 8 * 5 * 4, 8 * 1 * 2])
    for count in (2, 2, 8, 2):
        runner.infer({"input": _batch(count)})
    assert cuda.names().count("malloc") == 6 and cuda.names().count("malloc_host") == 6
    assert {cuda.kinds[a] for a in context.addresses.values()} == {"malloc"}
    # One caller keeps to one set: every tensor bound once, to its device buffer.
    assert [c for c in context.calls if c.startswith("set_tensor_address")] == \
        ["set_tensor_address input", "set_tensor_address features", "set_tensor_address total"]
    # The input shape is set only when the batch size changes.
    assert [c for c in context.calls if c.startswith("set_input_shape")] == \
        ["set_input_shape (2, 3, 4)", "set_input_shape (8, 3, 4)", "set_input_shape (2, 3, 4)"]


def test_outputs_are_copies_not_views_of_reused_buffers() -> None:
    runner, _, _ = _runner()
    first = runner.infer({"input": _batch(2, seed=1)})[0]
    kept = first.copy()
    runner.infer({"input": _batch(2, seed=2)})
    np.testing.assert_array_equal(first, kept)


def test_instances_have_their_own_streams_and_run_in_parallel_threads() -> None:
    cuda = FakeCuda(gpus=2)
    runners = [_runner(max_batch=4, cuda=cuda, gpu=i)[0] for i in range(2)]
    assert runners[0].stream != runners[1].stream
    errors: list[BaseException] = []

    def work(runner: StreamRunner, seed: int) -> None:
        try:
            for i in range(20):
                batch = _batch(1 + i % 4, seed=seed * 100 + i)
                features, _ = runner.infer({"input": batch})
                np.testing.assert_allclose(features, _expected(batch)[0], rtol=1e-5, atol=1e-5)
        except BaseException as error:  # noqa: BLE001  reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(r, n)) for n, r in enumerate(runners)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors


def test_close_frees_everything_once() -> None:
    runner, cuda, _ = _runner()
    runner.infer({"input": _batch(3)})
    runner.close()
    assert cuda.memory == {} and cuda.streams == {}
    runner.close()   # idempotent


def test_a_failed_allocation_frees_what_was_allocated() -> None:
    cuda = FakeCuda(fail_malloc_at=4)   # the third tensor's device buffer
    with pytest.raises(CudaError, match="out of memory"):
        StreamRunner(TENSORS, FakeContext(cuda, 4), cuda, 4, ["input"])
    assert cuda.memory == {} and cuda.streams == {}


def test_refusals_are_errors_that_say_what_happened() -> None:
    runner, _, context = _runner(max_batch=4)
    with pytest.raises(ValueError, match=r"per-sample shape \(3, 4\)"):
        runner.infer({"input": np.zeros((2, 4, 3), np.float32)})
    context.execute_result = False
    with pytest.raises(RuntimeError, match="execute_async_v3 returned False"):
        runner.infer({"input": _batch(2)})
    cuda = FakeCuda()
    stubborn = StreamRunner(TENSORS, FakeContext(cuda, 2), cuda, 4, ["input"])   # profile narrower than claimed
    with pytest.raises(RuntimeError, match="refused batch size 3"):
        stubborn.infer({"input": _batch(3)})


def test_engines_the_runner_cannot_feed_are_refused() -> None:
    cuda = FakeCuda()
    with pytest.raises(UserError, match="the runner feeds images"):
        StreamRunner(TENSORS, FakeContext(cuda, 4), cuda, 4, ["images"])
    dynamic = [TensorInfo("input", True, np.dtype(np.float32), (-1, 3, -1)), *TENSORS[1:]]
    with pytest.raises(UserError, match="only the batch dimension may be dynamic"):
        StreamRunner(dynamic, FakeContext(cuda, 4), cuda, 4, ["input"])
    assert cuda.memory == {}


def test_tensorrt_data_types_map_to_numpy() -> None:
    assert numpy_dtype("DataType.FLOAT") == np.float32
    assert numpy_dtype("DataType.HALF") == np.float16
    assert numpy_dtype("DataType.INT8") == np.int8
    with pytest.raises(UserError, match="BF16 are not supported"):
        numpy_dtype("DataType.BF16")


def test_the_context_methods_the_runner_calls_exist_in_tensorrt_10_and_11() -> None:
    """The runner reaches the execution context through its `ExecutionContext` protocol (mypy checks that
    TensorRT 11.4's IExecutionContext satisfies it); the recorded names list says whether 10.16 has them too."""
    from pathlib import Path

    from code.common.backends.tensorrt_runner import ExecutionContext

    facts = {}
    for line in (Path(__file__).parent / "data" / "tensorrt_api_names.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, *versions = line.split()
            facts[name] = dict(v.split(":") for v in versions)
    methods = [name for name in vars(ExecutionContext) if not name.startswith("_")]
    assert sorted(methods) == ["execute_async_v3", "get_tensor_shape", "set_input_shape", "set_tensor_address"]
    for method in methods:
        versions = facts[f"IExecutionContext.{method}"]
        assert versions["10.16"] == "YES" and versions["11.4"] == "YES", (method, versions)


class TwoInputContext(FakeContext):
    """Inputs `ids` int32 [2] and `weights` float32 [2] (the engine lists them in that order); output `dot` = their
    per-sample dot product."""

    def get_tensor_shape(self, name: str) -> Sequence[int]:
        return {"ids": (self.batch, 2), "weights": (self.batch, 2), "dot": (self.batch, 1)}[name]

    def execute_async_v3(self, stream_handle: int) -> bool:
        self.calls.append("execute")
        batch, at = self.batch, dict(self.addresses)

        def compute() -> None:
            ids = self._array(at, "ids", (batch, 2), np.int32)
            weights = self._array(at, "weights", (batch, 2), np.float32)
            self._array(at, "dot", (batch, 1), np.float32)[:] = (ids * weights).sum(axis=1, keepdims=True)
        self.cuda._enqueue(stream_handle, compute)
        return True


def test_every_named_input_is_copied_in_and_shaped_for_the_batch() -> None:
    tensors = [TensorInfo("ids", True, np.dtype(np.int32), (-1, 2)),
               TensorInfo("weights", True, np.dtype(np.float32), (-1, 2)),
               TensorInfo("dot", False, np.dtype(np.float32), (-1, 1))]
    cuda = FakeCuda()
    context = TwoInputContext(cuda, 4)
    runner = StreamRunner(tensors, context, cuda, 4, ["weights", "ids"])     # fed by name, in any order
    ids, weights = np.arange(12, dtype=np.int32).reshape(6, 2), np.full((6, 2), 0.5, np.float32)
    [dot] = runner.infer({"weights": weights, "ids": ids})                   # 6 > 4: run in two parts
    np.testing.assert_allclose(dot[:, 0], (ids * weights).sum(axis=1))
    assert [c for c in context.calls if c.startswith("set_input_shape")] == \
        ["set_input_shape (4, 2)", "set_input_shape (4, 2)", "set_input_shape (2, 2)", "set_input_shape (2, 2)"]
    with pytest.raises(ValueError, match="for input weights of per-sample shape \\(2,\\), 3 samples"):
        runner.infer({"ids": ids[:3], "weights": weights[:2]})
    runner.close()


# -- the feed: pinned memory, two batches in flight, events --------------------------------------------------------
def _steps(cuda: FakeCuda, since: int) -> list[str]:
    """The runner's CUDA calls after `since`, by name, without the device settings."""
    return [c.name for c in cuda.calls[since:] if c.name != "set_device"]


def test_the_next_batch_is_copied_in_before_the_current_one_is_waited_for() -> None:
    runner, cuda, context = _runner(max_batch=4)
    batches = [_batch(4, seed=s) for s in range(5)]
    start = len(cuda.calls)
    outputs = list(runner.infer_batches({"input": b} for b in batches))
    for batch, (features, total) in zip(batches, outputs, strict=True):
        np.testing.assert_allclose(features, _expected(batch)[0], rtol=1e-5, atol=1e-5)
    steps = _steps(cuda, start)
    copies = [i for i, name in enumerate(steps) if name == "copy_to_device_async"]
    waits = [i for i, name in enumerate(steps) if name == "event_synchronize"]
    assert len(copies) == len(waits) == 5
    # Batch n+1's input copy is issued before the host waits for batch n: they overlap on the GPU.
    assert all(copies[n + 1] < waits[n] for n in range(4))
    # Never a stream synchronize per batch: events order the streams and tell the host.
    assert "synchronize" not in steps
    assert steps.count("event_record") == 10 and steps.count("stream_wait_event") == 5
    # The copy and the inference are on different streams; the inference waits for its copy's event.
    copy_streams = {c.args[3] for c in cuda.calls[start:] if c.name == "copy_to_device_async"}
    assert copy_streams == {runner.copy_stream} and runner.copy_stream != runner.stream
    # The two buffer sets take turns, so each batch binds its own set's addresses (host calls only); the right
    # outputs above show they were the set's.
    assert [c for c in context.calls if c.startswith("set_tensor_address input")] == \
        ["set_tensor_address input"] * 5


def test_one_caller_per_buffer_set_runs_batches_concurrently_and_correctly() -> None:
    """The harness gives an instance two worker threads (parallel_calls): their batches share one context."""
    runner, cuda, _ = _runner(max_batch=4)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(30):
                batch = _batch(1 + i % 4, seed=seed * 1000 + i)
                features, _ = runner.infer({"input": batch})
                np.testing.assert_allclose(features, _expected(batch)[0], rtol=1e-5, atol=1e-5)
        except BaseException as error:  # noqa: BLE001  reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert "synchronize" not in cuda.names()
    runner.close()
    assert cuda.memory == {} and cuda.streams == {} and cuda.events == {}


class Pending:
    """A batch not gathered yet, as harness/qsl.PendingBatch is: rows `slots` of a loaded set."""

    def __init__(self, rows: np.ndarray, slots: list[int], token: int = 1) -> None:
        self.rows, self.slots, self.load_token, self.count = rows, np.asarray(slots), token, len(slots)
        self.gathered_into: list[str] = []
        self.read: list[str] = []

    def __getitem__(self, name: str) -> np.ndarray:
        self.read.append(name)
        return self.rows[self.slots]

    def gather_into(self, out) -> set[str]:
        np.take(self.rows, self.slots, axis=0, out=out["input"])
        self.gathered_into.append("input")
        return {"input"}

    def stacked(self, name: str) -> np.ndarray:
        return self.rows


def test_a_pending_batch_is_gathered_straight_into_pinned_memory() -> None:
    runner, cuda, _ = _runner(max_batch=4)
    rows = _batch(10, seed=7)
    pending = Pending(rows, [3, 1, 8])
    features, _ = runner.infer(pending)
    np.testing.assert_allclose(features, _expected(rows[[3, 1, 8]])[0], rtol=1e-5, atol=1e-5)
    assert pending.gathered_into == ["input"] and pending.read == []     # one host copy, no gathered array


def test_start_from_device_uploads_the_set_once_per_gpu_and_gathers_on_the_gpu() -> None:
    from code.common.backends.tensorrt_resident import ResidentSets

    cuda = FakeCuda(gpus=2)
    residents = ResidentSets()
    runners = [_runner(max_batch=4, cuda=cuda, gpu=g)[0] for g in (0, 0, 1)]
    for runner in runners:
        runner.keep_inputs_on_device(residents)
    rows = _batch(10, seed=9)
    start = len(cuda.calls)
    for runner in runners:                # when LoadGen loads the set, before the test's clock runs
        runner.upload(Pending(rows, list(range(10))))
    # One upload of the set per GPU: the two runners of GPU 0 share it.
    assert _steps(cuda, start).count("copy_to_device_async") == 2
    assert residents.on_gpu(0) == residents.on_gpu(1) == rows.nbytes
    start = len(cuda.calls)
    for runner, slots in zip(runners, ([0, 1, 2, 7], [5, 4], [9, 8, 9])):
        pending = Pending(rows, slots)
        features, _ = runner.infer(pending)
        np.testing.assert_allclose(features, _expected(rows[slots])[0], rtol=1e-5, atol=1e-5)
        assert pending.gathered_into == [] and pending.read == []        # no host copy at all
    steps = _steps(cuda, start)
    # Then only device-to-device copies.
    assert steps.count("copy_to_device_async") == 0
    # Runs of consecutive rows are one copy each: [0, 1, 2] and [7]; [5], [4]; [9], [8, 9].
    assert steps.count("copy_on_device_async") == 2 + 2 + 2
    # A new load replaces the set on the GPU (here on the first batch of it: uploaded then).
    moved = rows[::-1].copy()
    features, _ = runners[0].infer(Pending(moved, [0, 1], token=2))
    np.testing.assert_allclose(features, _expected(moved[[0, 1]])[0], rtol=1e-5, atol=1e-5)
    for runner in runners:
        runner.close()
    assert residents.on_gpu(0) == residents.on_gpu(1) == 0
    assert cuda.memory == {} and cuda.streams == {} and cuda.events == {}


def test_an_abandoned_pipeline_gives_its_buffer_sets_back() -> None:
    runner, cuda, _ = _runner(max_batch=4)
    batches = runner.infer_batches({"input": _batch(4, seed=s)} for s in range(6))
    next(batches)
    batches.close()                       # the consumer stops early: the batch in flight is waited for
    assert sorted(runner._available) == [0, 1]
    features, _ = runner.infer({"input": _batch(2)})
    np.testing.assert_allclose(features, _expected(_batch(2))[0], rtol=1e-5, atol=1e-5)


def test_a_pending_batch_larger_than_the_plan_is_run_in_parts() -> None:
    runner, _, _ = _runner(max_batch=4)
    rows = _batch(10, seed=3)
    slots = [9, 0, 1, 2, 3, 4, 8]
    features, _ = runner.infer(Pending(rows, slots))
    np.testing.assert_allclose(features, _expected(rows[slots])[0], rtol=1e-5, atol=1e-5)


def test_start_from_device_refuses_a_set_stored_in_a_type_the_engine_cannot_take() -> None:
    from code.common.backends.tensorrt_resident import ResidentSets

    cuda = FakeCuda()
    runner = _runner(max_batch=4, cuda=cuda)[0]
    runner.keep_inputs_on_device(ResidentSets())
    as_float64 = Pending(_batch(6).astype(np.float64), [0, 1])        # float64 -> float32: same kind, converted
    np.testing.assert_allclose(runner.infer(as_float64)[0], _expected(_batch(6)[[0, 1]])[0], rtol=1e-5, atol=1e-5)
    as_complex = Pending(_batch(6).astype(np.complex64), [0, 1], token=2)
    with pytest.raises(UserError, match="stores input input as complex64, the engine takes float32"):
        runner.infer(as_complex)
    runner.close()
    assert cuda.memory == {} and cuda.streams == {}


def test_two_callers_with_batches_in_parts_never_hold_the_sets_crosswise() -> None:
    """Two callers each run a batch in parts with parts in flight (infer_batches, as infer does for a batch larger
    than the plan). Both take a set for their first part at once (the barrier); then neither may wait for a set
    while holding one the other needs."""
    runner, _, _ = _runner(max_batch=2)
    rows = _batch(8, seed=5)
    both_hold_a_set = threading.Barrier(2, timeout=30)

    class FirstPart(Pending):
        def gather_into(self, out) -> set[str]:
            both_hold_a_set.wait()
            return super().gather_into(out)

    results: dict[int, list[np.ndarray]] = {}
    errors: list[BaseException] = []

    def work(caller: int) -> None:
        try:
            parts = [FirstPart(rows, [0, 1]), Pending(rows, [2, 3]), Pending(rows, [4, 5])]
            results[caller] = [features for features, _ in runner.infer_batches(parts)]
        except BaseException as error:  # noqa: BLE001  reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "the callers deadlocked"
    assert not errors, errors
    for caller in (0, 1):
        np.testing.assert_allclose(np.concatenate(results[caller]), _expected(rows[:6])[0], rtol=1e-5, atol=1e-5)
