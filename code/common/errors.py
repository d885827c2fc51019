"""One exception type for problems the user can fix, and the exit statuses the toolkit uses: the one place that
names them (every process of the toolkit: code.main, a test's child process, the accuracy scripts)."""
from __future__ import annotations

from typing import Mapping, TypeVar

T = TypeVar("T")

EXIT_OK = 0               # done (a test that ran to its end, VALID or not, too)
EXIT_FAILURE = 1          # a failure: a test failed, a file to repair, a step to run first, a lock held by another
EXIT_BAD_INPUT = 2        # a bad flag, value, benchmark or scenario: fix the command line
EXIT_NOT_IMPLEMENTED = 3  # the action exists in the Makefile but its capability has not landed yet
EXIT_SIGNAL_BASE = 128    # 128 + N: signal N stopped the process, as a shell reports it


def signal_exit_status(signum: int) -> int:
    """The exit status of a process that signal `signum` stopped (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP)."""
    return EXIT_SIGNAL_BASE + int(signum)


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
