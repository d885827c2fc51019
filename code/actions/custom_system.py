"""add_custom_system: register this machine and write config stubs prefilled from the nearest known system.

Writes the system into code/common/systems/custom_list.py and one class per (benchmark, scenario) into
configs/<benchmark>/<Scenario>/custom.py. Interactive by default; `--system_id=ID --yes` asks nothing. It writes
under the configs lock (locks.py), each file whole or not at all.
"""
from __future__ import annotations

import inspect
import keyword
import re
import sys
from pathlib import Path

from ..common.config_registry import PerCore, Registration, class_values
from ..common.constants import Scenario, SystemType
from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.fields import FIELDS
from ..common.fileio import write_atomically
from ..common.systems import KnownSystem, SystemInfo, all_known_systems, read_custom_systems
from ..common.systems.info import derived_system_id
from .base import Handler
from .locks import editing_configs

_ID_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_]*$")


def system_entry(system_id: str, info: SystemInfo, system_type: SystemType, description: str) -> KnownSystem:
    if info.gpus:
        return KnownSystem(system_id, description, system_type, gpu_names=(info.gpus[0].name,),
                           gpu_count=len(info.gpus))
    return KnownSystem(system_id, description, system_type, cpu_model=info.cpu.model, cpu_cores=info.cpu.cores)


def render_custom_list(systems: tuple[KnownSystem, ...]) -> str:
    lines = ['"""Systems added with `make add_custom_system`. This file is rewritten by that command."""',
             "from __future__ import annotations", "",
             "from ..constants import SystemType  # noqa: F401  (used by the entries below)",
             "from .known import KnownSystem", "", "CUSTOM_SYSTEMS: tuple[KnownSystem, ...] = ("]
    for s in systems:
        hardware = (f"gpu_names={s.gpu_names!r}, gpu_count={s.gpu_count}" if s.is_gpu
                    else f"cpu_model={s.cpu_model!r}, cpu_cores={s.cpu_cores}")
        lines.append(f"    KnownSystem({s.id!r}, {s.description!r}, SystemType.{s.system_type.name},")
        lines.append(f"                {hardware}),")
    lines += [")", ""]
    return "\n".join(lines)


def render_config_class(system_id: str, parent: type, scenario: Scenario,
                        registration: Registration = Registration()) -> str:
    """One registered class that inherits everything from the nearest system's class and is registered as that one
    is (`registration`: for every harness, or for the harness it tunes for; its accuracy target and power setting),
    with the fields it may set listed as comments (required first), prefilled with the inherited values."""
    inherited = class_values(parent)
    backend = inherited.get("backend", FIELDS["backend"].default)
    applicable = [f for f in FIELDS.values() if f.applies_to(scenario, backend, parent.benchmark)]
    lines = ["", "", f"@register({system_id!r}{registration.register_arguments()})",
             f"class {class_name(system_id, registration)}({parent.__name__}):",
             f'    """{system_id}, {scenario.value}: prefilled from {parent.__name__}; '
             f'uncomment a line to change it."""']
    for title, group in (("Required", [f for f in applicable if f.required]),
                         ("Optional", [f for f in applicable if not f.required])):
        if group:
            lines.append(f"    # {title}:")
        for spec in group:
            value = inherited.get(spec.name, spec.default)
            text = f"PerCore({value.per_core!r})" if isinstance(value, PerCore) else repr(value)
            lines.append(f"    # {spec.name} = {text}  # {spec.description}")
    lines.append("    pass")
    return "\n".join(lines) + "\n"


def hardware_description(info: SystemInfo) -> str:
    """The description a new system gets unless the user gives one."""
    return f"{len(info.gpus)}x {info.gpus[0].name}" if info.gpus else f"{info.cpu.model}, {info.cpu.cores} cores"


def class_name(system_id: str, registration: Registration = Registration()) -> str:
    """The class of `system_id`'s config, named after its registration where it is not NVIDIA's default (a class
    for the openai harness beside one for every harness: MyBox_openai)."""
    parts = (system_id, registration.harness,
             "" if registration.accuracy_target == Registration().accuracy_target else registration.accuracy_target,
             "" if registration.power_setting == Registration().power_setting else registration.power_setting)
    name = re.sub(r"\W", "_", "_".join(str(part) for part in parts if part))
    return f"System_{name}" if name[0].isdigit() or keyword.iskeyword(name) else name


class AddCustomSystem(Handler):
    def handle(self) -> int:
        ctx = self.ctx
        info = ctx.system.info
        interactive = not ctx.args.yes
        if interactive and not sys.stdin.isatty():
            raise UserError("add_custom_system asks questions, but there is no terminal. "
                            "Run it as: make add_custom_system RUN_ARGS=\"--system_id=ID --yes\"")
        system_id = ctx.args.system_id or derived_system_id(info)
        description = hardware_description(info)
        system_type = ctx.system.system_type
        if interactive:
            system_id = _ask("System id", system_id)
            description = _ask("Description", description)
            system_type = SystemType.parse(_ask(f"System type ({SystemType.choices_text()})", system_type.value))
        self._check_id(system_id)

        entry = system_entry(system_id, info, system_type, description)
        candidates = (system_id, *ctx.system.candidates[1:]) if ctx.system.system_id == system_id else \
            (system_id, *ctx.system.candidates)
        plan = []
        for benchmark in ctx.args.benchmarks:
            for scenario in ctx.args.scenarios:
                if not ctx.registry.systems_for(benchmark, scenario):
                    continue
                found = ctx.registry.find(benchmark, scenario, candidates[1:], ctx.args.workload_for(benchmark))
                plan.append((ctx.paths.custom_config_file(benchmark, scenario), found, scenario))
        if not plan:
            raise UserError("No benchmark and scenario selected that has configs; nothing was written.")
        ctx.log(f"Adding system {system_id} ({description}, {system_type.value}) with configs for:")
        for path, found, _ in plan:
            ctx.log(f"  {path.relative_to(ctx.paths.repo)} (prefilled from {found.config_class.__name__})")
        if interactive and _ask("Write these files? [y/N]", "n").lower() not in ("y", "yes"):
            ctx.log("Nothing was written.")
            return EXIT_FAILURE

        with editing_configs(ctx.paths, files=[ctx.paths.custom_systems_file, *(path for path, _, _ in plan)]):
            registered = read_custom_systems(ctx.paths.custom_systems_file)   # as it is now: another process may
            self._check_id(system_id, registered)                             # have registered it meanwhile
            write_atomically(ctx.paths.custom_systems_file, render_custom_list((*registered, entry)))
            ctx.log(f"wrote {ctx.paths.custom_systems_file.relative_to(ctx.paths.repo)}")
            for path, found, scenario in plan:
                append_config(path, system_id, found.config_class, scenario, found.key.registration)
                ctx.log(f"wrote {path.relative_to(ctx.paths.repo)}")
        ctx.log(f"Done. Tune the values in the files above, then check them with: "
                f"make show_config RUN_ARGS=\"--system_name={system_id}\"")
        return EXIT_OK

    def _check_id(self, system_id: str, registered: tuple[KnownSystem, ...] = ()) -> None:
        if not _ID_PATTERN.match(system_id):
            raise UserError(f"System id '{system_id}' must start with a letter and hold only letters, digits "
                            f"and underscores (it names folders and Python classes).")
        if system_id in {s.id for s in (*all_known_systems(), *registered)}:
            raise UserError(f"System {system_id} is already registered "
                            f"(code/common/systems/known.py or custom_list.py). Nothing was written.")


def append_config(path: Path, system_id: str, parent: type, scenario: Scenario,
                  registration: Registration = Registration()) -> None:
    """Add the class of `system_id` to `path` (created with its header when missing), registered as `registration`,
    in one atomic write."""
    if path.exists():
        text = path.read_text()
    else:
        text = ('"""Configs of custom systems for this scenario. Written by `make add_custom_system`; '
                'edit freely."""\n'
                "from code.common.config_registry import PerCore, register  # noqa: F401\n")
    import_line = f"from {parent.__module__} import {parent.__name__}\n"
    same_file = inspect.getsourcefile(parent) == str(path)
    if import_line not in text and not same_file:
        # imports stay at the top, after the header
        head, _, rest = text.partition("\n\n\n")
        text = head.rstrip("\n") + "\n" + import_line + ("\n\n" + rest if rest else "")
    write_atomically(path, text.rstrip("\n") + "\n" + render_config_class(system_id, parent, scenario, registration))


def _ask(question: str, default: str) -> str:
    answer = input(f"{question} [{default}]: ").strip()
    return answer or default
