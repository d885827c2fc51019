"""Systems added with `make add_custom_system`. This file is rewritten by that command."""
from __future__ import annotations

from ..constants import SystemType  # noqa: F401  (used by the entries below)
from .known import KnownSystem

CUSTOM_SYSTEMS: tuple[KnownSystem, ...] = (
)
