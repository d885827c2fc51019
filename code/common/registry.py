"""One registry class for every plug-in point (benchmarks, backends, harnesses): a table keyed by name.

An entry is either the object itself or a lazy "module:attribute" string, imported when the entry is first asked
for, so nothing is imported at registration. A name registered twice is an error that names both places; an
unknown name is a UserError that suggests the closest names ("Did you mean ...? Available: ..."). A plug-in that
lives outside the toolkit (a test, a user's package) registers itself with `register` from its own module.
"""
from __future__ import annotations

import difflib
import importlib
import sys
from types import MappingProxyType
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from .errors import UserError

T = TypeVar("T")


class DuplicateRegistration(ValueError):
    """A name registered a second time; the message names where each registration is."""


def _caller(depth: int) -> str:
    """file:line of the code `depth` frames above the caller of this function (where a registration is made)."""
    frame = sys._getframe(depth + 1)
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"


class Registry(Generic[T]):
    """Name -> plug-in (or "module:attribute", resolved on first use), in registration order.

    `kind` names what is registered, for messages ("backend", "benchmark", "harness"); `package` anchors relative
    module names of lazy entries; `make` turns a resolved attribute into the plug-in (e.g. a class into its
    instance); `unknown` words the start of the message for an unknown name (default: "Unknown <kind> '<name>'.");
    `entries` are registered at once, in order (the toolkit's own plug-ins); `entries_from`, "module:attribute" of
    such a table kept elsewhere (e.g. in the plug-ins' own package), is registered before the first question.
    """

    def __init__(self, kind: str, *, package: str | None = None, make: Callable[[Any], T] | None = None,
                 unknown: Callable[[str], str] | None = None, entries: Mapping[str, str] = MappingProxyType({}),
                 entries_from: str | None = None) -> None:
        self.kind = kind
        self._package = package
        self._make = make
        self._unknown = unknown or (lambda name: f"Unknown {kind} '{name}'.")
        self._entries: dict[str, tuple[Any, str]] = {}    # name -> (target, where it was registered)
        self._loaded: dict[str, T] = {}
        self.version = 0                                  # grows with every change (caches derived from entries)
        self._entries_from = entries_from
        for name, target in entries.items():
            self.register(name, target, where=_caller(1))

    def _table(self) -> dict[str, tuple[Any, str]]:
        """The entries, the table of `entries_from` registered first (once)."""
        if self._entries_from is not None:
            target, self._entries_from = self._entries_from, None
            table = self._resolve(target)
            where = sys.modules[target.partition(":")[0]].__file__ or target
            earlier, self._entries = self._entries, {}
            for name, entry in table.items():
                self.register(name, entry, where=where)
            for name, (entry, place) in earlier.items():
                self.register(name, entry, where=place)
        return self._entries

    def _resolve(self, target: str) -> Any:
        module, _, attribute = target.partition(":")
        return getattr(importlib.import_module(module, self._package), attribute)

    # -- registering -------------------------------------------------------------------------------
    def register(self, name: str, target: T | str, *, where: str | None = None) -> None:
        """Add `name`; `target` is the plug-in, or "module:attribute" of it. DuplicateRegistration names both
        places when `name` is taken."""
        where = where or _caller(1)
        entries = self._table()
        if name in entries:
            raise DuplicateRegistration(f"{self.kind} '{name}' is registered twice: at {entries[name][1]} "
                                        f"and at {where}")
        if isinstance(target, str) and ":" not in target:
            raise ValueError(f"{self.kind} '{name}': a lazy entry is 'module:attribute', not '{target}'")
        self._entries[name] = (target, where)
        self.version += 1

    def unregister(self, name: str) -> None:
        """Remove `name` (a plug-in registered for a while, e.g. by a test)."""
        self._table().pop(name, None)
        self._loaded.pop(name, None)
        self.version += 1

    # -- asking ------------------------------------------------------------------------------------
    def get(self, name: str) -> T:
        """The plug-in `name`, imported on first use; UserError naming the closest and all names when unknown."""
        if name in self._loaded:
            return self._loaded[name]
        try:
            target, _ = self._table()[name]
        except KeyError:
            raise UserError(self.unknown_message(name)) from None
        if isinstance(target, str):
            target = self._resolve(target)
        plugin = self._make(target) if self._make is not None else target
        self._loaded[name] = plugin
        return plugin

    def if_loaded(self, name: str) -> T | None:
        """The plug-in `name` where it was asked for already, else None; never imports (safe in a signal handler)."""
        return self._loaded.get(name)

    def unknown_message(self, name: str) -> str:
        close = difflib.get_close_matches(name, list(self._table()), n=3)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        return f"{self._unknown(name)}{hint} Available: {', '.join(self._table()) or 'none'}."

    def names(self) -> tuple[str, ...]:
        return tuple(self._table())

    def where(self, name: str) -> str:
        """Where `name` was registered."""
        return self._table()[name][1]

    def loaded(self) -> Iterator[T]:
        """Every plug-in, each imported (for the tables and contract tests that must see them all)."""
        return (self.get(name) for name in self.names())

    def __contains__(self, name: object) -> bool:
        return name in self._table()

    def __iter__(self) -> Iterator[str]:
        return iter(tuple(self._table()))

    def __len__(self) -> int:
        return len(self._table())
