"""Files people edit (systems/*.overrides.json, configs/*/*/custom.py, code/common/systems/custom_list.py, ...) read
so that a damaged one is named in one sentence with the way to repair it: not UTF-8, not JSON, not Python, a value
of the wrong type. Never `internal error`."""
from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import EXIT_FAILURE, UserError



def read_json_file(path: Path, fix: str, shown: Path | str | None = None) -> Any:
    """The JSON value in `path` (UTF-8); a UserError naming the file (as `shown`), what is wrong and `fix`."""
    shown = path if shown is None else shown
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except OSError as error:
        raise UserError(f"{shown} cannot be read ({error.strerror or error}); {fix}.", exit_code=EXIT_FAILURE) \
            from None
    except UnicodeDecodeError as error:
        raise UserError(f"{shown} is not UTF-8 text (byte {error.start} is 0x{error.object[error.start]:02x}); "
                        f"{fix}.", exit_code=EXIT_FAILURE) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise UserError(f"{shown} is not valid JSON (line {error.lineno}, column {error.colno}: {error.msg}); "
                        f"{fix}.", exit_code=EXIT_FAILURE) from None
    except RecursionError:
        raise UserError(f"{shown} nests too deeply to be read; {fix}.", exit_code=EXIT_FAILURE) from None


def source_problem(error: BaseException) -> str:
    """Why a Python file could not be loaded, in words (its line where known)."""
    if isinstance(error, SyntaxError):
        where = f"line {error.lineno}" if error.lineno else "a line"
        if "codec can't decode" in str(error.msg):
            return f"it is not UTF-8 text ({where})"
        if "null bytes" in str(error.msg):
            return "it is not text (it holds NUL bytes)"
        return f"{where} is not valid Python: {error.msg}"
    return f"loading it raised {type(error).__name__}: {error}"


def import_user_module(name: str, path: Path | None, fix: str) -> ModuleType:
    """importlib.import_module(name), with any failure to load the file a UserError naming `path` and `fix`."""
    try:
        return importlib.import_module(name)
    except UserError:
        raise
    except Exception as error:  # noqa: BLE001  whatever the file does wrong, it is named
        raise UserError(f"{path or name} cannot be loaded: {source_problem(error)}; {fix}.",
                        exit_code=EXIT_FAILURE) from None


def load_user_file(name: str, path: Path, fix: str) -> ModuleType:
    """`path` executed as a fresh module `name` (not the one this process may have imported before another
    process changed the file); a UserError naming it and `fix` when it cannot be loaded."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError(f"{path} cannot be loaded as Python; {fix}.", exit_code=EXIT_FAILURE)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001  whatever the file does wrong, it is named
        raise UserError(f"{path} cannot be loaded: {source_problem(error)}; {fix}.", exit_code=EXIT_FAILURE) \
            from None
    return module
