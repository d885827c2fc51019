"""The Triton harness: model repositories Triton accepts, endpoints, and real runs against real servers.

The servers are the tritonserver binary of PyPI's nvidia-pytriton in the Triton environment (.venv-triton, from
requirements/triton.txt); the session makes that environment once as `make run` does (conftest's triton_venv), and
the tests that need a server skip, saying why, where it cannot be made (no package registry).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from google.protobuf import text_format

from code.common.arguments import parse_run_args
from code.common.benchmark_api import TensorSpec, get_benchmark
from code.common.errors import UserError
from code.common.harness.triton_system import check_engines, check_servable, start_servers, triton_model
from code.common.paths import Paths
from code.common.triton.client import EndpointInfo, parse_endpoints
from code.common.triton.repository import TritonModel, config_pbtxt, write_repository
from code.common.triton.server import TritonServer, find_installation

from .conftest import EMBEDDED, REPO, default_stop_signals, make_in
from .test_harness_e2e import records, toolkit

TRITON = "--harness_type=triton"


def _model(tmp_path: Path, backend: str = "onnxruntime", device: str = "cpu") -> TritonModel:
    engine = tmp_path / "engine.plan"
    engine.write_bytes(b"engine")
    return TritonModel(name="resnet50", engine=engine, engine_sha256="ab" * 32, toolkit_backend=backend,
                       device=device, inputs=(TensorSpec("input", "float32", (3, 224, 224)),),
                       outputs=(TensorSpec("logits", "float32", (1000,)), TensorSpec("boxes", "int64", (None, 4))),
                       max_batch_size=32, instances=2, threads=1, max_queue_delay_us=500)


def _parsed(text: str):
    from tritonclient.grpc import model_config_pb2

    return text_format.Parse(text, model_config_pb2.ModelConfig())


# -- repositories, endpoints, records: no server needed ---------------------------------------------------------
def test_the_python_backend_config_is_valid_triton_model_config(tmp_path):
    config = _parsed(config_pbtxt(_model(tmp_path)))
    assert config.backend == "python" and config.max_batch_size == 32
    assert [(i.name, list(i.dims)) for i in config.input] == [("input", [3, 224, 224])]
    assert [(o.name, list(o.dims)) for o in config.output] == [("logits", [1000]), ("boxes", [-1, 4])]
    assert config.output[1].data_type == _parsed('output [{ data_type: TYPE_INT64 }]').output[0].data_type
    assert config.instance_group[0].count == 2 and config.instance_group[0].kind == 2   # KIND_CPU
    assert config.dynamic_batching.max_queue_delay_microseconds == 500
    params = {key: value.string_value for key, value in config.parameters.items()}
    assert params["engine_sha256"] == "ab" * 32 and params["toolkit_backend"] == "onnxruntime"
    assert Path(params["toolkit_root"]) == REPO


def test_a_tensorrt_plan_is_served_by_tritons_tensorrt_backend(tmp_path):
    model = _model(tmp_path, backend="tensorrt", device="gpu")
    config = _parsed(config_pbtxt(model))
    assert config.backend == "tensorrt" and config.default_model_filename == "model.plan"
    assert config.instance_group[0].kind == 1   # KIND_GPU
    folder = write_repository(model, tmp_path / "repository") / "resnet50"
    assert (folder / "1" / "model.plan").resolve() == model.engine.resolve()
    assert not (folder / "1" / "model.py").exists()


def test_the_repository_holds_the_python_model_and_is_rewritten_whole(tmp_path):
    repository = tmp_path / "repository"
    write_repository(_model(tmp_path), repository)
    (repository / "resnet50" / "1" / "stale.txt").write_text("old")
    write_repository(_model(tmp_path), repository)
    files = sorted(p.relative_to(repository).as_posix() for p in repository.rglob("*") if p.is_file())
    assert files == ["resnet50/1/model.py", "resnet50/config.pbtxt"]
    assert "class TritonPythonModel" in (repository / "resnet50" / "1" / "model.py").read_text()


def test_endpoints_are_host_port_pairs_named_once(other_nodes):
    assert parse_endpoints("node1:8001, 10.0.0.2:8001,[::1]:9001") == ("node1:8001", "10.0.0.2:8001", "[::1]:9001")
    for text, message in (("node1", "is not host:port"), ("node1:99999", "is not host:port"),
                          ("a:8001,a:8001", "names one server twice"), (" , ", "is empty"),
                          ("localhost:8001,127.0.0.1:8001", "twice, as localhost:8001 and as 127.0.0.1:8001"),
                          ("node2:8001,10.0.0.2:8001", "twice, as node2:8001 and as 10.0.0.2:8001"),
                          ("node1:8001,nowhere.invalid:8001", "'nowhere.invalid' does not resolve")):
        with pytest.raises(UserError, match=message) as refused:
            parse_endpoints(text)
        assert refused.value.exit_code == 2


def test_endpoints_need_the_triton_harness(other_nodes):
    with pytest.raises(UserError, match=r"--endpoints is a flag of the triton harness and of the openai harness and of the "
                                        r"endpoints harness: add --harness_type=triton or --harness_type=openai or "
                                        r"--harness_type=endpoints, or drop --endpoints"):
        parse_run_args(["--action=run_harness", "--triton_endpoints=node1:8001"], ["run_harness"], ["resnet50"])
    args = parse_run_args(["--action=run_harness", TRITON, "--triton_endpoints=node1:8001,node2:8001"],
                          ["run_harness"], ["resnet50"])
    assert args.endpoints == ("node1:8001", "node2:8001") and args.workload.name == "triton_k_99_MaxP"


def test_an_endpoint_serving_another_engine_is_refused_by_name(tmp_path):
    model = _model(tmp_path)
    same = EndpointInfo("node1:8001", "resnet50", "/e", model.engine_sha256, 32, "2.51.0")
    other = EndpointInfo("node2:8001", "resnet50", "/e", "cd" * 32, 32, "2.51.0")
    check_engines([same], model)
    with pytest.raises(UserError, match=r"node2:8001 serves cdcdcdcdcdcd") as error:
        check_engines([same, other], model)
    assert "node1:8001" not in str(error.value).split("):", 1)[1]


def test_a_missing_triton_environment_names_the_make_target(tmp_path):
    with pytest.raises(UserError, match=r'make build RUN_ARGS="--harness_type=triton"'):
        find_installation(tmp_path / "no-venv")
    with pytest.raises(UserError, match=r'make build RUN_ARGS="--harness_type=triton"'):
        check_servable({"backend": "onnxruntime"}, (), tmp_path / "no-venv")
    check_servable({"backend": "onnxruntime"}, ("node1:8001",), tmp_path / "no-venv")   # remote: none needed here
    with pytest.raises(UserError, match="NVIDIA's Triton container"):
        check_servable({"backend": "tensorrt"}, ("node1:8001",), tmp_path / "no-venv")


# -- real servers ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def triton_engine(scratch, tmp_path_factory, triton_venv) -> Path:
    """The embedded model's Offline engine for the Triton harness (and the in-process one, for comparison)."""
    logs = tmp_path_factory.mktemp("triton-engines")
    for harness in (TRITON, "--harness_type=lwis"):
        assert toolkit(scratch, logs, "--action=generate_engines", "--scenarios=offline,server", *EMBEDDED,
                       harness) == 0
    return scratch


def _serve(scratch: Path, tmp_path: Path, count: int) -> list[TritonServer]:
    """`count` local servers of the embedded Offline engine, as make serve_triton starts them."""
    from code.common.config_registry import ConfigRegistry
    from code.common.constants import Scenario, WorkloadSetting
    from code.common.harness.engine_build import locate_engine
    from code.common.systems import SystemDetector, match_system

    system = match_system(SystemDetector().detect())
    config = ConfigRegistry.load(["resnet50"]).resolve(
        "resnet50", Scenario.Offline, system.candidates, WorkloadSetting.from_name("triton_k_99_MaxP"),
        overrides={"model": "mobilenet_v2", "dataset": "foolbox20"}, cpu_cores=system.info.cpu.cores)
    paths = Paths.create(scratch=scratch, log_dir=tmp_path)
    engine = locate_engine(config, system.system_id, paths, get_benchmark("resnet50"))
    manifest = json.loads(paths.engine_manifest(engine).read_text())
    model = triton_model("resnet50", get_benchmark("resnet50").models["mobilenet_v2"], engine, manifest,
                         config.values, system.info.cpu.cores)
    return start_servers(model, [tmp_path / f"server{number}" for number in range(count)])


def _entries(run_dir: Path) -> list[tuple[int, int, str]]:
    log = json.loads((run_dir / "mlperf_log_accuracy.json").read_text())
    return sorted((e["seq_id"], e["qsl_idx"], e["data"]) for e in log)


def _tritonservers_under(folder: Path) -> list[str]:
    """Command lines of running tritonserver processes whose model repository lies under `folder`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].endswith(b"tritonserver") and any(str(folder).encode() in a for a in argv):
            found.append(b" ".join(argv).decode(errors="replace"))
    return found


def test_two_servers_serve_one_run_with_the_in_process_harness_results(triton_engine, tmp_path):
    servers = _serve(triton_engine, tmp_path / "servers", 2)
    # localhost: a server on this machine, fed through shared memory; 127.0.0.2 is the same machine by an address
    # the harness does not take for it, so that server gets its batches in the gRPC messages.
    urls = [servers[0].url, f"127.0.0.2:{servers[1].grpc_port}"]
    try:
        endpoints = ",".join(urls)
        args = ["--action=run_harness", "--scenarios=offline", *EMBEDDED, "--test_mode=AccuracyOnly"]
        assert toolkit(triton_engine, tmp_path / "triton", *args, TRITON, f"--triton_endpoints={endpoints}") == 0
    finally:
        for server in servers:
            server.stop()
    assert toolkit(triton_engine, tmp_path / "lwis", *args) == 0
    remote = records(tmp_path / "triton")[("Offline", "AccuracyOnly")]
    local = records(tmp_path / "lwis")[("Offline", "AccuracyOnly")]
    assert remote.config.workload_setting == "triton_k_99_MaxP" and remote.accuracy.value == local.accuracy.value
    assert _entries(Path(remote.log_dir)) == _entries(Path(local.log_dir))
    served = {e.address: e for e in remote.endpoints}
    assert set(served) == set(urls) and all(e.samples > 0 and not e.local for e in served.values())
    assert [served[url].transport for url in urls] == ["system shared memory", "grpc"]
    assert sum(e.samples for e in served.values()) == 20
    assert {e.engine_sha256 for e in served.values()} == {remote.engine.manifest["engine_sha256"]}
    assert all(e.protocol == "grpc" and e.model == "resnet50" and e.extras["server_version"] for e in served.values())
    assert remote.nodes == 1       # two servers of one machine, by two names


def _kill_once_serving(server: TritonServer, stop: threading.Event) -> None:
    """SIGKILL `server` once it has answered a request of the run (asked through its statistics), so that it dies
    mid-run however slow the machine is."""
    from code.common.triton.client import connect

    client = connect(server.url)
    try:
        while not stop.wait(0.2):
            stats = client.get_inference_statistics(as_json=True).get("model_stats", [])
            if any(int(m["inference_stats"]["success"].get("count", 0)) for m in stats):
                server.kill()
                return
    finally:
        client.close()


def test_killing_an_endpoint_mid_run_fails_the_run_and_names_it(triton_engine, tmp_path):
    before = _shared_memory()
    servers = _serve(triton_engine, tmp_path / "servers", 2)
    victim = servers[1]
    # 660,000 samples: far more than are served before the kill; the rest are completed empty, which for the
    # 66 million of --offline_expected_qps=100000 took LoadGen minutes.
    args = ["--action=run_harness", "--scenarios=offline", *EMBEDDED, TRITON, "--min_duration=600000",
            "--offline_expected_qps=1000", f"--triton_endpoints={servers[0].url},{victim.url}"]
    stop = threading.Event()
    killer = threading.Thread(target=_kill_once_serving, args=(victim, stop), daemon=True)
    killer.start()
    try:
        status = toolkit(triton_engine, tmp_path / "logs", *args)
    finally:
        stop.set()
        killer.join()
        for server in servers:
            server.stop()
    assert status == 1
    [record] = records(tmp_path / "logs").values()
    assert record.status == "failed" and record.valid is None and record.metric is None
    assert f"Triton endpoint {victim.url} failed" in record.error
    assert {e.address for e in record.endpoints} == {servers[0].url, victim.url}
    assert _left_behind(before) == set()     # the killed server's regions too, once it is stopped


def _shared_memory() -> set[str]:
    return {p.name for p in Path("/dev/shm").glob("*")} if Path("/dev/shm").is_dir() else set()


def _left_behind(before: set[str]) -> set[str]:
    """The toolkit's regions (mlperf-<pid>-..., mlperf-triton-<pid>-...) created since `before` whose process has
    ended: left behind. Regions of processes still running are another test's on the same machine, not this one's."""
    left = set()
    for name in _shared_memory() - before:
        match = re.match(r"mlperf-(?:triton-)?(\d+)-", name)
        if match is not None and not Path(f"/proc/{match.group(1)}").exists():
            left.add(name)
    return left


def test_a_local_server_serves_the_test_and_is_gone_after_it(triton_engine, tmp_path):
    before = _shared_memory()
    args = ["--action=run_harness", "--scenarios=server", *EMBEDDED, TRITON, "--test_run", "--min_duration=1000",
            "--server_target_qps=5"]
    assert toolkit(triton_engine, tmp_path, *args) == 0
    [record] = records(tmp_path).values()
    assert record.completed and record.valid is not None
    [endpoint] = record.endpoints
    assert endpoint.local and endpoint.samples == endpoint.requests > 0      # Server: a request per query
    assert endpoint.transport == "system shared memory"
    run_dir = Path(record.log_dir)
    assert (run_dir / "triton" / "repository" / "resnet50" / "config.pbtxt").is_file()
    assert "Started GRPCInferenceService" in (run_dir / "triton" / "server.log").read_text()
    assert _tritonservers_under(run_dir) == []
    assert _left_behind(before) == set()     # the client's regions and the python backend's


def test_ctrl_c_stops_the_local_server_with_the_test(triton_engine, tmp_path):
    command = [sys.executable, "-m", "code.main", "--action=run_harness", "--scenarios=offline", *EMBEDDED, TRITON,
               "--min_duration=600000", f"--scratch_path={triton_engine}", f"--log_dir={tmp_path}"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               preexec_fn=default_stop_signals)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not any(
                "Started GRPCInferenceService" in log.read_text(errors="replace")
                for log in tmp_path.rglob("triton/server.log")):
            time.sleep(0.5)
        time.sleep(2)       # the test is running against the server now
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, output
    [record] = records(tmp_path).values()
    assert record.status == "interrupted"
    assert _tritonservers_under(tmp_path) == []


def test_staging_reports_the_nodes_the_inference_ran_on(tmp_path):
    from code.common.submission.staging import stage_system_files

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path)
    paths.system_json("box").parent.mkdir(parents=True)
    paths.system_json("box").write_text(json.dumps({"system_name": "box", "number_of_nodes": "1"}))
    lines: list[str] = []
    stage_system_files(paths, "open", "Org", "box", nodes=3, log=lines.append)
    staged = paths.submitter_root(paths.staging, "open", "Org") / "systems" / "box.json"
    assert json.loads(staged.read_text())["number_of_nodes"] == "3" and "number_of_nodes 3" in lines[0]
    paths.system_json("box").write_text(json.dumps({"system_name": "box", "number_of_nodes": "4"}))
    stage_system_files(paths, "open", "Org", "box", nodes=3, log=lines.append)
    assert json.loads(staged.read_text())["number_of_nodes"] == "4" and len(lines) == 1


# -- make run makes the environment its harness needs -------------------------------------------------------------
def _fresh_clone(tmp_path: Path) -> Path:
    """The repository's files as a clone has them (no .venv-triton, no build/), with this checkout's pinned uv
    (build/tools) so that the bootstrap does not fetch uv again."""
    import shutil

    repo = tmp_path / "repo"
    for name in ("code", "configs", "scripts", "requirements", "Makefile", "pyproject.toml"):
        source = REPO / name
        if source.is_dir():
            shutil.copytree(source, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, repo / name)
    if (REPO / "build" / "tools").is_dir():
        (repo / "build").mkdir()
        (repo / "build" / "tools").symlink_to(REPO / "build" / "tools")
    return repo


def test_make_run_makes_the_triton_environment_of_a_fresh_clone(triton_venv, scratch, tmp_path):
    repo, logs = _fresh_clone(tmp_path), tmp_path / "logs"
    # a dry run installs nothing
    dry = make_in(repo, "run", f"MLPERF_SCRATCH_PATH={scratch}", "RUN_ARGS=--harness_type=triton --dry_run")
    assert dry.returncode == 0 and not (repo / ".venv-triton").exists(), dry.stderr
    done = make_in(repo, "run", f"MLPERF_SCRATCH_PATH={scratch}", f"LOG_DIR={logs}",
                   "RUN_ARGS=--harness_type=triton --offline_expected_qps=20")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert f"{repo / '.venv-triton'} is ready" in done.stdout and "make build" not in done.stdout + done.stderr
    find_installation(repo / ".venv-triton")       # the server, from the hash-checked requirements/triton.txt
    assert (repo / ".venv-triton" / ".toolkit-deps.sha256").read_text().startswith("triton ")
    found = records(logs)
    assert set(found) == {("Offline", "PerformanceOnly"), ("Offline", "AccuracyOnly")}
    for record in found.values():
        assert record.completed and record.config.workload_setting == "triton_k_99_MaxP", record
        assert [e.local for e in record.endpoints] == [True]


def test_make_run_stops_before_any_step_where_the_triton_environment_cannot_be_made(scratch, tmp_path):
    repo, logs = _fresh_clone(tmp_path), tmp_path / "logs"
    (repo / "requirements" / "triton.txt").unlink()       # a clone whose Triton lock is missing
    done = make_in(repo, "run", f"MLPERF_SCRATCH_PATH={scratch}", f"LOG_DIR={logs}", "RUN_ARGS=--harness_type=triton")
    assert done.returncode != 0 and "Error 1" in done.stderr, done.stderr
    assert "requirements/triton.txt is missing" in done.stderr
    assert f"The Triton environment could not be installed into {repo / '.venv-triton'}" in done.stderr
    assert not (repo / "build" / "engines").exists() and not list(logs.rglob("metadata.json"))


def test_only_a_local_triton_server_needs_the_triton_environment(other_nodes):
    from code.common.harness.registry import HARNESSES

    def needs(*flags: str, for_run: bool = True) -> bool:
        args = parse_run_args(["--action=run", *flags], ["run"], ["resnet50"])
        return HARNESSES.get("triton").needs_environment(args, for_run)

    assert needs(TRITON) and needs(TRITON, "--triton_endpoints=node1:8001", for_run=False)   # make build: always
    assert not needs(TRITON, "--triton_endpoints=node1:8001")
    assert not needs() and not needs("--harness_type=lwis")
