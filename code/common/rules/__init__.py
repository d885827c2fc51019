"""Rules of each MLPerf Inference round, as data. The harness, staging and checker read only this."""
from __future__ import annotations

import importlib

from ..errors import UserError
from .schema import BenchmarkRules, ComplianceTest, RulesRound, Seeds

CURRENT_ROUND = "v6.1"
# Round name -> module holding its ROUND table. A new round is one new module and one line here.
_ROUND_MODULES = {"v6.1": "v6_1"}

__all__ = ["BenchmarkRules", "ComplianceTest", "RulesRound", "Seeds", "CURRENT_ROUND", "known_rounds", "get_round"]


def known_rounds() -> tuple[str, ...]:
    return tuple(_ROUND_MODULES)


def get_round(version: str = CURRENT_ROUND) -> RulesRound:
    if version not in _ROUND_MODULES:
        raise UserError(f"Unknown rules round '{version}'. Known rounds: {', '.join(_ROUND_MODULES)}.")
    module = importlib.import_module(f"{__name__}.{_ROUND_MODULES[version]}")
    return module.ROUND
