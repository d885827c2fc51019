"""Every registered harness plug-in through the same round trip: its factory, real LoadGen, a fast fake engine.

Offline, Server and SingleStream; fixed-size responses (one int32 per sample) and variable-size ones (0 to 2 records
per sample) for the harnesses of fixed-size models, on a tiny ONNX model that returns its input (a Triton harness
serves it from a local server); token streams for the harnesses of benchmarks that generate tokens, on fake
decoders (outputs of 2 to 10 tokens, and outputs of one token, which reach LoadGen with EOS appended). Each run is
an AccuracyOnly test in a child process (the native core's LoadGen must be the first one a process imports): every
sample is completed once, with the response the engine gave, LoadGen logs no error (a first token reported after
its completion, or a completion without one, would be one), and the counters agree.

The harness plug-ins that live only in tests (tests/harness_plugins/, one module each) go through the same round
trip: each is registered for its cases alone, in this process and in the child, and run with its own flags.
"""
from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from code.common.benchmark_api import GenerativeBenchmark, ModelSpec, Responses, TensorSpec
from code.common.constants import Scenario, TestMode
from code.common.harness.registry import HARNESSES, HarnessRun

from .conftest import REPO

SAMPLES = 24
SCENARIOS = (Scenario.Offline, Scenario.Server, Scenario.SingleStream)
FIXED_KINDS = ("fixed", "variable")
TOKEN_KINDS = ("varied", "eos_first")        # test_llm_sut's lives: 2 to 10 tokens; some outputs of one token
RUN_TIMEOUT_S = 120


# -- the fake engines ---------------------------------------------------------------------------------------------
def tiny_model(folder: Path) -> Path:
    """An ONNX model that returns its input x [batch, 4] (float32) as y."""
    from onnx import TensorProto, helper, save

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "contract",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = folder / "tiny.onnx"
    save(model, str(path))
    return path


def expected_records(kind: str, index: int) -> np.ndarray:
    """What the postprocessor makes of sample `index` (whose input is four copies of `index`)."""
    if kind == "fixed":
        return np.array([index], np.int32)
    return np.array([[index, r] for r in range(index % 3)], np.int32).reshape(-1)


class Samples:
    directory = Path("/nonexistent")

    def __len__(self) -> int:
        return SAMPLES

    def load(self, index: int) -> np.ndarray:
        return np.full(4, index, np.float32)


class ContractBenchmark(GenerativeBenchmark):
    """Only what the harness factories read from a benchmark: the model, the postprocessor, the generative face
    (its declared defaults: no tokenizer, no engines of its own, token ids as answers)."""

    name = "contract"

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.generates_tokens = kind.startswith("tokens")
        self.models = {"tiny": ModelSpec("tiny", "an identity", "open", (TensorSpec("x", "float32", (4,)),), "", "",
                                         outputs=(TensorSpec("y", "float32", (4,)),))}

    def postprocessor(self, model: str, samples):
        def postprocess(outputs, indices) -> Responses:
            rows = [int(v) for v in np.asarray(outputs[0])[:, 0]]
            assert rows == [int(i) for i in indices], "the engine's outputs are not the batch's samples"
            return Responses.pieces([expected_records(self.kind, i) for i in rows])
        return postprocess

    def generation(self, model, fields, paths):
        if not self.kind.startswith("tokens"):
            return None
        from code.common.generation import GenerationSettings

        from .test_llm_sut import EOS
        return GenerationSettings(max_new_tokens=16, eos_token_ids=(EOS,), max_batch=4)


class FakeDecoders:
    """A backend plug-in whose decoders are test_llm_sut's fake ones (registered in the child process only)."""

    life = "varied"

    def create_decoder(self, engine, *, threads, device, max_batch, instance=0):
        from .test_llm_sut import LIVES, FakeDecoder

        return FakeDecoder(LIVES[self.life], 0.0005)


# -- one round trip in a child process ------------------------------------------------------------------------------
def loadgen_settings(scenario: Scenario, tokens: bool):
    import mlperf_loadgen as lg

    settings = lg.TestSettings()
    settings.scenario = getattr(lg.TestScenario, scenario.loadgen.value)
    settings.mode = lg.TestMode.AccuracyOnly
    settings.offline_expected_qps = 1000
    settings.server_target_qps = 200
    settings.single_stream_expected_latency_ns = 1_000_000
    settings.min_duration_ms = 0
    settings.min_query_count = SAMPLES
    if tokens:
        settings.use_token_latencies = True
        settings.ttft_latency = settings.tpot_latency = 60_000_000_000
    return settings


def child(spec: dict[str, Any]) -> None:
    """Run one AccuracyOnly LoadGen test of harness `spec["harness"]`; write what it saw into <out>/result.json."""
    from code.common.backends.registry import BACKEND_PLUGINS
    from code.common.harness.spec import RunSpec
    from code.common.paths import Paths

    from .test_llm_sut import Prompts

    out, kind, scenario = Path(spec["out"]), spec["kind"], Scenario(spec["scenario"])
    if spec.get("plugins"):
        importlib.import_module(spec["plugins"]).register()
    plugin = HARNESSES.get(spec["harness"])
    tokens = plugin.generates_tokens
    if tokens:
        FakeDecoders.life = kind
        BACKEND_PLUGINS.register("contract-decoders", FakeDecoders)
    fields = {"backend": "contract-decoders" if tokens else "onnxruntime", "batch_size": 4, "instances": 2,
              "intra_op_threads": 1, "server_batch_timeout_us": 500, "triton_in_flight": 4,
              "triton_request_timeout_s": 30.0, "max_input_tokens": 0, "openai_in_flight": 4,
              "openai_scheduler": "fewest_input_tokens", "openai_request_timeout_s": 30.0,
              "openai_metrics_interval_s": 0.5, "openai_warmup_requests": 2, "openai_token_ids": "auto"}
    run_spec = RunSpec(
        benchmark="contract", model="tiny", dataset="synthetic", division="open", scenario=scenario.value,
        test_mode=TestMode.AccuracyOnly.value, loadgen_model="contract", log_dir=str(out), scratch=str(out),
        engine=spec["engine"], engine_manifest={"engine_sha256": spec["engine_sha256"], "device": "cpu"},
        config={"fields": fields, "workload_setting": "lwis_k_99_MaxP"}, system={}, user_conf=[],
        performance_sample_count=SAMPLES, cpu_cores=2, test_run=True, rules_version="v6.1",
        accuracy_threshold=None, invocation={}, harness=plugin.name, harness_options=spec["options"])
    plugin.prepare_process(run_spec)
    import mlperf_loadgen as lg

    benchmark = ContractBenchmark("tokens" if tokens else kind)
    samples = Prompts(SAMPLES) if tokens else Samples()
    run = HarnessRun(run_spec, benchmark, samples, Paths.create(scratch=out, log_dir=out), out,
                     benchmark.generation("tiny", fields, None))
    sut, qsl = plugin.create(run)
    log_settings = lg.LogSettings()
    log_settings.log_output.outdir = str(out)
    log_settings.enable_trace = False
    lg_sut, lg_qsl = sut.construct(), qsl.construct()
    lg.StartTestWithLogSettings(lg_sut, lg_qsl, loadgen_settings(scenario, tokens), log_settings, "")
    sut.stop()
    sut.destroy(lg_sut)
    qsl.destroy(lg_qsl)
    counters = sut.counters
    (out / "result.json").write_text(json.dumps({
        "issued": counters.issued, "completed": counters.completed, "progress": counters.progress,
        "error": repr(sut.error) if sut.error else None, "endpoints": sut.endpoint_records()}))


# -- the tests ------------------------------------------------------------------------------------------------------
PLUGINS_PACKAGE = "tests.harness_plugins"


def plugin_modules() -> list[str]:
    """The modules of tests/harness_plugins/, each a harness plug-in that lives only in tests."""
    folder = Path(__file__).parent / "harness_plugins"
    return [f"{PLUGINS_PACKAGE}.{path.stem}" for path in sorted(folder.glob("*.py")) if path.stem != "__init__"]


@contextmanager
def plugged_in(module: str | None):
    """The names the plug-in module registers, registered for the block alone (None: the toolkit's own)."""
    if module is None:
        yield HARNESSES.names()
        return
    names = importlib.import_module(module).register()
    try:
        yield names
    finally:
        for name in names:
            HARNESSES.unregister(name)


ENGINE_HARNESS = "engine"


def cases() -> list:
    found = []
    for module in (None, *plugin_modules()):
        with plugged_in(module) as names:
            for name in names:
                if HARNESSES.get(name).name == ENGINE_HARNESS:
                    continue     # it runs a benchmark's own engines, which the contract's benchmark has not:
                    # tests/test_whisper_harness.py runs it through LoadGen on whisper's
                kinds = TOKEN_KINDS if HARNESSES.get(name).generates_tokens else FIXED_KINDS
                found += [pytest.param(name, scenario, kind, module, id=f"{name}-{scenario.value}-{kind}")
                          for scenario in SCENARIOS for kind in kinds]
    return found


@pytest.fixture(scope="module")
def engine(tmp_path_factory) -> Path:
    return tiny_model(tmp_path_factory.mktemp("contract-engine"))


def options(name: str, endpoints: tuple[str, ...] = (), flags: tuple[str, ...] = ()) -> dict[str, Any]:
    """What the plug-in takes from an invocation, here; skips, saying why, where it cannot run on this machine (its
    own why_not and pre-flight check: the native core not built, no Triton environment)."""
    from code.common.errors import UserError
    from code.common.harness.registry import Selection
    from code.common.paths import Paths

    plugin = HARNESSES.get(name)
    paths, args = Paths.create(), _args(plugin.harness_type, endpoints, flags)
    why = plugin.why_not(Selection("contract", "tiny", plugin.generates_tokens, plugin.harness_type, paths.build))
    if why is None:
        try:
            plugin.preflight({"backend": "onnxruntime"}, args, paths)
        except UserError as error:
            why = str(error)
    if why is not None:
        pytest.skip(f"the {name} harness cannot run here: {why}")
    return plugin.run_options(args, paths)


def _args(harness_type: str, endpoints: tuple[str, ...] = (), given: tuple[str, ...] = ()):
    from code.common.arguments import parse_run_args

    flags = [] if harness_type == "lwis" else [f"--harness_type={harness_type}"]
    flags += [f"--endpoints={','.join(endpoints)}"] if endpoints else []
    return parse_run_args(["--action=run_harness", *flags, *given], ["run_harness"], ["resnet50"])


@pytest.mark.parametrize("name, scenario, kind, plugins", cases())
def test_every_harness_completes_every_sample_once_with_its_engines_response(name, scenario, kind, plugins, engine,
                                                                             tmp_path, request):
    from contextlib import ExitStack

    out = tmp_path / "run"
    out.mkdir()
    with ExitStack() as servers, plugged_in(plugins):
        if HARNESSES.get(name).harness_type == "triton":
            request.getfixturevalue("triton_venv")    # its local server's environment, made as make run makes it
        endpoints = serving_endpoints(servers, kind) if HARNESSES.get(name).harness_type == "openai" else ()
        flags = tuple(importlib.import_module(plugins).CONTRACT_FLAGS) if plugins else ()
        spec = {"out": str(out), "harness": name, "scenario": scenario.value, "kind": kind, "engine": str(engine),
                "engine_sha256": hashlib.sha256(engine.read_bytes()).hexdigest(),
                "options": options(name, endpoints, flags), "plugins": plugins}
        _round_trip(name, out, spec)


def serving_endpoints(servers, kind: str) -> tuple[str, ...]:
    """Two of the toolkit's streaming test servers for the openai harness, serving the contract's model; with
    `eos_first`, some prompts end on EOS at once (one-token outputs)."""
    from code.common.serving.fake_server import ServerSettings, StreamingServer

    settings = ServerSettings(model="tiny", eos_every=3 if kind == "eos_first" else 0, tokens_per_chunk=2)
    return tuple(servers.enter_context(StreamingServer(settings)).url for _ in range(2))


def _round_trip(name: str, out: Path, spec: dict[str, Any]) -> None:
    from code.common.records.loadgen_log import read_detail

    (out / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run([sys.executable, "-m", "tests.test_harness_contract", str(out / "spec.json")], cwd=REPO,
                          capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["error"] is None
    assert result["issued"] == result["completed"] == result["progress"] == SAMPLES
    assert read_detail(out).errors == ()
    entries = json.loads((out / "mlperf_log_accuracy.json").read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(SAMPLES))
    for entry in entries:
        data = bytes.fromhex(entry["data"])
        if HARNESSES.get(name).generates_tokens:
            tokens = np.frombuffer(data, np.int32)
            assert 2 <= len(tokens) <= 16, entry          # a one-token output is completed with EOS appended
        else:
            assert data == expected_records(spec["kind"], entry["qsl_idx"]).tobytes(), entry
    if any(flag.name == "endpoints" for flag in HARNESSES.get(name).flags):     # a harness of servers
        assert sum(e["samples"] for e in result["endpoints"]) == SAMPLES   # what served it is on the record


# -- harnesses that live only in tests/ -----------------------------------------------------------------------------
def test_a_harness_of_a_new_type_in_tests_plugs_in_with_its_flags_and_no_configs(capsys):
    """tests/harness_plugins/relay.py alone: a harness type no core file or config names, its own flag parsed and
    checked by it, the configs every harness shares; and it is among the contract's cases."""
    from code.common.arguments import parse_run_args
    from code.common.errors import UserError
    from code.main import main

    from .conftest import EMBEDDED
    from .harness_plugins import relay

    assert relay.NAME not in HARNESSES
    assert {p.values[3] for p in cases()} >= {None, "tests.harness_plugins.relay"}
    assert any(p.values[0] == relay.NAME for p in cases())
    named = [str(path) for folder in ("code", "configs") for path in (REPO / folder).rglob("*.py")
             if relay.NAME in path.read_text().lower()]
    assert named == []          # nothing outside its file names it

    def parse(*flags: str):
        return parse_run_args(["--action=run_harness", *flags], ["run_harness", "show_config"], ["resnet50"])

    with pytest.raises(UserError, match="Unknown harness_type 'relay'"):
        parse("--harness_type=relay")
    with plugged_in("tests.harness_plugins.relay"):
        args = parse("--harness_type=Relay", "--relay_pause_us=250")
        assert args.workload.name == "relay_k_99_MaxP" and dict(args.harness_flags) == {"relay_pause_us": 250}
        for flags, message in ((("--harness_type=relay", "--relay_pause_us=fast"), "--relay_pause_us=fast: expected "
                                "a whole number of microseconds"),
                               (("--relay_pause_us=10",), "--relay_pause_us is a flag of the relay harness: add "
                                "--harness_type=relay, or drop --relay_pause_us")):
            with pytest.raises(UserError, match=message) as refused:
                parse(*flags)
            assert refused.value.exit_code == 2
        capsys.readouterr()
        assert main(["--action=show_config", "--harness_type=relay", "--scenarios=offline", *EMBEDDED]) == 0
        shown = capsys.readouterr().out
        assert "[relay_k_99_MaxP] from configs/resnet50/Offline/__init__.py: class GenericCPU" in shown
    assert relay.NAME not in HARNESSES


# -- a harness that lives only in tests/, run by the toolkit's child process ----------------------------------------
def test_a_harness_living_in_tests_plugs_in_by_registration_alone(scratch, tmp_path):
    """tests/tiny_harness.py registers itself; the toolkit's child process runs a planned test on it."""
    from code.common.fields import FIELDS
    from code.common.harness.runner import run_test
    from code.common.harness.spec import RunSpec
    from code.main import main

    from . import tiny_harness
    from .conftest import EMBEDDED

    assert tiny_harness.NAME in HARNESSES and "echo_note" in FIELDS       # its field is in the catalogue
    planned = tmp_path / "planned"
    args = ["--scenarios=offline", *EMBEDDED, "--test_mode=AccuracyOnly", f"--scratch_path={scratch}",
            f"--log_dir={planned}"]
    assert main(["--action=generate_engines", *args], log=print) == 0
    assert main(["--action=run_harness", *args], log=print) == 0
    spec = RunSpec.load(next(planned.rglob("run_spec.json")))
    spec = RunSpec(**{**spec.__dict__, "log_dir": str(tmp_path / "echo"), "harness": tiny_harness.NAME,
                      "harness_options": {}})
    try:
        record = run_test(spec, REPO, child_module="tests.tiny_harness")
    finally:
        HARNESSES.unregister(tiny_harness.NAME)
    assert "echo_note" not in FIELDS
    assert record.status == "completed", record.error
    assert record.accuracy is not None and record.accuracy.samples == 20
    assert record.loadgen.errors == () and record.loadgen.build.startswith("wheel: mlcommons-loadgen")
    entries = json.loads((tmp_path / "echo" / "mlperf_log_accuracy.json").read_text())
    assert sorted(e["qsl_idx"] for e in entries) == list(range(20))
    assert all(len(bytes.fromhex(e["data"])) == 4 for e in entries)     # one int32 class id each


if __name__ == "__main__":
    child(json.loads(Path(sys.argv[1]).read_text()))
