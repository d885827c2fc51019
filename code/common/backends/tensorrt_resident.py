"""Resident sets (NVIDIA's start_from_device): the performance set LoadGen loaded, kept on each GPU once, shared by
the runners there; a batch of it is gathered on the GPU by device-to-device copies, with no host copy."""
from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np

from ..errors import EXIT_FAILURE, UserError
from .cuda_runtime import CudaCalls
from .tensorrt_loader import TensorInfo


class ResidentBatch(Protocol):
    """A batch of the performance set as LoadGen loaded it (harness/qsl.PendingBatch): which rows (`slots`) of which
    load (`load_token`), and the loaded rows per input (`stacked`), which a runner keeping the set on the GPU uploads
    once per load. It is a runner's DirectBatch too."""

    count: int
    slots: np.ndarray
    load_token: int

    def stacked(self, name: str) -> np.ndarray: ...


@dataclass
class _ResidentSet:
    """The performance set of one load on the GPU: per input, the loaded rows in one device buffer."""

    token: int
    rows: dict[str, int]            # input name -> device pointer of its rows
    nbytes: int = 0

    @classmethod
    def upload(cls, cuda: CudaCalls, stream: int, batch: ResidentBatch, inputs: Sequence[TensorInfo]
               ) -> "_ResidentSet":
        resident = cls(batch.load_token, {})
        try:
            for tensor in inputs:
                stored = batch.stacked(tensor.name)
                if not np.can_cast(stored.dtype, tensor.dtype, "same_kind"):
                    raise UserError(f"start_from_device: the performance set stores input {tensor.name} as "
                                    f"{stored.dtype}, the engine takes {tensor.dtype}: preprocess the data for this "
                                    "engine (`make preprocess_data`) or rebuild the engine", exit_code=EXIT_FAILURE)
                rows = np.ascontiguousarray(stored, dtype=tensor.dtype)
                if tuple(rows.shape[1:]) != tensor.sample_shape:
                    raise UserError(f"start_from_device: the performance set's input {tensor.name} has samples of "
                                    f"shape {rows.shape[1:]}, the engine takes {tensor.sample_shape}",
                                    exit_code=EXIT_FAILURE)
                resident.rows[tensor.name] = cuda.malloc(max(1, rows.nbytes))
                resident.nbytes += rows.nbytes
                cuda.copy_to_device_async(resident.rows[tensor.name], rows.ctypes.data, rows.nbytes, stream)
            cuda.synchronize(stream)    # once per load: `rows` may be a temporary
        except BaseException:
            resident.free(cuda)
            raise
        return resident

    def gather(self, cuda: CudaCalls, tensor: TensorInfo, device: int, slots: np.ndarray, stream: int) -> None:
        """Rows `slots` of input `tensor` into the device memory at `device`, one device-to-device copy per run of
        consecutive rows."""
        size, source = tensor.sample_bytes, self.rows[tensor.name]
        slots = np.asarray(slots, dtype=np.int64)
        breaks = np.flatnonzero(np.diff(slots) != 1) + 1
        for start, end in zip([0, *breaks.tolist()], [*breaks.tolist(), len(slots)]):
            cuda.copy_on_device_async(device + start * size, source + int(slots[start]) * size,
                                      (end - start) * size, stream)

    def free(self, cuda: CudaCalls) -> None:
        rows, self.rows = self.rows, {}
        for pointer in rows.values():
            cuda.free(pointer)


class ResidentSets:
    """The performance set on each GPU, one copy per GPU shared by the runners there (start_from_device): uploaded
    by the first runner that meets a new load, freed when the next load replaces it or the GPU's last runner
    closes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sets: dict[int, _ResidentSet] = {}
        self._users: dict[int, int] = {}

    def join(self, gpu: int) -> None:
        with self._lock:
            self._users[gpu] = self._users.get(gpu, 0) + 1

    def rows(self, cuda: CudaCalls, gpu: int, stream: int, batch: ResidentBatch,
             inputs: Sequence[TensorInfo]) -> _ResidentSet:
        with self._lock:
            resident = self._sets.get(gpu)
            if resident is None or resident.token != batch.load_token:
                if resident is not None:   # LoadGen loads a new set only when every query of the last is done
                    del self._sets[gpu]
                    resident.free(cuda)
                resident = self._sets[gpu] = _ResidentSet.upload(cuda, stream, batch, inputs)
            return resident

    def leave(self, cuda: CudaCalls, gpu: int) -> None:
        with self._lock:
            self._users[gpu] = self._users.get(gpu, 1) - 1
            if self._users[gpu] <= 0:
                del self._users[gpu]
                resident = self._sets.pop(gpu, None)
                if resident is not None:
                    resident.free(cuda)

    def on_gpu(self, gpu: int) -> int:
        """Bytes of the performance set held on `gpu` now."""
        with self._lock:
            resident = self._sets.get(gpu)
            return resident.nbytes if resident is not None else 0


RESIDENT_SETS = ResidentSets()
