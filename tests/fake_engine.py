"""A TensorRT execution context on fake CUDA (tests/fake_cuda.py), for the runner's tests: `FakeContext` computes
two outputs of known values from its input, reading and writing the tensors at the addresses bound when the
inference was enqueued, as TensorRT does."""
from __future__ import annotations

import ctypes
from typing import Sequence

import numpy as np

from code.common.backends.tensorrt_loader import TensorInfo
from tests.fake_cuda import FakeCuda

SAMPLE = (3, 4)
WEIGHTS = np.random.default_rng(0).normal(0, 1, (12, 5)).astype(np.float32)


class FakeContext:
    """Two outputs: `features` = input flattened @ WEIGHTS, `total` = sum per sample (float16)."""

    def __init__(self, cuda: FakeCuda, max_batch: int) -> None:
        self.cuda, self.max_batch = cuda, max_batch
        self.addresses: dict[str, int] = {}
        self.batch = 0
        self.calls: list[str] = []
        self.execute_result = True

    def set_input_shape(self, name: str, shape: Sequence[int]) -> bool:
        self.calls.append(f"set_input_shape {tuple(shape)}")
        if not 1 <= shape[0] <= self.max_batch:
            return False
        self.batch = shape[0]
        return True

    def set_tensor_address(self, name: str, memory: int) -> bool:
        self.calls.append(f"set_tensor_address {name}")
        self.addresses[name] = memory
        return True

    def get_tensor_shape(self, name: str) -> Sequence[int]:
        return {"input": (self.batch, *SAMPLE), "features": (self.batch, 5), "total": (self.batch, 1)}[name]

    def _array(self, addresses: dict[str, int], name: str, shape: tuple[int, ...], dtype) -> np.ndarray:
        """The tensor `name` at the address bound when the inference was enqueued (as TensorRT reads them)."""
        count = int(np.prod(shape))
        buffer = (ctypes.c_byte * (count * np.dtype(dtype).itemsize)).from_address(addresses[name])
        return np.frombuffer(buffer, dtype=dtype, count=count).reshape(shape)

    def execute_async_v3(self, stream_handle: int) -> bool:
        self.calls.append("execute")
        if not self.execute_result:
            return False
        batch, at = self.batch, dict(self.addresses)

        def compute() -> None:
            x = self._array(at, "input", (batch, *SAMPLE), np.float32).reshape(batch, -1)
            self._array(at, "features", (batch, 5), np.float32)[:] = x @ WEIGHTS
            self._array(at, "total", (batch, 1), np.float16)[:] = x.sum(axis=1, keepdims=True)
        self.cuda._enqueue(stream_handle, compute)
        return True


TENSORS = [TensorInfo("input", True, np.dtype(np.float32), (-1, *SAMPLE)),
           TensorInfo("features", False, np.dtype(np.float32), (-1, 5)),
           TensorInfo("total", False, np.dtype(np.float16), (-1, 1))]


