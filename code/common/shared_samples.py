"""Development samples kept beside the repository (paths.shared_data): `make download_data` links them into the
scratch data folder, the same way for every benchmark. A link is never a copy: the samples stay where they are, and
a file or folder the user put in the link's place stays too."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from .errors import EXIT_FAILURE, UserError

Log = Callable[[str], None]


def absent(name: str, source: str | Path, what_else: str) -> UserError:
    """The error of a sample that is not beside the repository: `source` names it (its path, and what it holds
    where that helps), `what_else` is the sentence that says what to do instead."""
    return UserError(f"{name}: {source} is absent; it is development data kept beside the repository, not part of a "
                     f"fresh clone. {what_else}", exit_code=EXIT_FAILURE)


def link_sample(name: str, link: Path, source: Path, log: Log | None = None,
                is_copy: Callable[[Path], bool] = lambda found: True) -> bool:
    """Make `link` a symlink to the sample file or folder `source` (of the data set `name`) unless it already is one.
    A dangling link, a link elsewhere or an empty folder is replaced; a file or folder of the user's stays where
    `is_copy` accepts it as a copy of the sample, and is refused otherwise. True when the link was made; `log`
    hears what was done."""
    say = log or (lambda line: None)
    if link.is_symlink():
        if link.resolve() == source.resolve():
            say(f"{name}: {link} already links to {source}")
            return False
        link.unlink()
    elif link.is_dir() and not any(link.iterdir()):
        link.rmdir()
    elif link.exists():
        if not is_copy(link):
            raise UserError(f"{name}: {link} is in the place of the link to {source} and is not a copy of it; "
                            f"remove it and rerun.", exit_code=EXIT_FAILURE)
        say(f"{name}: {link} is a copy of yours; it stays")
        return False
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(source, target_is_directory=source.is_dir())
    say(f"{name}: {link} -> {source}")
    return True
