"""What every action handler gets, and the setup -> handle -> cleanup lifecycle it runs in."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Callable

from ..common.arguments import RunArgs
from ..common.config_registry import ConfigRegistry, ResolvedConfig
from ..common.constants import Scenario, TestMode
from ..common.paths import Paths
from ..common.rules import RulesRound
from ..common.systems import SystemInfo, SystemMatch, match_system


@dataclass
class Context:
    """Inputs of one invocation. The system is detected at most once, when first asked for."""

    args: RunArgs
    paths: Paths
    rules: RulesRound
    detect: Callable[[], SystemInfo]
    log: Callable[[str], None] = print
    # make run makes the harness environment (e.g. builds the native core) before its first test: until it has,
    # what it will make counts as there when the harness implementation is settled.
    environment_made: bool = False
    _registry: ConfigRegistry | None = field(default=None, repr=False)

    @cached_property
    def system(self) -> SystemMatch:
        return match_system(self.detect(), system_name=self.args.system_name)

    @property
    def registry(self) -> ConfigRegistry:
        if self._registry is None:
            self._registry = ConfigRegistry.load(self.args.benchmarks)
        return self._registry

    def resolve(self, benchmark: str, scenario: Scenario, mode: TestMode | None = None,
                measured_layout: bool = True) -> ResolvedConfig:
        """The config of a test of `mode` as it will run (the harness implementation settled: harness/registry.py);
        `mode` None: of no test in particular (a default the benchmark sets per test mode is then the one of
        performance runs, and its source says so). `measured_layout` False: the configured layout, not the one a
        sweep of the engine chose where none is tuned (`measured`)."""
        from ..common.benchmark_api import get_benchmark
        from ..common.harness.selection import settle

        config = self.registry.resolve(benchmark, scenario, self.system.candidates, self.args.workload_for(benchmark),
                                       overrides=self.args.fields_for(benchmark),
                                       cpu_cores=self.system.info.cpu.cores, override_sources=self.args.filled_in,
                                       benchmark_defaults=getattr(get_benchmark(benchmark), "field_defaults", None),
                                       mode=mode)
        config = settle(config, self.args.workload.harness_type.value, self.paths.build, self.environment_made)
        return self.measured(config) if measured_layout else config

    @property
    def machine(self) -> str:
        """What an engine's layout sweep is kept for (tuning/measured_layout.machine_key)."""
        from ..common.tuning.measured_layout import machine_key

        return machine_key(self.system.info.cpu.model, self.system.info.cpu.cores)

    def measured(self, config: ResolvedConfig) -> ResolvedConfig:
        """`config` with the layout its engine's sweep chose, where no layout was tuned or typed and a sweep of this
        engine on this machine is kept (tuning/measured_layout.py); else as it is."""
        from ..common.tuning.measured_layout import applies, apply_sweep, find_sweep

        if not applies(config) or self.args.endpoints:    # an engine on other machines: not this one's sweep
            return config
        sweep = find_sweep(self.paths.layout_sweep(self.system.system_id, config.benchmark, config.scenario),
                           config, self.machine)
        return config if sweep is None else apply_sweep(config, sweep, self.pinned_layout(config))

    def pinned_layout(self, config: ResolvedConfig) -> set[str]:
        """The layout fields of `config` that typing or this system's custom.py (make tune's layout included) set:
        what a measured layout never replaces. A figure measured on this system in custom.py (make find_peak's
        target QPS or expected QPS) was measured with the layout then in force, so it holds the whole layout."""
        from ..common.config_registry import set_by_invocation
        from ..common.harness.first_run import LAYOUT_FIELDS, set_in_custom_config
        from ..common.tuning.trials import SEARCHED_FIELD

        _, config_class = self.registry.lookup(config.benchmark, config.scenario, [config.key.system_id],
                                               config.key.workload)
        present = [name for name in LAYOUT_FIELDS if name in config.sources]
        if set_in_custom_config(config_class, SEARCHED_FIELD[config.scenario]):
            return set(present)
        return {name for name in present
                if set_by_invocation(config.sources[name]) or set_in_custom_config(config_class, name)}

    def selected(self) -> list[tuple[str, Scenario]]:
        """(benchmark, scenario) pairs the user asked for that have configs."""
        return [(b, s) for b in self.args.benchmarks for s in self.args.scenarios
                if self.registry.systems_for(b, s)]

    def nothing_selected(self) -> str:
        """Why the selection is empty: the scenarios each benchmark has configs for, and the edge variant that has
        a scenario its datacenter benchmark lacks (llama3.1-8b-edge's SingleStream)."""
        asked = ", ".join(s.value for s in self.args.scenarios)
        return f"Nothing selected that has a config ({asked} asked for): {self._configured_scenarios()}."

    def refuse_unrunnable(self, modes: tuple[TestMode, ...] = (TestMode.PerformanceOnly,)) -> None:
        """UserError (exit status 2) for a selection this action cannot run as asked: a --test_mode it does not run
        (it runs `modes`), or a scenario given with --scenarios that a benchmark has no config for, where
        run_harness would run nothing of it (nothing_selected's account of what each benchmark has)."""
        from ..common.errors import UserError

        action = self.args.action
        if "test_mode" in self.args.explicit and self.args.test_mode not in modes:
            runs = " and ".join(m.value for m in modes)
            raise UserError(f"make {action} runs {runs} tests only, so --test_mode={self.args.test_mode.value} would "
                            f"be ignored; drop it, or run that test with make run_harness RUN_ARGS=\"... "
                            f"--test_mode={self.args.test_mode.value}\".")
        if "scenarios" not in self.args.explicit:
            return
        lacking = [f"{b} {s.value}" for b in self.args.benchmarks for s in self.args.scenarios
                   if not self.registry.systems_for(b, s)]
        if lacking:
            raise UserError(f"make {action} cannot run {', '.join(lacking)}: no config for "
                            f"{'it' if len(lacking) == 1 else 'them'} ({self._configured_scenarios()}); choose "
                            f"--scenarios among those.")

    def _configured_scenarios(self) -> str:
        """The scenarios each selected benchmark has configs for, and the edge variant that has a scenario its
        datacenter benchmark lacks."""
        from ..common.benchmark_api import IMPLEMENTATIONS

        parts = []
        for benchmark in self.args.benchmarks:
            has = [s.value for s in Scenario if self.registry.systems_for(benchmark, s)]
            line = f"{benchmark} has configs for {', '.join(has) or 'no scenario'}"
            edge = f"{benchmark}-edge"
            if edge in IMPLEMENTATIONS:
                variant = ConfigRegistry.load([edge])
                found = [s.value for s in self.args.scenarios if variant.systems_for(edge, s)]
                if found:
                    line += f"; {', '.join(found)} is run by its edge variant: --benchmarks={edge}"
            parts.append(line)
        return "; ".join(parts)


class Handler:
    """Base of action handlers: cleanup runs even on an exception or Ctrl-C."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    def setup(self) -> None:
        pass

    def handle(self) -> int:
        raise NotImplementedError

    def cleanup(self) -> None:
        pass

    def run(self) -> int:
        self.setup()
        try:
            return self.handle()
        finally:
            self.cleanup()
