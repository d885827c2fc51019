"""Harness actions: download_model, download_data, preprocess_data, generate_engines, calibrate,
run_harness, and `run`, the embedded default end to end."""
from __future__ import annotations

import dataclasses
from types import MappingProxyType

from ..common.benchmark_api import get_benchmark
from ..common.constants import Scenario, TestMode
from ..common.harness.metadata import COMPLETED
from ..common.harness.runner import plan_test, run_test, summary_line
from .base import Context, Handler

# What `make run` runs when RUN_ARGS leave it open: open-division MobileNetV2 on the 20 labelled
# ImageNet images that a package registry ships, Offline, a short test run, performance then accuracy.
EMBEDDED_DEFAULT = {"benchmarks": ("resnet50",), "scenarios": (Scenario.Offline,),
                    "fields": {"model": "mobilenet_v2", "dataset": "foolbox20"}}


class _PerConfig(Handler):
    """Helpers shared by the steps: the resolved configs of the selection, deduplicated by what matters."""

    def configs(self):
        return [self.ctx.resolve(b, s) for b, s in self.ctx.selected()]

    def unique(self, *names: str):
        seen = {}
        for config in self.configs():
            key = (config.benchmark, *(config[n] for n in names))
            seen.setdefault(key, config)
        return list(seen.items())


class DownloadModel(_PerConfig):
    def handle(self) -> int:
        for (benchmark, model), _ in self.unique("model"):
            path = get_benchmark(benchmark).download_model(model, self.ctx.paths, self.ctx.log)
            self.ctx.log(f"{benchmark}: model {model} ready at {path}")
        return 0


class DownloadData(_PerConfig):
    def handle(self) -> int:
        for (benchmark, dataset), _ in self.unique("dataset"):
            path = get_benchmark(benchmark).download_data(dataset, self.ctx.paths, self.ctx.log)
            self.ctx.log(f"{benchmark}: data set {dataset} ready at {path}")
        return 0


class PreprocessData(_PerConfig):
    def handle(self) -> int:
        for (benchmark, model, dataset), _ in self.unique("model", "dataset"):
            samples = get_benchmark(benchmark).preprocess(model, dataset, self.ctx.paths, self.ctx.log)
            self.ctx.log(f"{benchmark}: {len(samples)} preprocessed samples for {model} in {samples.directory}")
        return 0


class GenerateEngines(_PerConfig):
    def handle(self) -> int:
        from ..common.engines.builder import build_engine

        for config in self.configs():
            result = build_engine(config, self.ctx.system.system_id, self.ctx.paths,
                                  get_benchmark(config.benchmark), self.ctx.log)
            state = "built" if result.rebuilt else "up to date"
            self.ctx.log(f"{config.benchmark} {config.scenario.value}: engine {state}: {result.path}")
        return 0


class Calibrate(_PerConfig):
    def handle(self) -> int:
        from ..common.engines.builder import calibrate

        for _, config in self.unique("model", "dataset", "calibration_images"):
            path = calibrate(config, self.ctx.paths, get_benchmark(config.benchmark), self.ctx.log)
            self.ctx.log(f"{config.benchmark}: calibration cache written: {path}")
        return 0


class RunHarness(Handler):
    def test_modes(self) -> list[TestMode]:
        return [self.ctx.args.test_mode]

    def handle(self) -> int:
        plans = [(b, s, m) for b, s in self.ctx.selected() for m in self.test_modes()]
        if not plans:
            self.ctx.log("Nothing selected that has a config.")
            return 1
        specs = [plan_test(self.ctx, b, s, m) for b, s, m in plans]   # every check before the first run
        records = []
        for spec in specs:
            record = run_test(spec, self.ctx.paths.repo, self.ctx.log)
            records.append(record)
            self.ctx.log(summary_line(record))
            for reason in record.get("reasons", []):
                self.ctx.log(f"  - {reason}")
        self.ctx.log("\nSummary:")
        for record in records:
            self.ctx.log(f"  {summary_line(record)}")
        self.ctx.log(f"Logs and metadata.json: {self.ctx.paths.claimed_log_dir}")
        return 0 if all(r.get("status") == COMPLETED for r in records) else 1


def with_embedded_default(ctx: Context) -> Context:
    """The embedded default, for whatever RUN_ARGS leave open."""
    args = ctx.args
    fields = {k: v for k, v in EMBEDDED_DEFAULT["fields"].items() if k not in args.overrides}
    changes = {
        "benchmarks": args.benchmarks if "benchmarks" in args.explicit else EMBEDDED_DEFAULT["benchmarks"],
        "scenarios": args.scenarios if "scenarios" in args.explicit else EMBEDDED_DEFAULT["scenarios"],
        "test_run": args.test_run if "test_run" in args.explicit else True,
        "overrides": MappingProxyType({**fields, **args.overrides}),
    }
    return dataclasses.replace(ctx, args=dataclasses.replace(args, **changes), _registry=None)


class Run(RunHarness):
    """Everything from the model download to the results, for the embedded default by default."""

    def __init__(self, ctx: Context) -> None:
        super().__init__(with_embedded_default(ctx))

    def test_modes(self) -> list[TestMode]:
        if "test_mode" in self.ctx.args.explicit:
            return [self.ctx.args.test_mode]
        return [TestMode.PerformanceOnly, TestMode.AccuracyOnly]

    def handle(self) -> int:
        for step in (DownloadModel, DownloadData, PreprocessData, GenerateEngines):
            step(self.ctx).run()
        return super().handle()
