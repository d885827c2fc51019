"""The run record (metadata.json): typed reading and writing, schema 1 and 2 records of earlier releases, the
endpoints of any harness and the nodes they count, what the user typed kept apart from what the toolkit filled in,
and the command that reproduces a record."""
from __future__ import annotations

import dataclasses
import json
import re
import shlex
from pathlib import Path

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.actions.harness import EMBEDDED_DEFAULT_SOURCE, Run
from code.common.arguments import parse_run_args
from code.common.constants import Scenario, TestMode
from code.common.harness.child import base_record
from code.common.records.metadata import (COMPLETED, SCHEMA_VERSION, ConfigRecord, Invocation, RunRecord,
                                          UnreadableRecord, read_metadata, write_metadata)
from code.common.records.record import EndpointRecord
from code.common.records.reproduce import reproduce_command
from code.common.harness.spec import RunSpec
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.records.runs import choose_runs, load_records
from tests.run_records import make_record

# metadata.json as the previous release of the toolkit wrote it for `make run` (schema 1).
SCHEMA_1 = {
    "schema_version": 1, "benchmark": "resnet50", "model": "mobilenet_v2", "dataset": "foolbox20",
    "division": "open", "scenario": "Offline", "test_mode": "PerformanceOnly", "purpose": "submission",
    "audit_test": None,
    "system": {"id": "box", "known": False, "description": "box (2 cores)", "system_type": "edge",
               "hardware": {"cpu": {"model": "EPYC", "cores": 2}, "gpus": []}},
    "config": {"benchmark": "resnet50", "scenario": "Offline", "system_id": "generic_cpu",
               "workload_setting": "lwis_k_99_MaxP", "config_class": "configs/resnet50/Offline/__init__.py: class C",
               "match": "nearest known system generic_cpu",
               "fields": {"model": "mobilenet_v2", "dataset": "foolbox20", "backend": "onnxruntime",
                          "precision": "fp32", "batch_size": 2},
               "sources": {"model": "command line", "dataset": "command line", "backend": "config class",
                           "precision": "default", "batch_size": "command line"}},
    "test_run": True,
    "engine": {"path": "build/engines/e.onnx", "manifest": {"model": "mobilenet_v2"}, "manifest_sha256": "ab" * 32},
    "rules_version": "v6.1",
    "command_line": ["python3", "-m", "code.main", "--action=run", "--scratch_path=", "--log_dir=",
                     "--submitter=", "--batch_size=2"],
    "log_dir": "/logs/run", "started": "2026-01-01T00:00:00+00:00",
    "loadgen": {"version": "6.0.17", "seeds": {"qsl_rng_seed": 1}, "errors": [], "warnings": 0,
                "effective": {"min_duration_ms": 0}},
    "durations": {"test_s": 12.5, "measured_s": 10.1},
    "metric": {"name": "samples per second", "value": 240.5, "unit": "samples/s", "higher_is_better": True},
    "result_validity": "VALID", "valid": True, "submittable": False, "reasons": ["a test run"],
    "log_sha256": {"mlperf_log_detail.txt": "cd" * 32}, "status": "completed", "finished": "2026-01-01T00:01:00+00:00",
}


def test_a_schema_1_record_is_read_converted(tmp_path: Path) -> None:
    run_dir = tmp_path / "logs" / "run"
    run_dir.mkdir(parents=True)
    (run_dir / "metadata.json").write_text(json.dumps(SCHEMA_1))
    record = read_metadata(run_dir / "metadata.json")
    assert record.scenario is Scenario.Offline and record.test_mode is TestMode.PerformanceOnly
    assert record.metric.value == 240.5 and record.loadgen.seeds["qsl_rng_seed"] == 1
    assert record.durations.measured_s == 10.1 and record.reasons == ("a test run",)
    assert record.invocation == Invocation(action="run", typed=("--batch_size=2",))   # make's empty flags dropped
    assert record.given_fields() == {"model": "mobilenet_v2", "dataset": "foolbox20", "batch_size": 2}
    assert record.path == run_dir / "metadata.json"
    # It takes part in choosing runs as a record of today does.
    [chosen] = choose_runs(load_records([tmp_path / "logs"]), allow_test_runs=True).values()
    assert chosen.performance == record
    # Written again, it is a record of this schema that reads back the same.
    write_metadata(tmp_path / "again", record)
    data = json.loads((tmp_path / "again" / "metadata.json").read_text())
    assert data["schema_version"] == SCHEMA_VERSION == 3 and "command_line" not in data
    assert read_metadata(tmp_path / "again" / "metadata.json") == record


# The servers of a schema-2 record, as its Triton harness wrote them.
SCHEMA_2_SERVERS = [
    {"url": "node1:8001", "model": "resnet50", "engine": "/e.onnx", "engine_sha256": "ab", "max_batch_size": 32,
     "server_version": "2.51.0", "local": False, "requests": 3, "samples": 90, "transport": "grpc"},
    {"url": "[fd00::2]:8001", "engine_sha256": "ab", "requests": 2, "samples": 60}]


def test_a_schema_2_record_keeps_its_servers_as_endpoints(tmp_path: Path) -> None:
    data = {**{k: v for k, v in SCHEMA_1.items() if k != "command_line"}, "schema_version": 2,
            "invocation": {"action": "run_harness", "typed": []}, "triton_endpoints": SCHEMA_2_SERVERS}
    (tmp_path / "metadata.json").write_text(json.dumps(data))
    record = read_metadata(tmp_path / "metadata.json")
    assert record.endpoints == (
        EndpointRecord(host="node1", port=8001, protocol="grpc", model="resnet50", engine_sha256="ab", requests=3,
                       samples=90, transport="grpc",
                       extras={"engine": "/e.onnx", "max_batch_size": 32, "server_version": "2.51.0"}),
        EndpointRecord(host="fd00::2", port=8001, protocol="grpc", engine_sha256="ab", requests=2, samples=60))
    assert [e.address for e in record.endpoints] == ["node1:8001", "[fd00::2]:8001"]
    assert record.nodes == 2
    write_metadata(tmp_path / "again", record)
    written = json.loads((tmp_path / "again" / "metadata.json").read_text())
    assert "triton_endpoints" not in written and written["endpoints"][0]["extras"]["max_batch_size"] == 32
    assert read_metadata(tmp_path / "again" / "metadata.json") == record


def test_the_nodes_are_the_distinct_hosts_of_any_harness_endpoints() -> None:
    served = [{"host": host, "port": port, "protocol": "http", "model": "llama", "samples": 4}
              for host, port in (("node1", 8000), ("node1", 8001), ("node2", 8000))]
    record = RunRecord.from_dict({**make_record().as_dict(), "endpoints": served})
    assert record.nodes == 2 and {e.protocol for e in record.endpoints} == {"http"}
    assert RunRecord.from_dict(record.as_dict()) == record
    assert make_record().nodes == 1 and make_record().endpoints == ()     # in process: this machine alone


@pytest.mark.parametrize("change, reason", [
    ({"config": {**SCHEMA_1["config"], "fields": ["model"]}}, '"config.fields" is not an object'),
    ({"valid": "yes"}, '"valid" is not true or false'),
    ({"status": "running"}, '"status" is not one of completed, failed, interrupted'),
    ({"scenario": "Offlin"}, '"scenario" is not one of Offline'),
    ({"metric": {**SCHEMA_1["metric"], "value": "fast"}}, '"metric.value" is not a number'),
    ({"loadgen": {**SCHEMA_1["loadgen"], "errors": "none"}}, '"loadgen.errors" is not a list'),
    ({"system": {"known": True}}, '"system.id" is missing'),
    ({"schema_version": 4}, "metadata schema 4, this toolkit reads schemas 1, 2, 3"),
    ({"schema_version": 2, "triton_endpoints": [{"url": "node1"}]}, '"triton_endpoints[0].url" is not host:port'),
    ({"schema_version": 3, "endpoints": [{"host": "node1", "protocol": "http"}]}, '"endpoints[0].port" is missing'),
])
def test_a_field_of_the_wrong_type_makes_the_record_unreadable(tmp_path: Path, change: dict, reason: str) -> None:
    path = tmp_path / "metadata.json"
    path.write_text(json.dumps({**SCHEMA_1, **change}))
    with pytest.raises(UnreadableRecord) as error:
        read_metadata(path)
    assert error.value.exit_code == 1 and reason in str(error.value) and str(path) in str(error.value)
    lines: list[str] = []
    assert load_records([tmp_path], lines.append) == [] and reason in lines[0]


def _make_run_context(tmp_path: Path, kvm_2core, *run_args: str) -> Context:
    """The context of `make run RUN_ARGS="..."`, as make passes it, after the run action filled in its defaults."""
    argv = ["--action=run", "--scratch_path=", "--log_dir=", "--submitter=", *run_args]
    args = parse_run_args(argv, list(ACTIONS), ["resnet50", "yolo"])
    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path)
    ctx = Context(args=args, paths=paths, rules=get_round(), detect=lambda: kvm_2core, log=lambda _: None)
    return Run(ctx).ctx


def _record_of(ctx: Context, mode: TestMode, log_dir: Path):
    """The record the harness writes for a test of `ctx` (everything but the run itself)."""
    config = ctx.resolve("resnet50", Scenario.Offline)
    spec = RunSpec(benchmark="resnet50", model=config["model"], dataset=config["dataset"], division="open",
                   scenario="Offline", test_mode=mode.value, loadgen_model="resnet50", log_dir=str(log_dir),
                   scratch="unused", engine="e.onnx", engine_manifest={}, config=config.as_dict(),
                   system={"id": ctx.system.system_id}, user_conf=[], performance_sample_count=1, cpu_cores=2,
                   test_run=ctx.args.test_run, rules_version="v6.1", accuracy_threshold=None,
                   invocation=ctx.args.invocation(mode, "resnet50"))
    write_metadata(log_dir, base_record(spec, COMPLETED))
    return read_metadata(log_dir / "metadata.json"), config


def _parsed(command: str, action: str):
    run_args = re.fullmatch(rf'make {action} RUN_ARGS="(.*)"', command).group(1)
    return parse_run_args([f"--action={action}", *shlex.split(run_args)], list(ACTIONS), ["resnet50"])


def test_filled_in_defaults_are_recorded_apart_from_what_the_user_typed(tmp_path: Path, kvm_2core) -> None:
    ctx = _make_run_context(tmp_path, kvm_2core, "--batch_size=2")
    record, _ = _record_of(ctx, TestMode.AccuracyOnly, tmp_path / "run")
    assert record.invocation.action == "run" and record.invocation.typed == ("--batch_size=2",)
    sources = record.config.sources
    assert sources["batch_size"] == "command line"
    assert sources["model"] == sources["dataset"] == EMBEDDED_DEFAULT_SOURCE
    filled = record.invocation.filled_in
    assert {name: f.source for name, f in filled.items() if name != "test_mode"} == dict.fromkeys(
        ("model", "dataset", "benchmarks", "scenarios", "test_run"), EMBEDDED_DEFAULT_SOURCE)
    assert filled["model"].value == "mobilenet_v2" and filled["test_run"].value is True
    assert filled["test_mode"].value == "AccuracyOnly" and "make run" in filled["test_mode"].source


@pytest.mark.parametrize("run_args", [(), ("--batch_size=2", "--offline_expected_qps=12.5"),
                                      ("--scenarios=offline", "--model=mobilenet_v2", "--test_run=false")])
@pytest.mark.parametrize("mode", list(TestMode))
def test_the_reproduce_command_gives_the_same_config_again(tmp_path: Path, kvm_2core, run_args, mode) -> None:
    ctx = _make_run_context(tmp_path, kvm_2core, *run_args)
    record, config = _record_of(ctx, mode, tmp_path / "run")
    args = _parsed(reproduce_command(record), "run_harness")
    assert (args.benchmarks, args.scenarios, args.workload.name) == \
        (("resnet50",), (Scenario.Offline,), record.config.workload_setting)
    assert (args.test_mode, args.test_run) == (mode, record.test_run)
    assert dict(args.overrides) == record.given_fields()
    again = dataclasses.replace(ctx, args=args, _registry=None).resolve("resnet50", Scenario.Offline)
    assert again.values == config.values and again.key == config.key


def test_the_reproduce_command_of_a_compliance_run_keeps_workload_system_and_test() -> None:
    record = make_record(test_run=False, batch_size=8, offline_expected_qps=99.5).replace(
        audit_test="TEST01", purpose="audit",
        invocation=Invocation(action="run_audit_harness", typed=("--system_name=box", "--batch_size=8")))
    record = record.replace(config=dataclasses.replace(record.config, workload_setting="lwis_k_99_9_MaxQ"))
    command = reproduce_command(record)
    args = _parsed(command, "run_audit_harness")
    assert args.workload.name == "lwis_k_99_9_MaxQ" and args.system_name == "box" and args.audit_test == "TEST01"
    assert dict(args.overrides) == record.given_fields() == {"batch_size": 8, "offline_expected_qps": 99.5}
    assert not args.test_run and args.test_mode is TestMode.PerformanceOnly


def test_how_long_loadgen_runs_stays_out_of_the_command_of_other_steps(tmp_path: Path, kvm_2core) -> None:
    from code.common.records.reproduce import config_command

    ctx = _make_run_context(tmp_path, kvm_2core, "--min_duration=10000", "--min_query_count=1", "--batch_size=2")
    config = ctx.resolve("resnet50", Scenario.Offline)
    build = config_command("generate_engines", config)
    assert "--batch_size=2" in build and "min_duration" not in build and "min_query_count" not in build
    run = config_command("run_harness", config, TestMode.PerformanceOnly)
    assert "--min_duration=10000" in run and "--min_query_count=1" in run


def test_config_sources_name_the_fields_to_give_again() -> None:
    config = ConfigRecord(workload_setting="lwis_k_99_MaxP", fields={"a": 1, "b": 2, "c": 3, "d": 4, "e": 5},
                          sources={"a": "command line", "b": "config class", "c": "default", "d": "embedded default",
                                   "e": "config class (2 per core x 4 cores)"})
    assert config.given() == {"a": 1, "d": 4}


def test_the_documented_example_is_a_record_with_its_reproduce_command() -> None:
    text = (Path(__file__).resolve().parents[1] / "documentation" / "metadata.md").read_text()
    [example] = re.findall(r"```json\n(.*?)```", text, re.S)
    record = RunRecord.from_dict(json.loads(example))
    documented = re.search(r"Its reproduce command: `(.*?)`", text, re.S).group(1).replace("\n", " ")
    assert reproduce_command(record) == documented
    assert record.config.sources["model"] == EMBEDDED_DEFAULT_SOURCE and record.invocation.typed == ("--batch_size=16",)


def test_each_benchmark_gets_its_own_embedded_default(tmp_path, kvm_2core):
    ctx = _make_run_context(tmp_path, kvm_2core, "--benchmarks=resnet50,yolo")
    offline = {b: ctx.resolve(b, Scenario.Offline) for b in ("resnet50", "yolo")}
    assert (offline["resnet50"]["model"], offline["resnet50"]["dataset"]) == ("mobilenet_v2", "foolbox20")
    assert (offline["yolo"]["model"], offline["yolo"]["dataset"]) == ("nanodet-m", "coco_mini")
    assert offline["yolo"].sources["model"] == EMBEDDED_DEFAULT_SOURCE
    assert ctx.args.invocation(TestMode.AccuracyOnly, "yolo")["filled_in"]["model"]["value"] == "nanodet-m"
    # NanoDet-m's own Offline rate, per core (the configs' rate is YOLOv11l's); resnet50's configs fit its default.
    cores = kvm_2core.cpu.cores
    assert offline["yolo"]["offline_expected_qps"] == 30.0 * cores
    assert offline["yolo"].sources["offline_expected_qps"] == EMBEDDED_DEFAULT_SOURCE
    assert ctx.args.invocation(TestMode.AccuracyOnly, "yolo")["filled_in"]["offline_expected_qps"]["value"] == \
        30.0 * cores
    assert offline["resnet50"].sources["offline_expected_qps"] != EMBEDDED_DEFAULT_SOURCE
    # A model typed on the command line wins over every benchmark's embedded default.
    typed = _make_run_context(tmp_path, kvm_2core, "--benchmarks=yolo", "--model=yolov11l")
    assert typed.resolve("yolo", Scenario.Offline)["model"] == "yolov11l"
    assert typed.resolve("yolo", Scenario.Offline)["dataset"] == "coco_mini"
