"""The lwis harness, in this process: backend instances called once per batch, by Python worker threads (sut.py) or
by the native core's C++ batchers (native_sut.py, code/common/native). Native is the default where it can serve:
the core is built from these sources, and the test is one the core implements (one backend call per batch of the
lwis harness). Where it cannot, registry.settle falls back to python with this module's reason.
"""
from __future__ import annotations

from pathlib import Path

from ...fields import Field
from ..registry import IMPL_FIELD, HarnessPlugin, HarnessRun, Selection

LWIS = "lwis"
IMPLEMENTATION = Field(
    IMPL_FIELD, str, "native", "Implementation of the lwis harness: native (the C++ core: issue, batching, sample "
    "gathering and completions without Python, the backend called once per batch) or python (all in Python). Where "
    "the native core is not built (`make build`), or for a harness it does not implement (the LLM and Triton "
    "harnesses), the default falls back to python.", choices=("native", "python"))


class BackendInstances:
    """The backend instances of a test and their inference callables (`calls`: `parallel_calls` per instance, each
    served by a worker thread of its own); `close` frees the instances, once."""

    def __init__(self, backends: list, calls: list) -> None:
        self.backends, self.calls = backends, calls

    @property
    def direct_batches(self) -> bool:
        return bool(self.backends) and all(getattr(b, "direct_batches", False) for b in self.backends)

    def close(self) -> None:
        """Close every instance (the last first), even when one fails to; the first failure is raised after."""
        backends, self.backends = self.backends, []
        failure: BaseException | None = None
        for backend in reversed(backends):
            try:
                close = getattr(backend, "close", None)    # a plug-in's backend that is not a Backend may have none
                if close is not None:
                    close()
            except BaseException as error:  # noqa: BLE001  raised below, after the others are closed
                failure = failure or error
        if failure is not None:
            raise failure


def backend_instances(run: HarnessRun, log=None) -> BackendInstances:
    """The test's backend instances, each warmed up on the batch sizes it will see, and their inference callables.
    A backend whose instances are per device (TensorRT: per GPU) gets `instances` on every device. Whatever was
    made is closed again when making or warming up one fails."""
    import sys

    from ...backends import create_backend, get_plugin, runtime_options, threads_per_instance
    from ...backends.registry import instance_count
    from ...engines.input_samples import engine_inputs
    from ...named_inputs import warmup_inputs

    spec, fields = run.spec, run.fields
    log = log or (lambda line: print(line, file=sys.stderr))
    per_config, batch_size = int(fields["instances"]), int(fields["batch_size"])
    count = instance_count(get_plugin(fields["backend"]), per_config)
    if count != per_config:
        log(f"{spec.label}: {fields['backend']} runs {per_config} instance(s) per device on {count // per_config} "
            f"devices: {count} instances")
    if fields.get("start_from_device") and spec.harness != PythonHarness.name:
        from ...errors import UserError

        raise UserError("start_from_device needs the python implementation of the lwis harness "
                        "(--harness_impl=python): the native core gathers batches in host memory")
    threads = threads_per_instance(fields, spec.cpu_cores)
    inputs = engine_inputs(run.benchmark, {**fields, "model": spec.model})   # int8 for input_dtype=int8
    made = BackendInstances([], [])
    try:
        for index in range(count):
            made.backends.append(create_backend(Path(spec.engine), backend=fields["backend"],
                                                input_names=[i.name for i in inputs], threads=threads,
                                                device=spec.engine_manifest.get("device", "cpu"), instance=index,
                                                options=runtime_options(fields)))
        if fields.get("start_from_device"):
            for backend in made.backends:
                backend.keep_inputs_on_device()
        for backend in made.backends:
            for size in warmup_batch_sizes(spec.scenario_enum, batch_size):
                backend.infer(warmup_inputs(inputs, size))
    except BaseException:
        made.close()
        raise
    postprocess = run.benchmark.postprocessor(spec.model, run.samples)

    def make(backend):
        return lambda batch, indices: postprocess(backend.infer(batch), indices)

    made.calls = [make(b) for b in made.backends for _ in range(max(1, int(getattr(b, "parallel_calls", 1))))]
    return made


def warmup_batch_sizes(scenario, batch_size: int) -> list[int]:
    """The batch sizes an instance is warmed up on before the test: a runtime's first call at a new batch shape is
    slow, and Server batches take every size up to batch_size (up to 16 of them; above, 1 and batch_size)."""
    from ...constants import Scenario

    if scenario is Scenario.Server and batch_size <= 16:
        return list(range(1, batch_size + 1))
    return sorted({1, batch_size})


def batching(run: HarnessRun) -> tuple[int, int]:
    """(batch size, Server batching window in microseconds) of the test."""
    return int(run.fields["batch_size"]), int(run.fields.get("server_batch_timeout_us") or 0)


class _Lwis(HarnessPlugin):
    """What both implementations of the lwis harness declare: the type, and the field that chooses between them."""

    harness_type = LWIS
    fields = (IMPLEMENTATION,)


class PythonHarness(_Lwis):
    name = implementation = "python"
    description = "in process: Python worker threads batch and call the backend instances"

    def create(self, run: HarnessRun):
        from ...engines.input_samples import engine_inputs
        from ..qsl import SampleLibrary
        from ..sut import HarnessSUT

        inputs = engine_inputs(run.benchmark, {**run.fields, "model": run.spec.model})
        qsl = SampleLibrary(run.samples, run.spec.performance_sample_count, inputs)
        instances = backend_instances(run)
        if run.fields.get("start_from_device"):     # each load goes to the GPUs before the test's clock runs
            qsl.after_load.append(lambda loaded: [backend.upload(loaded) for backend in instances.backends])
        try:
            sut = HarnessSUT(run.spec.scenario_enum, qsl, instances.calls, *batching(run),
                             direct_batches=instances.direct_batches)
        except BaseException:
            instances.close()
            raise
        sut.on_close(instances.close)
        return sut.start(), qsl


def _tests(configs, verb: str) -> str:
    """`resnet50 Offline runs` / `resnet50 Offline, resnet50 Server run`."""
    tests = list(dict.fromkeys(f"{c.benchmark} {c.scenario.value}" for c in configs))
    return f"{', '.join(tests)} {verb}{'s' if len(tests) == 1 else ''}"


def fallen_back(configs, why: str, fix: str) -> str:
    """The console line of tests that run the Python harness where the default is the native core."""
    return (f"Note: {_tests(configs, 'run')} the Python harness, not the native core (the default --harness_impl): "
            f"{why}; {fix} to run on the core, or set --harness_impl=python to choose Python.")


class NativeHarness(_Lwis):
    name = implementation = "native"
    description = "in process: the native core (C++) issues, batches and completes; the backend is called per batch"
    overhead_figures = "code.actions.bench_native:native_figures"

    def why_not(self, selection: Selection) -> str | None:
        from ...native.build import cannot_build, not_ready

        if selection.harness_type != LWIS:
            return (f"the {selection.harness_type} harness has one implementation, in Python (the native core "
                    f"implements lwis)")
        if selection.generates_tokens:
            return (f"{selection.benchmark} streams tokens through the LLM harness (continuous batching), which is "
                    f"Python; the native core serves models of one call per batch")
        missing = not_ready(selection.build_root)
        if missing is not None and selection.environment_made and cannot_build() is None:
            return None      # make run builds it before the first test (make_environment)
        return missing

    def needs_environment(self, args, for_run: bool) -> bool:
        return for_run and args.workload.harness_type.value == LWIS

    def make_environment(self, ctx) -> None:
        """Compile the core (as `make build` does) when a test of the selection would run on it but it is not built,
        or not as built. Where it cannot be built: UserError (exit 1) when the command line asked for it, else one
        console line saying so, and the tests run the Python implementation."""
        from ...config_registry import set_by_invocation
        from ...errors import EXIT_FAILURE, UserError
        from ...native.build import NativeUnavailable, build_native, not_ready
        from ..registry import IMPL_FIELD

        if not_ready(ctx.paths.build) is None:
            return
        wanted = [ctx.resolve(b, s) for b, s in ctx.selected()]
        wanted = [config for config in wanted if config.get(IMPL_FIELD) == self.implementation]
        if not wanted:
            return
        try:
            built = build_native(ctx.paths.build, ctx.paths.download_cache, log=ctx.log)
            ctx.log(f"native harness core: built in {built.lib}")
        except NativeUnavailable as why:
            reason, _, output = str(why).strip().partition("\n")     # a failed compile: its output, then the line
            if output:
                ctx.log(output)
                reason = f"{reason.rstrip(':')}, its output is above"
            if any(set_by_invocation(config.sources[IMPL_FIELD]) for config in wanted):
                raise UserError(f"--{IMPL_FIELD}=native: the native harness core cannot be built here ({reason}); "
                                f"see make build for what it needs, or leave --{IMPL_FIELD} out to run the Python "
                                f"harness.", exit_code=EXIT_FAILURE) from None
            ctx.log(fallen_back(wanted, f"it could not be built here ({reason})",
                                "see make build for what it needs"))

    def notices(self, ctx) -> list[str]:
        """Where the core is not built, or damaged: the tests whose default, the core, fell back to Python (the
        reason and `make build`), or under make run the tests it will build the core for."""
        from ...config_registry import fallback_source
        from ...native.build import cannot_build, not_ready
        from ..registry import IMPL_FIELD

        missing = not_ready(ctx.paths.build)
        if missing is None:
            return []
        why, blocked = missing.partition(" (`make build`")[0], cannot_build()
        configs = [ctx.resolve(b, s) for b, s in ctx.selected()]
        if ctx.environment_made and blocked is None:
            native = [c for c in configs if c.get(IMPL_FIELD) == self.implementation]
            return [f"Note: {why}: make run builds it before the first test ({_tests(native, 'run')} on it)."] \
                if native else []
        fell = [c for c in configs if c.sources.get(IMPL_FIELD) == fallback_source(missing)]
        if not fell:
            return []
        if blocked is not None:
            return [fallen_back(fell, f"{why}, and it cannot be built here ({blocked})",
                                "see make build for what it needs")]
        return [fallen_back(fell, why, "run make build")]

    def capabilities(self, ctx) -> list[tuple[str, str, str]]:
        """Compile the core (LoadGen from its pinned sdist, native/src) where a compiler is found."""
        from ...native.build import NativeUnavailable, build_native

        try:
            built = build_native(ctx.paths.build, ctx.paths.download_cache, log=ctx.log)
        except NativeUnavailable as why:
            return [("Native core", "not built", f"{why}; the lwis harness runs in Python (--harness_impl=python)")]
        return [("Native core", "built" if built.built_now else "up to date",
                 f"LoadGen 6.0.17 from its sdist, in {built.lib}; the lwis harness runs on it (--harness_impl=native)")]

    def run_options(self, args, paths) -> dict:
        from ...native.build import lib_dir

        return {"native_lib": str(lib_dir(paths.build))}

    def prepare_process(self, spec) -> None:
        """The core completes into its own LoadGen build: it must be the `mlperf_loadgen` this process imports."""
        from ..native_sut import use_native_loadgen

        use_native_loadgen(spec.harness_options["native_lib"])

    def loadgen_build(self, spec) -> str:
        from ...native.build import LOADGEN_SDIST, LOADGEN_SDIST_SHA256

        return (f"native core: {LOADGEN_SDIST} (sha256 {LOADGEN_SDIST_SHA256}) built in "
                f"{spec.harness_options['native_lib']}")

    def create(self, run: HarnessRun):
        from ..native_sut import native_system

        made: list[BackendInstances] = []

        def python_instances() -> list:
            made.append(backend_instances(run))
            return made[-1].calls

        try:
            sut, qsl = native_system(run.spec, run.benchmark, run.samples, python_instances)
        except BaseException:
            for instances in made:
                instances.close()
            raise
        for instances in made:
            sut.on_close(instances.close)
        return sut, qsl
