"""make find_peak: the searches with fake trials (noise, contradictions, non-monotone results), the confirming
run stepping to a safer value, and the value written into a custom config that the registry still loads."""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from code.actions import ACTIONS
from code.actions.base import Context
from code.actions.find_peak import FindPeak
from code.common.arguments import parse_run_args
from code.common.config_registry import ConfigRegistry
from code.common.constants import Scenario
from code.common.errors import UserError
from code.common.paths import REPO_ROOT, Paths
from code.common.rules import get_round
from code.common.tuning.config_edit import MARKER, set_class_field
from code.common.tuning.search import Outcome, confirm, find_highest, settle

BOUND = 15e6   # ns


def server(peak: float):
    """A Server whose p99 reaches 90 % of the bound at `peak` QPS and the bound itself at peak / 0.9."""
    def outcome(value: float) -> Outcome:
        latency = 0.9 * BOUND * value / peak
        return Outcome(valid=latency <= BOUND, latency_ns=latency, percentile=0.99, bound_ns=BOUND,
                       reason="" if latency <= BOUND else "p99 over the bound")
    return outcome


class Recorder:
    """A fake trial: `outcome(value)`, with some runs' verdicts flipped (`flips`: value -> how many times)."""

    def __init__(self, outcome, flips: dict[float, int] | None = None) -> None:
        self.outcome, self.flips, self.values = outcome, dict(flips or {}), []

    def __call__(self, value: float) -> Outcome:
        self.values.append(value)
        honest = self.outcome(value)
        if self.flips.get(value, 0) > 0:
            self.flips[value] -= 1
            lucky = not honest.accepted(0.1)
            return Outcome(valid=lucky, latency_ns=0.5 * BOUND if lucky else 2 * BOUND, percentile=0.99,
                           bound_ns=BOUND, reason="" if lucky else "p99 over the bound (noise)")
        return honest


def quiet(_: str) -> None:
    pass


# -- find_highest -----------------------------------------------------------------------------------------------
def test_brackets_the_peak_and_confirms_both_edges():
    lines: list[str] = []
    trial = Recorder(server(100.0))
    result = find_highest(trial, 20.0, tolerance=0.05, latency_margin=0.1, log=lines.append)
    assert result.value is not None and 95 <= result.value <= 100 < result.high
    assert (result.high - result.low) <= 0.05 * result.low
    assert trial.values.count(result.low) >= 2 and trial.values.count(result.high) >= 2
    assert len(lines) == len(trial.values) == len(result.steps)
    assert "VALID" in lines[0] and "p99" in lines[0] and "bracket [" in lines[0]
    assert "bracket narrower than 5%" in result.stopped


def test_valid_over_the_latency_margin_is_not_accepted():
    lines: list[str] = []
    result = find_highest(Recorder(server(100.0)), 105.0, tolerance=0.05, latency_margin=0.1, log=lines.append)
    assert "VALID, over the margin" in lines[0]     # 105 QPS: VALID, p99 at 94.5 % of the bound
    assert result.value <= 100


def test_a_short_run_invalid_by_early_stopping_alone_is_judged_on_its_percentile():
    """500 queries leave early stopping little room: a few cold-start outliers fail it although the 99th
    percentile is well within the bound. The search judges such a short run on the percentile (the full-length
    confirmation, with the round's query count, is LoadGen's verdict as it is)."""
    within = Outcome(valid=False, latency_ns=9e6, percentile=0.99, bound_ns=BOUND, early_stopping_only=True)
    assert within.accepted(0.1)
    assert not Outcome(valid=False, latency_ns=14e6, percentile=0.99, bound_ns=BOUND,
                       early_stopping_only=True).accepted(0.1)          # over the margin
    assert not Outcome(valid=False, latency_ns=9e6, percentile=0.99, bound_ns=BOUND).accepted(0.1)
    lines: list[str] = []
    result = find_highest(lambda v: within if v <= 40 else Outcome(valid=False, latency_ns=2 * BOUND,
                                                                     percentile=0.99, bound_ns=BOUND),
                          20.0, tolerance=0.05, latency_margin=0.1, log=lines.append)
    assert 38 <= result.value <= 40 and "INVALID by early stopping alone" in lines[0]


def test_early_stopping_alone_is_read_from_loadgens_verdicts(tmp_path):
    from code.common.tuning.trials import outcome_of
    from tests.synthetic_logs import write_detail

    base = {"effective_scenario": "Server", "result_validity": "INVALID", "effective_target_latency_ns": 15_000_000,
            "effective_target_latency_percentile": 0.99, "result_99.00_percentile_latency_ns": 9_000_000,
            "result_perf_constraints_met": True, "result_min_duration_met": True, "result_min_queries_met": True,
            "early_stopping_met": False}
    write_detail(tmp_path, base)
    assert outcome_of(tmp_path, valid=False).early_stopping_only
    write_detail(tmp_path, {**base, "result_perf_constraints_met": False})
    assert not outcome_of(tmp_path, valid=False).early_stopping_only


def test_a_lucky_run_above_the_peak_is_overturned_by_the_edge_retest():
    trial = Recorder(server(100.0), flips={110.0: 1})   # 110 QPS passes once by luck
    lines: list[str] = []
    result = find_highest(trial, 55.0, tolerance=0.05, latency_margin=0.1, log=lines.append)
    assert trial.values[:2] == [55.0, 110.0]
    assert trial.values.count(110.0) == 3          # re-tested, contradicted, decided by a third run
    assert any("contradicts its earlier run" in line for line in lines)
    assert 95 <= result.value <= 100


def test_an_unlucky_run_below_the_peak_is_overturned_by_the_edge_retest():
    trial = Recorder(server(100.0), flips={40.0: 1})    # 40 QPS fails once by bad luck
    result = find_highest(trial, 20.0, tolerance=0.05, latency_margin=0.1, log=quiet)
    assert trial.values[:2] == [20.0, 40.0]
    assert 95 <= result.value <= 100


def test_an_overturned_edge_with_nothing_below_it_steps_down_a_little_not_by_half():
    """Seen in a Server search: the first rate under the start passed once by luck, every rate above it failed,
    and two more runs overturned it. The peak is just below that rate: the search steps down by 2 x the tolerance
    (200 -> 180) instead of halving to 100, which with the trials left would have been the figure handed on."""
    trial = Recorder(server(171.0), flips={200.0: 1})   # accepted up to 190 QPS (p99 at the bound at 171 / 0.9)
    lines: list[str] = []
    result = find_highest(trial, 400.0, tolerance=0.05, latency_margin=0.0, max_trials=12, log=lines.append)
    assert trial.values[:2] == [400.0, 200.0] and trial.values.count(200.0) == 3
    third = len(trial.values) - 1 - trial.values[::-1].index(200.0)
    assert trial.values[third + 1] == 180.0
    assert 100.0 not in trial.values
    assert result.value == 190.0 and result.high == 195.0


def test_a_clean_rejection_below_the_start_still_halves():
    trial = Recorder(server(10.0))
    find_highest(trial, 100.0, tolerance=0.05, latency_margin=0.0, log=quiet)
    assert trial.values[:4] == [100.0, 50.0, 25.0, 12.5]


def test_non_monotone_results_end_on_a_value_accepted_by_most_of_its_runs():
    def bumpy(value: float) -> Outcome:     # accepted up to 60 and again from 70 to 100
        ok = value <= 60 or 70 < value <= 100
        return Outcome(valid=ok, latency_ns=BOUND * (0.5 if ok else 2), percentile=0.99, bound_ns=BOUND)
    trial = Recorder(bumpy)
    result = find_highest(trial, 50.0, tolerance=0.05, latency_margin=0.1, max_trials=16, log=quiet)
    assert len(trial.values) <= 16
    assert result.value is not None and bumpy(result.value).valid
    assert result.high is None or not bumpy(result.high).valid


def test_nothing_accepted_gives_no_value():
    result = find_highest(Recorder(server(0.001)), 20.0, log=quiet)
    assert result.value is None and "nothing accepted" in result.stopped


def test_out_of_trials_keeps_the_best_so_far():
    result = find_highest(Recorder(server(100.0)), 1.0, max_trials=5, log=quiet)
    assert len(result.steps) == 5 and "out of trials" in result.stopped and result.value == 16.0


def test_ceiling_stops_the_growth():
    result = find_highest(Recorder(server(1000.0)), 50.0, ceiling=100.0, log=quiet)
    assert result.value == 100.0 and "ceiling" in result.stopped


# -- settle and confirm -----------------------------------------------------------------------------------------
def offline(throughputs):
    """An Offline machine measuring the next of `throughputs` each run; VALID when the query lasted 10 s."""
    measured = iter(throughputs)

    def outcome(value: float) -> Outcome:
        throughput = next(measured)
        return Outcome(valid=value * 1.1 >= throughput, throughput=throughput,
                       reason="" if value * 1.1 >= throughput else "Offline run lasted too short")
    return outcome


def test_settle_sets_the_value_from_the_measurement():
    result = settle(offline([240, 241, 240]), 50.0, lambda o: round(o.throughput * 1.1, 1), safest=max, log=quiet)
    assert result.value == 264.0 and len(result.steps) == 2 and not result.steps[0].accepted


def test_settle_that_never_settles_keeps_the_safest_proposal():
    noisy = offline([200, 300, 200, 300])
    result = settle(noisy, 250.0, lambda o: o.throughput * 1.1, safest=max, tolerance=0.05, max_trials=4, log=quiet)
    assert result.value == pytest.approx(330.0) and "did not settle" in result.stopped


def test_confirm_steps_to_a_safer_value_until_a_full_run_is_valid():
    lines: list[str] = []
    result = confirm(Recorder(server(50.0)), 100.0, lambda v, _: v * 0.9, max_attempts=3, log=lines.append)
    assert [s.value for s in result.steps] == [100.0, 90.0, 81.0] and result.value is None
    assert "no safer value left" in lines[-1]
    result = confirm(Recorder(server(80.0)), 95.0, lambda v, _: v * 0.9, max_attempts=3, log=lines.append)
    assert result.value == pytest.approx(85.5) and "stepping to" in lines[-2] and "confirmed" in lines[-1]


# -- the config class ------------------------------------------------------------------------------------------
STUB = '''from configs.resnet50.Offline import GenericCPU


@register('Box')
class Box(GenericCPU):
    """Box, Offline."""
    # Required:
    # offline_expected_qps = PerCore(120.0)  # Expected Offline throughput
    pass


@register('Other')
class Other(GenericCPU):
    offline_expected_qps = 1.0
'''


def test_value_replaces_pass_then_its_own_earlier_value_and_comment():
    once = set_class_field(STUB, "Box", "offline_expected_qps", 264.0, ["on day 1: run A", "more"])
    assert "    pass\n" not in once.split("class Other")[0]
    assert f"    {MARKER} on day 1: run A\n    # more\n    offline_expected_qps = 264.0\n" in once
    twice = set_class_field(once, "Box", "offline_expected_qps", 290.0, ["on day 2: run B"])
    assert "day 1" not in twice and "offline_expected_qps = 264.0" not in twice
    assert "# offline_expected_qps = PerCore(120.0)" in twice and "offline_expected_qps = 1.0" in twice
    assert set_class_field(twice, "Other", "offline_expected_qps", 5.0, ["x"]).count("= 290.0") == 1
    latency = set_class_field(STUB, "Other", "single_stream_expected_latency_ns", 3_520_000, ["x"])
    assert "single_stream_expected_latency_ns = 3_520_000\n" in latency


# -- the action, with fake runs, in a copy of the repository --------------------------------------------------
@pytest.fixture
def repo_copy(tmp_path: Path) -> Path:
    for name in ("code", "configs"):
        shutil.copytree(REPO_ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "custom.py"))
    (tmp_path / "code/common/systems/custom_list.py").write_text(
        subprocess.run(["git", "show", "HEAD:code/common/systems/custom_list.py"], cwd=REPO_ROOT,
                       capture_output=True, text=True, check=True).stdout)
    return tmp_path


class FakeRuns(FindPeak):
    """find_peak with `respond(value, short)` instead of LoadGen."""

    def __init__(self, ctx, respond) -> None:
        super().__init__(ctx)
        self.respond, self.folders = respond, []

    def preflight(self, benchmark, scenario) -> None:
        pass

    def run_one(self, benchmark, scenario, run_dir, fields, short) -> Outcome:
        self.folders.append(run_dir.name)
        outcome = self.respond(next(iter(fields.values())), short)
        return Outcome(**{**outcome.__dict__, "run_dir": str(run_dir)})


def context(repo: Path, kvm_2core, *flags: str) -> tuple[Context, list[str]]:
    lines: list[str] = []
    args = parse_run_args(["--action=find_peak", "--benchmarks=resnet50", *flags], list(ACTIONS), ["resnet50"])
    paths = Paths.create(scratch=repo / "scratch", log_dir=repo / "logs", repo=repo)
    return Context(args=args, paths=paths, rules=get_round(), detect=lambda: kvm_2core, log=lines.append), lines


def offline_machine(value: float, short: bool) -> Outcome:
    """240 samples/s; a full-length run needs an expected QPS of at least 280 (it runs faster than the short ones)."""
    needed = 218.0 if short else 280.0
    return Outcome(valid=value >= needed, throughput=240.0 if short else 308.0,
                   reason="" if value >= needed else "Offline run lasted 9 s < 10 s")


def test_offline_value_confirmed_after_a_step_is_written_and_loads(repo_copy, kvm_2core):
    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=offline", "--model=mobilenet_v2")
    action = FakeRuns(ctx, offline_machine)
    assert action.run() == 0
    assert action.folders == ["trial-01-240qps", "trial-02-264qps", "confirm-01-264qps", "confirm-02-339qps"]
    custom = repo_copy / "configs/resnet50/Offline/custom.py"
    text = custom.read_text()
    assert "class AMD_EPYC_2C(GenericCPU):" in text and "offline_expected_qps = 339.0" in text
    assert f"{MARKER} on " in text and ", with model=mobilenet_v2." in text
    assert "# logs/find_peak/AMD_EPYC_2C/resnet50/Offline/confirm-02-339qps;\n" in text
    assert "AMD_EPYC_2C" in (repo_copy / "code/common/systems/custom_list.py").read_text()
    assert any("registered it as AMD_EPYC_2C" in line for line in lines)
    assert any("created class AMD_EPYC_2C (prefilled from GenericCPU)" in line for line in lines)
    shown = subprocess.run([sys.executable, "-m", "code.main", "--action=show_config", "--benchmarks=resnet50",
                            "--scenarios=offline", "--system_name=AMD_EPYC_2C"], cwd=repo_copy,
                           capture_output=True, text=True, check=False)
    assert shown.returncode == 0, shown.stderr
    assert "custom.py: class AMD_EPYC_2C (exact)" in shown.stdout and "339" in shown.stdout

    # Found again: the value and its comment are replaced, the system is not registered twice.
    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=offline")
    ctx.registry.add_module(_load(custom))
    assert FakeRuns(ctx, offline_machine).run() == 0
    again = custom.read_text()
    assert again.count("offline_expected_qps = ") == 1 + again.count("# offline_expected_qps = ")
    assert again.count(MARKER) == 1
    assert (repo_copy / "code/common/systems/custom_list.py").read_text().count("AMD_EPYC_2C") == 1


def _load(path: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("custom_under_test", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module    # so that its classes know their file, as imported ones do
    spec.loader.exec_module(module)
    return module


def test_server_value_never_confirmed_is_not_written(repo_copy, kvm_2core):
    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=server", "--server_target_qps=20")
    honest = server(50.0)
    action = FakeRuns(ctx, lambda value, short: honest(value) if short else Outcome(valid=False, reason="p99 high"))
    assert action.run() == 1
    assert [f for f in action.folders if f.startswith("confirm")] == ["confirm-01-50qps", "confirm-02-45qps",
                                                                       "confirm-03-40.5qps"]
    assert not (repo_copy / "configs/resnet50/Server/custom.py").exists()
    assert "AMD_EPYC_2C" not in (repo_copy / "code/common/systems/custom_list.py").read_text()
    assert any("nothing confirmed" in line and "no full-length run was VALID" in line for line in lines)
    assert sum(line.startswith("  trial") for line in lines) == len(action.folders) - 3


def test_a_server_layout_measured_on_the_engine_is_held_in_every_run_and_written_with_the_rate(repo_copy, kvm_2core):
    from tests.test_measured_layout import RECORDED_LAYOUTS, _keep

    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=server", "--model=mobilenet_v2")
    _keep(ctx, ctx.resolve("resnet50", Scenario.Server), RECORDED_LAYOUTS)     # 1 x 2 threads at 20 QPS
    ran: list[dict] = []

    class Recording(FakeRuns):
        def run_one(self, benchmark, scenario, run_dir, fields, short) -> Outcome:
            ran.append(dict(fields))
            return super().run_one(benchmark, scenario, run_dir, fields, short)
    honest = server(50.0)
    assert Recording(ctx, lambda value, short: honest(value)).run() == 0
    assert ran and all((f["instances"], f["intra_op_threads"]) == (1, 2) for f in ran)
    assert any("holding the layout measured on the engine (instances=1, intra_op_threads=2" in line
               for line in lines)
    text = (repo_copy / "configs/resnet50/Server/custom.py").read_text()
    assert "instances = 1" in text and "intra_op_threads = 2" in text and "server_target_qps = " in text
    ctx, _ = context(repo_copy, kvm_2core, "--scenarios=server", "--model=mobilenet_v2")
    ctx.registry.add_module(_load(repo_copy / "configs/resnet50/Server/custom.py"))
    config = ctx.resolve("resnet50", Scenario.Server)          # the rate found (45 QPS) is custom.py's now
    assert (config["instances"], config["intra_op_threads"]) == (1, 2)
    assert not config.sources["instances"].startswith("default") and ctx.pinned_layout(config) >= {"instances"}


def test_a_rate_found_with_the_configured_layout_holds_that_layout(repo_copy, kvm_2core):
    from tests.test_measured_layout import RECORDED_LAYOUTS, _keep

    ctx, _ = context(repo_copy, kvm_2core, "--scenarios=server", "--model=mobilenet_v2")
    honest = server(50.0)
    assert FakeRuns(ctx, lambda value, short: honest(value)).run() == 0      # no sweep yet: 2 x 1 thread
    _keep(ctx, ctx.resolve("resnet50", Scenario.Server), RECORDED_LAYOUTS)
    ctx, _ = context(repo_copy, kvm_2core, "--scenarios=server", "--model=mobilenet_v2")
    ctx.registry.add_module(_load(repo_copy / "configs/resnet50/Server/custom.py"))
    config = ctx.resolve("resnet50", Scenario.Server)
    assert (config["instances"], config["intra_op_threads"]) == (2, 1)


def test_singlestream_latency_from_the_measured_percentile(repo_copy, kvm_2core):
    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=singlestream")

    def machine(value: float, short: bool) -> Outcome:   # p90 3.6 ms, mean 3.4 ms; runs out above 6.8 ms
        return Outcome(valid=value <= 6.8e6, latency_ns=3.6e6, percentile=0.9, mean_latency_ns=3.4e6,
                       reason="" if value <= 6.8e6 else "ran out of queries")
    assert FakeRuns(ctx, machine).run() == 0
    text = (repo_copy / "configs/resnet50/SingleStream/custom.py").read_text()
    assert "single_stream_expected_latency_ns = 3_600_000" in text


def test_known_system_value_is_printed_not_written(repo_copy, kvm_2core):
    ctx, lines = context(repo_copy, kvm_2core, "--scenarios=offline", "--system_name=generic_cpu")
    assert FakeRuns(ctx, offline_machine).run() == 0
    assert not (repo_copy / "configs/resnet50/Offline/custom.py").exists()
    assert any("prints the value" in line for line in lines)
    assert any("offline_expected_qps = 339.0; not written" in line for line in lines)


def test_run_lengths_are_refused(repo_copy, kvm_2core):
    ctx, _ = context(repo_copy, kvm_2core, "--scenarios=offline", "--min_duration=1000", "--test_run")
    with pytest.raises(UserError, match="--min_duration, --test_run"):
        FakeRuns(ctx, offline_machine).run()


def test_registry_of_the_real_repository_still_loads():
    assert ConfigRegistry.load(["resnet50"]).systems_for("resnet50", Scenario.Offline)
