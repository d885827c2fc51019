"""The toolkit's own submission checker: an exported tree against one rules round.

Layout, systems/<system>.json, required scenarios here; each results scenario folder in checker_rules.py. Every
number comes from the RulesRound. It never raises on a malformed tree: whatever it cannot read is a finding on
that file, with the make target or field that fixes it.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..constants import AccuracyTarget, Scenario, SystemType
from ..rules.schema import BenchmarkRules, RulesRound
from .checker_rules import (ERROR, WARNING, ScenarioContext, check_scenario, harness_command, is_empty,
                            read_json_object)

DIVISIONS = ("closed", "open")
STATUSES = ("available", "preview", "rdi")
# Counts the official checker requires to be meaningful (truthy). The string "0" is truthy on purpose: a CPU-only
# system writes accelerators_per_node as "0"; the number 0 reads as not filled in.
MEANINGFUL_FIELDS = ("number_of_nodes", "host_processors_per_node", "host_processor_core_count",
                     "accelerators_per_node")


@dataclass(frozen=True)
class Finding:
    level: str      # "error" | "warning"
    path: str       # relative to the checked root
    message: str    # one sentence: what is wrong and the fix


@dataclass(frozen=True)
class CheckReport:
    findings: tuple[Finding, ...]
    checked: int    # results scenario folders checked

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == ERROR)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.level == WARNING)

    @property
    def passed(self) -> bool:
        return not self.errors

    def summary(self) -> str:
        def count(n: int, word: str) -> str:
            return f"{n} {word}{'' if n == 1 else 's'}"
        folders = "results folder" if self.checked == 1 else "results folders"
        return (f"{count(len(self.errors), 'error')}, {count(len(self.warnings), 'warning')} in {self.checked} "
                f"{folders}: {'PASS' if self.passed else 'FAIL'}")

    def text(self) -> str:
        lines = [f"{f.level.upper()} {f.path}: {f.message}" for f in self.findings]
        return "\n".join([*lines, self.summary()])


@dataclass(frozen=True)
class BenchmarkFolder:
    key: str                          # toolkit benchmark name (the folder name for a model without a table)
    rules: BenchmarkRules | None
    target: AccuracyTarget | None


def resolve_benchmark(rules: RulesRound, name: str) -> BenchmarkFolder | None:
    """A results/<system>/<name> folder: a submission name, the toolkit name of a one-target benchmark (the
    alias `resnet50`), or a round model the toolkit has no table for; None when the round does not know it."""
    for key, bench in rules.benchmarks.items():
        for target, submission_name in bench.submission_names.items():
            if name == submission_name or (name == key and len(bench.submission_names) == 1):
                return BenchmarkFolder(key, bench, target)
    return BenchmarkFolder(name, None, None) if name in rules.all_models else None


def parse_system_type(value: Any) -> SystemType | None:
    if not isinstance(value, str):
        return None
    parts = sorted({part.strip().lower() for part in value.split(",") if part.strip()})
    return next((st for st in SystemType if sorted(st.value.split(",")) == parts), None)


class _Sink:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.findings: list[Finding] = []

    def __call__(self, level: str, path: Path, message: str) -> None:
        try:
            rel = path.relative_to(self.root).as_posix()
        except ValueError:
            rel = str(path)
        self.findings.append(Finding(level, rel, message))

    def subdirs(self, path: Path) -> list[Path]:
        try:
            return sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError as exc:
            self(ERROR, path, f"the folder cannot be listed ({exc}); fix its permissions or re-run "
                              f"make export_submission.")
            return []


def check_submission(root: Path, rules: RulesRound, allow_test_runs: bool = False) -> CheckReport:
    root = Path(root)
    sink = _Sink(root)
    checked = 0
    if not root.is_dir():
        sink(ERROR, root, "the submission tree does not exist; run make export_submission.")
        return CheckReport(tuple(sink.findings), 0)
    divisions = sink.subdirs(root)
    if not any(d.name in DIVISIONS for d in divisions):
        sink(ERROR, root, "the tree has no closed/ or open/ division folder; run make export_submission.")
    for division in divisions:
        if division.name not in DIVISIONS:
            sink(ERROR, division, f"division folder {division.name!r} is neither closed nor open; rename or "
                                  f"remove it.")
            continue
        submitters = sink.subdirs(division)
        if not submitters:
            sink(ERROR, division, "the division holds no submitter folder; run make export_submission.")
        for submitter in submitters:
            checked += _check_submitter(sink, rules, submitter, allow_test_runs)
    return CheckReport(tuple(sink.findings), checked)


def _check_submitter(sink: _Sink, rules: RulesRound, folder: Path, allow_test_runs: bool) -> int:
    division = folder.parent.name
    if not (folder / "systems").is_dir():
        sink(ERROR, folder / "systems", "systems/ is missing; write one systems/<system>.json per results "
                                        "system (make export_submission).")
    src = folder / "src"
    try:
        has_src = src.is_dir() and any(src.iterdir())
    except OSError:
        has_src = False
    if not has_src:
        sink(ERROR, src, "src/ is missing or empty; copy the implementation code into it (make export_submission).")
    if division == "closed" and not (folder / "documentation" / "calibration.md").is_file():
        sink(ERROR, folder / "documentation" / "calibration.md",
             "calibration.md is missing, which the closed division requires; write it (how weights were quantized "
             "and calibrated) and re-run make export_submission.")
    results = folder / "results"
    if not results.is_dir():
        sink(ERROR, results, "results/ is missing; run make stage_results then make export_submission.")
        return 0
    checked = 0
    for system in sink.subdirs(results):
        system_type = _check_system_json(sink, rules, folder, system.name)
        for bench_dir in sink.subdirs(system):
            checked += _check_benchmark(sink, rules, division, bench_dir, system_type, allow_test_runs)
    return checked


def _check_system_json(sink: _Sink, rules: RulesRound, folder: Path, system: str) -> SystemType | None:
    """Report what is wrong with systems/<system>.json; return its system type when usable."""
    path = folder / "systems" / f"{system}.json"
    where = f"systems/{system}.json"
    data = read_json_object(sink, path, f"write {where} describing the system of results/{system}")
    if data is None:
        return None
    for name in rules.system_json_fields:
        if name not in data:
            sink(ERROR, path, f"field {name} is missing; add it to {where}.")
        elif is_empty(data[name]):
            sink(ERROR, path, f"field {name} is empty; set it in {where.removesuffix('.json')}.overrides.json of "
                              f"the toolkit and run make generate_conf_files stage_results export_submission.")
    for name in MEANINGFUL_FIELDS:
        value = data.get(name)
        if not is_empty(value) and not value:
            sink(ERROR, path, f"field {name} is {value!r}, which the checker reads as not filled in; set it to "
                              f"the real count in {where} (a CPU-only system writes the string \"0\").")
    for name, expected in (("division", folder.parent.name), ("submitter", folder.name)):
        value = data.get(name)
        if not is_empty(value) and value != expected:
            sink(ERROR, path, f"field {name} is {value!r} but the folder is {expected!r}; set {name} to "
                              f"{expected!r} in {where}.")
    status = data.get("status")
    if not is_empty(status) and str(status).strip().lower() not in STATUSES:
        sink(ERROR, path, f"field status is {status!r}; set it to one of {', '.join(STATUSES)} in {where}.")
    system_type = parse_system_type(data.get("system_type"))
    if system_type is None and not is_empty(data.get("system_type")):
        sink(ERROR, path, f"field system_type is {data.get('system_type')!r}; set it to one of "
                          f"{', '.join(st.value for st in SystemType)} in {where}.")
    return system_type


def _check_benchmark(sink: _Sink, rules: RulesRound, division: str, folder: Path, system_type: SystemType | None,
                     allow_test_runs: bool) -> int:
    bench = resolve_benchmark(rules, folder.name)
    if bench is None:
        sink(ERROR, folder, f"benchmark folder {folder.name!r} is not a {rules.version} model; rename it to one of "
                            f"{', '.join(rules.all_models)} or remove it.")
        return 0
    if bench.rules is None:
        sink(WARNING, folder, f"the toolkit's {rules.version} rules tables do not describe {folder.name}, so its "
                              f"sample counts, accuracy, required scenarios and compliance were not checked; add it "
                              f"to code/common/rules to check them.")
    present: set[Scenario] = set()
    for scenario_dir in sink.subdirs(folder):
        try:
            scenario = Scenario(scenario_dir.name)
        except ValueError:
            sink(ERROR, scenario_dir, f"{scenario_dir.name!r} is not a scenario folder; rename it to one of "
                                      f"{Scenario.choices_text()} or remove it.")
            continue
        present.add(scenario)
        ctx = ScenarioContext(sink, rules, division, scenario_dir, scenario, bench.key, bench.rules, bench.target,
                              allow_test_runs)
        try:
            check_scenario(ctx)
        except Exception as exc:  # noqa: BLE001 - a malformed tree must give a finding, never a traceback
            sink(ERROR, scenario_dir, f"the checker could not read this folder ({type(exc).__name__}: {exc}); "
                                      f"regenerate it with make stage_results.")
    if bench.rules is not None and system_type is not None:
        _check_required(sink, folder, bench, system_type, present)
    return len(present)


def _inferred_from(missing: Scenario, present: set[Scenario], system_type: SystemType,
                   bench: BenchmarkRules) -> Scenario | None:
    """The scenario an edge result may be inferred from (facts: MultiStream from SingleStream, Offline from
    SingleStream/MultiStream); never for a scenario the datacenter category of a datacenter,edge system needs."""
    if "edge" not in system_type.value.split(","):
        return None
    if system_type is SystemType.datacenter_edge and missing in bench.required_scenarios.get(SystemType.datacenter, ()):
        return None
    sources = {Scenario.MultiStream: (Scenario.SingleStream,),
               Scenario.Offline: (Scenario.MultiStream, Scenario.SingleStream)}.get(missing, ())
    return next((s for s in sources if s in present), None)


def _check_required(sink: _Sink, folder: Path, bench: BenchmarkFolder, system_type: SystemType,
                    present: set[Scenario]) -> None:
    assert bench.rules is not None
    several = len(bench.rules.submission_names) > 1
    for scenario in bench.rules.required_scenarios.get(system_type, ()):
        if scenario in present:
            continue
        command = harness_command(bench.key, scenario, bench.target, several)
        source = _inferred_from(scenario, present, system_type, bench.rules)
        # An inferable edge scenario is a warning, not an error and not silence: the official checker accepts the
        # tree and infers the figure, but a measured result is better, and the user should know it is not there.
        if source is not None:
            sink(WARNING, folder / scenario.value,
                 f"{scenario.value} is missing and will be inferred from {source.value} for an edge system; run "
                 f"{command} then make stage_results to report a measured result.")
        else:
            sink(ERROR, folder / scenario.value,
                 f"{scenario.value} is required for system_type {system_type.value} but missing; run {command} then "
                 f"make stage_results.")
