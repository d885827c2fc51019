"""stage_results and stage_compliance: copy the chosen runs into
build/submission-staging/<division>/<submitter>/results/<system>/<benchmark>/<Scenario>/."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable

from ..audit.verify import PASS
from ..constants import Scenario
from ..errors import UserError
from ..harness.loadgen_log import ACCURACY, DETAIL, SUMMARY, read_detail
from ..paths import Paths
from ..rules import RulesRound
from .measurements import MEASUREMENTS, README, USER_CONF, submission_benchmark
from .runs import Choice, Key, score

Log = Callable[[str], None]
ACCURACY_FILES = (SUMMARY, DETAIL, ACCURACY, "accuracy.txt")


def _replace_dir(source_files: dict[str, Path], dest: Path) -> None:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name, source in source_files.items():
        shutil.copy2(source, dest / name)


def _staged_score(detail: Path) -> float | None:
    if not detail.exists():
        return None
    metric = read_detail(detail.parent).metric()
    if metric is None:
        return None
    return metric.value if metric.higher_is_better else 1.0 / metric.value


def stage_scenario(paths: Paths, rules: RulesRound, submitter: str, key: Key, choice: Choice, log: Log) -> Path:
    system_id, benchmark, scenario = key
    performance, accuracy = choice.performance, choice.accuracy
    bench_rules = rules.benchmark(benchmark)
    name = submission_benchmark(bench_rules, performance)
    dest = paths.results_dir(paths.staging, choice.division, submitter, system_id, name, scenario)
    label = f"{system_id} {name} {scenario.value}"
    measured = paths.measurements_dir(system_id, name, scenario)
    if not all((measured / f).is_file() for f in (MEASUREMENTS, USER_CONF, README)):
        raise UserError(f"{measured} is incomplete: run `make generate_conf_files` first.", exit_code=1)

    run_dir = Path(performance["log_dir"])
    staged_detail = dest / "performance" / "run_1" / DETAIL
    staged = _staged_score(staged_detail)
    if staged is not None and staged_detail.read_bytes() == (run_dir / DETAIL).read_bytes():
        log(f"{label}: performance run already staged ({run_dir})")
    elif staged is not None and staged >= score(performance):
        log(f"{label}: kept the staged performance run, which is better than {run_dir}")
    else:
        if staged is not None:
            log(f"{label}: replacing the staged performance run with the better {run_dir}")
        _replace_dir({f: run_dir / f for f in (SUMMARY, DETAIL)}, dest / "performance" / "run_1")
        log(f"{label}: staged performance run {run_dir}")

    if accuracy is not None:
        acc_dir = Path(accuracy["log_dir"])
        staged_acc = dest / "accuracy" / DETAIL
        if staged_acc.exists() and staged_acc.read_bytes() == (acc_dir / DETAIL).read_bytes():
            log(f"{label}: accuracy run already staged ({acc_dir})")   # maybe truncated since: left as it is
        else:
            _replace_dir({f: acc_dir / f for f in ACCURACY_FILES}, dest / "accuracy")
            log(f"{label}: staged accuracy run {acc_dir}")
    for file_name in (MEASUREMENTS, USER_CONF, README):
        shutil.copy2(measured / file_name, dest / file_name)
    return dest


def stage_system_files(paths: Paths, division: str, submitter: str, system_id: str) -> None:
    root = paths.submitter_root(paths.staging, division, submitter)
    system_json = paths.system_json(system_id)
    if not system_json.is_file():
        raise UserError(f"{system_json} is missing: run `make generate_conf_files` first.", exit_code=1)
    (root / "systems").mkdir(parents=True, exist_ok=True)
    shutil.copy2(system_json, root / "systems" / system_json.name)
    calibration = paths.repo / "documentation" / "calibration.md"
    if calibration.is_file():
        (root / "documentation").mkdir(parents=True, exist_ok=True)
        shutil.copy2(calibration, root / "documentation" / "calibration.md")


def missing_scenarios(rules: RulesRound, system_type, staged: dict[tuple[str, str], set[Scenario]]) -> list[str]:
    """Required scenarios of the system type that have no staged result, one line each."""
    lines = []
    for (system_id, benchmark), scenarios in sorted(staged.items()):
        required = rules.benchmark(benchmark).required_scenarios.get(system_type, ())
        for scenario in required:
            if scenario not in scenarios:
                lines.append(f"{system_id} {benchmark} {scenario.value}: required for {system_type.value} systems "
                             f"and not staged: make run_harness RUN_ARGS=\"--benchmarks={benchmark} "
                             f"--scenarios={scenario.value} --test_mode=PerformanceOnly\" (and AccuracyOnly)")
    return lines


# -- compliance ------------------------------------------------------------------------------------------
def _passed(folder: Path) -> tuple[bool, list[str]]:
    verdicts = sorted(folder.glob("verify_*.txt"))
    failed = [v.name for v in verdicts if PASS not in v.read_text().strip().splitlines()[-1:]]
    return bool(verdicts) and not failed, failed


def stage_compliance_for(paths: Paths, rules: RulesRound, results_dir: Path, system_id: str, benchmark: str,
                         scenario: Scenario, log: Log) -> list[str]:
    """Copy each passed TEST0x of this scenario beside its results; return what could not be staged."""
    problems = []
    for test in rules.benchmark(benchmark).compliance_tests:
        source = paths.compliance_log_dir(test, system_id, benchmark, scenario)
        label = f"{system_id} {benchmark} {scenario.value} {test}"
        if not source.is_dir() or not list(source.glob("verify_*.txt")):
            division = results_dir.relative_to(paths.staging).parts[0]
            optional = " (optional in the open division)" if division == "open" else ""
            problems.append(f"{label}: no verdict{optional}; run make run_audit_harness "
                            f"RUN_ARGS=\"--benchmarks={benchmark} --scenarios={scenario.value}\"")
            continue
        passed, failed = _passed(source)
        if not passed:
            problems.append(f"{label}: {', '.join(failed)} says TEST FAIL; not staged (see {source})")
            continue
        dest = results_dir / test
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns("runs"))
        log(f"{label}: staged from {source}")
    return problems


def staged_scenarios(paths: Paths, rules: RulesRound, submitter: str) -> list[tuple[Path, str, str, Scenario]]:
    """(results folder, system id, toolkit benchmark, scenario) of everything staged for this submitter."""
    names = {name: bench for bench, r in rules.benchmarks.items() for name in r.submission_names.values()}
    found = []
    for division_dir in sorted(p for p in paths.staging.glob("*") if p.is_dir() and not p.name.startswith(".")):
        for folder in sorted((division_dir / submitter / "results").glob("*/*/*")):
            system_id, name, scenario = folder.parts[-3:]
            if name in names and scenario in Scenario.__members__:
                found.append((folder, system_id, names[name], Scenario(scenario)))
    return found


def scenarios_by_benchmark(found: list[tuple[Path, str, str, Scenario]]) -> dict[tuple[str, str], set[Any]]:
    grouped: dict[tuple[str, str], set[Any]] = {}
    for _, system_id, benchmark, scenario in found:
        grouped.setdefault((system_id, benchmark), set()).add(scenario)
    return grouped
