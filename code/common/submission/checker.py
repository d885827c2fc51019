"""The toolkit's own submission checker: an exported tree against one rules round.

It gives the verdict of the round's official checkers (tools/submission/submission_checker/main.py and
submission_checker_old.py with `--version v6.1`): an error wherever either rejects the tree or crashes on it,
nothing where both accept it. Layout, tree hygiene, systems/<system>.json and the scenario set of each benchmark
here; each results scenario folder in checker_rules.py. Every number comes from the RulesRound. It never raises on
a malformed tree: whatever it cannot read is a finding on that file, with the make target or field that fixes it.
Beside the official verdict, the toolkit's own integrity checks (cross_checks.py) refuse a tree whose files disagree
with each other or with the run (an edited summary or accuracy.txt, a damaged accuracy log, a compliance verdict its
logs do not give: compliance_evidence.py), which the official checkers would accept; their findings say so.
"""
from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

from ..constants import AccuracyTarget, Scenario, SystemType
from ..paths import CALIBRATION_DOC, COMPLIANCE_DIRS, DOCUMENTATION_DIR, RESULTS_DIR, SRC_DIR, SYSTEMS_DIR, Paths
from ..rules.schema import BenchmarkRules, RulesRound
from .checker_rules import (ERROR, WARNING, ScenarioContext, as_int, harness_command, is_falsy,
                            read_json_object)
from .compliance_evidence import check_compliance_evidence
from .cross_checks import TreeSources, check_integrity
from .endpoints_checks import check_any_scenario
from .system_json import COUNT_FIELDS, STATUSES, TEXT_FIELDS

DIVISIONS = ("closed", "open")
MAX_FILE_BYTES = 50 * 1024 * 1024   # the old checker refuses bigger files
ROOT_FILE_SUFFIXES = (".md", ".pdf")


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
    """Only the exact spellings the checkers accept ("Edge" or "datacenter, edge" crash main.py)."""
    return SystemType.from_json(value)


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


def check_submission(root: Path, rules: RulesRound, allow_test_runs: bool = False,
                     paths: Paths | None = None) -> CheckReport:
    """Findings of the official rules and of the toolkit's own integrity checks (cross_checks.py). With `paths`,
    the integrity checks also read the toolkit's folders: the full accuracy logs truncate_results backed up, the
    staging tree, and the data sets, to re-score each accuracy.txt."""
    root = Path(root)
    sink = _Sink(root)
    sources = TreeSources(root, paths)
    checked = 0
    if not root.is_dir():
        sink(ERROR, root, "the submission tree does not exist; run make export_submission.")
        return CheckReport(tuple(sink.findings), 0)
    _check_hygiene(sink, root)
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
            checked += _check_submitter(sink, rules, submitter, allow_test_runs, sources)
    _check_stray_evidence(sink, root)
    return CheckReport(tuple(sink.findings), checked)


def _check_stray_evidence(sink: _Sink, root: Path) -> None:
    """Compliance folders anywhere but in a results scenario folder (<division>/<submitter>/results/<system>/
    <benchmark>/<scenario>/TEST0x), where neither the checkers nor the toolkit verify them."""
    for division in (d for d in root.iterdir() if d.is_dir() and d.name in DIVISIONS):
        for folder in sorted(division.rglob(COMPLIANCE_DIRS)):
            parts = folder.relative_to(division).parts
            if (len(parts) == 6 and parts[1] == RESULTS_DIR) or SRC_DIR in parts[1:2] \
                    or any(fnmatch(part, COMPLIANCE_DIRS) for part in parts[:-1]):
                continue   # in place (checked there), the code's copy, or inside a compliance folder
            sink(ERROR, folder, f"{folder.name} lies outside a results/<system>/<benchmark>/<scenario>/ folder, where "
                                f"nothing verifies it; remove it (make stage_compliance puts each test in its "
                                f"scenario folder) and run make export_submission again.")


def _check_hygiene(sink: _Sink, root: Path) -> None:
    """The old checker's tree rules: no hidden, empty, cache or oversized entries, no names with spaces, no
    links that lead nowhere, and only .md/.pdf files beside the division folders."""
    fix = "remove it and run make export_submission again"
    for entry in sorted(root.iterdir()):
        if entry.is_file() and not entry.name.startswith(".") and not entry.name.endswith(ROOT_FILE_SUFFIXES):
            sink(ERROR, entry, f"{entry.name} lies beside the division folders, where only .md and .pdf files may; "
                               f"{fix}.")
    for path in sorted(root.rglob("*")):
        name = path.name
        if name.startswith("."):
            sink(ERROR, path, f"{name} is hidden, and a submission may hold no hidden files or folders; {fix}.")
        elif " " in name:
            sink(ERROR, path, f"{name!r} has a space in its name, which the official checker refuses; rename it.")
        elif name == "__pycache__":
            sink(ERROR, path, f"{name}/ is a cache; {fix}.")
        elif path.is_symlink() and not path.exists():
            sink(ERROR, path, f"{name} is a link to nothing; {fix}.")
        elif path.is_symlink():
            sink(ERROR, path, f"{name} is a link, and a submission holds files, not links to someone's disk (the "
                              f"export copies them); {fix}.")
        elif path.is_dir() and not any(path.iterdir()):
            sink(ERROR, path, f"{name}/ is empty, and the official checker refuses empty folders; {fix}.")
        elif path.is_file() and path.stat().st_size > MAX_FILE_BYTES:
            sink(ERROR, path, f"{name} is {path.stat().st_size} bytes, over the {MAX_FILE_BYTES} bytes a file may "
                              f"have; {fix} (accuracy logs: make truncate_results).")
    for division in (d for d in root.iterdir() if d.is_dir() and d.name in DIVISIONS):
        for entry in sorted(division.iterdir()):
            if entry.is_file() and not entry.name.startswith("."):
                sink(ERROR, entry, f"{entry.name} lies in {division.name}/ outside a submitter folder; {fix}.")


def _check_submitter(sink: _Sink, rules: RulesRound, folder: Path, allow_test_runs: bool,
                     sources: TreeSources) -> int:
    division = folder.parent.name
    if not (folder / SYSTEMS_DIR).is_dir():
        sink(ERROR, folder / SYSTEMS_DIR, f"{SYSTEMS_DIR}/ is missing; write one systems/<system>.json per results "
                                        "system (make export_submission).")
    src = folder / SRC_DIR
    try:
        has_src = src.is_dir() and any(src.iterdir())
    except OSError:
        has_src = False
    if not has_src:
        sink(ERROR, src, "src/ is missing or empty; copy the implementation code into it (make export_submission).")
    if division == "closed" and not (folder / DOCUMENTATION_DIR / CALIBRATION_DOC).is_file() \
            and not (folder / CALIBRATION_DOC).is_file():
        sink(ERROR, folder / DOCUMENTATION_DIR / CALIBRATION_DOC,
             "calibration.md is missing, which the closed division requires; write it (how weights were quantized "
             "and calibrated) and re-run make export_submission.")
    results = folder / RESULTS_DIR
    if not results.is_dir():
        sink(ERROR, results, "results/ is missing; run make stage_results then make export_submission.")
        return 0
    checked = 0
    systems = sink.subdirs(results)
    for described in sorted((folder / SYSTEMS_DIR).glob("*.json")):
        if described.stem not in {s.name for s in systems}:
            sink(ERROR, described, f"{described.name} describes a system with no results/{described.stem}/ folder; "
                                   f"remove it or stage that system's results (make stage_results).")
    for system in systems:
        system_type = _check_system_json(sink, rules, folder, system.name)
        for bench_dir in sink.subdirs(system):
            checked += _check_benchmark(sink, rules, division, bench_dir, system_type, allow_test_runs, sources)
    return checked


def _check_system_json(sink: _Sink, rules: RulesRound, folder: Path, system: str) -> SystemType | None:
    """SystemCheck of main.py and the old checker's system description checks; the system type when usable."""
    path = folder / SYSTEMS_DIR / f"{system}.json"
    where = f"{SYSTEMS_DIR}/{system}.json"
    overrides = f"{where.removesuffix('.json')}.overrides.json of the toolkit and run make generate_conf_files " \
                f"stage_results export_submission"
    data = read_json_object(sink, path, f"write {where} describing the system of results/{system}")
    if data is None:
        return None
    for name in rules.system_json_fields:
        if name not in data:
            sink(ERROR, path, f"field {name} is missing; add it to {where}.")
    for name in rules.system_json_meaningful_fields:
        value = data.get(name)
        if name in data and is_falsy(value):
            shown = "empty" if value in ("", None) else \
                f"{value!r}, which the checkers read as not filled in (write numbers as strings: \"0\")"
            sink(ERROR, path, f"field {name} is {shown}; set it in {overrides}.")
    for name in COUNT_FIELDS:
        value = data.get(name)
        if not is_falsy(value) and (isinstance(value, bool) or as_int(value) is None
                                    or str(as_int(value)) != str(value).strip()):
            sink(ERROR, path, f"field {name} is {value!r}, not a whole number, and main.py fails on it; set it to "
                              f"the count (\"0\" for none) in {overrides}.")
    for name in TEXT_FIELDS:
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            sink(ERROR, path, f"field {name} is {value!r}, not text, and the old checker fails on it; write it as a "
                              f"string in {overrides}.")
    division, submitter = data.get("division"), data.get("submitter")
    if not is_falsy(division) and division != folder.parent.name:
        sink(ERROR, path, f"field division is {division!r} but the folder is {folder.parent.name!r}; set division "
                          f"to {folder.parent.name!r} in {where}.")
    if not is_falsy(submitter) and str(submitter).lower() != folder.name.lower():
        sink(ERROR, path, f"field submitter is {submitter!r} but the folder is {folder.name!r}; set submitter to "
                          f"{folder.name!r} in {where}.")
    status = data.get("status")
    if not is_falsy(status) and str(status).strip().lower() not in STATUSES:
        sink(ERROR, path, f"field status is {status!r}; set it to one of {', '.join(STATUSES)} in {where}.")
    if "is_network" in data:
        sink(ERROR, path, f"field is_network is {data['is_network']!r}; the checkers misread it outside the network "
                          f"division (a JSON boolean crashes the old one, \"false\" makes main.py ask for the "
                          f"network fields): remove it from {where}.")
    system_type = parse_system_type(data.get("system_type"))
    if system_type is None and not is_falsy(data.get("system_type")):
        spellings = ", ".join(SystemType.json_spellings())
        sink(ERROR, path, f"field system_type is {data.get('system_type')!r}, which the official checkers refuse "
                          f"(main.py crashes on it); set it to exactly one of {spellings} in {overrides}.")
    return system_type


def _scenario_of(name: str) -> Scenario | None:
    """Scenario folders as the checkers read them: the round's spelling or all lower case."""
    return next((s for s in Scenario if name in (s.value, s.value.lower())), None)


def _check_benchmark(sink: _Sink, rules: RulesRound, division: str, folder: Path, system_type: SystemType | None,
                     allow_test_runs: bool, sources: TreeSources) -> int:
    bench = resolve_benchmark(rules, folder.name)
    if bench is None:
        sink(ERROR, folder, f"benchmark folder {folder.name!r} is not a {rules.version} model; rename it to one of "
                            f"{', '.join(rules.all_models)} or remove it.")
        return 0
    if bench.rules is None:
        sink(WARNING, folder, f"the toolkit's {rules.version} rules tables do not describe {folder.name}, so its "
                              f"sample counts, accuracy, required scenarios and compliance were not checked; add it "
                              f"to code/common/rules to check them.")
    elif bench.rules.official_checker_defect:
        sink(WARNING, folder, f"{bench.rules.official_checker_defect}; the toolkit follows main.py here, so expect "
                              f"the old checker's verdict to differ, and point reviewers to this known defect.")
    if bench.rules is not None and system_type is not None and not bench.rules.allows(system_type):
        suites = " and ".join(t.value for t in bench.rules.required_scenarios)
        verdicts = _not_in_suite_verdicts(division, folder.name, system_type)
        sink(ERROR, folder, f"{folder.name} is not in the {rules.version} {system_type.value} suite (the round has it "
                            f"for {suites} systems only): {verdicts}; set system_type in "
                            f"systems/{folder.parent.name}.overrides.json to a type whose suite holds it, or remove "
                            f"{folder.name} from the submission.")
        return 0
    present: set[Scenario] = set()
    for scenario_dir in sink.subdirs(folder):
        scenario = _scenario_of(scenario_dir.name)
        if scenario is None:
            sink(ERROR, scenario_dir, f"{scenario_dir.name!r} is not a scenario folder; rename it to one of "
                                      f"{Scenario.choices_text()} or remove it.")
            continue
        present.add(scenario)
        ctx = ScenarioContext(sink, rules, division, scenario_dir, scenario, bench.key, bench.rules, bench.target,
                              allow_test_runs, system_type)
        try:
            check_any_scenario(ctx)
        except Exception as exc:  # noqa: BLE001 - a malformed tree must give a finding, never a traceback
            sink(ERROR, scenario_dir, f"the checker could not read this folder ({type(exc).__name__}: {exc}); "
                                      f"regenerate it with make stage_results.")
        try:
            check_integrity(ctx, sources)
            check_compliance_evidence(ctx, sources)
        except Exception as exc:  # noqa: BLE001 - likewise
            sink(ERROR, scenario_dir, f"the integrity checks could not read this folder ({type(exc).__name__}: "
                                      f"{exc}); regenerate it with make stage_results.")
    if bench.rules is not None and system_type is not None:
        _check_scenario_set(sink, rules, division, folder, bench, system_type, present)
    return len(present)


def _not_in_suite_verdicts(division: str, name: str, system_type: SystemType) -> str:
    """What the official checkers do with a benchmark outside the system type's suite, as they were seen to: the old
    checker rejects it in every division ("invalid model"); main.py looks the suite up only in the closed (and
    network) division, where it crashes on the missing scenario list, and accepts it in the open one."""
    old = f"submission_checker_old.py rejects it (\"has an invalid model {name}, system_type={system_type.value}\")"
    if division in ("closed", "network"):
        return f"{old} and main.py crashes on it (it finds no scenario list for {name})"
    return (f"{old}; main.py accepts it in the {division} division, where it does not look up the suite, and this "
            f"checker follows the stricter verdict")


def _check_scenario_set(sink: _Sink, rules: RulesRound, division: str, folder: Path, bench: BenchmarkFolder,
                        system_type: SystemType, present: set[Scenario]) -> None:
    """Loader.check_scenarios of main.py (closed: one missing or extra scenario folder fails the benchmark, and an
    LLM with Server and Interactive optional needs one of them) and the old checker (closed: missing is an error;
    open: nothing is required)."""
    assert bench.rules is not None
    several = len(bench.rules.submission_names) > 1
    closed = division in ("closed", "network")
    allowed = bench.rules.allowed_scenarios(system_type)
    for scenario in sorted(present - set(allowed), key=lambda s: s.value):
        if closed:
            sink(ERROR, folder / scenario.value,
                 f"{scenario.value} is neither required nor optional for {bench.rules.submission_names[bench.target]} "
                 f"on a {system_type.value} system, and the official checkers reject the benchmark with it in the "
                 f"closed division; remove the folder (it may stay in the open division).")
    for scenario in bench.rules.required_scenarios.get(system_type, ()):
        if scenario in present:
            continue
        command = harness_command(bench.key, scenario, bench.target, several)
        level = ERROR if closed else WARNING
        consequence = ("the official checkers reject the whole benchmark without it" if closed
                       else "the open division accepts the benchmark without it")
        sink(level, folder / scenario.value,
             f"{scenario.value} is required for system_type {system_type.value} but missing ({consequence}); run "
             f"{command} then make stage_results{_inference_hint(rules, scenario, present, system_type)}.")
    one_of = bench.rules.required_one_of.get(system_type, ())
    if closed and one_of and not present & set(one_of):
        choices = " or ".join(s.value for s in one_of)
        commands = " or ".join(harness_command(bench.key, s, bench.target, several) for s in one_of)
        sink(ERROR, folder, f"{folder.name} on a {system_type.value} system needs one of {choices} in the closed "
                            f"division and has neither (the official checkers reject the benchmark without one); "
                            f"run {commands}, then make stage_results.")


def _inference_hint(rules: RulesRound, missing: Scenario, present: set[Scenario], system_type: SystemType) -> str:
    """How the rules let an edge system fill the folder from a scenario it has (stage_results --infer_scenarios)."""
    if not system_type.includes_edge:
        return ""
    sources = [logged for logged, folder in rules.inferable_scenarios if folder is missing and logged in present]
    if not sources:
        return ""
    return (f", or fill it from the {sources[0].value} run (make stage_results RUN_ARGS=\"--infer_scenarios\"), "
            f"which the round accepts for an edge system")

