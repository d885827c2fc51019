"""Typed stub of the native harness core's Python module (native/src/bindings.cc), installed beside it."""
from typing import Callable, Sequence

import numpy as np

# Per input, in the declared order: (the samples' C-contiguous array, samples first; None for an input of fixed
# shape, else int64 samples x dimensions of each sample's own shape).
LoadedInputs = list[tuple[np.ndarray, np.ndarray | None]]
# Per input, in the declared order: (the batch's bytes, its shape with the batch axis first).
BatchInputs = list[tuple[memoryview, tuple[int, ...]]]


class InputLayout:
    name: str
    shape: list[int]      # per sample; -1 for a varying axis
    buckets: list[int]

    def __init__(self, name: str, itemsize: int, shape: Sequence[int], pad_value: bytes,
                 buckets: Sequence[int]) -> None: ...


class SampleLibrary:
    handle: int

    def __init__(self, total: int, performance: int, inputs: Sequence[InputLayout],
                 load: Callable[[np.ndarray], LoadedInputs]) -> None: ...


class Backend: ...


class PythonBackend(Backend):
    """Present where the core was built with TOOLKIT_NATIVE_PYTHON (the default)."""

    def __init__(self, infer: Callable[[BatchInputs, np.ndarray], tuple[np.ndarray, np.ndarray]]) -> None: ...


def create_backend(name: str, options: dict[str, str]) -> Backend: ...
def backend_names() -> list[str]: ...


class Sut:
    handle: int
    error: str
    issued: int
    completed: int
    batches: int

    def __init__(self, qsl: SampleLibrary, backends: Sequence[Backend], batch_size: int, timeout_us: int,
                 issue_inline: bool = False) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...


class ReferenceSut:
    handle: int

    def __init__(self, completion_batch: int = 0) -> None: ...
