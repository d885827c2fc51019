"""ONNX graphs whose weights live in an external-data file beside them (LLM decoders: a protobuf stops at 2 GB).

The graph names its data file; moving or renaming the pair means rewriting that name in the graph. The data file
is `<graph file name>.data` (fileio.external_data) wherever this toolkit writes one.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..fileio import atomic_path, external_data


def external_locations(graph: Path) -> set[str]:
    """The data files `graph` reads its external tensors from (names relative to its folder)."""
    import onnx

    model = onnx.load(str(graph), load_external_data=False)
    return {entry.value for tensor in _external_tensors(model) for entry in tensor.external_data
            if entry.key == "location"}


def write_graph(graph: Path, dest: Path, data_name: str) -> None:
    """Write `graph` (without loading its weights) to `dest`, its external tensors pointing at `data_name`."""
    import onnx

    model = onnx.load(str(graph), load_external_data=False)
    for tensor in _external_tensors(model):
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = data_name
    onnx.save(model, str(dest))


def place_decoder(source: Path, dest: Path, copy: bool) -> None:
    """Put the graph `source` and its one data file at `dest` and external_data(dest): the data copied when `copy`
    (an engine never shares storage with the model it was built from, so damage to one is not damage to both),
    else moved; then the graph; each replaced atomically."""
    locations = external_locations(source)
    if len(locations) != 1:
        raise RuntimeError(f"{source}: expected its weights in one external-data file, found "
                           f"{sorted(locations) or 'none'}")
    data = source.parent / locations.pop()
    with atomic_path(external_data(dest)) as tmp:
        if copy:
            shutil.copyfile(data, tmp)
        else:
            os.replace(data, tmp)
    with atomic_path(dest, ".tmp.onnx") as tmp:
        write_graph(source, tmp, external_data(dest).name)


def _external_tensors(model) -> list:
    from onnx.external_data_helper import _get_all_tensors, uses_external_data

    return [t for t in _get_all_tensors(model) if uses_external_data(t)]
