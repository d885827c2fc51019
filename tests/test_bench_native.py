"""The native core's null-backend figures of `make bench` (code/actions/bench_native.py): the probe
(code/actions/native_ceiling.py) run for real at a low rate, and the searches and figures wired to fake probes.

The real runs need the native core; where it cannot be built they skip, saying why (tests/test_native.py's fixture).
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from code.actions import bench_native
from code.actions.bench_native import (GOALS, figures_from, native_figures, offline_rates, outcome, ratio_line,
                                       server_ceiling, subprocess_probe)
from code.common.native.build import NativeUnavailable

from .conftest import REPO


def ceiling_probe(lib: Path, kind: str, scenario: str, outdir: Path) -> dict:
    done = subprocess.run([sys.executable, "-m", "code.actions.native_ceiling", str(lib), kind, scenario, str(outdir),
                           "2000", "1"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


# -- the probe, for real ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,scenario", [("reference", "Server"), ("native", "Server"), ("python", "Server"),
                                           ("reference-batched", "Offline"),
                                           ("native", "Offline")])
def test_the_probe_runs_each_kind_on_the_native_builds_loadgen(native_lib, tmp_path, kind, scenario):
    result = ceiling_probe(native_lib, kind, scenario, tmp_path)
    assert Path(result["module"]).parent == native_lib      # all three kinds on the same LoadGen
    assert (result["kind"], result["scenario"], result["target_qps"]) == (kind, scenario, 2000.0)
    assert result["validity"] in ("VALID", "INVALID") and result["samples_per_second"] > 0
    assert (result["p99_latency_ns"] is not None) == (scenario == "Server")
    if not kind.startswith("reference"):                     # the references keep no counters
        assert result["error"] == "" and result["issued"] == result["completed"] > 0
    assert (tmp_path / "mlperf_log_detail.txt").is_file()


def test_the_probe_refuses_an_unknown_kind(native_lib, tmp_path):
    done = subprocess.run([sys.executable, "-m", "code.actions.native_ceiling", str(native_lib), "nonsense", "Server",
                           str(tmp_path), "2000", "1"], cwd=REPO, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode != 0 and "unknown kind 'nonsense'" in done.stderr


def test_a_failing_probe_process_is_an_invalid_run_with_its_reason(tmp_path):
    probe = subprocess_probe(tmp_path / "no-lib-here", REPO)
    result = probe("nonsense", "Server", 1000, 1, tmp_path / "run")
    assert "exit status" in result["error"]
    judged = outcome(result, tmp_path / "run")
    assert not judged.accepted() and "unknown kind" in judged.reason


# -- the searches and figures, with fake probes -------------------------------------------------------------------
def fake_probe(limits: dict[str, float], offline: dict[str, list[float]] | None = None, calls: list | None = None):
    """Server runs VALID up to each kind's limit (p99 far inside the bound), INVALID above it; Offline runs giving
    the listed rates in turn."""
    offline = {kind: list(rates) for kind, rates in (offline or {}).items()}

    def probe(kind, scenario, target, seconds, run_dir):
        if calls is not None:
            calls.append((kind, scenario, target, run_dir.name))
        if scenario == "Offline":
            return {"valid": False, "samples_per_second": offline[kind].pop(0)}
        valid = target <= limits[kind]
        return {"valid": valid, "p99_latency_ns": 1e6 if valid else 5e7, "samples_per_second": target,
                "perf_constraints_met": valid, "min_duration_met": True, "early_stopping_met": True}
    return probe


def test_the_server_search_brackets_the_ceiling_within_its_tolerance(tmp_path):
    calls: list = []
    lines: list[str] = []
    search = server_ceiling(fake_probe({"native": 290_000}, calls=calls), "native", tmp_path, lines.append)
    assert search.value is not None and 290_000 / 1.1 <= search.value <= 290_000
    assert len(search.steps) <= bench_native.SERVER_MAX_TRIALS
    assert calls[0][:3] == ("native", "Server", bench_native.SERVER_START)
    assert calls[0][3] == f"trial-01-{bench_native.SERVER_START:g}"
    assert any("INVALID" in line for line in lines) and any("VALID" in line for line in lines)


def test_a_rejected_server_run_says_which_constraint_failed(tmp_path):
    judged = outcome({"valid": False, "p99_latency_ns": 5e7, "perf_constraints_met": False,
                      "min_duration_met": True}, tmp_path)
    assert not judged.accepted() and judged.reason == "INVALID: perf_constraints_met"
    assert judged.bound_ns == 10_000_000 and judged.percentile == 0.99


def test_offline_runs_alternate_and_each_kind_takes_its_median(tmp_path):
    calls: list = []
    rates = offline_rates(fake_probe({}, {"reference": [10.0, 30.0, 20.0], "reference-batched": [4.0, 6.0, 5.0],
                                          "native": [9.0, 1.0, 5.0]}, calls), tmp_path, lambda _: None)
    assert rates == {"reference": 20.0, "reference-batched": 5.0, "native": 5.0}
    assert [c[0] for c in calls] == ["reference", "reference-batched", "native"] * 3


def test_the_figures_hold_each_harness_against_the_reference_and_log_their_lines(tmp_path):
    lines: list[str] = []
    offline = {"reference": [1e7] * 3, "reference-batched": [1e7] * 3, "native": [9.5e6] * 3}
    figures = figures_from(fake_probe({"reference": 320_000, "native": 300_000, "python": 60_000}, offline),
                           tmp_path, lines.append)
    server_native, server_python, offline_native, offline_batched = figures
    assert offline_batched.goal is None and offline_batched.baseline == 1e7
    assert server_native.goal == GOALS["server"] and server_native.meets
    assert server_python.goal is None and server_python.ratio < server_native.ratio
    assert offline_native.goal == GOALS["offline"] and offline_native.ratio == pytest.approx(0.95)
    expected = ratio_line("Server ceiling, native", server_native.value, server_native.baseline)
    assert expected in lines and expected.endswith("x the C++ reference")
    assert any(line.startswith("Server ceiling, Python harness: ") for line in lines)
    assert any(line.startswith("Server ceiling, C++ reference: ") for line in lines)


def test_a_ratio_line_reads_as_the_spec_writes_it():
    assert ratio_line("Server ceiling, native", 290_000, 318_681) == \
        "Server ceiling, native: 290000 samples/s, 0.91 x the C++ reference"
    assert ratio_line("Server ceiling, native", 290_000, 0) == \
        "Server ceiling, native: 290000 samples/s, - x the C++ reference"


def test_no_figures_where_the_core_cannot_be_built(monkeypatch, tmp_path):
    def unavailable(*args, **kwargs):
        raise NativeUnavailable("cmake not found")

    monkeypatch.setattr(bench_native, "build_native", unavailable)
    lines: list[str] = []
    paths = SimpleNamespace(build=tmp_path, download_cache=tmp_path, bench_dir=tmp_path, repo=REPO)
    bench = SimpleNamespace(ctx=SimpleNamespace(paths=paths, log=lines.append))
    assert native_figures(bench, bench.ctx) == []
    assert lines == ["no figures of the native harness core: it cannot be built here: cmake not found"]


def test_the_python_overhead_probe_runs_its_null_backend_without_failing(tmp_path):
    """Figure (a): the Python harness with a backend that returns at once (a failing one would complete every
    sample empty at once and measure nothing but the failure path)."""
    done = subprocess.run([sys.executable, "-m", "code.common.harness.overhead", "harness", str(tmp_path), "1", "64",
                           "1"], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["samples_per_second"] > 0
