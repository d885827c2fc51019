"""stage_results and stage_compliance: copy the chosen runs into
build/submission-staging/<division>/<submitter>/results/<system>/<benchmark>/<Scenario>/.

stage_compliance verifies each compliance test again against the runs staged beside it, as the official scripts
compare with the submitted performance/run_1 and accuracy/ logs, so a verdict never refers to another run. TEST06
compares with no run: its sampled responses are checked again with the EOS token ids run_audit_harness recorded,
and staged as compliance/TEST06/run_verification.py lays them out (verify_accuracy.txt, accuracy/). TEST07 and
TEST09 compare with no run either: TEST09's output lengths are verified again from its accuracy log, TEST07's
verdict is staged with the very accuracy log it scored; both as their run_verification.py lays them out
(verify_accuracy.txt or verify_output_len.txt, accuracy/, performance/run_1/).
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..audit.verdicts import ACCURACY_FILES as TEST01_ACCURACY_FILES
from ..audit.evidence import (compliance_record, digest_problems, disagreement, laid_out_logs, laid_out_problems,
                              written_verdict)
from ..audit.test06 import verify_test06
from ..audit.test07 import score_test07
from ..audit.test09 import issued_samples, verify_test09
from ..audit.verdicts import (JUDGED_LOG_SHA256, PART3_FILES, TEST06_ACCURACY_LOG, VERIFIED_AGAINST,
                              read_verified_against, verdict_problems)
from ..audit.verify import (Check, compare_accuracy_logs, read_accuracy_log, verify_performance,
                            verify_test01_accuracy)
from ..benchmark_api import ResponseFormat
from ..constants import AccuracyTarget, Scenario, SystemType
from ..errors import EXIT_FAILURE, UserError
from ..fileio import atomic_dir, copy_atomically, replace_dir, sha256_file
from ..records.loadgen_log import read_detail
from ..records.metadata import RunRecord
from ..records.reproduce import reproduce_command
from ..paths import (ACCURACY_LOG, ACCURACY_TXT, CALIBRATION_DOC, COMPLIANCE_DIRS, COMPLIANCE_RUNS, DETAIL_LOG,
                     DOCUMENTATION_DIR, LOADGEN_LOGS, MEASUREMENTS_JSON, README, RESULTS_DIR, RUN_RECORD, SUMMARY_LOG,
                     SYSTEMS_DIR, USER_CONF, VERIFY_ACCURACY, VERIFY_OUTPUT_LEN, VERIFY_PERFORMANCE, Paths,
                     accuracy_dir, performance_run_dir)
from ..rules import RulesRound
from ..user_files import read_json_file
from .compliance_evidence import compliance_provenance, write_compliance_provenance
from .cross_checks import write_provenance
from .endpoints_tree import audit_files, is_endpoints_run, stage_endpoints_scenario
from .measurements import readme, submission_benchmark
from ..records.runs import Choice, Key
from .system_json import write_system_json
from .truncate import HASH_LINE

Log = Callable[[str], None]
ACCURACY_FILES = (*LOADGEN_LOGS, ACCURACY_TXT)
PERFORMANCE_FILES = (SUMMARY_LOG, DETAIL_LOG)


def _replace_dir(source_files: dict[str, Path], dest: Path) -> None:
    replace_dir(dest, source_files)    # whole or not at all: a full disk midway leaves the folder as it was


def stage_scenario(paths: Paths, rules: RulesRound, submitter: str, key: Key, choice: Choice, log: Log) -> Path:
    system_id, benchmark, scenario = key
    name = submission_benchmark(rules.benchmark(benchmark), choice.performance)
    dest = paths.results_dir(paths.staging, choice.division, submitter, system_id, name, scenario)
    label = f"{system_id} {name} {scenario.value}"
    try:
        return _stage_scenario(paths, dest, label, name, key, choice, log,
                               dict(rules.benchmark(benchmark).accuracy_artefacts),
                               audit_files(rules.benchmark(benchmark).checked_compliance_tests))
    except (UserError, OSError) as error:
        # Never a mix of this run's files and an earlier one's, nor an earlier result kept as if it were this one.
        names = (name, *rules.benchmark(benchmark).submission_names.values())
        removed = unstage_scenario(paths, submitter, system_id, dict.fromkeys(names), scenario)
        if not removed or not isinstance(error, UserError):
            raise
        raise UserError(f"{error} {removed_note(label, removed)}", exit_code=error.exit_code) from error


def _stage_scenario(paths: Paths, dest: Path, label: str, name: str, key: Key, choice: Choice, log: Log,
                    artefacts: Mapping[str, tuple[str, ...]] | None = None, audits: tuple[str, ...] = ()) -> Path:
    """`artefacts`: the folders beside the accuracy logs that accuracy/ carries too (a video benchmark's audit
    videos and captions; folder -> the names it holds), staged where the accuracy run wrote them."""
    artefacts = artefacts or {}
    system_id, benchmark, scenario = key
    performance, accuracy = choice.performance, choice.accuracy
    measured = paths.measurements_dir(system_id, name, scenario)
    if is_endpoints_run(performance):    # the MLCommons endpoints client's reports, not LoadGen's logs
        _refuse_or_label_subsets(label, choice, log)
        _refuse_stale_readme(measured, label, performance)
        return stage_endpoints_scenario(dest, label, performance, accuracy, measured, log, artefacts, audits)
    if not all((measured / f).is_file() for f in (MEASUREMENTS_JSON, USER_CONF, README)):
        raise UserError(f"{measured} is incomplete: run `make generate_conf_files` first.", exit_code=EXIT_FAILURE)
    # Every log this scenario stages is checked before the first copy: a changed one stages nothing of it.
    verify_run_logs(performance, PERFORMANCE_FILES, label, log)
    if accuracy is not None:
        verify_run_logs(accuracy, ACCURACY_FILES, label, log)
    _refuse_or_label_subsets(label, choice, log)

    _refuse_stale_readme(measured, label, performance)

    # The chosen run is staged, always: the same ranking chose the run the audit compares with and the README
    # reproduces, so a run staged earlier gives way to it (and the console says so).
    run_dir = Path(performance.log_dir)
    staged_detail = performance_run_dir(dest) / DETAIL_LOG
    if staged_detail.is_file() and staged_detail.read_bytes() == (run_dir / DETAIL_LOG).read_bytes():
        log(f"{label}: performance run already staged ({run_dir})")
    else:
        if staged_detail.is_file():
            log(f"{label}: replacing the staged performance run with the chosen {run_dir}")
        _replace_dir({f: run_dir / f for f in PERFORMANCE_FILES}, performance_run_dir(dest))
        log(f"{label}: staged performance run {run_dir}")

    if accuracy is not None:
        acc_dir = Path(accuracy.log_dir)
        staged_acc = accuracy_dir(dest) / DETAIL_LOG
        if staged_acc.exists() and staged_acc.read_bytes() == (acc_dir / DETAIL_LOG).read_bytes():
            log(f"{label}: accuracy run already staged ({acc_dir})")   # maybe truncated since: left as it is
        else:
            written = [a for a in artefacts if (acc_dir / a).is_dir()]
            _replace_dir({**{f: acc_dir / f for f in ACCURACY_FILES}, **{a: acc_dir / a for a in written}},
                         accuracy_dir(dest))
            log(f"{label}: staged accuracy run {acc_dir}" + "".join(f" with its {a}/" for a in written))
        write_provenance(dest, accuracy, acc_dir / ACCURACY_LOG)
    for file_name in (MEASUREMENTS_JSON, USER_CONF, README):
        copy_atomically(measured / file_name, dest / file_name)
    return dest


def _refuse_stale_readme(measured: Path, label: str, performance: RunRecord) -> None:
    if (measured / README).is_file() and (measured / README).read_text() != readme(performance):
        raise UserError(f"{measured / README} was written for another configuration than the run chosen for {label} "
                        f"({performance.log_dir}), so its commands would not reproduce it: run "
                        f"`make generate_conf_files` again, then stage.", exit_code=EXIT_FAILURE)


def _refuse_or_label_subsets(label: str, choice: Choice, log: Log) -> None:
    """A run on a set that is not the published data set is never a closed-division result; elsewhere it is staged
    labelled (here, and in the README beside it)."""
    for record in (choice.performance, choice.accuracy):
        subset = record.data.subset if record is not None and record.data is not None else ""
        if not subset:
            continue
        if choice.division == "closed":
            raise UserError(f"{label}: the run in {record.log_dir} read {record.dataset} as {subset}; a closed-"
                            f"division result needs the whole published set. Prepare all of it and run again, or "
                            f"move that run out of the log folders.", exit_code=EXIT_FAILURE)
        log(f"note: {label}: the run in {record.log_dir} read {record.dataset} as {subset}; staged labelled so "
            f"(README.md), its figures are that part's")


def unstage_scenario(paths: Paths, submitter: str, system_id: str, names: Iterable[str],
                     scenario: Scenario) -> list[Path]:
    """Remove what an earlier stage_results staged of this scenario (under each of the submission `names`, in every
    division), so that a refused result leaves nothing of it behind; the folders removed. A system left without
    results loses its systems/<id>.json there too, which the checkers would refuse beside no results."""
    removed = []
    if not paths.staging.is_dir():
        return removed
    for division in sorted(p.name for p in paths.staging.iterdir() if p.is_dir() and not p.name.startswith(".")):
        for name in names:
            folder = paths.results_dir(paths.staging, division, submitter, system_id, name, scenario)
            if not folder.is_dir():
                continue
            shutil.rmtree(folder)
            removed.append(folder)
            results = paths.submitter_root(paths.staging, division, submitter) / RESULTS_DIR
            for parent in (folder.parent, folder.parent.parent):
                if parent.is_dir() and not any(parent.iterdir()):
                    parent.rmdir()
            if not (results / system_id).exists():
                (paths.submitter_root(paths.staging, division, submitter) / SYSTEMS_DIR /
                 paths.system_json(system_id).name).unlink(missing_ok=True)
    return removed


def removed_note(label: str, removed: list[Path]) -> str:
    """What a refusal did to the staging tree, for the line that reports it."""
    folders = ", ".join(str(folder) for folder in removed)
    return (f"The copy of {label} staged earlier ({folders}) was removed, so that no stale result is exported: "
            f"nothing of {label} is staged until it is staged again.")


def verify_run_logs(record: RunRecord, names: tuple[str, ...], label: str, log: Log) -> None:
    """Refuse (UserError, exit status 1) a run whose logs changed after it ran: each LoadGen log against the sha256
    its metadata.json recorded, accuracy.txt against the accuracy it recorded. A run recorded without digests is
    staged with a note."""
    run_dir = Path(record.log_dir)
    fix = f"restore the file or run the test again: {reproduce_command(record)}"
    for name in names:
        if not (run_dir / name).is_file():
            raise UserError(f"{run_dir / name} is missing, so {label} cannot be staged from {run_dir}; {fix}.",
                            exit_code=EXIT_FAILURE)
    digests = record.log_sha256
    unverified = [name for name in names if name in LOADGEN_LOGS and not isinstance(digests.get(name), str)]
    if unverified:
        log(f"note: {label}: {run_dir / RUN_RECORD} records no sha256 of {', '.join(unverified)} (a run recorded "
            f"before log digests were kept), so these are staged unverified")
    for name in names:
        expected = digests.get(name)
        if isinstance(expected, str) and sha256_file(run_dir / name) != expected:
            raise UserError(f"{run_dir / name} changed after the run (its sha256 is not the one {RUN_RECORD} "
                            f"recorded), so {label} is not staged from {run_dir}; {fix}.", exit_code=EXIT_FAILURE)
    recorded = record.accuracy.text if record.accuracy is not None else None
    if ACCURACY_TXT in names and recorded is not None:
        if (run_dir / ACCURACY_TXT).read_text(errors="replace").strip() != recorded.strip():
            raise UserError(f"{run_dir / ACCURACY_TXT} changed after the run ({RUN_RECORD} recorded "
                            f"\"{recorded}\"), so {label} is not staged from {run_dir}; {fix}.",
                            exit_code=EXIT_FAILURE)


def stage_system_files(paths: Paths, division: str, submitter: str, system_id: str, nodes: int = 1,
                       log: Log = print) -> None:
    """systems/<id>.json of this division: the generated description with `division` and `submitter` set to the
    folders it lies in (one system may have results in both divisions), and `number_of_nodes` at least `nodes`,
    the machines its staged runs' inference ran on (the distinct hosts of their endpoints)."""
    root = paths.submitter_root(paths.staging, division, submitter)
    system_json = paths.system_json(system_id)
    if not system_json.is_file():
        raise UserError(f"{system_json} is missing: run `make generate_conf_files` first.", exit_code=EXIT_FAILURE)
    data = read_json_file(system_json, "run `make generate_conf_files` again")
    if not isinstance(data, dict):
        raise UserError(f"{system_json} holds a JSON {type(data).__name__}, not the system description object: run "
                        f"`make generate_conf_files` again.", exit_code=EXIT_FAILURE)
    data.update(division=division, submitter=submitter)
    described = str(data.get("number_of_nodes", "1"))
    if nodes > (int(described) if described.isdigit() else 1):
        log(f"{system_id}: number_of_nodes {nodes} (the hosts of the endpoints its staged runs used; "
            f"{system_json} says {described})")
        data["number_of_nodes"] = str(nodes)
    write_system_json(root / SYSTEMS_DIR / system_json.name, data)
    calibration = paths.calibration_doc
    if calibration.is_file():
        (root / DOCUMENTATION_DIR).mkdir(parents=True, exist_ok=True)
        copy_atomically(calibration, root / DOCUMENTATION_DIR / CALIBRATION_DOC)


def accuracy_target_of(rules: RulesRound, benchmark: str, folder_name: str) -> AccuracyTarget:
    """The accuracy target a results/<system>/<name> folder stands for."""
    names = rules.benchmark(benchmark).submission_names
    return next((target for target, name in names.items() if name == folder_name), next(iter(names)))


# -- scenario inference ---------------------------------------------------------------------------------
def inferable_sources(rules: RulesRound, system_type: SystemType, missing: Scenario,
                      staged: set[Scenario]) -> list[Scenario]:
    """Staged scenarios an edge system may fill the missing folder from, in the rules' order."""
    if not system_type.includes_edge:
        return []
    return [logged for logged, folder in rules.inferable_scenarios if folder is missing and logged in staged]


def infer_scenario(results_dir: Path, source: Scenario, missing: Scenario) -> Path:
    """Copy the staged `source` folder (logs, measurements; no compliance verdicts) into the `missing` one."""
    src = results_dir / source.value
    dest = results_dir / missing.value
    with atomic_dir(dest) as tmp:
        shutil.copytree(src, tmp, ignore=shutil.ignore_patterns(COMPLIANCE_DIRS), dirs_exist_ok=True)
    return dest


# -- compliance ------------------------------------------------------------------------------------------
def full_accuracy_log(paths: Paths, scenario_dir: Path) -> Path:
    """The whole accuracy log of a staged scenario: the staged one, or its backup once truncate_results ran."""
    staged = accuracy_dir(scenario_dir) / ACCURACY_LOG
    marker = accuracy_dir(scenario_dir) / ACCURACY_TXT
    if marker.is_file() and HASH_LINE.search(marker.read_text()):
        return accuracy_dir(paths.full_results / scenario_dir.relative_to(paths.staging)) / ACCURACY_LOG
    return staged


def _logged_scenario(scenario_dir: Path, folder: Scenario) -> Scenario:
    """The scenario the staged logs were run in: the folder's (LoadGen logs an Interactive run as Server), or
    another one when the result is inferred."""
    logged = read_detail(performance_run_dir(scenario_dir)).scenario
    return folder if logged is folder.loadgen else logged


def _verify_accuracy(paths: Paths, source: Path, results_dir: Path, response: ResponseFormat,
                     against: dict[str, Any]) -> tuple[Check, bool, str | None]:
    """(verify_accuracy verdict against the staged accuracy run, whether Part III applies, problem)."""
    staged_log = full_accuracy_log(paths, results_dir)
    if not staged_log.is_file():
        return Check(False, "", ""), False, f"no full accuracy log of the staged run at {staged_log}"
    check = verify_test01_accuracy(compare_accuracy_logs(read_accuracy_log(staged_log),
                                                         read_accuracy_log(accuracy_dir(source) / ACCURACY_LOG),
                                                         response.np_dtype))
    if check.passed:
        return check, False, None
    if not all((accuracy_dir(source) / name).is_file() for name in PART3_FILES):
        return check, False, f"{check.summary}, and no Part III result was computed"
    if against.get("accuracy_log_sha256") != sha256_file(staged_log):
        return check, False, (f"{check.summary}; its Part III result was computed against another accuracy run "
                              f"({against.get('accuracy_log_dir', 'unknown')}) than the staged one")
    return check, True, None


class EvidenceProblem(str):
    """Why a compliance test is refused when its evidence disagrees with its run: a laid-out log is not the one the
    compliance run wrote, or a written verdict is not what its logs give. stage_compliance exits 1 on one."""


def stage_compliance_for(paths: Paths, rules: RulesRound, results_dir: Path, system_id: str, benchmark: str,
                         scenario: Scenario, target: AccuracyTarget, response: ResponseFormat, log: Log,
                         scorer: Any = None) -> list[str]:
    """Verify each TEST0x of this scenario against the staged runs and stage the verdicts that pass; return what
    could not be staged (an EvidenceProblem where the evidence disagrees with its run). A TEST0x staged earlier
    that no longer passes is removed. `scorer`: the Benchmark that scores TEST07 again (get_benchmark(benchmark)
    when None)."""
    problems: list[str] = []
    staged: dict[str, dict[str, Any]] = {}
    bench = rules.benchmark(benchmark)
    logged = _logged_scenario(results_dir, scenario)
    inferred = f" (inferred from {logged.value})" if logged is not scenario else ""
    for test in bench.compliance_tests:
        source = paths.compliance_log_dir(test, system_id, benchmark, logged)
        label = f"{system_id} {benchmark} {scenario.value}{inferred} {test}"
        dest = results_dir / test
        fix = f"make run_audit_harness RUN_ARGS=\"--benchmarks={benchmark} --scenarios={logged.value}\""
        record, problem = _compliance_run(source, label, log)
        if problem is not None:
            pass
        elif rules.compliance_tests[test].checks_output_tokens:
            problem = _stage_tokens(rules, test, source, results_dir, bench, target, response, logged, log, label)
        elif rules.compliance_tests[test].scores_accuracy or rules.compliance_tests[test].checks_output_length:
            problem = _stage_logged(rules, test, source, results_dir, bench, target, response, log, label,
                                    paths=paths, record=record, scorer=scorer or _benchmark(benchmark))
        else:
            problem = _stage_test(paths, rules, test, source, results_dir, bench, target, response, log, label)
        if problem is None:
            staged[test] = compliance_provenance(record, _verified_against(source, lambda _: None))
            continue
        evidence = isinstance(problem, EvidenceProblem)
        if dest.exists():
            shutil.rmtree(dest)
            problem += f"; removed the {test}/ staged earlier"
        division = results_dir.relative_to(paths.staging).parts[0]
        optional = " (optional in the open division)" if division == "open" else \
            " (optional: the official checkers do not ask it of this benchmark)" \
            if test not in bench.checked_compliance_tests else ""
        line = f"{label}: {problem}{optional}; run {fix}"
        problems.append(EvidenceProblem(line) if evidence else line)
    write_compliance_provenance(results_dir, staged)
    return problems


def _benchmark(name: str) -> Any:
    from ..benchmark_api import get_benchmark

    return get_benchmark(name)


def _compliance_run(source: Path, label: str, log: Log) -> tuple[RunRecord | None, str | None]:
    """(the record of the compliance run whose logs `source` lays out, why the test is refused or None): each
    laid-out log a readable file (not a link, not a folder) and against the sha256 that run recorded. Logs whose
    run left no record with their digests cannot be verified and are refused."""
    unusable = laid_out_problems(source)
    if unusable:
        return None, EvidenceProblem("; ".join(message for _, message in unusable))
    logs = laid_out_logs(source)
    if not logs:
        return None, None     # no compliance run: the test's own staging says so
    record = compliance_record(source)
    if record is None:
        return None, EvidenceProblem(f"no record of the compliance run that wrote {source}'s logs ({RUN_RECORD} "
                                     f"under {source / COMPLIANCE_RUNS}, with the sha256 of each log), so they cannot "
                                     f"be verified and are not staged")
    problems = digest_problems(logs, record.log_sha256, str(record.path or record.log_dir))
    if problems:
        return record, EvidenceProblem("; ".join(message for _, message in problems))
    return record, None


def _disagreeing(path: Path, check: Check) -> EvidenceProblem | None:
    """A written verdict file that says otherwise than the verdict derived from its logs (none written: None)."""
    written = written_verdict(path)
    found = disagreement(path, written, check) if written is not None else None
    return EvidenceProblem(found[1]) if found is not None else None


def _verified_against(folder: Path, log: Log) -> dict[str, Any]:
    """Which runs run_audit_harness verified against ({} when unknown: then only what can be verified again from
    the logs counts, never a Part III result)."""
    try:
        return read_verified_against(folder)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        log(f"note: {folder / VERIFIED_AGAINST} cannot be read ({exc}); the test is verified again from its logs, "
            f"and a Part III result in it does not count")
        return {}


def _replace_if_judged_right(tmp: Path, dest: Path, spec, bench, target: AccuracyTarget,
                             rules: RulesRound) -> str | None:
    """Put a compliance folder assembled in `tmp` in place of `dest` when the checkers' judgement of it finds no
    problem; else remove it and return the problems."""
    problems = verdict_problems(tmp, spec, bench, target, rules)
    if problems:
        shutil.rmtree(tmp)
        return "; ".join(problem for _, problem in problems)
    if dest.exists():
        shutil.rmtree(dest)
    tmp.rename(dest)
    return None


def _stage_test(paths: Paths, rules: RulesRound, test: str, source: Path, results_dir: Path, bench,
                target: AccuracyTarget, response: ResponseFormat, log: Log, label: str) -> str | None:
    """Stage one test; the reason it cannot be staged, or None."""
    spec = rules.compliance_tests[test]
    run_1 = performance_run_dir(source)
    if not (run_1 / DETAIL_LOG).is_file() or not (run_1 / SUMMARY_LOG).is_file():
        return "no compliance run"
    against = _verified_against(source, log)
    performance = verify_performance(spec, performance_run_dir(results_dir), run_1)
    same_run = against.get("performance_detail_sha256") == sha256_file(performance_run_dir(results_dir) / DETAIL_LOG)
    if same_run:     # verified against the staged run itself: what it wrote must be what its logs give
        refused = _disagreeing(source / VERIFY_PERFORMANCE, performance)
        if refused is not None:
            return refused
    if not performance.passed:
        return f"against the staged performance run the test fails ({performance.summary})"
    accuracy, part3 = None, False
    if spec.samples_accuracy:
        accuracy, part3, problem = _verify_accuracy(paths, source, results_dir, response, against)
        staged_log = full_accuracy_log(paths, results_dir)
        if accuracy is not None and staged_log.is_file() and \
                against.get("accuracy_log_sha256") == sha256_file(staged_log):
            refused = _disagreeing(source / VERIFY_ACCURACY, accuracy)
            if refused is not None:
                return refused
        if problem is not None:
            return problem
    dest = results_dir / test
    tmp = results_dir / f".{test}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    performance_run_dir(tmp).mkdir(parents=True)
    for name in PERFORMANCE_FILES:
        shutil.copy2(run_1 / name, performance_run_dir(tmp) / name)
    (tmp / VERIFY_PERFORMANCE).write_text(performance.text)
    if accuracy is not None:
        (tmp / VERIFY_ACCURACY).write_text(accuracy.text)
        accuracy_dir(tmp).mkdir()
        for name in sorted(PART3_FILES if part3 else TEST01_ACCURACY_FILES):
            shutil.copy2(accuracy_dir(source) / name, accuracy_dir(tmp) / name)
    problem = _replace_if_judged_right(tmp, dest, spec, bench, target, rules)
    if problem is not None:
        return problem
    reverified = against.get("performance_detail_sha256") not in (None, sha256_file(performance_run_dir(results_dir)
                                                                                    / DETAIL_LOG))
    note = " (verified again against the staged run, which differs from the audited one)" if reverified else ""
    log(f"{label}: staged from {source}{note}: {performance.summary}"
        + (f"; {accuracy.summary}" if accuracy is not None else ""))
    return None


def _stage_tokens(rules: RulesRound, test: str, source: Path, results_dir: Path, bench, target: AccuracyTarget,
                  response: ResponseFormat, scenario: Scenario, log: Log, label: str) -> str | None:
    """Stage TEST06: its accuracy log verified again (run_verification.py's checks) with the EOS token ids
    run_audit_harness recorded (a verdict recorded without them cannot be verified: refused); the reason it cannot
    be staged, or None."""
    spec = rules.compliance_tests[test]
    accuracy_log = source / TEST06_ACCURACY_LOG
    if not accuracy_log.is_file():
        return "no compliance run"
    eos = _verified_against(source, log).get("eos_token_ids")
    if isinstance(eos, list) and eos:
        try:
            check = verify_test06(read_accuracy_log(accuracy_log), scenario, eos, response.np_dtype)
        except (OSError, ValueError) as error:
            return f"its accuracy log cannot be read ({error})"
        refused = _disagreeing(source / VERIFY_ACCURACY, check)
        if refused is not None:
            return refused
        if not check.passed:
            return f"the test fails ({check.summary})"
        text, how = check.text, f"verified again: {check.summary}"
    else:
        return EvidenceProblem(f"{source / VERIFIED_AGAINST} records no EOS token ids to verify {accuracy_log} "
                               f"again, so its verdict cannot be verified and is not staged")
    dest = results_dir / test
    tmp = results_dir / f".{test}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / TEST06_ACCURACY_LOG).parent.mkdir(parents=True)
    (tmp / VERIFY_ACCURACY).write_text(text)
    shutil.copy2(accuracy_log, tmp / TEST06_ACCURACY_LOG)
    problem = _replace_if_judged_right(tmp, dest, spec, bench, target, rules)
    if problem is not None:
        return problem
    log(f"{label}: staged from {source}: {how}")
    return None


def _stage_logged(rules: RulesRound, test: str, source: Path, results_dir: Path, bench, target: AccuracyTarget,
                  response: ResponseFormat, log: Log, label: str, *, paths: Paths | None = None,
                  record: RunRecord | None = None, scorer: Any = None) -> str | None:
    """Stage TEST07 or TEST09 with the compliance run's whole accuracy log and its logs, the verdict derived again
    from them: TEST09's responses counted against the samples the run issued (its detail log) and their output
    lengths measured, TEST07's log scored again by `scorer` (the benchmark) on the data set the compliance run
    (`record`) ran. A written verdict that says otherwise is refused; the reason it cannot be staged, or None."""
    spec = rules.compliance_tests[test]
    accuracy_log = accuracy_dir(source) / ACCURACY_LOG
    if not accuracy_log.is_file():
        return "no compliance run"
    if spec.checks_output_length:
        detail = performance_run_dir(source) / DETAIL_LOG
        issued = issued_samples(read_detail(performance_run_dir(source))) if detail.is_file() else None
        if issued is None:
            return (f"{detail} does not say how many samples the run issued, so its {ACCURACY_LOG} cannot be counted "
                    f"against them")
        try:
            check = verify_test09(read_accuracy_log(accuracy_log), spec.output_token_bounds, response.np_dtype,
                                  issued, spec.accuracy_log_sampling_target)
        except (OSError, ValueError) as error:
            return f"its accuracy log cannot be read ({error})"
        verdict, how = VERIFY_OUTPUT_LEN, f"verified again: {check.summary}"
    else:
        verdict = VERIFY_ACCURACY
        recorded = _verified_against(source, log).get(JUDGED_LOG_SHA256)
        if recorded is not None and recorded != sha256_file(accuracy_log):
            return EvidenceProblem(f"{accuracy_log} is not the log its verdict scored (another one in "
                                   f"{VERIFIED_AGAINST})")
        if record is None:
            return (f"no record of the compliance run ({RUN_RECORD} under {source / COMPLIANCE_RUNS}) names the data "
                    f"set to score its {ACCURACY_LOG} again")
        check = score_test07(scorer, record.model, record.dataset, accuracy_log, paths, spec.accuracy_threshold,
                             spec.score_pattern)
        how = f"scored again: {check.summary}"
    refused = _disagreeing(source / verdict, check)
    if refused is not None:
        return refused
    if not check.passed:
        return f"the test fails ({check.summary}, {accuracy_log})"
    text = check.text
    dest = results_dir / test
    tmp = results_dir / f".{test}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    accuracy_dir(tmp).mkdir(parents=True)
    (tmp / verdict).write_text(text)
    shutil.copy2(accuracy_log, accuracy_dir(tmp) / ACCURACY_LOG)
    run_1 = performance_run_dir(source)
    if all((run_1 / name).is_file() for name in PERFORMANCE_FILES):
        performance_run_dir(tmp).mkdir(parents=True)
        for name in PERFORMANCE_FILES:
            shutil.copy2(run_1 / name, performance_run_dir(tmp) / name)
    problem = _replace_if_judged_right(tmp, dest, spec, bench, target, rules)
    if problem is not None:
        return problem
    log(f"{label}: staged from {source}: {how}")
    return None


def staged_scenarios(paths: Paths, rules: RulesRound, submitter: str) -> list[tuple[Path, str, str, Scenario]]:
    """(results folder, system id, toolkit benchmark, scenario) of everything staged for this submitter."""
    names = {name: bench for bench, r in rules.benchmarks.items() for name in r.submission_names.values()}
    found = []
    for division_dir in sorted(p for p in paths.staging.glob("*") if p.is_dir() and not p.name.startswith(".")):
        for folder in sorted((division_dir / submitter / RESULTS_DIR).glob("*/*/*")):
            system_id, name, scenario = folder.parts[-3:]
            if name in names and scenario in Scenario.__members__:
                found.append((folder, system_id, names[name], Scenario(scenario)))
    return found

