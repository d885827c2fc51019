"""show_config: the resolved config of each selected (benchmark, scenario), and where each value came from."""
from __future__ import annotations

from ..common.errors import EXIT_FAILURE, EXIT_OK
from .base import Handler


class ShowConfig(Handler):
    def handle(self) -> int:
        system = self.ctx.system
        self.ctx.log(f"System: {system.describe()}")
        if not system.is_known:
            self.ctx.log(system.registration_hint())
        selected = self.ctx.selected()
        if not selected:
            self.ctx.log("No config matches the selected benchmarks and scenarios.")
            return EXIT_FAILURE
        # With --test_mode, the config of that kind of run; without, of none in particular (a benchmark default set
        # per kind of run names both values).
        mode = self.ctx.args.test_mode if "test_mode" in self.ctx.args.explicit else None
        for benchmark, scenario in selected:
            config = self.ctx.resolve(benchmark, scenario, mode)
            self.ctx.log(f"\n{benchmark} {scenario.value} [{config.workload.name}] from {config.source_class}"
                         f" ({config.match})")
            width = max(len(name) for name in config.values)
            for name, value in config.values.items():
                self.ctx.log(f"  {name:<{width}} = {value!s:<14} ({config.sources[name]})")
        return EXIT_OK
