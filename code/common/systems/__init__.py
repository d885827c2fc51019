"""Which system this is: detection, known and custom systems, and the nearest match for unknown ones."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..constants import SystemType
from ..errors import EXIT_FAILURE, UserError
from ..user_files import import_user_module, load_user_file
from .detect import SystemDetector
from .info import CPUInfo, GPUInfo, SystemInfo, derived_system_id
from .known import GENERIC_CPU, KNOWN_SYSTEMS, KnownSystem

__all__ = ["CPUInfo", "GPUInfo", "SystemInfo", "SystemDetector", "KnownSystem", "SystemMatch", "match_system",
           "all_known_systems", "custom_systems", "read_custom_systems", "GENERIC_CPU"]

CUSTOM_LIST_FIX = ("repair it, or put back the committed one (git checkout code/common/systems/custom_list.py) and "
                   "register this machine again with make add_custom_system")


def all_known_systems() -> tuple[KnownSystem, ...]:
    return KNOWN_SYSTEMS + custom_systems()


def custom_systems() -> tuple[KnownSystem, ...]:
    """The systems registered in custom_list.py (imported once, when first asked for); a UserError naming the
    file when it cannot be used."""
    module = import_user_module(f"{__name__}.custom_list", Path(__file__).with_name("custom_list.py"),
                                CUSTOM_LIST_FIX)
    return _checked_entries(module, Path(__file__).with_name("custom_list.py"))


def read_custom_systems(path: Path) -> tuple[KnownSystem, ...]:
    """The systems in the custom_list.py at `path` as it is now on disk (for a writer, which must not drop an
    entry another process added since this one started)."""
    if not Path(path).exists():
        return ()
    return _checked_entries(load_user_file(f"{__name__}.custom_list", Path(path), CUSTOM_LIST_FIX), Path(path))


def _checked_entries(module, path: Path) -> tuple[KnownSystem, ...]:
    entries = getattr(module, "CUSTOM_SYSTEMS", None)
    if not isinstance(entries, tuple) or not all(isinstance(entry, KnownSystem) for entry in entries):
        raise UserError(f"{path}: CUSTOM_SYSTEMS must be a tuple of KnownSystem(...) entries, as make "
                        f"add_custom_system writes it; {CUSTOM_LIST_FIX}.", exit_code=EXIT_FAILURE)
    return entries


@dataclass(frozen=True)
class SystemMatch:
    info: SystemInfo
    system_id: str
    known: KnownSystem | None
    candidates: tuple[str, ...]   # the system's own id first, then the nearest known ones, generic_cpu last

    @property
    def is_known(self) -> bool:
        return self.known is not None

    @property
    def system_type(self) -> SystemType:
        return self.known.system_type if self.known else SystemType.edge

    def describe(self) -> str:
        if self.known:
            return f"{self.system_id} ({self.known.description})"
        return f"{self.system_id} (not a registered system; nearest configs: {', '.join(self.candidates[1:])})"

    def registration_hint(self) -> str:
        return (f"This machine is not a registered system, so the toolkit uses the defaults of "
                f"{self.candidates[1] if len(self.candidates) > 1 else GENERIC_CPU}. To register it and tune "
                f"its configs, run: make add_custom_system RUN_ARGS=\"--system_id={self.system_id} --yes\"")


def match_system(info: SystemInfo, known: tuple[KnownSystem, ...] | None = None,
                 system_name: str | None = None) -> SystemMatch:
    """Match detected hardware to a known system, or derive an id and list the nearest known ones."""
    known = all_known_systems() if known is None else known
    by_id = {k.id: k for k in known}
    if system_name:
        check_system_name(system_name, info, known)
        found = by_id.get(system_name)
        return SystemMatch(info, system_name, found, (system_name, *_nearest(info, known, exclude=system_name)))
    for system in known:
        if system.matches(info):
            return SystemMatch(info, system.id, system, (system.id, *_nearest(info, known, exclude=system.id)))
    own_id = derived_system_id(info)
    return SystemMatch(info, own_id, by_id.get(own_id), (own_id, *_nearest(info, known, exclude=own_id)))


def check_system_name(system_name: str, info: SystemInfo, known: tuple[KnownSystem, ...]) -> None:
    """--system_name must name a registered system, generic_cpu, or this machine's own derived id."""
    own_id = derived_system_id(info)
    allowed = [k.id for k in known] + [GENERIC_CPU]
    if system_name in allowed or system_name == own_id:
        return
    new_id = system_name if _registrable(system_name) else own_id
    raise UserError(f"--system_name={system_name} names no known system (known: {', '.join(allowed)}, and this "
                    f"machine's own id {own_id}); to register this machine as {new_id}, run make add_custom_system "
                    f"SYSTEM_NAME= RUN_ARGS=\"--system_id={new_id} --yes\", after which --system_name={new_id} "
                    f"works.")


def _registrable(system_id: str) -> bool:
    """What add_custom_system accepts as an id: a letter, then letters, digits and underscores."""
    return system_id.isascii() and system_id.isidentifier() and system_id[0].isalpha()


def _nearest(info: SystemInfo, known: tuple[KnownSystem, ...], exclude: str) -> list[str]:
    """Known systems of the same kind, closest first; generic_cpu closes every list."""
    if info.gpus:
        name = info.gpus[0].name.lower()
        same_kind = [k for k in known if k.is_gpu]
        same_kind.sort(key=lambda k: (name not in {n.lower() for n in k.gpu_names},
                                      abs(k.gpu_count - len(info.gpus)), k.id))
    else:
        same_kind = [k for k in known if not k.is_gpu]
        same_kind.sort(key=lambda k: (abs(k.cpu_cores - info.cpu.cores), k.id))
    return [k.id for k in same_kind if k.id != exclude] + ([GENERIC_CPU] if exclude != GENERIC_CPU else [])
