"""The builder's persistent timing cache (tensorrt_builder._use_timing_cache): timings are said to be reused only
when TensorRT took them, i.e. the cache file was written by this TensorRT version on this GPU.

The builder config here is a fake with TensorRT's documented behaviour: `create_timing_cache(bytes)` gives a
cache (None where the bytes are not a cache at all); `ITimingCache.combine(other, ignore_mismatch=False)` copies
`other`'s entries and returns True only for a cache of the same TensorRT version and device, else copies nothing
and returns False.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from code.common.backends.tensorrt_builder import _use_timing_cache

HERE = b"trt-11.4|H100|"          # the header of a cache this TensorRT writes on this GPU


@dataclass
class Cache:
    header: bytes
    entries: list[bytes] = field(default_factory=list)

    def combine(self, other: "Cache", ignore_mismatch: bool) -> bool:
        assert ignore_mismatch is False
        if other.header != self.header:
            return False
        self.entries += other.entries
        return True


class Config:
    def __init__(self) -> None:
        self.cache: Cache | None = None

    def create_timing_cache(self, serialized: bytes) -> Cache | None:
        if not serialized:
            return Cache(HERE)
        if b"|" not in serialized:
            return None
        header, _, body = serialized.rpartition(b"|")
        return Cache(header + b"|", body.split(b",") if body else [])

    def set_timing_cache(self, cache: Cache, ignore_mismatch: bool) -> bool:
        self.cache = cache
        return True


@pytest.mark.parametrize("content, reused, said", [
    (None, [], None),
    (HERE + b"conv1,conv2", [b"conv1", b"conv2"], "reusing tactic timings"),
    (b"trt-10.16|H100|conv1", [], "written by another TensorRT version or GPU"),
    (b"trt-11.4|L4|conv1", [], "written by another TensorRT version or GPU"),
    (b"not a cache", [], "written by another TensorRT version or GPU"),
])
def test_timings_are_reused_only_from_this_tensorrt_and_gpu(tmp_path, content, reused, said) -> None:
    path = tmp_path / "timing.cache"
    if content is not None:
        path.write_bytes(content)
    config, lines = Config(), []
    _use_timing_cache(config, path, lines.append)
    assert config.cache is not None and config.cache.header == HERE and config.cache.entries == reused
    assert len(lines) == (0 if said is None else 1)
    if said is not None:
        assert said in lines[0]
    assert not any("reusing" in line for line in lines) or reused
