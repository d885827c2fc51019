"""A scratch folder with the wan substitute written for small videos, the diffusers environment installed and the
reference's prompts linked; the test skips with the reason where the prompts or the environment cannot be had."""
from __future__ import annotations

from pathlib import Path

import pytest

from code.common.errors import UserError
from code.common.paths import Paths
from code.wan import datasets, models
from code.wan import reference as ref


def wan_substitute_paths(root: Path, height: int, width: int, frames: int) -> Paths:
    paths = Paths.create(scratch=root / "scratch", log_dir=root / "logs")
    official = datasets.official_file(paths, ref.PROMPTS_FILE)
    if not official.is_file():
        pytest.skip(f"the reference's prompts are not beside the repository ({official})")
    try:
        models.make_environment(paths, lambda line: None)
    except UserError as error:
        pytest.skip(f"the diffusers environment cannot be installed here: {error}")
    datasets.download_data(datasets.DATASET, paths, lambda line: None)
    models.make_substitute(paths, models.model_folder(paths, models.SUBSTITUTE), official, height, width, frames)
    return paths
