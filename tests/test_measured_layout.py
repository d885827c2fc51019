"""Untuned layouts chosen from a sweep of the engine (tuning/measured_layout.py): the choices on recorded and
generated sweeps, the sweep kept and found again beside the engine, and a tuned or typed value winning."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.common.arguments import parse_run_args
from code.common.config_registry import UNTUNED
from code.common.constants import Scenario, TestMode
from code.common.harness.first_run import measured_layout, untuned_layout_note
from code.common.paths import Paths
from code.common.rules import get_round
from code.common.tuning import measured_layout as measured
from code.main import available_benchmarks
from tests.conftest import EMBEDDED, flags_over, recorded_detector

ROUND = get_round("v6.1")
# A sweep shaped on MobileNetV2 FP32 on a 2-core VM (raw ONNX Runtime, 1 instance x 2 threads: batch 2 measured at
# 395 samples/s, the configured 32 at 310; the other sizes filled in between): batch 2 is best.
RECORDED_BATCHES = {1: 381.2, 2: 395.4, 4: 389.0, 8: 372.5, 16: 341.8, 32: 310.3, 64: 298.7}
# Batch 1 on 2 cores, as measured there: one instance of 2 threads (403/s), or 2 of one thread each (335/s).
RECORDED_LAYOUTS = {(1, 2): 403.0, (2, 1): 335.0}


def test_offline_takes_the_batch_of_the_most_samples_per_second():
    assert measured.choose_batch(RECORDED_BATCHES) == 2


def test_a_smaller_batch_within_the_tie_wins_over_noise():
    assert measured.choose_batch({1: 100.0, 2: 100.5, 8: 99.8, 32: 80.0}) == 1
    assert measured.choose_batch({1: 90.0, 2: 100.0, 8: 101.5}) == 8
    with pytest.raises(ValueError):
        measured.choose_batch({})


@pytest.mark.parametrize("rate", [20.0, 40.0, 80.0, 120.0])
def test_server_at_rates_one_sample_at_a_time_keeps_up_takes_one_instance_with_every_thread(rate):
    (instances, threads), why = measured.choose_layout(RECORDED_LAYOUTS, rate)
    assert (instances, threads) == (1, 2)
    assert "keeps up" in why


def test_more_instances_only_where_the_rate_needs_them():
    # One instance of every thread does 300/s, two of one thread 700/s together (a model that scales badly).
    rates = {(1, 2): 300.0, (2, 1): 700.0}
    assert measured.choose_layout(rates, 80.0)[0] == (1, 2)
    layout, why = measured.choose_layout(rates, 150.0)
    assert layout == (2, 1) and "needs 2 instances" in why
    layout, why = measured.choose_layout(rates, 400.0)     # past every layout's margin: the most throughput
    assert layout == (2, 1) and "the layout of the most" in why


def test_a_sweep_is_kept_beside_the_engine_and_found_while_engine_and_machine_stay(tmp_path):
    ctx = _context(tmp_path)
    config = ctx.resolve("resnet50", Scenario.Offline)
    where = ctx.paths.layout_sweep(ctx.system.system_id, "resnet50", Scenario.Offline)
    manifest = _keep(ctx, config, RECORDED_BATCHES)
    assert measured.find_sweep(where, config, ctx.machine).rates["b2"] == 395.4
    assert measured.find_sweep(where, config, "another machine") is None
    manifest.write_text('{"rebuilt": true}')                   # another engine now: measured again
    assert measured.find_sweep(where, config, ctx.machine) is None
    where.write_text("not json")                              # a damaged file is measured again, not an error
    assert measured.find_sweep(where, config, ctx.machine) is None


def test_the_resolved_config_runs_the_measured_batch_and_says_why(tmp_path):
    ctx = _context(tmp_path)
    configured = ctx.resolve("resnet50", Scenario.Offline)
    assert configured["batch_size"] == 32
    _keep(ctx, configured, RECORDED_BATCHES)
    config = ctx.resolve("resnet50", Scenario.Offline)
    assert config["batch_size"] == 2
    source = config.sources["batch_size"]
    assert source.startswith(UNTUNED) and "batch 2 from a 6 s sweep of this engine" in source
    assert "b32 310" in source and "make tune confirms" in source
    assert config.given() == configured.given()          # still a default: repeating the run does not pin it
    kept = measured_layout(config)
    assert kept["fields"] == {"batch_size": 2} and kept["why"].startswith("batch 2 from")
    assert measured_layout(configured) == {}
    note = untuned_layout_note("resnet50", Scenario.Offline, "onnxruntime", TestMode.PerformanceOnly, True, None,
                               dict(config.sources), dict(config.values))
    assert note.startswith("Note: resnet50 Offline runs batch_size=2, chosen where no layout is tuned")
    assert "make tune" in note


def test_a_typed_value_wins_over_the_measured_one(tmp_path):
    _keep(_context(tmp_path), _context(tmp_path).resolve("resnet50", Scenario.Offline), RECORDED_BATCHES)
    config = _context(tmp_path, "--batch_size=16").resolve("resnet50", Scenario.Offline)
    assert config["batch_size"] == 16 and config.sources["batch_size"] == "command line"


def test_a_sweep_at_other_threads_says_nothing_of_these(tmp_path):
    ctx = _context(tmp_path)
    _keep(ctx, ctx.resolve("resnet50", Scenario.Offline), RECORDED_BATCHES)
    config = _context(tmp_path, "--instances=2").resolve("resnet50", Scenario.Offline)
    assert config["batch_size"] == 32 and not config.sources["batch_size"].startswith(UNTUNED)


def test_the_server_layout_follows_the_rate(tmp_path):
    ctx = _context(tmp_path)
    configured = ctx.resolve("resnet50", Scenario.Server)
    assert (configured["instances"], configured["intra_op_threads"]) == (2, 1)     # the shipped 2 x 1 thread
    _keep(ctx, configured, {(1, 2): 300.0, (2, 1): 700.0})
    config = ctx.resolve("resnet50", Scenario.Server)                              # 20 QPS: 10 per core
    assert (config["instances"], config["intra_op_threads"], config["batch_size"]) == (1, 2, 1)
    assert "1 x 2 threads at batch 1" in config.sources["instances"]
    fast = _context(tmp_path, "--server_target_qps=150").resolve("resnet50", Scenario.Server)
    assert (fast["instances"], fast["intra_op_threads"]) == (2, 1)
    assert "needs 2 instances" in fast.sources["instances"]


def test_a_server_batch_above_one_is_left_to_make_tune(tmp_path):
    ctx = _context(tmp_path)
    _keep(ctx, ctx.resolve("resnet50", Scenario.Server), RECORDED_LAYOUTS)
    config = _context(tmp_path, "--batch_size=4").resolve("resnet50", Scenario.Server)
    assert (config["instances"], config["intra_op_threads"]) == (2, 1)


def test_a_sweep_on_a_busy_machine_says_so(tmp_path):
    ctx = _context(tmp_path)
    config = ctx.resolve("resnet50", Scenario.Offline)
    busy = dataclasses.replace(_sweep(ctx, config, RECORDED_BATCHES), load=12.1, cores=2)
    assert "busy (load 12.1 on 2 cores: measured again once it is quiet)" in measured.chosen(config, busy)[1]
    quiet = dataclasses.replace(busy, load=1.5)
    assert "busy" not in measured.chosen(config, quiet)[1]
    assert measured.quieter_now(busy, 1.2) and not measured.quieter_now(busy, 9.0)
    assert not measured.quieter_now(quiet, 0.5) and not measured.quieter_now(None, 0.5)
    assert not measured.quieter_now(busy, None)
    assert measured.Sweep.from_dict(json.loads(json.dumps(busy.to_dict()))) == busy


def test_a_model_of_one_sample_per_call_gets_the_offline_layout_of_the_most_samples_per_second(tmp_path):
    assert measured.varies(Scenario.Offline, 1) == measured.LAYOUT
    assert measured.varies(Scenario.Offline, None) == measured.BATCH
    assert measured.most_throughput({(1, 2): 30.0, (2, 1): 58.0}) == (2, 1)
    assert measured.most_throughput({(1, 2): 58.0, (2, 1): 58.3}) == (1, 2)     # within the tie: fewer instances
    ctx = _context(tmp_path, "--benchmarks=yolo", "--model=nanodet-m", "--dataset=coco_mini")
    configured = ctx.resolve("yolo", Scenario.Offline)
    assert (configured["instances"], configured["intra_op_threads"], configured["batch_size"]) == (2, 1, 1)
    sweep = _sweep(ctx, configured, {(1, 2): 34.0, (2, 1): 29.0}, "yolo")
    measured.keep_sweep(ctx.paths.layout_sweep(ctx.system.system_id, "yolo", Scenario.Offline), sweep)
    config = ctx.resolve("yolo", Scenario.Offline)
    assert (config["instances"], config["intra_op_threads"], config["batch_size"]) == (1, 2, 1)
    assert "1 x 2 threads at batch 1 from a 6 s sweep" in config.sources["instances"]
    assert "the most samples/s" in config.sources["instances"]
    typed = _context(tmp_path, "--benchmarks=yolo", "--model=nanodet-m", "--dataset=coco_mini", "--instances=2")
    assert typed.resolve("yolo", Scenario.Offline)["intra_op_threads"] == 1


def test_a_layout_in_custom_py_wins(tmp_path):
    ctx = _context(tmp_path)
    config = ctx.resolve("resnet50", Scenario.Offline)
    sweep = _sweep(ctx, config, RECORDED_BATCHES)
    assert measured.apply_sweep(config, sweep, {"batch_size"}) is config
    assert measured.apply_sweep(config, sweep, set())["batch_size"] == 2
    assert measured.apply_sweep(config, None, set()) is config


def test_the_configured_layout_is_still_there_to_ask_for_beside_a_kept_sweep(tmp_path):
    # make bench's harness overhead (a) runs at the configured batch, not the one the engine's sweep chose
    ctx = _context(tmp_path)
    configured = ctx.resolve("resnet50", Scenario.Offline)
    _keep(ctx, configured, RECORDED_BATCHES)
    assert ctx.resolve("resnet50", Scenario.Offline)["batch_size"] == 2
    shipped = ctx.resolve("resnet50", Scenario.Offline, measured_layout=False)
    assert shipped["batch_size"] == configured["batch_size"] != 2
    assert not shipped.sources["batch_size"].startswith(UNTUNED)


# -- helpers ---------------------------------------------------------------------------------------------------
def _context(tmp_path: Path, *flags: str) -> Context:
    real = Paths.create(scratch=tmp_path / "scratch", log_dir=tmp_path / "logs")
    paths = dataclasses.replace(real, repo=tmp_path)      # build/ (engines, their sweeps) in tmp_path
    argv = ["--action=run_harness", *flags_over(EMBEDDED, *flags)]
    args = parse_run_args(argv, list(ACTIONS), available_benchmarks(real, ROUND), list(ROUND.benchmarks))
    system = recorded_detector("kvm_epyc_2core_lscpu.txt", None).detect()
    return Context(args=args, paths=paths, rules=ROUND, detect=lambda: system, log=lambda _: None)


def _sweep(ctx: Context, config, rates: dict, benchmark: str = "resnet50") -> measured.Sweep:
    folder = ctx.paths.engine_dir(ctx.system.system_id, benchmark, config.scenario)
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "engine.onnx.manifest.json"
    if not manifest.exists():
        manifest.write_text(json.dumps({"model": config["model"]}))
    labels = {(measured.batch_label(k) if isinstance(k, int) else measured.layout_label(*k)): v
              for k, v in rates.items()}
    return measured.Sweep(config.scenario.value, "engine.onnx", measured.sha256_file(manifest), ctx.machine,
                          measured.sweep_fields(config, measured.kind_of(labels)), labels, 5.6,
                          measured.measured_now())


def _keep(ctx: Context, config, rates: dict) -> Path:
    sweep = _sweep(ctx, config, rates)
    measured.keep_sweep(ctx.paths.layout_sweep(ctx.system.system_id, "resnet50", config.scenario), sweep)
    return ctx.paths.engine_dir(ctx.system.system_id, "resnet50", config.scenario) / "engine.onnx.manifest.json"


def test_a_compliance_run_takes_the_measured_layout_of_the_run_it_is_compared_with(tmp_path):
    from dataclasses import replace

    from code.actions.audit import REFERENCE_SOURCE, RunAuditHarness
    from tests.run_records import make_record

    ctx = _context(tmp_path, "--batch_size=8")
    _keep(ctx, _context(tmp_path).resolve("resnet50", Scenario.Offline), RECORDED_BATCHES)   # now: batch 2
    record = make_record()
    swept = {"fields": {"batch_size": 4, "instances": 1}, "why": "batch 4 from an earlier sweep"}
    record = replace(record, config=replace(record.config, measured_layout=swept))
    audit = RunAuditHarness.__new__(RunAuditHarness)
    audit.ctx = _context(tmp_path)
    like = audit._like_reference(record)
    config = like.resolve("resnet50", Scenario.Offline)
    assert config["batch_size"] == 4 and config.sources["batch_size"] == REFERENCE_SOURCE
    audit.ctx = ctx                                           # typed here: the typed value wins
    assert audit._like_reference(record).resolve("resnet50", Scenario.Offline)["batch_size"] == 8
