"""prebuild (its local part), build, link_dirs and clean: the environment the harness runs in."""
from __future__ import annotations

import importlib
import importlib.metadata
import json
import shutil
import subprocess
import sys
from pathlib import Path

from ..common.errors import EXIT_FAILURE, EXIT_OK, UserError
from ..common.paths import SCRATCH_SUBDIRS
from .base import Handler

# Run in a child process: LoadGen loads its built-in mlperf.conf only on the first FromConfig of a process.
_SEED_PROBE = (
    "import json, mlperf_loadgen as lg\n"
    "s = lg.TestSettings(); s.FromConfig('', 'resnet50', 'Offline', 0)\n"
    "print(json.dumps([s.qsl_rng_seed, s.sample_index_rng_seed, s.schedule_rng_seed]))\n"
)


def make_harness_environment(ctx, for_run: bool) -> None:
    """What the selected harness needs beyond .venv, as its plug-ins say (e.g. the Triton environment for a local
    server, the native core), made through the same hash-checked bootstrap by make build (for_run False) and make
    run (True); nothing when it is up to date."""
    from ..common.harness.registry import of_type

    for plugin in of_type(ctx.args.workload.harness_type.value):
        if plugin.needs_environment(ctx.args, for_run):
            plugin.make_environment(ctx)


def harness_notices(ctx) -> list[str]:
    """What the selected harness's plug-ins say before a run's plan (e.g. a default that fell back, and why)."""
    from ..common.harness.registry import of_type

    return [line for plugin in of_type(ctx.args.workload.harness_type.value) for line in plugin.notices(ctx)]


class Prebuild(Handler):
    """The local part of make prebuild, where no docker engine runs (code/docker builds and enters the image where
    one does): .venv is set up by then, and what the selected harness needs beyond it is made here."""

    def handle(self) -> int:
        make_harness_environment(self.ctx, for_run=False)
        self.ctx.log(f"The local virtual environment {sys.prefix} is set up. Next: make build")
        return EXIT_OK


class Build(Handler):
    def handle(self) -> int:
        info = self.ctx.system.info
        if info.has_gpu and not (_importable("tensorrt") and _importable("cuda.bindings.runtime")):
            self.ctx.log("NVIDIA GPU found and TensorRT or cuda-python missing: installing the tensorrt "
                         "environment ...")
            bootstrap = self.ctx.paths.repo / "scripts" / "bootstrap_venv.py"
            if subprocess.call([sys.executable, str(bootstrap), "--extras", "dev,tensorrt"]) != 0:
                self.ctx.log("TensorRT and cuda-python could not be installed (the installer's messages are above: "
                             "NVIDIA's tensorrt-cu12-libs package downloads the libraries from pypi.nvidia.com at "
                             "install time, so that host must be reachable); ONNX Runtime still works.")
        make_harness_environment(self.ctx, for_run=False)
        from ..common.environment_lock import lock_state
        from ..common.harness.registry import HARNESSES

        lock = lock_state(Path(sys.prefix))
        rows = [
            ("Python", sys.version.split()[0], str(self.ctx.paths.venv)),
            ("Environment", lock.short, self._lock_detail(lock)),
            ("LoadGen", *self._loadgen()),
            ("ONNX Runtime", *self._onnxruntime()),
            ("TensorRT", *self._tensorrt(info.has_gpu)),
            ("cuda-python", *self._cuda_python()),
            ("CUDA driver", *self._cuda()),
            *(row for plugin in HARNESSES.loaded() for row in plugin.capabilities(self.ctx)),
            ("GPUs", str(len(info.gpus)), ", ".join(f"{g.name} ({g.memory_gib:.0f} GiB)" for g in info.gpus)
             or info.gpu_note),
            ("CPU", f"{info.cpu.cores} cores", f"{info.cpu.model}, {info.cpu.sockets} socket(s), "
                                               f"{info.cpu.threads} threads, {info.memory_gib:g} GiB memory"),
            ("System", self.ctx.system.system_id, "registered" if self.ctx.system.is_known else "not registered"),
        ]
        _print_table("What works on this machine", ("component", "version / state", "details"), rows)
        for line in lock.differences:
            self.ctx.log(f"warning: {line} (installed by hand?); `make lock` pins changes, and deleting "
                         f"{sys.prefix} then any make target installs exactly the lock again")
        if not self.ctx.system.is_known:
            self.ctx.log(self.ctx.system.registration_hint())
        return EXIT_OK

    @staticmethod
    def _lock_detail(lock) -> str:
        if lock.installed_from is None:
            origin = "this environment was not installed by the toolkit's bootstrap"
        elif lock.installed_from != lock.digest:
            origin = "installed from an earlier version of the lock"
        else:
            origin = f"{lock.name} environment, installed hash-checked from the lock"
        state = "no package differs" if not lock.differences else f"{len(lock.differences)} package(s) differ (below)"
        return f"{origin}; {state}"

    def _loadgen(self) -> tuple[str, str]:
        try:
            version = importlib.metadata.version("mlcommons-loadgen")
        except importlib.metadata.PackageNotFoundError:
            return "missing", "mlcommons-loadgen is not installed: run make prebuild"
        rules = self.ctx.rules
        done = subprocess.run([sys.executable, "-c", _SEED_PROBE], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            return version, f"could not read its built-in mlperf.conf: {done.stderr.strip()[-200:]}"
        seeds = json.loads(done.stdout)
        expected = [rules.seeds.qsl_rng_seed, rules.seeds.sample_index_rng_seed, rules.seeds.schedule_rng_seed]
        if seeds == expected:
            return version, f"rules round {rules.version} (its built-in seeds are the round's)"
        return version, f"its seeds are not those of rules round {rules.version}: results would not be valid"

    @staticmethod
    def _onnxruntime() -> tuple[str, str]:
        try:
            ort = importlib.import_module("onnxruntime")
        except ImportError as error:
            return "missing", str(error)
        return ort.__version__, "execution providers: " + ", ".join(ort.get_available_providers())

    @staticmethod
    def _tensorrt(has_gpu: bool) -> tuple[str, str]:
        from ..common.backends import get_plugin

        plugin = get_plugin("tensorrt")
        try:
            version = plugin.runtime_version().split()[-1]
        except UserError as error:
            if not has_gpu and not _importable("tensorrt"):
                return "absent", "not needed: no NVIDIA GPU found (the CPU path uses ONNX Runtime)"
            return "absent", str(error)
        try:
            hardware = plugin.hardware()
        except UserError as error:
            return version, f"installed, but cannot run here: {error}"
        return version, (f"ready: plans are built for {hardware.gpu_name} (compute capability "
                         f"{hardware.compute_capability}); first run make selftest_gpu")

    @staticmethod
    def _cuda_python() -> tuple[str, str]:
        try:
            version = importlib.metadata.version("cuda-python")
        except importlib.metadata.PackageNotFoundError:
            return "absent", "installed with TensorRT by make build where a GPU is found"
        from ..common.backends.cuda_runtime import CudaError, CudaRuntime, describe_cuda_failure

        try:
            driver, runtime = CudaRuntime().versions()
        except (CudaError, UserError) as error:
            return version, describe_cuda_failure(error) if isinstance(error, CudaError) else str(error)
        return version, f"CUDA driver {driver}, runtime {runtime}"

    def _cuda(self) -> tuple[str, str]:
        gpus = self.ctx.system.info.gpus
        if not gpus:
            return "absent", self.ctx.system.info.gpu_note or "no NVIDIA GPU"
        return gpus[0].driver_version or "?", f"compute capability {gpus[0].compute_capability or '?'}"


class LinkDirs(Handler):
    def handle(self) -> int:
        paths = self.ctx.paths
        for kind in SCRATCH_SUBDIRS:
            target, link = paths.scratch_dir(kind), paths.build_link(kind)
            target.mkdir(parents=True, exist_ok=True)
            link.parent.mkdir(parents=True, exist_ok=True)
            if link.is_symlink():
                if link.resolve() == target.resolve():
                    self.ctx.log(f"{link} -> {target} (already linked)")
                    continue
                link.unlink()
            elif link.exists():
                raise UserError(f"{link} is a real folder, not a link; move its contents to {target} "
                                f"and remove it, then run make link_dirs again. Nothing was changed.")
            link.symlink_to(target, target_is_directory=True)
            self.ctx.log(f"{link} -> {target}")
        return EXIT_OK


class Clean(Handler):
    """Engines and scratch work go; logs and submission trees stay unless --yes says otherwise."""

    DISPOSABLE = ("engines", "calibration", "test_cache")
    RESULTS = ("logs", "compliance_logs", "reports", "submission-staging", "submission", "full_results")

    def handle(self) -> int:
        build = self.ctx.paths.build
        doomed = [build / name for name in self.DISPOSABLE if (build / name).exists()]
        results = [build / name for name in self.RESULTS if (build / name).exists()]
        if results and not self.ctx.args.yes:
            self.ctx.log("Kept (they hold results; add RUN_ARGS=--yes to remove them too): "
                         + ", ".join(str(p.relative_to(self.ctx.paths.repo)) for p in results))
        else:
            doomed += results
        for path in doomed:
            shutil.rmtree(path)
            self.ctx.log(f"removed {path.relative_to(self.ctx.paths.repo)}")
        if not doomed:
            self.ctx.log("Nothing to remove.")
        return EXIT_OK


def _importable(module: str) -> bool:
    try:
        importlib.import_module(module)
    except Exception:  # noqa: BLE001  any failure means the GPU path cannot use it
        return False
    return True


def _print_table(title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*row)
    Console(width=max(100, shutil.get_terminal_size().columns)).print(table)
