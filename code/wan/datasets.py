"""wan-2.2-t2v-a14b's data set: the reference's 248 VBench prompts (data/vbench_prompts.txt), one video each.

`make download_data` links the official file from the round's reference folder where it lies beside the repository
(../shared/mlcommons-inference), or takes the copy a user put in the data folder; either way the file must be the
248 prompts byte for byte (its sha256): a prompt list of another length or wording would be another benchmark. A
prompt goes to the engine as a chat's text part, as it is (the pipeline cleans it as the reference's does)."""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Callable

from ..common.benchmark_api import DatasetSpec
from ..common.errors import EXIT_FAILURE, UserError
from ..common.paths import Paths
from ..common.prompts import Chat, Text
from ..common.shared_samples import link_sample
from . import reference as ref

Log = Callable[[str], None]
DATASET = "vbench_prompts"
DATASETS = {DATASET: DatasetSpec(
    name=DATASET, description="the 248 VBench prompts of the reference (data/vbench_prompts.txt), one video each",
    how_to_get=f"data/{ref.PROMPTS_FILE} of {ref.OFFICIAL_FOLDER} in the mlcommons/inference repository; "
               f"`make download_data` links it from ../shared/mlcommons-inference, or put a copy into the data "
               f"folder it names",
    sample_count=ref.PROMPT_COUNT)}


def official_file(paths: Paths, name: str) -> Path:
    """A file of the reference's data/ folder beside the repository (it may be absent)."""
    return paths.shared_official / ref.OFFICIAL_FOLDER / "data" / name


def prompts_path(paths: Paths, dataset: str = DATASET) -> Path:
    return paths.dataset_dir(dataset) / ref.PROMPTS_FILE


def check_prompts(path: Path) -> list[str]:
    """The prompts of `path`, which must be the reference's 248 (UserError naming what differs otherwise)."""
    data = path.read_bytes()
    prompts = [line.strip() for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
    if hashlib.sha256(data).hexdigest() != ref.PROMPTS_SHA256:
        what = f"{len(prompts)} prompts" if len(prompts) != ref.PROMPT_COUNT else "248 prompts that are not the " \
                                                                                 "reference's word for word"
        raise UserError(f"{path} holds {what}: wan-2.2-t2v-a14b runs the reference's {ref.PROMPT_COUNT} VBench "
                        f"prompts exactly (data/{ref.PROMPTS_FILE}, sha256 {ref.PROMPTS_SHA256[:12]}...). Put the "
                        f"official file there, or remove it and run make download_data.", exit_code=EXIT_FAILURE)
    return prompts


def download_data(dataset: str, paths: Paths, log: Log) -> Path:
    target = prompts_path(paths, dataset)
    source = official_file(paths, ref.PROMPTS_FILE)
    if not target.exists() and not target.is_symlink():
        if not source.is_file():
            raise UserError(f"{dataset}: the reference's prompt list is not here; copy data/{ref.PROMPTS_FILE} of "
                            f"{ref.OFFICIAL_FOLDER} (mlcommons/inference) to {target} and rerun make download_data.",
                            exit_code=EXIT_FAILURE)
        check_prompts(source)
    link_sample(dataset, target, source, log, is_copy=lambda found: bool(check_prompts(found)))
    check_prompts(target)
    return target.parent


class PromptSet:
    """The preprocessed set: one chat of the prompt's text per sample, in QSL order (the file's line order)."""

    def __init__(self, directory: Path, prompts: list[str]) -> None:
        self.directory, self.prompts = directory, prompts      # directory: where the prompt file lies

    def __len__(self) -> int:
        return len(self.prompts)

    def load(self, index: int) -> Any:
        return Chat.user(Text(self.prompts[index]))

    def text(self, index: int) -> str:
        return self.prompts[index]


def prompt_set(dataset: str, paths: Paths) -> PromptSet:
    path = prompts_path(paths, dataset)
    if not path.is_file():
        raise UserError(f"{dataset}: {path} is missing; run make download_data "
                        f"RUN_ARGS=\"--benchmarks={ref.NAME}\".")
    return PromptSet(path.parent, check_prompts(path))
