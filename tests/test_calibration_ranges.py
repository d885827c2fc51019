"""INT8 calibration methods (calibration_ranges.py): TensorRT's entropy (KL) threshold and the percentile threshold
on generated histograms, the choice a config makes, and ranges computed on a generated conv net that the TensorRT
and ONNX Runtime INT8 preparations take as they are. The ImageNet figures are in tests/test_int8_imagenet.py."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from code.common.engines import onnxruntime_builder as ort_builder
from code.common.engines import tensorrt_onnx
from code.common.engines.calibration_ranges import (
    HISTOGRAM_BINS, AbsHistograms, CalibrationChoice, compute_ranges, entropy_threshold, percentile_threshold,
)
from code.common.errors import UserError
from tests.test_engines import _tiny_model

SHAPE = (3, 16, 16)


def _histogram(values: np.ndarray, bins: int = HISTOGRAM_BINS) -> tuple[np.ndarray, np.ndarray]:
    return np.histogram(np.abs(values), bins=bins, range=(0.0, float(np.abs(values).max())))


def test_entropy_keeps_the_whole_range_of_evenly_spread_values() -> None:
    hist, edges = _histogram(np.random.default_rng(0).uniform(-1, 1, 200_000))
    assert entropy_threshold(hist, edges) >= 0.99 * edges[-1]


def test_entropy_clips_rare_outliers_of_a_bell_curve() -> None:
    values = np.random.default_rng(1).normal(0, 1, 500_000)
    values[:20] = 40.0                      # 0.004 % of the values stretch the range tenfold
    hist, edges = _histogram(values)
    threshold = entropy_threshold(hist, edges)
    assert 2.5 < threshold < 8.0, threshold
    assert percentile_threshold(hist, edges, 99.9) < threshold < edges[-1]


def test_the_zeros_of_a_relu_do_not_pull_the_entropy_threshold_down() -> None:
    values = np.maximum(np.random.default_rng(4).normal(0, 1, 400_000), 0.0)     # half of them exactly 0
    hist, edges = np.histogram(values, bins=HISTOGRAM_BINS, range=(0.0, values.max()))
    positive, _ = np.histogram(values[values > 0], bins=HISTOGRAM_BINS, range=(0.0, values.max()))
    assert entropy_threshold(hist, edges) == entropy_threshold(positive, edges) > 0.5 * edges[-1]


def test_entropy_of_short_or_empty_histograms_is_the_top_edge() -> None:
    edges = np.linspace(0, 3, 65)
    assert entropy_threshold(np.ones(64), edges) == 3.0          # fewer bins than int8 levels: nothing to merge
    assert entropy_threshold(np.zeros(2048), np.linspace(0, 5, 2049)) == 5.0


def test_percentile_threshold_is_the_edge_below_which_that_share_lies() -> None:
    hist, edges = np.array([50, 30, 15, 4, 1]), np.array([0.0, 1, 2, 3, 4, 5])
    assert percentile_threshold(hist, edges, 50) == 1.0
    assert percentile_threshold(hist, edges, 95) == 3.0
    assert percentile_threshold(hist, edges, 99) == 4.0
    assert percentile_threshold(hist, edges, 100) == 5.0


def test_histograms_leave_out_non_finite_values() -> None:
    histograms = AbsHistograms({"t": 2.0}, bins=4)
    histograms.add("t", np.array([-2.0, -0.1, 0.6, 1.2, np.inf, -np.inf, np.nan], dtype=np.float32))
    assert histograms.counts["t"].tolist() == [1, 1, 1, 1]


@pytest.mark.parametrize("config, label, suffix", [
    ({}, "MinMax", ""),
    ({"calibration_method": "minmax"}, "MinMax", ""),
    ({"calibration_method": "entropy"}, "Entropy", "-entropy"),
    ({"calibration_method": "percentile"}, "Percentile 99.999", "-percentile99.999"),
    ({"calibration_method": "percentile", "calibration_percentile": 99.99}, "Percentile 99.99", "-percentile99.99"),
])
def test_the_choice_a_config_makes(config: dict, label: str, suffix: str) -> None:
    choice = CalibrationChoice.of(config)
    assert (choice.label, choice.file_suffix) == (label, suffix)


def test_bad_choices_are_refused_with_the_valid_ones() -> None:
    with pytest.raises(UserError, match="Valid choices: minmax, entropy, percentile"):
        CalibrationChoice("kl")
    with pytest.raises(UserError, match="between 50 and 100"):
        CalibrationChoice("percentile", 101.0)
    with pytest.raises(UserError, match="calibration_method=percentile only"):
        CalibrationChoice("entropy", 99.9)


def test_the_config_fields_parse_and_refuse() -> None:
    from code.common.fields import FIELDS

    assert FIELDS["calibration_method"].parse("entropy") == "entropy"
    assert FIELDS["calibration_percentile"].parse("99.99") == 99.99
    with pytest.raises(UserError, match="Valid choices"):
        FIELDS["calibration_method"].parse("kl")


def _scalar(value) -> float:
    return float(np.asarray(value).reshape(-1)[0])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> tuple[Path, Path, np.ndarray]:
    import onnx

    root = tmp_path_factory.mktemp("calibration")
    source = root / "tiny.onnx"
    onnx.save(_tiny_model(), str(source))
    prepared = ort_builder.prepare_model(source, root, for_quantization=True)
    data = np.random.default_rng(3).normal(0, 1, (60, *SHAPE)).astype(np.float32)
    data[0, 0, 0, 0] = 25.0                 # one outlier the clipping methods cut
    return source, prepared, data


@pytest.mark.parametrize("choice", [CalibrationChoice("entropy"), CalibrationChoice("percentile", 99.9)])
def test_clipping_methods_narrow_minmax_ranges_and_both_engines_take_them(tiny, choice: CalibrationChoice,
                                                                          tmp_path: Path) -> None:
    source, prepared, data = tiny

    def batches():
        return ({"input": data[i:i + 10]} for i in range(0, len(data), 10))

    minmax = compute_ranges(prepared, batches, CalibrationChoice())
    ranges = compute_ranges(prepared, batches, choice)
    assert ranges.calibration_method.name == choice.label.split()[0]
    assert set(ranges) == set(minmax)
    narrower = 0
    for name in minmax:
        low, high = (_scalar(v) for v in ranges[name].range_value)
        min_low, min_high = (_scalar(v) for v in minmax[name].range_value)
        assert min_low <= low <= 0 <= high <= min_high or (low, high) == (min_low, min_high), name
        narrower += (low, high) != (min_low, min_high)
    assert narrower >= len(list(minmax)) // 2
    # the outlier is cut off
    assert _scalar(ranges["input"].range_value[1]) < 10.0 and _scalar(minmax["input"].range_value[1]) == 25.0

    cache = tmp_path / f"tiny{choice.file_suffix}.calib.json"
    ort_builder.write_calibration_cache(cache, ranges, {"method": choice.label})
    assert json.loads(cache.read_text())["toolkit_inputs"] == {"method": choice.label}
    trt_model, ort_model = tmp_path / "trt.onnx", tmp_path / "ort.onnx"
    tensorrt_onnx.prepare(source, trt_model, "int8", cache)
    assert tensorrt_onnx.nonzero_zero_points(trt_model) == []
    assert tensorrt_onnx.quantized_node_counts(trt_model)["QuantizeLinear"] > 0
    ort_builder.build(source, ort_model, "int8", ["CPUExecutionProvider"], cache)
    batch = data[1:5]
    reference = tensorrt_onnx.cpu_reference_session(source).run(None, {"input": batch[:1]})[0]
    got = tensorrt_onnx.cpu_reference_session(trt_model).run(None, {"input": batch[:1]})[0]
    assert np.abs(got - reference).max() <= 0.1 * np.abs(reference).max() + 1e-3
