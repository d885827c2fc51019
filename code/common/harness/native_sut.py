"""The lwis harness on the native core (native/, built by code/common/native/build.py).

LoadGen's SUT and QSL are C++ objects: IssueQuery only enqueues, one batcher thread per backend instance takes up to
batch_size samples (Server: waiting at most server_batch_timeout_us after the first; other scenarios: what is queued;
SingleStream, and Server at a batch of one, on one instance: no thread, the query runs on LoadGen's issuing thread in
IssueQuery, runs_inline), gathers each named input from the performance set (held per input, varying axes padded as
the model declares), calls the instance once per batch and completes the batch to LoadGen from C++. An instance is
the C++ backend the backend plug-in names (BackendPlugin.native_backend), which runs without Python, or else the
toolkit's Python backend (ONNX Runtime, TensorRT's runner) and the benchmark's postprocessing, called through the
core's python backend with the GIL once per batch; nothing in the loop touches Python per sample.

The test's process must import LoadGen from the native build (`use_native_loadgen`, before anything imports
`mlperf_loadgen`): the core completes samples into that LoadGen, and the wheel's is a different library.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..benchmark_api import PreprocessedSet, TensorSpec
from ..constants import Scenario
from ..named_inputs import stack_samples
from ..native.build import not_ready
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
    """The performance set, stacked per named input in arrays the core keeps, loaded through `samples` when LoadGen
    asks for it."""

    def __init__(self, samples: PreprocessedSet, performance_count: int, inputs: Sequence[TensorSpec]) -> None:
        import toolkit_native

        self.samples = samples
        self.inputs = tuple(inputs)
        self.total = len(samples)
        self.performance_count = min(performance_count, self.total)
        layouts = [toolkit_native.InputLayout(spec.name, np.dtype(spec.dtype).itemsize,
                                              [-1 if size is None else size for size in spec.shape],
                                              _pad_bytes(spec), list(spec.padding.buckets) if spec.padding else [])
                   for spec in self.inputs]
        self.native = toolkit_native.SampleLibrary(self.total, self.performance_count, layouts, self._load)

    def _load(self, indices: np.ndarray) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """The samples at `indices` stacked per input (named_inputs.StackedInput), which the core keeps and gathers
        batches from."""
        stacked = stack_samples(self.samples, indices, self.inputs)
        return [(stacked[spec.name].data, stacked[spec.name].extents) for spec in self.inputs]

    def batch(self, inputs: list[tuple[memoryview, tuple[int, ...]]]) -> dict[str, np.ndarray]:
        """A batch as the core hands it to the python backend, as {input name: array} (views, not copies)."""
        return {spec.name: np.frombuffer(data, dtype=spec.dtype).reshape(shape)
                for spec, (data, shape) in zip(self.inputs, inputs, strict=True)}

    def construct(self) -> int:
        return self.native.handle

    def destroy(self, handle: int) -> None:
        """Nothing to free: the C++ object lives as long as this one (LoadGen's DestroyQSL is for its own)."""


def _pad_bytes(spec: TensorSpec) -> bytes:
    return np.array(spec.padding.value if spec.padding else 0, dtype=spec.dtype).tobytes()


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


def runs_inline(scenario: Scenario, instances: int, batch_size: int) -> bool:
    """Whether the core runs each query on LoadGen's issuing thread, with no batcher thread: on one instance,
    SingleStream (as the Python harness runs it), and Server where a batch is one sample (no window to wait in).
    No thread then wakes between LoadGen's issue and the instance inside the latency LoadGen measures. A Server query
    that arrives while the instance is busy waits in LoadGen's schedule instead of the batcher's queue: LoadGen
    issues it as soon as IssueQuery returns and counts its latency from its scheduled time
    (issue_query_controller.cc), so it is the same single queue, served in the same order."""
    if instances != 1:
        return False
    return scenario is Scenario.SingleStream or (scenario is Scenario.Server and batch_size == 1)


class NativeSUT(SUTBase):
    """HarnessSUT's counterpart on the native core: the same instances, batch size and Server batching window. An
    instance is a Python inference callable (run through the core's python backend) or a C++ backend of the core
    (`native_backends`). The core issues, batches and completes in C++: the base's counters are the core's, its
    failure the core's message unless a Python backend raised first."""

    def __init__(self, scenario: Scenario, qsl: NativeSampleLibrary, instances: Sequence[object], batch_size: int,
                 batch_timeout_us: int = 0) -> None:
        import toolkit_native

        super().__init__(scenario)
        self.qsl = qsl
        self.batch_size = batch_size
        backends = [instance if isinstance(instance, toolkit_native.Backend) else self._python_backend(instance)
                    for instance in instances]
        # Only Server waits for a batch to fill; the other scenarios issue every sample of a query at once.
        timeout_us = batch_timeout_us if scenario is Scenario.Server else 0
        issue_inline = runs_inline(scenario, len(backends), batch_size)
        self.native = toolkit_native.Sut(qsl.native, backends, batch_size, timeout_us, issue_inline)
        self.counters = NativeCounters(self.native)     # type: ignore[assignment]

    def _python_backend(self, infer: Infer):
        import toolkit_native

        if not hasattr(toolkit_native, "PythonBackend"):
            raise RuntimeError("the native core was built without its python backend (CMake option "
                               "TOOLKIT_NATIVE_PYTHON), which runs this backend's Python runner")
        return toolkit_native.PythonBackend(self._call(infer))

    def _call(self, infer: Infer):
        """The instance as the core calls it: (inputs, QSL indices) -> (response bytes, byte offsets). A Python
        error is kept (its type and message name the failure) and raised on, so the core fails the run."""
        qsl = self.qsl

        def call(inputs: list[tuple[memoryview, tuple[int, ...]]], indices: np.ndarray):
            try:
                responses = infer(qsl.batch(inputs), indices)
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


def native_system(spec, benchmark, samples: PreprocessedSet, python_instances: Callable[[], Sequence[Infer]]):
    """(SUT, QSL) of a native run (`spec` a RunSpec), started: the instances are the C++ backend of the core that the
    backend plug-in names (BackendPlugin.native_backend), or where it names none the Python inference callables
    `python_instances()`, run through the core's python backend."""
    from ..backends import threads_per_instance
    from ..backends.registry import get_plugin

    from ..engines.input_samples import engine_inputs

    fields = spec.fields
    qsl = NativeSampleLibrary(samples, spec.performance_sample_count,
                              engine_inputs(benchmark, {**fields, "model": spec.model}))   # int8: input_dtype=int8
    name = get_plugin(fields["backend"]).native_backend
    if name is None:
        instances = python_instances()
    else:
        options = {"engine": str(spec.engine), "device": str(spec.engine_manifest.get("device", "cpu")),
                   "threads": str(threads_per_instance(fields, spec.cpu_cores)),
                   "batch_size": str(fields["batch_size"]), "response_bytes": str(benchmark.response.typical_bytes)}
        instances = native_backends(name, [{**options, "instance": str(i)} for i in range(int(fields["instances"]))])
    sut = NativeSUT(spec.scenario_enum, qsl, instances, int(fields["batch_size"]),
                    int(fields.get("server_batch_timeout_us") or 0))
    return sut.start(), qsl


def native_backends(name: str, options: Sequence[dict[str, str]]) -> list:
    """One instance of the core's C++ backend `name` per entry of `options`; RuntimeError where the core here was
    built without it."""
    import toolkit_native

    if name not in toolkit_native.backend_names():
        raise RuntimeError(f"the native core here was built without its C++ backend {name!r} (built: "
                           f"{', '.join(toolkit_native.backend_names()) or 'none'}); `make build` builds those "
                           f"this machine has what they need for")
    return [toolkit_native.create_backend(name, entry) for entry in options]
