"""systems/<system>.json and measurements.json agree with the round's checkers: exact spellings of the enumerated
fields, no falsy value in a meaningful field, whole-number counts, empty optional fields allowed, the system
type of each known system and the message for a benchmark outside its suite (fast, no GPU, no network)."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.actions.submission import StageResults
from code.common.benchmark_api import ModelSpec, TensorSpec
from code.common.constants import SystemType
from code.common.errors import UserError
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.submission.measurements import MEASUREMENTS_FIELDS, measurements, measurements_problems
from code.common.submission.system_json import (benchmark_not_in_suite_message, declared_system_type,
                                                describe_system, empty_fields, empty_meaningful_fields,
                                                empty_optional_fields, load_overrides, require_complete,
                                                write_overrides_template)
from code.common.systems import GENERIC_CPU, match_system
from code.common.systems.info import CPUInfo, GPUInfo, SystemInfo
from code.common.systems.known import KNOWN_SYSTEMS

RULES = get_round("v6.1")
CPU = CPUInfo(model="AMD EPYC 7B13", vendor="AuthenticAMD", architecture="x86_64", sockets=1, cores_per_socket=2,
              threads_per_core=2, max_mhz=None, caches=())
INFO = SystemInfo(cpu=CPU, memory_gib=7.8, os_name="Debian GNU/Linux 12 (bookworm)", kernel="6.1.0")
H100x8 = SystemInfo(cpu=CPU, memory_gib=2015.6, os_name="Ubuntu 22.04.4 LTS", kernel="5.15",
                    gpus=(GPUInfo("NVIDIA H100 80GB HBM3", 81559, "550.54.15"),) * 8)
WHERE = "systems/sys1.overrides.json"
# What detection cannot know and the checkers need a truthy value for, on a CPU-only machine.
MEANINGFUL_FILL = {"status": "available", "host_memory_configuration": "N/A", "host_networking": "N/A",
                   "host_network_card_count": "1", "host_networking_topology": "N/A", "cooling": "air"}


def _describe(overrides: dict | None = None, info: SystemInfo = INFO, *, division: str = "open",
              submitter: str = "ACME", system_type: str = "edge") -> dict:
    return describe_system(info, "sys1", division, submitter, system_type, "ONNX Runtime 1.22.0", overrides or {},
                           RULES, software={"Python": "3.11.9"}, storage=("512 GB", "SSD"), overrides_path=WHERE)


def _refused(overrides: dict, **kwargs) -> str:
    with pytest.raises(UserError) as caught:
        _describe(overrides, **kwargs)
    assert caught.value.exit_code == 1
    return str(caught.value)


def _load(tmp_path: Path, overrides: dict) -> dict:
    path = tmp_path / "sys1.overrides.json"
    path.write_text(json.dumps(overrides))
    return load_overrides(path, RULES)


# -- enumerated fields ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spelling", ["Edge", "EDGE", "datacenter, edge", "edge, datacenter", "Datacenter", "both",
                                      "datacenter_edge"])
def test_system_type_must_be_spelled_exactly_as_the_checkers_do(tmp_path: Path, spelling: str) -> None:
    message = _refused({"system_type": spelling})
    assert message.startswith(f'system_type is "{spelling}" in {WHERE};')
    assert '"edge", "datacenter", "datacenter,edge" or "edge,datacenter"' in message
    with pytest.raises(UserError, match=r'system_type is .* in .*sys1\.overrides\.json; the checkers accept') as c:
        _load(tmp_path, {"system_type": spelling})
    assert c.value.exit_code == 1


@pytest.mark.parametrize("spelling", ["edge", "datacenter", "datacenter,edge", "edge,datacenter"])
def test_every_checker_spelling_of_system_type_is_kept(tmp_path: Path, spelling: str) -> None:
    assert _describe(_load(tmp_path, {"system_type": spelling}))["system_type"] == spelling
    assert SystemType.from_json(spelling) is not None


def test_the_system_type_argument_is_checked_too() -> None:
    with pytest.raises(UserError, match="Unknown system type 'Edge'") as caught:
        _describe(system_type="Edge")
    assert caught.value.exit_code == 2   # a bad argument, not a bad file
    assert _describe(system_type="edge,datacenter")["system_type"] == "edge,datacenter"


def test_status_is_case_insensitive_but_written_lowercase(tmp_path: Path) -> None:
    assert _describe(_load(tmp_path, {"status": " Available"}))["status"] == "available"
    assert _describe({"status": "RDI"})["status"] == "rdi"
    message = _refused({"status": "research"})
    assert message == (f'status is "research" in {WHERE}; expected "available", "preview" or "rdi".')


def test_division_must_be_lowercase_and_the_runs_division(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r'division is "Open" in .*; expected exactly "closed", "open" or "network"'):
        _load(tmp_path, {"division": "Open"})
    assert "remove division from the file" in _refused({"division": "closed"}, division="open")
    assert _describe({"division": "open"}, division="open")["division"] == "open"
    with pytest.raises(UserError, match="Unknown division 'Open'"):
        _describe(division="Open")


def test_submitter_must_be_the_folders_submitter() -> None:
    message = _refused({"submitter": "Acme Inc"}, submitter="ACME")
    assert message.startswith('submitter is "Acme Inc" in systems/sys1.overrides.json;')
    assert "SUBMITTER=ACME" in message and 'set it to "ACME"' in message
    assert _describe({"submitter": "ACME"}, submitter="ACME")["submitter"] == "ACME"
    # Without SUBMITTER there is no folder name yet: the file's value is used.
    assert _describe({"submitter": "Acme Inc"}, submitter="")["submitter"] == "Acme Inc"


@pytest.mark.parametrize("value", [False, True, "false", "true", "False"])
def test_is_network_is_refused_whatever_its_value(tmp_path: Path, value) -> None:
    message = _refused({"is_network": value})
    assert message.startswith(f"is_network is {json.dumps(value)} in {WHERE}; leave is_network out")
    assert "network division, which the toolkit does not submit" in message
    with pytest.raises(UserError, match="leave is_network out"):
        _load(tmp_path, {"is_network": value})


def test_every_bad_value_is_named_in_one_error(tmp_path: Path) -> None:
    message = _refused({"system_type": "Edge", "status": "research", "cooling": False, "hw_notes": ""})
    starts = [message.index(f"{name} is ") for name in ("system_type", "status", "cooling")]
    assert starts[0] == 0 and starts == sorted(starts)   # one sentence each, in the file's order
    assert message.count(f" in {WHERE}; ") == 3 and "hw_notes" not in message


# -- falsy values and counts ---------------------------------------------------------------------------------------
def test_numbers_become_strings_so_zero_stays_meaningful() -> None:
    data = _describe({"host_network_card_count": 0, "accelerators_per_node": 0, "number_of_nodes": 1})
    assert (data["host_network_card_count"], data["accelerators_per_node"], data["number_of_nodes"]) == ("0", "0", "1")


@pytest.mark.parametrize("name,value,why", [
    ("cooling", False, "instead of a JSON boolean"),
    ("host_networking", True, "instead of a JSON boolean"),
    ("host_networking", [], "empty list or object"),
    ("host_memory_configuration", {}, "empty list or object"),
])
def test_booleans_and_empty_containers_are_refused_in_meaningful_fields(tmp_path: Path, name, value, why) -> None:
    message = _refused({name: value})
    assert message.startswith(f"{name} is {json.dumps(value)} in {WHERE};") and why in message
    with pytest.raises(UserError, match=why):
        _load(tmp_path, {name: value})


def test_names_the_summary_writer_concatenates_must_be_text() -> None:
    assert "write it as one string" in _refused({"host_processor_model_name": ["Xeon", "8480C"]})
    assert _describe({"accelerator_model_name": 4090})["accelerator_model_name"] == "4090"


def test_optional_fields_take_what_the_checkers_take() -> None:
    data = _describe({"hw_notes": False, "sw_notes": ["a", "b"]})
    assert data["hw_notes"] is False and data["sw_notes"] == ["a", "b"]


@pytest.mark.parametrize("name,value", [("number_of_nodes", "N/A"), ("number_of_nodes", "2.0"),
                                        ("number_of_nodes", 2.5), ("number_of_nodes", "0"),
                                        ("accelerators_per_node", "N/A"), ("accelerators_per_node", "eight"),
                                        ("accelerators_per_node", "-1")])
def test_counts_must_be_whole_numbers(tmp_path: Path, name: str, value) -> None:
    message = _refused({name: value})
    assert message.startswith(f"{name} is {json.dumps(value)} in {WHERE}; write a whole number")
    assert "int(number_of_nodes)" in message
    with pytest.raises(UserError, match="write a whole number"):
        _load(tmp_path, {name: value})


def test_counts_that_parse_are_accepted() -> None:
    data = _describe({"number_of_nodes": 2, "accelerators_per_node": " 8 "}, H100x8)
    assert data["number_of_nodes"] == "2" and int(data["accelerators_per_node"]) == 8
    assert _describe()["accelerators_per_node"] == "0"   # CPU-only: the string "0", truthy and int-parseable


# -- completeness ----------------------------------------------------------------------------------------------------
def test_empty_optional_fields_are_allowed_and_empty_meaningful_ones_refused(tmp_path: Path) -> None:
    data = _describe()
    optional = empty_optional_fields(data, RULES)
    assert {"hw_notes", "sw_notes", "system_type_detail", "host_processor_frequency", "host_processor_caches",
            "host_processor_interconnect"} <= set(optional)
    assert not set(optional) & set(RULES.system_json_meaningful_fields)
    assert set(empty_meaningful_fields(data, RULES)) == set(MEANINGFUL_FILL)
    # The template still lists every empty field, meaningful ones first.
    assert empty_fields(data, RULES) == empty_meaningful_fields(data, RULES) + optional
    template = tmp_path / "sys1.overrides.json"
    assert write_overrides_template(template, empty_fields(data, RULES))
    assert set(json.loads(template.read_text())) == set(MEANINGFUL_FILL) | set(optional)

    with pytest.raises(UserError) as caught:
        require_complete(data, RULES, Path(WHERE))
    message = str(caught.value)
    assert caught.value.exit_code == 1 and f"Set them in {WHERE}" in message
    assert all(f"{name} is empty" in message for name in MEANINGFUL_FILL)
    assert not any(f"{name} is empty" in message for name in optional)

    complete = _describe(MEANINGFUL_FILL)
    assert empty_optional_fields(complete, RULES) == optional
    require_complete(complete, RULES, Path(WHERE))   # optional fields may stay ""


def test_require_complete_refuses_what_the_checkers_refuse() -> None:
    complete = _describe(MEANINGFUL_FILL)
    for change, expected in (({"cooling": ""}, "cooling is empty"),
                             ({"accelerators_per_node": 0}, "accelerators_per_node is 0, which the checkers read"),
                             ({"host_networking": False}, "host_networking is false, which the checkers read"),
                             ({"system_type": "Edge"}, 'system_type is "Edge" (the checkers accept exactly'),
                             ({"status": "research"}, 'status is "research" (expected'),
                             ({"number_of_nodes": "N/A"}, 'number_of_nodes is "N/A" (write a whole number'),
                             ({"is_network": "false"}, 'is_network is "false" (leave is_network out')):
        with pytest.raises(UserError, match=expected.replace("(", r"\(")):
            require_complete({**complete, **change}, RULES, Path(WHERE))
    partial = {k: v for k, v in complete.items() if k != "hw_notes"}
    with pytest.raises(UserError, match="hw_notes is missing"):
        require_complete(partial, RULES, Path(WHERE))


# -- system type of known systems, and benchmarks outside a suite --------------------------------------------------
def test_known_systems_declare_their_category() -> None:
    types = {system.id: system.system_type for system in KNOWN_SYSTEMS}
    for system_id in ("H100_SXM_80GBx1", "H100_SXM_80GBx8", "H200_SXM_141GBx1", "H200_SXM_141GBx8"):
        assert types[system_id] is SystemType.datacenter
    assert types["L4x1"] is SystemType.edge
    assert match_system(INFO).system_type is SystemType.edge   # generic CPU fallback
    assert GENERIC_CPU not in types


def test_benchmark_not_in_suite_message() -> None:
    message = benchmark_not_in_suite_message("resnet", SystemType.datacenter, "H100_SXM_80GBx1")
    assert message == ('resnet is not in the v6.1 datacenter suite (the round has it for edge and datacenter,edge '
                       'systems only); set system_type to "edge" or "datacenter,edge" (which also requires Server) in '
                       'systems/H100_SXM_80GBx1.overrides.json if this system is submitted as an edge system, or '
                       'leave resnet out.')
    bert = benchmark_not_in_suite_message("bert-99", "datacenter", "H200_SXM_141GBx8", RULES)
    assert 'set system_type to "edge" or "datacenter,edge" in systems/H200_SXM_141GBx8.overrides.json' in bert
    assert "requires" not in bert
    yolo = benchmark_not_in_suite_message("yolo", "datacenter", "H100_SXM_80GBx8")   # toolkit name works too
    assert yolo.startswith("yolo is not in the v6.1 datacenter suite")
    for text in (message, bert, yolo, benchmark_not_in_suite_message("rgat", "edge", "sys1")):
        assert text.endswith(".") and ". " not in text   # one sentence


def test_declared_system_type_reads_the_exact_spelling(tmp_path: Path) -> None:
    path = tmp_path / "sys1.json"
    assert declared_system_type(path, WHERE) is None
    for value, expected in (("datacenter,edge", SystemType.datacenter_edge),
                            ("edge,datacenter", SystemType.datacenter_edge), ("edge", SystemType.edge), ("", None)):
        path.write_text(json.dumps({"system_type": value}))
        assert declared_system_type(path, WHERE) is expected
    path.write_text(json.dumps({"system_type": "datacenter, edge"}))
    with pytest.raises(UserError) as caught:
        declared_system_type(path, WHERE)
    assert caught.value.exit_code == 1
    assert str(caught.value).startswith(f'system_type is "datacenter, edge" in {path}; the checkers accept exactly')
    assert f"set it in {WHERE} and run make generate_conf_files again" in str(caught.value)


def test_stage_results_uses_the_exact_spelling(tmp_path: Path) -> None:
    paths = Paths.create(scratch=tmp_path / "s", log_dir=tmp_path / "l", repo=tmp_path / "repo")
    system = SimpleNamespace(system_id="box", system_type=SystemType.edge)
    handler = StageResults(SimpleNamespace(paths=paths, system=system))
    assert handler._system_type() is SystemType.edge   # no systems JSON yet: the detected type
    paths.system_json("box").parent.mkdir(parents=True)
    paths.system_json("box").write_text(json.dumps({"system_type": "datacenter,edge"}))
    assert handler._system_type() is SystemType.datacenter_edge
    paths.system_json("box").write_text(json.dumps({"system_type": "Edge"}))
    with pytest.raises(UserError, match=r'system_type is "Edge" in .*systems/box\.json;.*systems/box\.overrides\.json'):
        handler._system_type()


# -- measurements.json -----------------------------------------------------------------------------------------------
def _record(model: str = "mobilenet_v2", precision: str = "fp32"):
    from tests.run_records import make_record

    return make_record(model=model, precision=precision)


def _benchmark(**facts) -> SimpleNamespace:
    spec = ModelSpec(name="m", description="test model", division="open",
                     inputs=(TensorSpec("input", "float32", (3, 224, 224)),), starting_weights_filename="m.onnx",
                     weight_transformations="none", **facts)
    return SimpleNamespace(models={"m": spec})


def test_measurements_values_are_all_truthy_strings() -> None:
    from code.common.benchmark_api import get_benchmark

    values = measurements(_record(), get_benchmark("resnet50"))
    assert list(values) == list(MEASUREMENTS_FIELDS)
    assert all(isinstance(v, str) and v.strip() for v in values.values())
    assert measurements_problems(values) == []
    int8 = measurements(_record(precision="int8"), get_benchmark("resnet50"))
    assert int8["weight_data_types"] == "int8" and "INT8 static quantization" in int8["weight_transformations"]


@pytest.mark.parametrize("retraining,written", [(False, "no"), ("", "no"), (True, "yes"), ("No", "No")])
def test_retraining_is_never_falsy(retraining, written) -> None:
    assert measurements(_record("m"), _benchmark(retraining=retraining))["retraining"] == written


def test_measurements_with_an_empty_fact_are_refused() -> None:
    spec = _benchmark().models["m"]
    broken = SimpleNamespace(models={"m": spec.__class__(**{**spec.__dict__, "starting_weights_filename": ""})})
    with pytest.raises(UserError, match='starting_weights_filename is "", which must be a non-empty string') as c:
        measurements(_record("m"), broken)
    assert c.value.exit_code == 1
    assert measurements_problems({"retraining": False}) == [
        "input_data_types is missing", "retraining is false, which must be a non-empty string",
        "starting_weights_filename is missing", "weight_data_types is missing", "weight_transformations is missing"]


def test_number_of_nodes_counts_machines_not_endpoints_or_their_names(other_nodes):
    """The record keeps each server's machine (its host name resolved when the test ran): several ports of one host,
    or two names of one machine, are one node; records written before it counted hosts by their names."""
    from code.common.harness.child import _endpoints
    from code.common.records.record import EndpointRecord
    from tests.run_records import make_record

    served = [("127.0.0.1", 8000), ("localhost", 8001), ("node1", 8000), ("node1-ib", 8001)]
    sut = SimpleNamespace(endpoint_records=lambda: [{"host": host, "port": port, "protocol": "http"}
                                                    for host, port in served])
    endpoints = _endpoints(sut)
    assert [e.machine for e in endpoints] == ["this machine", "this machine", "10.0.0.1", "10.0.0.1"]
    assert make_record().replace(endpoints=endpoints).nodes == 2
    older = tuple(EndpointRecord(host=host, port=port, protocol="http") for host, port in served)
    assert make_record().replace(endpoints=older).nodes == 4 and make_record().nodes == 1
