"""The table of what the project's config classes resolve to: every benchmark x scenario x harness type x accuracy
target x power setting, on every known system and on an unknown CPU and GPU machine (each with its nearest-systems
list as system matching builds it: its own id, the systems of its kind, generic_cpu last).

Each row keeps what decides a config: the class it came from, how the system was matched, the workload setting
named in show_config and the records, and the values the config classes set (a field default comes from the
catalogue, not from the classes); a combination without a config has no row. tests/test_config_table.py compares it
with tests/data/resolved_configs.json, the table of the configs as they are meant to resolve. After a deliberate
change of a config class, write the table again and review its diff:

    .venv/bin/python -m tests.config_table tests/data/resolved_configs.json
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HARNESS_TYPES = ("lwis", "triton", "openai", "custom")
ACCURACY_TARGETS = ("k_95", "k_99", "k_99_9")
POWER_SETTINGS = ("MaxP", "MaxQ")
CPU_CORES = 16
UNKNOWN_CPU, UNKNOWN_GPU = "unknown_cpu_box", "unknown_gpu_box"


def candidate_lists() -> dict[str, list[str]]:
    """system -> the systems its configs are looked up on, in order (as match_system orders them, by kind)."""
    from code.common.systems.known import GENERIC_CPU, KNOWN_SYSTEMS

    gpus = sorted(k.id for k in KNOWN_SYSTEMS if k.is_gpu)
    cpus = sorted(k.id for k in KNOWN_SYSTEMS if not k.is_gpu)
    lists = {}
    for own, kind in [*((g, gpus) for g in gpus), *((c, cpus) for c in cpus), (UNKNOWN_GPU, gpus),
                      (UNKNOWN_CPU, cpus), (GENERIC_CPU, [])]:
        lists[own] = [own, *(k for k in kind if k != own), *([GENERIC_CPU] if own != GENERIC_CPU else [])]
    return lists


def resolved_table() -> dict[str, dict]:
    """"benchmark|scenario|system|workload setting" -> the row of that config (see the module doc); a combination
    without a config has no row."""
    from code.common.benchmark_api import IMPLEMENTATIONS
    from code.common.config_registry import CONFIG_CLASS, ConfigRegistry
    from code.common.constants import Scenario, WorkloadSetting
    from code.common.errors import UserError

    benchmarks = sorted(IMPLEMENTATIONS)
    registry = ConfigRegistry()
    project = ConfigRegistry.load(benchmarks)
    for key, config_class in project.entries.items():      # the project's classes: no user's custom.py
        if not config_class.__module__.endswith(".custom"):
            registry.entries[key] = config_class
    table = {}
    for benchmark in benchmarks:
        for scenario in Scenario:
            if not project.systems_for(benchmark, scenario):
                continue
            for system, candidates in candidate_lists().items():
                for harness in HARNESS_TYPES:
                    for target in ACCURACY_TARGETS:
                        for power in POWER_SETTINGS:
                            workload = WorkloadSetting.from_name(f"{harness}_{target}_{power}")
                            row = f"{benchmark}|{scenario.value}|{system}|{workload.name}"
                            try:
                                config = registry.resolve(benchmark, scenario, candidates, workload,
                                                          cpu_cores=CPU_CORES)
                            except UserError:
                                continue       # no config: the row is absent
                            table[row] = {
                                "class": config.source_class, "match": config.match,
                                "workload_setting": config.workload.name,
                                "from_class": {name: [repr(config[name]), source]
                                               for name, source in sorted(config.sources.items())
                                               if source.startswith(CONFIG_CLASS)}}
    return table


def write_table(path: Path, table: dict[str, dict]) -> None:
    """One row a line, in order: a change shows as the lines of the rows it changes."""
    rows = (f"{json.dumps(key)}: {json.dumps(row, sort_keys=True)}" for key, row in sorted(table.items()))
    path.write_text("{\n" + ",\n".join(rows) + "\n}\n")


def main(argv: list[str]) -> int:
    write_table(Path(argv[0]), resolved_table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
