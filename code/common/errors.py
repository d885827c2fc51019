"""One exception type for problems the user can fix, and the exit codes the toolkit uses."""
from __future__ import annotations

from typing import Mapping, TypeVar

T = TypeVar("T")

EXIT_BAD_INPUT = 2        # a bad flag, value, benchmark or scenario: fix the command line
EXIT_NOT_IMPLEMENTED = 3  # the action exists in the Makefile but its capability has not landed yet


class UserError(Exception):
    """A problem the user can fix. Printed as one message, no traceback (unless --verbose)."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_INPUT) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NotImplementedYet(UserError):
    """An action whose capability is planned but not in this version of the toolkit."""

    def __init__(self, action: str, capability: str) -> None:
        super().__init__(
            f"'{action}' is not implemented yet: it arrives with {capability}. Nothing was changed.",
            exit_code=EXIT_NOT_IMPLEMENTED,
        )


def choose(table: Mapping[str, T], name: str, what: str, benchmark: str) -> T:
    """`table[name]`, or a UserError naming the valid choices (what: "model", "data set")."""
    try:
        return table[name]
    except KeyError:
        raise UserError(f"Unknown {what} '{name}' for {benchmark}. Valid choices: {', '.join(table)}.") from None
