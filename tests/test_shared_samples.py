"""The one linker of the development samples kept beside the repository (code/common/shared_samples.py), on files
and folders made here: a link is made once, a stale link or an empty folder is replaced, a copy of the user's stays,
anything else in the link's place is refused naming it."""
from __future__ import annotations

from pathlib import Path

import pytest

from code.common.errors import EXIT_FAILURE, UserError
from code.common.paths import Paths
from code.common.shared_samples import absent, link_sample


def _sample(root: Path) -> tuple[Path, Path]:
    folder = root / "shared" / "data" / "sample"
    folder.mkdir(parents=True)
    (folder / "rows.jsonl").write_text("{}\n")
    return folder, folder / "rows.jsonl"


def test_links_are_made_once_and_stale_ones_replaced(tmp_path: Path) -> None:
    folder, file = _sample(tmp_path)
    lines: list[str] = []
    link = tmp_path / "scratch" / "data" / "sample" / "rows.jsonl"
    assert link_sample("sample", link, file, lines.append)
    assert link.is_symlink() and link.resolve() == file.resolve() and lines == [f"sample: {link} -> {file}"]
    assert not link_sample("sample", link, file, lines.append)
    assert lines[-1] == f"sample: {link} already links to {file}"
    link.unlink()
    link.symlink_to(tmp_path / "gone.jsonl")                     # dangling: replaced
    assert link_sample("sample", link, file) and link.resolve() == file.resolve()
    empty = tmp_path / "scratch" / "data" / "images"
    empty.mkdir()                                                # an empty folder in a folder link's place
    assert link_sample("images", empty, folder) and empty.is_symlink() and (empty / "rows.jsonl").is_file()


def test_a_copy_stays_and_anything_else_is_refused(tmp_path: Path) -> None:
    folder, _ = _sample(tmp_path)
    target = tmp_path / "scratch" / "data" / "sample"
    target.mkdir(parents=True)
    (target / "rows.jsonl").write_text("{}\n")
    lines: list[str] = []
    assert not link_sample("sample", target, folder, lines.append,
                           is_copy=lambda found: (found / "rows.jsonl").is_file())
    assert lines == [f"sample: {target} is a copy of yours; it stays"] and not target.is_symlink()
    (target / "rows.jsonl").rename(target / "other.txt")
    with pytest.raises(UserError) as error:
        link_sample("sample", target, folder, is_copy=lambda found: (found / "rows.jsonl").is_file())
    assert error.value.exit_code == EXIT_FAILURE and str(target) in str(error.value)
    assert "remove it and rerun" in str(error.value) and (target / "other.txt").is_file()


def test_an_absent_sample_is_named_with_what_to_do_instead(tmp_path: Path) -> None:
    paths = Paths(repo=tmp_path / "repo", scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    assert paths.shared_data == tmp_path / "shared" / "data"
    error = absent("sample", paths.shared_data / "sample", "Use --dataset=other.")
    assert error.exit_code == EXIT_FAILURE
    assert str(error) == (f"sample: {paths.shared_data / 'sample'} is absent; it is development data kept beside the "
                          f"repository, not part of a fresh clone. Use --dataset=other.")
