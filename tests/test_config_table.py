"""What the project's config classes resolve to, against tests/data/resolved_configs.json (tests/config_table.py
writes both): every benchmark x scenario x harness type x accuracy target x power setting, on every known system
and on unknown machines."""
from __future__ import annotations

import json
from functools import cache

from .config_table import resolved_table as table_now
from .conftest import REPO

TABLE = REPO / "tests" / "data" / "resolved_configs.json"


@cache
def resolved_table() -> dict[str, dict]:
    return json.loads(json.dumps(table_now()))     # as the file keeps it (lists, not tuples)


def test_every_config_resolves_as_the_table_says():
    expected = json.loads(TABLE.read_text())
    resolved = resolved_table()
    differ = [f"{row}:\n  table:    {expected[row]}\n  resolved: {resolved.get(row, 'no config')}"
              for row in expected if resolved.get(row) != expected[row]]
    assert not differ, "\n".join(differ[:10]) + f"\n({len(differ)} rows differ)"


def test_a_harness_type_without_configs_of_its_own_takes_the_ones_every_harness_shares():
    """A row the table lacks (a harness type that no class is registered for: the Triton harness on an LLM, a new
    harness) resolves to a class registered for every harness, as a harness type no config names does."""
    from code.common.benchmark_api import IMPLEMENTATIONS
    from code.common.config_registry import EVERY_HARNESS, ConfigRegistry, _where

    shared = {_where(config_class) for key, config_class in ConfigRegistry.load(sorted(IMPLEMENTATIONS)).entries.items()
              if key.registration.harness == EVERY_HARNESS}
    expected = json.loads(TABLE.read_text())
    resolved = resolved_table()
    new = [row for row in resolved if row not in expected]
    assert any("|custom_k_99_MaxP" in row for row in new)     # a harness type no config names
    for row in new:
        benchmark, scenario, system, workload = row.split("|")
        unnamed = resolved[f"{benchmark}|{scenario}|{system}|custom_{workload.partition('_')[2]}"]
        assert resolved[row]["class"] in shared, row
        assert resolved[row] == {**unnamed, "workload_setting": workload}, row
