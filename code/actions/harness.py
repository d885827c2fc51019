"""Harness actions: download_model, download_data, preprocess_data, generate_engines, calibrate,
run_harness, and `run`, the embedded default end to end."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from ..common.benchmark_api import get_benchmark
from ..common.config_registry import resolve_value
from ..common.constants import HarnessType, Scenario, TestMode
from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.fields import FIELDS
from ..common.harness.plan import announce, free_space, plan_harness
from ..common.harness.planned import PlannedTest
from ..common.harness.resume import outcome_in, resume_paths
from ..common.harness.runner import CHILD, plan_test, refuse_taken_run_dir, run_test, summary_line
from .base import Context, Handler
from .environment import harness_notices, make_harness_environment
from .locks import measuring

# What `make run` runs when RUN_ARGS leave it open: resnet50, Offline, a short test run, performance then accuracy,
# each benchmark on its own embedded default model and data set (Benchmark.embedded_default: for resnet50 the
# open-division MobileNetV2 on the 20 labelled ImageNet images that a package registry ships), on TensorRT where
# it can run (an NVIDIA GPU with TensorRT installed), else on ONNX Runtime.
EMBEDDED_DEFAULT = {"benchmarks": ("resnet50",), "scenarios": (Scenario.Offline,)}
EMBEDDED_FIELDS = ("model", "dataset")     # the fields that say what an embedded default runs (besides speed hints)
# The source the record gives what the toolkit filled in for the user (config.sources, invocation.filled_in).
EMBEDDED_DEFAULT_SOURCE = "embedded default"
RUN_TEST_MODES_SOURCE = "make run (PerformanceOnly, then AccuracyOnly)"


class _PerConfig(Handler):
    """Helpers shared by the steps: the resolved configs of the selection, deduplicated by what matters."""

    def configs(self):
        return [self.ctx.resolve(b, s) for b, s in self.ctx.selected()]

    def unique(self, *names: str):
        seen = {}
        for config in self.configs():
            key = (config.benchmark, *(config.get(n) for n in names))
            seen.setdefault(key, config)
        return list(seen.items())


class DownloadModel(_PerConfig):
    def handle(self) -> int:
        from ..common.model_files import ensure_model

        for (benchmark, model), _ in self.unique("model"):
            path = ensure_model(get_benchmark(benchmark), model, self.ctx.paths, self.ctx.log)
            self.ctx.log(f"{benchmark}: model {model} ready at {path}")
        return EXIT_OK


class DownloadData(_PerConfig):
    def handle(self) -> int:
        for (benchmark, dataset), _ in self.unique("dataset"):
            path = get_benchmark(benchmark).download_data(dataset, self.ctx.paths, self.ctx.log)
            self.ctx.log(f"{benchmark}: data set {dataset} ready at {path}")
        return EXIT_OK


class PreprocessData(_PerConfig):
    def handle(self) -> int:
        for (benchmark, model, dataset), _ in self.unique("model", "dataset"):
            samples = get_benchmark(benchmark).preprocess(model, dataset, self.ctx.paths, self.ctx.log)
            self.ctx.log(f"{benchmark}: {len(samples)} preprocessed samples for {model} in {samples.directory}")
        self._int8_forms()
        return EXIT_OK

    def _int8_forms(self) -> None:
        """The int8 form of each set an engine with int8 inputs reads (input_dtype=int8), calibrating first."""
        from ..common.harness.engine_build import ensure_calibration
        from ..common.engines.input_samples import preprocess_int8, wants_int8_input

        for _, config in self.unique("model", "dataset", "backend", "precision", "input_dtype", "calibration_images",
                                     "calibration_method", "calibration_percentile"):
            if wants_int8_input(config.values):
                benchmark = get_benchmark(config.benchmark)
                ensure_calibration(config, self.ctx.paths, benchmark, self.ctx.log)
                samples = preprocess_int8(benchmark, config.values, self.ctx.paths, self.ctx.log)
                self.ctx.log(f"{config.benchmark}: {len(samples)} int8 samples for {config['model']} in "
                             f"{samples.directory}")


class GenerateEngines(_PerConfig):
    def handle(self) -> int:
        from ..common.harness.engine_build import build_engine

        from ..common.harness.selection import choose, refuse_served_only

        for config in self.configs():
            harness = choose(config, self.ctx.args.workload.harness_type.value, self.ctx.paths.build)
            if not harness.needs_engine:
                said = harness.prepare_model(config, self.ctx.paths, self.ctx.log)
                self.ctx.log(f"{config.benchmark} {config.scenario.value}: {harness.name} harness: {said}")
                continue
            refuse_served_only(harness, get_benchmark(config.benchmark).models[config["model"]])
            result = build_engine(config, self.ctx.system.system_id, self.ctx.paths,
                                  get_benchmark(config.benchmark), self.ctx.log)
            state = "built" if result.rebuilt else "up to date"
            self.ctx.log(f"{config.benchmark} {config.scenario.value}: engine {state}: {result.path}")
        return EXIT_OK


class Calibrate(_PerConfig):
    def handle(self) -> int:
        from ..common.harness.engine_build import calibrate

        for _, config in self.unique("model", "dataset", "calibration_images", "calibration_method",
                                     "calibration_percentile"):
            path = calibrate(config, self.ctx.paths, get_benchmark(config.benchmark), self.ctx.log)
            self.ctx.log(f"{config.benchmark}: calibration cache written: {path}")
        return EXIT_OK


class RunHarness(Handler):
    child_module = CHILD                     # the process a test runs in (tests put a fake one here)
    free_space = staticmethod(free_space)    # free bytes of LOG_DIR's file system (tests put a fake one here)

    def run(self) -> int:
        with measuring(self.ctx.paths):    # never beside find_peak, which needs the machine to itself
            return super().run()

    def test_modes(self) -> list[TestMode]:
        return [self.ctx.args.test_mode]

    def prepare(self) -> None:
        """What must happen between the plan and the first test (make run: downloads, preprocessing, engines)."""

    def handle(self) -> int:
        selection = [(b, s, m) for b, s in self.ctx.selected() for m in self.test_modes()]
        if not selection:      # a selection typed that names no test: bad input, as make tune and make bench say
            raise UserError(f"{self.ctx.nothing_selected()} Nothing was run; choose --scenarios among those.")
        if self.ctx.args.resume:
            self.ctx = dataclasses.replace(self.ctx, paths=resume_paths(self.ctx.paths, self.ctx.log))
        # The plan needs only configs, rules, the data sets' declared sizes and earlier records, all known before
        # make run downloads or preprocesses anything; so it comes first, and a dry run or a full disk stops the
        # command before any long step (prepare).
        plan = plan_harness(self.ctx, selection)
        for line in harness_notices(self.ctx):
            self.ctx.log(line)
        if not announce(plan, self.ctx.args.dry_run, self.ctx.log, self.free_space(plan.where)):
            return EXIT_OK
        for test in plan.to_run:   # a LOG_DIR given: its folders are known, so a taken one stops us before prepare
            if test.folder is not None:
                refuse_taken_run_dir(test.folder, self.ctx.paths.log_dir)
        self.prepare()
        if not self.ctx.args.endpoints:    # an untuned layout measured on its engine, once (layout_sweep.py)
            from .layout_sweep import ensure_sweeps

            # For the performance tests: an accuracy run computes the same at any layout (one kept is used).
            ensure_sweeps(self.ctx, [(test.benchmark, test.scenario) for test in plan.to_run
                                     if test.test_mode is TestMode.PerformanceOnly])
        specs = [(test, plan_test(self.ctx, test.benchmark, test.scenario, test.test_mode, log_dir=test.folder))
                 for test in plan.to_run]   # every check before the first run
        records = [self._run(test, spec) for test, spec in specs]
        self.ctx.log("\nSummary:")
        for test in plan.tests:
            if test.skip:
                self.ctx.log(f"  {test.label}: skipped, {test.skip}")
        for record in records:
            self.ctx.log(f"  {summary_line(record)}")
        self.ctx.log(f"Logs and metadata.json: {self.ctx.paths.claimed_log_dir}")
        return 0 if all(r.completed for r in records) else 1

    def _run(self, test: PlannedTest, spec):
        """Run one planned test; under --resume, run it again into a retry folder while it is not VALID and
        retries are left. The record of its last run."""
        retry, left = test.retry, test.retries_left
        while True:
            record = run_test(spec, self.ctx.paths.repo, self.ctx.log, child_module=self.child_module)
            self.ctx.log(summary_line(record))
            for reason in record.reasons:
                self.ctx.log(f"  - {reason}")
            outcome = outcome_in(Path(spec.log_dir))
            if left <= 0 or (outcome is not None and outcome.done):
                return record
            retry, left = retry + 1, left - 1
            first = self.ctx.paths.run_log_dir(self.ctx.system.system_id, test.benchmark, test.scenario,
                                               test.test_mode)
            folder = self.ctx.paths.retry_run_dir(first, retry)
            self.ctx.log(f"{test.label} is {outcome.outcome() if outcome else 'without a record'}: running it "
                         f"again into {folder} (--retries allows {left} more after this one).")
            spec = plan_test(self.ctx, test.benchmark, test.scenario, test.test_mode, log_dir=folder)


def tensorrt_runs_here(ctx: Context) -> bool:
    """An NVIDIA GPU, its driver, TensorRT and cuda-python are all here: the embedded default then runs on TensorRT."""
    if not ctx.system.info.has_gpu:
        return False
    from ..common.backends import get_plugin

    return get_plugin("tensorrt").availability() is None


def with_embedded_default(ctx: Context, test_run: bool = True,
                          benchmarks: tuple[str, ...] = EMBEDDED_DEFAULT["benchmarks"]) -> Context:
    """The embedded default, for whatever RUN_ARGS leave open: filled in, and recorded as such (never as typed).
    `test_run`: whether a short test run is part of it (make run), or left to the caller (run_audit_harness, whose
    compliance runs are test runs exactly when the runs they are compared with are); `benchmarks`: those chosen
    when RUN_ARGS name none."""
    args = ctx.args
    chosen = args.benchmarks if "benchmarks" in args.explicit else benchmarks
    defaults = {"benchmarks": benchmarks, "scenarios": default_scenarios(ctx, chosen),
                **({"test_run": True} if test_run else {})}
    own = own_load_generator_type(chosen)
    if own is not None:      # benchmarks the round runs on one load generator only: the harness that brings it
        defaults["workload"] = dataclasses.replace(args.workload, harness_type=HarnessType(own))
    flags = {name: value for name, value in defaults.items()
             if name not in args.explicit and not (name == "workload" and "harness_type" in args.explicit)}
    args = args.fill_in(EMBEDDED_DEFAULT_SOURCE, **flags)
    cores = ctx.system.info.cpu.cores
    gpu_backend = {"backend": "tensorrt"} if "backend" not in args.overrides and tensorrt_runs_here(ctx) else {}
    fields = {benchmark: {k: resolve_value(FIELDS[k], v, cores)
                          for k, v in {**embedded_fields(get_benchmark(benchmark).embedded_default, args.overrides),
                                       **gpu_backend}.items()
                          if k not in args.overrides}
              for benchmark in args.benchmarks}
    return dataclasses.replace(ctx, args=args.fill_in_per_benchmark(EMBEDDED_DEFAULT_SOURCE, fields),
                               _registry=None)


def default_scenarios(ctx: Context, benchmarks: tuple[str, ...]) -> tuple[Scenario, ...]:
    """The embedded default's scenario (Offline), and for a chosen benchmark without an Offline config its first
    configured scenario (a benchmark of the edge suite alone, SingleStream only)."""
    scenarios = list(EMBEDDED_DEFAULT["scenarios"])
    for benchmark in benchmarks:
        if not any(ctx.registry.systems_for(benchmark, s) for s in scenarios):
            scenarios += [s for s in Scenario if ctx.registry.systems_for(benchmark, s)][:1]
    return tuple(dict.fromkeys(scenarios))


def own_load_generator_type(benchmarks: tuple[str, ...]) -> str | None:
    """The harness type of the load generator every chosen benchmark runs on only (a harness plug-in with its own
    load generator), where they all do; None otherwise."""
    from ..common.benchmark_api import endpoints_only
    from ..common.harness.registry import own_load_generator_type

    if not benchmarks or not all(endpoints_only(get_benchmark(b)) for b in benchmarks):
        return None
    return own_load_generator_type()


def embedded_fields(default: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """What a benchmark's embedded default fills in beside `given` (the fields RUN_ARGS set): its model and data set
    where RUN_ARGS leave them out, and its development caps and speed hints (output cap, sample count, expected
    rates) only while the model and data set are both its own. Naming another model or data set (a closed one, or
    the full set) gets that benchmark's own caps, as make run_harness would."""
    own = all(str(given.get(name, default.get(name))) == str(default.get(name)) for name in EMBEDDED_FIELDS)
    return {k: v for k, v in default.items() if own or k in EMBEDDED_FIELDS}


class Run(RunHarness):
    """Everything from the model download to the results, for the embedded default by default."""

    def __init__(self, ctx: Context) -> None:
        ctx = dataclasses.replace(with_embedded_default(ctx), environment_made=True)   # prepare makes it
        if "test_mode" not in ctx.args.explicit:   # both modes (test_modes): recorded as filled in
            ctx = dataclasses.replace(ctx, args=ctx.args.fill_in(RUN_TEST_MODES_SOURCE, test_mode=ctx.args.test_mode))
        super().__init__(ctx)

    def test_modes(self) -> list[TestMode]:
        if "test_mode" in self.ctx.args.explicit:
            return [self.ctx.args.test_mode]
        return [TestMode.PerformanceOnly, TestMode.AccuracyOnly]

    def prepare(self) -> None:
        make_harness_environment(self.ctx, for_run=True)   # as make build would (e.g. a local server's, the core)
        # From here the tests are judged by what was made: a core that could not be built falls back (a default).
        self.ctx.environment_made = False
        for step in (DownloadModel, DownloadData, PreprocessData, GenerateEngines):
            step(self.ctx).run()
