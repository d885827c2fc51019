"""The Triton harness's system under test for one test: which servers, what they serve, and the SUT over them.

Without `--endpoints` the test starts its own local server from the Triton environment on a free port,
serving a model repository written into the run folder (`triton/repository`, its log `triton/server.log`) for the
test's engine, and stops it after the test. With endpoints, the servers already run (one per node, started with
`make serve_triton`); each must be up, serve the model, and serve the very engine this test records (the sha256
in its model config must equal the engine manifest's): a run never mixes engines.
"""
from __future__ import annotations

from pathlib import Path

from ..backends import threads_per_instance
from ..errors import EXIT_FAILURE, UserError
from ..triton.inputs import InputLayout, RequestLayout
from ..triton.repository import TritonModel, engine_outputs, triton_dtype
from .qsl import SampleLibrary
from .spec import RunSpec
from .triton_sut import RemoteModel, TritonSUT


def check_servable(fields, endpoints: tuple[str, ...], triton_venv: Path) -> None:
    """Before any test starts: a local server needs the Triton environment, and this environment's server runs
    onnxruntime engines only; UserError saying what to do otherwise."""
    from ..triton.server import find_installation

    backend = str(fields["backend"])
    if backend != "onnxruntime":
        raise UserError(f"Triton serves {backend} engines with its own backend in NVIDIA's Triton container "
                        f"(documentation/triton.md); this environment's server has the python backend only, which "
                        f"runs onnxruntime engines. Use --backend=onnxruntime here.", exit_code=EXIT_FAILURE)
    if not endpoints:
        find_installation(triton_venv)


def triton_model(benchmark_name: str, model_spec, engine: Path, manifest: dict, fields, cpu_cores: int) -> TritonModel:
    """The repository entry of an engine, from its config fields (batch_size, instances, server_batch_timeout_us)."""
    return TritonModel(
        name=model_name(benchmark_name), engine=Path(engine).resolve(), engine_sha256=str(manifest["engine_sha256"]),
        toolkit_backend=str(fields["backend"]), device=str(manifest.get("device", "cpu")), inputs=model_spec.inputs,
        outputs=engine_outputs(Path(engine)), max_batch_size=int(fields["batch_size"]),
        instances=int(fields["instances"]), threads=threads_per_instance(fields, cpu_cores),
        max_queue_delay_us=int(fields.get("server_batch_timeout_us") or 0))


def request_layout(model: TritonModel) -> RequestLayout:
    """How requests carry the model's inputs: their names and types, and each one's fixed per-sample shape, if it
    has one."""
    return RequestLayout(tuple(InputLayout(spec.name, triton_dtype(spec.dtype), spec.dtype,
                                           tuple(int(d) for d in spec.shape) if spec.fixed else None)
                               for spec in model.inputs), model.max_batch_size)


def model_name(benchmark_name: str) -> str:
    """The model's name on a Triton server: the benchmark's, in the characters Triton allows."""
    return benchmark_name.replace(".", "_")


def check_engines(infos, model: TritonModel) -> None:
    """Every endpoint serves the test's engine (same sha256); UserError naming the ones that do not."""
    wrong = [f"{info.url} serves {info.engine_sha256[:12] or 'an engine of unknown sha256'}"
             for info in infos if info.engine_sha256 != model.engine_sha256]
    if wrong:
        raise UserError(f"Not every Triton endpoint serves this test's engine ({model.engine}, sha256 "
                        f"{model.engine_sha256[:12]}): {'; '.join(wrong)}. Start them with the same engine "
                        f"(make serve_triton with the same benchmark, scenario and config).", exit_code=EXIT_FAILURE)


def start_servers(model: TritonModel, folders: list[Path], ports: list[int] | None = None) -> list:
    """One local server per folder (its repository and server.log there), on `ports` or free ones, each serving
    `model`; all ready, or none left running."""
    from ..triton.repository import write_repository
    from ..processes import free_port
    from ..triton.server import TritonServer

    servers = []
    try:
        for number, folder in enumerate(folders):
            port = ports[number] if ports else free_port()
            repository = write_repository(model, folder / "repository")
            servers.append(TritonServer(repository, port, folder / "server.log").start())
        for server in servers:
            server.wait_ready([model.name])
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def triton_system(spec: RunSpec, benchmark, samples, log_dir: Path):
    """(SUT, QSL) of a Triton harness test; the SUT stops the local server (if any) when it stops."""
    from ..triton.client import describe

    fields = spec.fields
    model = triton_model(spec.benchmark, benchmark.models[spec.model], Path(spec.engine), spec.engine_manifest,
                         fields, spec.cpu_cores)
    endpoints = list(spec.harness_options.get("endpoints", ()))
    servers = [] if endpoints else start_servers(model, [log_dir / "triton"])
    urls = endpoints or [server.url for server in servers]
    try:
        infos = [describe(url, model.name) for url in urls]
        check_engines(infos, model)
        remote = RemoteModel(model.name, request_layout(model), tuple(o.name for o in model.outputs))
        qsl = SampleLibrary(samples, spec.performance_sample_count, model.inputs)
        sut = TritonSUT(spec.scenario_enum, qsl, urls, remote, benchmark.postprocessor(spec.model, samples),
                        int(fields["batch_size"]), int(fields["triton_in_flight"]),
                        float(fields["triton_request_timeout_s"]), servers=servers, infos=infos)
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return sut.start(), qsl
