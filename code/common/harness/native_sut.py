"""The lwis harness on the native core (native/src/toolkit_native.cc, built by code/common/native/build.py).

LoadGen's SUT and QSL are C++ objects: IssueQuery only enqueues, one batcher thread per backend instance takes up
to batch_size samples (Server: waiting at most server_batch_timeout_us after the first; other scenarios: what is
queued), gathers them from the performance set held in one array, calls the instance once per batch and
completes the batch to LoadGen from C++. The instance here is the toolkit's Python backend (ONNX Runtime, TensorRT's
runner) and its postprocessing, called with the GIL once per batch; nothing in the loop touches Python per sample.

The test's process must import LoadGen from the native build (`use_native_loadgen`, before anything imports
`mlperf_loadgen`): the core completes samples into that LoadGen, and the wheel's is a different library.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Sequence

import numpy as np

from ..benchmark_api import PreprocessedSet
from ..constants import Scenario
from ..native.build import not_ready
from .qsl import stack_samples
from .sut import Infer
from .base import QSLBase, SUTBase


def use_native_loadgen(lib: str | Path) -> None:
    """Put the native build first on sys.path and check that `mlperf_loadgen` now comes from it."""
    lib = Path(lib)
    why = not_ready(lib.parents[1])    # build/native/lib -> build
    if why is not None:
        raise RuntimeError(why)
    loaded = sys.modules.get("mlperf_loadgen")
    if loaded is not None and Path(loaded.__file__).parent != lib:
        raise RuntimeError(f"LoadGen was imported from {loaded.__file__} before the native core's could be")
    sys.path.insert(0, str(lib))
    import mlperf_loadgen

    if Path(mlperf_loadgen.__file__).parent != lib:
        raise RuntimeError(f"mlperf_loadgen came from {mlperf_loadgen.__file__}, not the native build in {lib}")


class NativeSampleLibrary(QSLBase):
    """The performance set in one array the core keeps, loaded through `samples` when LoadGen asks for it."""

    def __init__(self, samples: PreprocessedSet, performance_count: int) -> None:
        import toolkit_native

        self.samples = samples
        self.total = len(samples)
        self.performance_count = min(performance_count, self.total)
        self.shape: tuple[int, ...] = ()
        self.dtype = np.dtype(np.uint8)
        self.native = toolkit_native.SampleLibrary(self.total, self.performance_count, self._load)

    def _load(self, indices: np.ndarray) -> np.ndarray:
        """The samples at `indices` in one array, which the core keeps and gathers batches from."""
        if len(indices) == 0:
            return np.zeros((0,), dtype=np.uint8)
        data = stack_samples(self.samples, indices)
        self.shape, self.dtype = data.shape[1:], data.dtype
        return data

    def construct(self) -> int:
        return self.native.handle

    def destroy(self, handle: int) -> None:
        """Nothing to free: the C++ object lives as long as this one (LoadGen's DestroyQSL is for its own)."""


class NativeCounters:
    """The core's counts, read live by the progress display."""

    def __init__(self, sut) -> None:
        self._sut = sut

    @property
    def issued(self) -> int:
        return self._sut.issued

    @property
    def completed(self) -> int:
        return self._sut.completed

    @property
    def progress(self) -> int:
        return self._sut.completed


class NativeSUT(SUTBase):
    """HarnessSUT's counterpart on the native core: the same instances, batch size and Server batching window. The
    core issues, batches and completes in C++: the base's counters are the core's, its failure the core's message
    unless a Python backend raised first."""

    def __init__(self, scenario: Scenario, qsl: NativeSampleLibrary, instances: Sequence[Infer], batch_size: int,
                 batch_timeout_us: int = 0) -> None:
        import toolkit_native

        super().__init__(scenario)
        self.qsl = qsl
        self.batch_size = batch_size
        backends = [toolkit_native.PythonBackend(self._call(infer)) for infer in instances]
        # Only Server waits for a batch to fill; the other scenarios issue every sample of a query at once.
        timeout_us = batch_timeout_us if scenario is Scenario.Server else 0
        self.native = toolkit_native.Sut(qsl.native, backends, batch_size, timeout_us)
        self.counters = NativeCounters(self.native)     # type: ignore[assignment]

    def _call(self, infer: Infer):
        """The instance as the core calls it: (batch bytes, QSL indices) -> (response bytes, byte offsets). A Python
        error is kept (its type and message name the failure) and raised on, so the core fails the run."""
        qsl = self.qsl

        def call(batch: memoryview, indices: np.ndarray):
            try:
                inputs = np.frombuffer(batch, dtype=qsl.dtype).reshape(len(indices), *qsl.shape)
                responses = infer(inputs, indices)
                if len(responses) != len(indices):
                    raise RuntimeError(f"backend returned {len(responses)} responses for {len(indices)} samples")
                return responses.data.reshape(-1).view(np.uint8), responses.offsets
            except BaseException as error:
                self.fail(error)
                raise
        return call

    def engine_error(self) -> BaseException | None:
        """The core's message, where it failed the run without a Python backend's exception."""
        message = self.native.error
        return RuntimeError(message) if message else None

    def start(self) -> "NativeSUT":
        self.native.start()
        return self

    def stop(self) -> None:
        self.native.stop()

    def construct(self) -> int:
        return self.native.handle

    def destroy(self, handle: int) -> None:
        """Nothing to free: the C++ object lives as long as this one (LoadGen's DestroySUT is for its own)."""

    def issue(self, ids: list[int], indices: list[int]) -> None:
        raise RuntimeError("the native core issues in C++; LoadGen never calls this SUT's Python issue")
