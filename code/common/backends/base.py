"""What every backend is: an engine loaded once, then a callable from one batch of named inputs to its outputs."""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:   # numpy is imported when a backend is made, not when the registry is read (fields.py reads it)
    import numpy as np


class Backend(ABC):
    """One loaded engine. `infer` may be called from one worker thread at a time per instance; several
    instances run in parallel threads because the runtimes release the GIL while they compute."""

    input_names: tuple[str, ...]      # the model's inputs, fed by name
    # Calls `infer` takes at once (from that many worker threads): 2 where an instance keeps one batch copying
    # while another computes (TensorRT's two buffer sets).
    parallel_calls: int = 1
    # Whether `infer` takes batches not gathered yet (harness/qsl.PendingBatch), gathering them into buffers of
    # its own (TensorRT's pinned memory: one host copy per sample).
    direct_batches: bool = False

    @abstractmethod
    def infer(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        """Outputs of one batch ({input name: array}, leading dimension = samples), in the engine's output order."""

    def keep_inputs_on_device(self) -> None:
        """Keep the performance set in the device's memory and gather batches there (start_from_device)."""
        from ..errors import UserError

        raise UserError(f"{type(self).__name__} cannot keep the performance set on a device (start_from_device is a "
                        "TensorRT option)")

    def close(self) -> None:
        """Free the engine; the backend is unusable afterwards."""

    def __enter__(self) -> "Backend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class NullBackend(Backend):
    """Returns zeros of a fixed per-sample shape at once, without any computation.

    A measuring tool, not a stand-in for a model: run through the harness, it gives the throughput
    ceiling of the harness itself (batching, threads, LoadGen callbacks), i.e. its overhead.
    """

    def __init__(self, output_shape: Sequence[int] = (1,), dtype: "str | np.dtype" = "float32",
                 input_names: Sequence[str] = ("input",)) -> None:
        import numpy as np

        self.input_names = tuple(input_names)
        self.output_shape = tuple(int(d) for d in output_shape)
        self.dtype = np.dtype(dtype)

    def infer(self, inputs: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        import numpy as np

        return [np.zeros((len(inputs[self.input_names[0]]), *self.output_shape), dtype=self.dtype)]
