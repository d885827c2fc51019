"""INT8 activation ranges by the method a config names (`calibration_method`), as NVIDIA's calibrators offer them:

- `minmax` (the default): each tensor's smallest and largest value over the calibration set (TensorRT's
  IInt8MinMaxCalibrator; ONNX Runtime's MinMax calibrator computes it).
- `entropy`: TensorRT's entropy calibration (IInt8EntropyCalibrator2, "8-bit Inference with TensorRT", GTC 2017):
  a histogram of |x| in HISTOGRAM_BINS bins from 0 to the tensor's largest |x|, bin 0 (the exact zeros a ReLU
  makes) set to bin 1's count as NVIDIA's pytorch-quantization does; for every candidate threshold of
  QUANTIZED_BINS bins or more, the reference distribution P is the histogram up to the threshold with every count
  beyond it added to its last bin, Q is P's bins merged into QUANTIZED_BINS levels (the 127 steps of int8 above
  zero, plus zero's) and spread back over P's non-empty bins; the threshold of least KL divergence KL(P||Q) wins.
- `percentile`: the |x| below which `calibration_percentile` % of all values lie (99.999 by default), from the same
  histogram (the percentile calibration of NVIDIA's pytorch-quantization and of ONNX Runtime).

entropy and percentile clip outliers: the range is (max(lowest, -t), min(highest, t)) with t the threshold, so a
symmetric quantizer (TensorRT) gets the scale t / 127 and an asymmetric one (ONNX Runtime's CPU engines) keeps a
one-sided range one-sided. Histograms are computed here over values ONNX Runtime's calibration graph outputs
(two passes: MinMax, then the histograms with those bounds); non-finite values are left out of them, and a tensor
whose MinMax range is not finite keeps it (such tensors stay in float, onnxruntime_builder.non_finite_ranges).
The ranges are written in ONNX Runtime's cache format, tagged with ORT's method of the same name, so the engines
quantize from them unchanged.
"""
from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

import numpy as np

from ..errors import UserError
from . import onnxruntime_builder as ort_builder

if TYPE_CHECKING:
    from onnxruntime.quantization import TensorsData

METHODS = ("minmax", "entropy", "percentile")
DEFAULT_PERCENTILE = 99.999
HISTOGRAM_BINS = 2048          # TensorRT's entropy calibrator's histogram
QUANTIZED_BINS = 128           # int8 levels 0..127 on one side of zero
_ORT_METHODS = {"minmax": "MinMax", "entropy": "Entropy", "percentile": "Percentile"}


@dataclass(frozen=True)
class CalibrationChoice:
    """How the ranges are computed: one of METHODS; `percentile` only for the percentile method."""

    method: str = "minmax"
    percentile: float | None = None

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise UserError(f"calibration_method={self.method!r} is not valid. Valid choices: {', '.join(METHODS)}.")
        if (self.method == "percentile") != (self.percentile is not None):
            raise UserError("calibration_percentile goes with calibration_method=percentile only.")
        if self.percentile is not None and not 50.0 <= self.percentile <= 100.0:
            raise UserError(f"calibration_percentile={self.percentile} is not between 50 and 100.")

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> "CalibrationChoice":
        """The choice a resolved config makes (`calibration_method`, `calibration_percentile`)."""
        method = str(config.get("calibration_method") or "minmax")
        percentile = None
        if method == "percentile":
            percentile = float(config.get("calibration_percentile") or DEFAULT_PERCENTILE)
        return cls(method, percentile)

    @property
    def label(self) -> str:
        """As recorded in caches and engine manifests: "MinMax", "Entropy", "Percentile 99.999"."""
        name = _ORT_METHODS[self.method]
        return name if self.percentile is None else f"{name} {self.percentile:g}"

    @property
    def file_suffix(self) -> str:
        """Added to the calibration cache's name: "" for minmax (the name it always had), "-entropy",
        "-percentile99.999"."""
        if self.method == "minmax":
            return ""
        return f"-{self.method}" + ("" if self.percentile is None else f"{self.percentile:g}")


def entropy_threshold(hist: np.ndarray, edges: np.ndarray, quantized_bins: int = QUANTIZED_BINS) -> float:
    """The |x| threshold of least KL divergence for a histogram of |x| (`edges` from 0 up, len(hist) + 1)."""
    hist = np.array(hist, dtype=np.float64)
    bins = len(hist)
    if bins > 1:
        # The zero spike: after a ReLU half the values or more are exactly 0, all in bin 0, and merging that spike
        # with its neighbours dwarfs every other term of the divergence, so the search would stop at the first
        # merge (MobileNetV2's ReLU6 outputs: 1/8 of their range). NVIDIA's pytorch-quantization entropy
        # calibrator sets bin 0 to bin 1's count before the search; so does this.
        hist[0] = hist[1]
    if bins <= quantized_bins or hist.sum() == 0:
        return float(edges[-1])
    best_kl, best_end = np.inf, bins
    for end in range(quantized_bins, bins + 1):
        reference = hist[:end].copy()
        reference[-1] += hist[end:].sum()          # what the threshold clips lands on the last level
        present = hist[:end] != 0
        # end bins -> quantized_bins levels: level j takes bins [j * end // q, (j + 1) * end // q)
        starts = (np.arange(quantized_bins) * end) // quantized_bins
        level_sums = np.add.reduceat(hist[:end], starts)
        level_counts = np.add.reduceat(present.astype(np.float64), starts)
        level_of_bin = np.repeat(np.arange(quantized_bins), np.diff(np.append(starts, end)))
        with np.errstate(divide="ignore", invalid="ignore"):
            per_bin = np.where(level_counts > 0, level_sums / level_counts, 0.0)
        candidate = np.where(present, per_bin[level_of_bin], 0.0)
        kl = _kl_divergence(reference, candidate)
        if kl < best_kl:
            best_kl, best_end = kl, end
    return float(edges[best_end])


def _kl_divergence(p: np.ndarray, q: np.ndarray) -> float:
    """KL(P||Q) of two unnormalized histograms; infinite where P has mass Q lacks."""
    p_total, q_total = p.sum(), q.sum()
    if p_total == 0 or q_total == 0:
        return np.inf
    p, q = p / p_total, q / q_total
    mass = p > 0
    if np.any(q[mass] == 0):
        return np.inf
    return float(np.sum(p[mass] * np.log(p[mass] / q[mass])))


def percentile_threshold(hist: np.ndarray, edges: np.ndarray, percentile: float) -> float:
    """The upper edge of the first bin at which `percentile` % of the counts lie below."""
    cumulative = np.cumsum(np.asarray(hist, dtype=np.float64))
    if cumulative[-1] == 0:
        return float(edges[-1])
    index = int(np.searchsorted(cumulative, cumulative[-1] * percentile / 100.0))
    return float(edges[min(index + 1, len(edges) - 1)])


class AbsHistograms:
    """Histograms of |x| per tensor over fixed bins from 0 to the tensor's largest |x| (finite values only)."""

    def __init__(self, bounds: Mapping[str, float], bins: int = HISTOGRAM_BINS) -> None:
        self.bins, self.tops = bins, dict(bounds)
        self.edges = {name: np.linspace(0.0, top, bins + 1) for name, top in bounds.items()}
        self.counts = {name: np.zeros(bins, dtype=np.int64) for name in bounds}

    def add(self, name: str, values: np.ndarray) -> None:
        flat = np.abs(np.asarray(values, dtype=np.float32).ravel())
        flat = flat[np.isfinite(flat)]
        top = self.tops[name]
        counts, _ = np.histogram(flat, bins=self.bins, range=(0.0, top))   # equal bins: numpy's fast path
        counts[-1] += int(np.count_nonzero(flat > top))   # none, unless the bounds were low
        self.counts[name] += counts

    def threshold(self, name: str, choice: CalibrationChoice) -> float:
        if choice.method == "entropy":
            return entropy_threshold(self.counts[name], self.edges[name])
        assert choice.percentile is not None
        return percentile_threshold(self.counts[name], self.edges[name], choice.percentile)


def compute_ranges(model: Path, batches: Callable[[], Iterable[Mapping[str, np.ndarray]]],
                   choice: CalibrationChoice) -> "TensorsData":
    """The activation ranges of `model` (prepared with onnxruntime_builder.prepare_model) over the calibration
    batches, by `choice`. `batches()` gives the batches, each {input name: array}; it is called once per pass."""
    from onnxruntime.quantization import CalibrationMethod, TensorsData
    from onnxruntime.quantization.calibrate import TensorData

    minmax = ort_builder.compute_ranges(model, batches())
    if choice.method == "minmax":
        return minmax
    bounds: dict[str, float] = {}
    for name in minmax:
        low, high = (float(np.asarray(v).reshape(-1)[0]) for v in minmax[name].range_value)
        if np.isfinite(low) and np.isfinite(high) and max(-low, high) > 0:
            bounds[name] = max(-low, high)
    histograms = AbsHistograms(bounds)
    _collect(model, batches(), histograms)
    data: dict[str, Any] = {}
    for name in minmax:
        low, high = (np.asarray(v, dtype=np.float32) for v in minmax[name].range_value)
        if name in bounds:
            threshold = np.float32(histograms.threshold(name, choice))
            low, high = np.maximum(low, -threshold), np.minimum(high, threshold)
        data[name] = TensorData(lowest=np.asarray(low, dtype=np.float32), highest=np.asarray(high, dtype=np.float32))
    return TensorsData(CalibrationMethod[_ORT_METHODS[choice.method]], data)


def _collect(model: Path, batches: Iterable[Mapping[str, np.ndarray]], histograms: AbsHistograms) -> None:
    """Run ONNX Runtime's calibration graph of `model` (every calibrated tensor an output) over the batches and add
    each tensor's values to its histogram."""
    from onnxruntime.quantization import CalibrationMethod, create_calibrator

    with tempfile.TemporaryDirectory(prefix="calibrate.") as work:
        calibrator = create_calibrator(Path(model), [], augmented_model_path=str(Path(work) / "augmented.onnx"),
                                       calibrate_method=CalibrationMethod.Percentile, extra_options={})
        session = calibrator.infer_session
        names = [output.name for output in session.get_outputs()]
        for batch in batches:
            for name, values in zip(names, session.run(None, dict(batch))):
                if name in histograms.counts:
                    histograms.add(name, values)
