"""Named inputs: a sample as {input name: array}, stacked and gathered per input with varying axes padded as the model
declares; and a benchmark of two inputs, one of varying length, that lives only in tests/ (two_input_benchmark.py)
and runs through real LoadGen on ONNX Runtime with both harness implementations, Offline and Server."""
from __future__ import annotations

import json
from pathlib import Path
from types import MappingProxyType

import numpy as np
import pytest

from code.common.benchmark_api import Padding, TensorSpec
from code.common.config_registry import ConfigKey, ConfigRegistry, ResolvedConfig
from code.common.constants import Scenario, WorkloadSetting
from code.common.harness.qsl import SampleLibrary
from code.common.harness.runner import run_test
from code.common.harness.spec import RunSpec
from code.common.named_inputs import gather_input, named_sample, stack_batch, stack_samples, warmup_inputs
from code.common.paths import Paths
from code.common.systems.known import GENERIC_CPU

from .conftest import REPO
from .two_input_benchmark import BENCHMARK, BUCKETS, DATASET, MODELS, NAME, SAMPLES, PairSet, write_model

CHILD = "tests.plugins_child"      # registers the plug-ins of tests/, then runs the harness child
A, B = MODELS["pairsum"].inputs
B_BUCKETS = MODELS["pairsum-buckets"].inputs[1]


# -- a sample, stacked and gathered ------------------------------------------------------------------------------
def test_a_single_input_models_array_is_read_under_its_inputs_name():
    image = TensorSpec("input", "float32", (2, 3))
    sample = np.ones((2, 3), np.float32)
    assert named_sample(sample, [image]).keys() == {"input"}
    assert named_sample({"input": sample}, [image])["input"] is not None


@pytest.mark.parametrize("sample, message", [
    (np.zeros(4, np.float32), "a sample of a model of 2 inputs must be a mapping of a, b"),
    ({"a": np.zeros(4, np.float32)}, "the sample holds input\\(s\\) a, the model declares a, b"),
    ({"a": np.zeros(4, np.float32), "b": np.zeros(2, np.int64), "c": np.zeros(1)}, "holds input\\(s\\) a, b, c"),
    ({"a": np.zeros(4, np.float64), "b": np.zeros(2, np.int64)}, "input 'a' of the sample is float64 \\[4\\], the "
                                                                  "model declares float32 \\[4\\]"),
    ({"a": np.zeros(5, np.float32), "b": np.zeros(2, np.int64)}, "float32 \\[5\\]"),
    ({"a": np.zeros(4, np.float32), "b": np.zeros((2, 2), np.int64)}, "declares int64 \\['any'\\]"),
])
def test_a_sample_that_is_not_what_the_model_declares_is_refused_naming_why(sample, message):
    with pytest.raises(ValueError, match=message):
        named_sample(sample, [A, B])


class Pairs:
    """Samples of {"a", "b"} with b of the given lengths, b counting up from 1 (so padding is visible)."""

    directory = Path(".")

    def __init__(self, lengths):
        self.lengths = lengths

    def __len__(self):
        return len(self.lengths)

    def load(self, index):
        return {"a": np.full(4, index, np.float32), "b": np.arange(1, self.lengths[index] + 1, dtype=np.int64)}


def test_varying_inputs_pad_to_the_batchs_longest_and_fixed_ones_stack_as_they_are():
    stacked = stack_samples(Pairs([2, 5, 1, 3]), [0, 1, 2, 3], [A, B])
    assert stacked["a"].extents is None and stacked["a"].data.shape == (4, 4)
    assert stacked["b"].data.shape == (4, 5) and stacked["b"].extents.tolist() == [[2], [5], [1], [3]]
    batch = gather_input(stacked["b"], np.array([2, 0]), B)          # longest in the batch: 2
    assert batch.tolist() == [[1, 0], [1, 2]] and batch.flags.c_contiguous
    assert gather_input(stacked["b"], np.array([3]), B).tolist() == [[1, 2, 3]]
    np.testing.assert_array_equal(gather_input(stacked["a"], np.array([3, 1]), A), [[3] * 4, [1] * 4])


def test_buckets_pad_past_the_sets_longest_with_the_declared_value():
    stacked = stack_samples(Pairs([2, 5, 1]), [0, 1, 2], [A, B_BUCKETS])
    assert stacked["b"].data[2].tolist() == [1, -1, -1, -1, -1]      # stored at the set's longest, padded with -1
    assert gather_input(stacked["b"], np.array([2, 0]), B_BUCKETS).tolist() == [[1, -1, -1, -1], [1, 2, -1, -1]]
    assert gather_input(stacked["b"], np.array([1]), B_BUCKETS).tolist() == [[1, 2, 3, 4, 5, -1, -1, -1]]
    with pytest.raises(ValueError, match=r"longer than the largest bucket \(12\)"):
        gather_input(stack_samples(Pairs([13]), [0], [A, B_BUCKETS])["b"], np.array([0]), B_BUCKETS)


def test_samples_of_varying_shape_need_a_declared_padding():
    unpadded = TensorSpec("b", "int64", (None,))
    with pytest.raises(ValueError, match="input 'b', which declares no padding; sample 1 is \\(3,\\), sample 0 "
                                         "\\(2,\\)"):
        stack_samples(Pairs([2, 3]), [0, 1], [A, unpadded])
    assert stack_samples(Pairs([2, 2]), [0, 1], [A, unpadded])["b"].data.shape == (2, 2)   # one shape: fine


def test_the_sample_library_gathers_named_batches_and_writes_fixed_inputs_into_given_buffers():
    library = SampleLibrary(Pairs([2, 5, 1, 3]), 4, [A, B])
    library.load([0, 1, 2, 3])
    batch = library.gather(np.array([0, 2]))
    assert list(batch) == ["a", "b"] and batch["b"].tolist() == [[1, 2], [1, 0]]
    out = np.empty((2, 4), np.float32)
    assert library.gather(np.array([3, 1]), out={"a": out})["a"] is out and out[:, 0].tolist() == [3, 1]


def test_samples_of_fixed_shape_one_after_another_in_the_loaded_set_are_read_where_it_holds_them():
    library = SampleLibrary(Pairs([2, 2, 2, 2]), 4, [A, TensorSpec("b", "int64", (2,))])
    library.load([3, 1, 0, 2])                       # held in this order
    adjacent = library.gather(np.array([1, 0]))["a"]  # held second and third: a read-only view of the set
    assert adjacent[:, 0].tolist() == [1, 0] and adjacent.base is not None and not adjacent.flags.writeable
    picked = library.gather(np.array([3, 0]))["a"]    # held first and third: copied
    assert picked[:, 0].tolist() == [3, 0] and picked.flags.writeable
    assert library.gather(np.array([2]))["a"][:, 0].tolist() == [2]


def test_a_pending_batch_is_gathered_straight_into_a_backends_buffers_where_it_can():
    """TensorRT's runner gathers a batch into its pinned buffers (one host copy per sample): inputs of fixed shape
    and the buffer's type are written there; the others are read by name, gathered as `gather` does."""
    library = SampleLibrary(Pairs([2, 5, 1, 3]), 4, [A, B])
    library.load([0, 1, 2, 3])
    first = library.load_token
    pending = library.pending(np.array([3, 1]))
    assert pending.count == 2 and list(pending) == ["a", "b"] and pending.load_token == first
    pinned = {"a": np.zeros((8, 4), np.float32), "b": np.zeros((8, 5), np.int64)}
    assert pending.gather_into(pinned) == {"a"}                      # b varies in length: not written
    assert pinned["a"][:2, 0].tolist() == [3, 1] and not pinned["a"][2:].any() and not pinned["b"].any()
    assert pending["b"].tolist() == library.gather(np.array([3, 1]))["b"].tolist()
    assert pending.stacked("a")[pending.slots, 0].tolist() == [3, 1]
    assert pending.gather_into({"a": np.zeros((8, 4), np.float16)}) == set()   # another type: read by name
    uploads = []
    library.after_load.append(lambda loaded: uploads.append((loaded.count, loaded.load_token,
                                                             loaded.stacked("a")[loaded.slots, 0].tolist())))
    library.load([1, 2])
    assert library.load_token == first + 1 and uploads == [(2, first + 1, [1, 2])]   # the whole loaded set
    with pytest.raises(RuntimeError, match=r"samples \[3\] were issued but not loaded"):
        library.pending(np.array([3]))


def test_calibration_batches_and_warm_up_inputs_follow_the_declaration():
    samples = [named_sample(Pairs([2, 4]).load(i), [A, B_BUCKETS]) for i in range(2)]
    batch = stack_batch(samples, [A, B_BUCKETS])
    assert batch["a"].shape == (2, 4) and batch["b"].tolist() == [[1, 2, -1, -1], [1, 2, 3, 4]]
    warm = warmup_inputs([A, B_BUCKETS], 3)
    assert warm["a"].shape == (3, 4) and warm["b"].shape == (3, min(BUCKETS)) and warm["b"].dtype == np.int64
    assert warmup_inputs([A, B], 2)["b"].shape == (2, 1)


def test_padding_rules():
    assert Padding().size(7) == 7
    assert [Padding(0, (8, 4)).size(n) for n in (1, 4, 5, 8)] == [4, 4, 8, 8]


# -- the two-input benchmark through the harness -----------------------------------------------------------------
def test_the_engine_builder_builds_and_calibrates_the_two_input_model(tmp_path):
    from code.common.harness.engine_build import build_engine

    paths = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs", repo=tmp_path)
    write_model(paths.model_file(NAME, "pairsum-buckets"))
    for precision in ("fp32", "int8"):
        values = {"model": "pairsum-buckets", "dataset": DATASET, "backend": "onnxruntime", "precision": precision,
                  "batch_size": 4, "instances": 1, "calibration_images": 20}
        config = ResolvedConfig(ConfigKey(NAME, Scenario.Offline, "Test_CPUx2", WorkloadSetting()), "test", "exact",
                                MappingProxyType(values), MappingProxyType({k: "test" for k in values}))
        engine = build_engine(config, "Test_CPUx2", paths, BENCHMARK, lambda _: None)
        assert engine.rebuilt and engine.path.is_file()
    assert paths.calibration_cache(NAME, "pairsum-buckets", DATASET, 20).is_file()


def run_spec(tmp_path: Path, model: str, scenario: Scenario, impl: str, native_lib: Path | None,
             backend: str = "onnxruntime") -> RunSpec:
    """An AccuracyOnly test of the two-input benchmark, as the run planner would write it (the config of the round's
    resnet50 with this benchmark's model, data set and batching in its place), the ONNX model as its engine."""
    config = ConfigRegistry.load(["resnet50"]).resolve("resnet50", scenario, [GENERIC_CPU], WorkloadSetting())
    fields = {**config.values, "model": model, "dataset": DATASET, "backend": backend, "precision": "fp32",
              "batch_size": 4, "instances": 2, "server_batch_timeout_us": 20_000, "harness_impl": impl,
              "intra_op_threads": 1}
    engine = write_model(tmp_path / "engine" / f"{model}.onnx")
    loadgen_model = "pairsum"
    return RunSpec(
        benchmark=NAME, model=model, dataset=DATASET, division="open", scenario=scenario.value,
        test_mode="AccuracyOnly", loadgen_model=loadgen_model, log_dir=str(tmp_path / f"{impl}-{scenario.value}"),
        scratch=str(tmp_path / "scratch"), engine=str(engine), engine_manifest={"device": "cpu"},
        config={**config.as_dict(), "benchmark": NAME, "fields": fields, "sources": {k: "test" for k in fields}},
        system={"id": "Test_CPUx2"},
        user_conf=[f"{loadgen_model}.{scenario.value}.performance_sample_count_override = {SAMPLES}",
                   f"{loadgen_model}.Server.target_qps = 400", f"{loadgen_model}.Offline.target_qps = 1000"],
        performance_sample_count=SAMPLES, cpu_cores=2, test_run=True, rules_version="v6.1",
        accuracy_threshold=None, invocation={}, harness=impl,
        harness_options={"native_lib": str(native_lib)} if native_lib else {})


def entries(record) -> list[dict]:
    log = json.loads((Path(record.log_dir) / "mlperf_log_accuracy.json").read_text())
    return sorted(log, key=lambda entry: entry["qsl_idx"])


def padded_lengths(found: list[dict]) -> list[int]:
    return [int(np.frombuffer(bytes.fromhex(e["data"]), np.float32)[2]) for e in found]


@pytest.mark.parametrize("model", ["pairsum", "pairsum-buckets"])
def test_the_two_input_benchmark_runs_through_loadgen_on_both_harnesses(native_lib, tmp_path, model):
    """By registration alone (tests/plugins_child.py registers it, then runs the harness child): every response
    holds its sample's own sums with b padded as the model declares, in Offline and Server, on the Python harness
    and on the native core; Offline forms the same batches in both, so their accuracy logs are the same."""
    found = {}
    for scenario in (Scenario.Offline, Scenario.Server):
        for impl in ("python", "native"):
            spec = run_spec(tmp_path, model, scenario, impl, native_lib if impl == "native" else None)
            record = run_test(spec, REPO, log=lambda _: None, child_module=CHILD)
            assert record.status == "completed", record.error
            assert record.accuracy.text == f"match=100.000%, good={SAMPLES}, total={SAMPLES}"
            assert record.loadgen.build.startswith("native core" if impl == "native" else "wheel")
            found[scenario, impl] = entries(record)
            own = [len(PairSet(Path(".")).load(e["qsl_idx"])["b"]) for e in found[scenario, impl]]
            padded = padded_lengths(found[scenario, impl])
            assert any(length > mine for length, mine in zip(padded, own, strict=True))   # b was padded
    assert found[Scenario.Offline, "python"] == found[Scenario.Offline, "native"]


def test_a_backend_plug_in_hands_the_native_harness_its_cpp_runner(native_lib, tmp_path):
    """A backend plug-in of tests/ whose native_backend names the core's C++ null backend: the native harness runs
    that (zero responses of the benchmark's response size), never the plug-in's Python runner (which refuses)."""
    spec = run_spec(tmp_path, "pairsum", Scenario.Offline, "native", native_lib, backend="null-native")
    record = run_test(spec, REPO, log=lambda _: None, child_module=CHILD)
    assert record.status == "completed", record.error
    found = entries(record)
    assert len(found) == SAMPLES and {e["data"] for e in found} == {"00" * BENCHMARK.response.typical_bytes}
    assert record.accuracy.text == f"match=0.000%, good=0, total={SAMPLES}"
