"""Set one field of a config class in its source file, with a comment saying where the value comes from.

The class is found with `ast`, so the rest of the file (other classes, comments, the stubs that
`make add_custom_system` writes) stays as it was. A value written before by the same tool is replaced together
with its comment; a bare `pass` that held the class body open is dropped.
"""
from __future__ import annotations

import ast

MARKER = "# Measured by make find_peak"
TUNE_MARKER = "# Tuned by make tune"
_MARKERS = (MARKER, TUNE_MARKER)


def literal(value: float | int | bool) -> str:
    """How a value is written: True / False, integers with underscores (3_520_000), floats as Python reads them
    back."""
    if isinstance(value, bool):
        return repr(value)
    return f"{value:_}" if isinstance(value, int) else repr(float(value))


def set_class_field(source: str, class_name: str, name: str, value: float | int | bool, comment: list[str],
                    marker: str = MARKER) -> str:
    """`source` with `name = value` in class `class_name`, preceded by `comment` (lines without the `# `);
    the first comment line should start after `marker`'s words, e.g. 'on 2026-01-01 12:00: ...'."""
    tree = ast.parse(source)
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name]
    if len(found) != 1:
        raise ValueError(f"{'no' if not found else 'more than one'} class {class_name} at the top level")
    cls = found[0]
    if cls.body[0].lineno == cls.lineno:
        raise ValueError(f"class {class_name} is written on one line; give it a body of its own lines")
    lines = source.splitlines(keepends=True)
    indent = " " * cls.body[0].col_offset
    new = [f"{indent}{marker} {comment[0]}\n" if comment else "",
           *(f"{indent}# {text}\n" for text in comment[1:]), f"{indent}{name} = {literal(value)}\n"]

    assigned = [s for s in cls.body if _assigns(s, name)]
    if assigned:   # the last assignment is the one that counts
        start = _own_comment_start(lines, assigned[-1].lineno - 1)
        return "".join(lines[:start] + new + lines[assigned[-1].end_lineno:])
    bare = [s for s in cls.body if isinstance(s, ast.Pass)]
    if bare:
        position = bare[0].lineno - 1
        return "".join(lines[:position] + new + lines[bare[0].end_lineno:])
    position = cls.body[-1].end_lineno
    return "".join(lines[:position] + new + lines[position:])


def _assigns(statement: ast.stmt, name: str) -> bool:
    if isinstance(statement, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in statement.targets)
    return isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
        and statement.target.id == name


def _own_comment_start(lines: list[str], index: int) -> int:
    """The first line of the comment (starting with a marker) right above line `index`, or `index` when there is
    none."""
    first = index
    while first > 0 and lines[first - 1].lstrip().startswith("#"):
        first -= 1
        if lines[first].lstrip().startswith(_MARKERS):
            return first
    return index
