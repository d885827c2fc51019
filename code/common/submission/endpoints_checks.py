"""The toolkit's checks of an endpoints tree (submission/endpoints_tree.py): what the v6.1 checker reads of one
(its endpoints parser, then its performance, accuracy and measurements checks with `is_endpoints_submission`), with
the file and the fix named.

- config.yaml, performance/result_summary.json and accuracy/accuracy_results.json present and readable;
- the seeds of config.yaml the round's (`seeds_check`: settings.runtime.dataloader_random_seed is the
  sample_index_rng_seed, scheduler_random_seed the schedule_rng_seed), and min_duration_ms at least the round's
  (`min_duration_check`); a test run's shortened duration is a warning with --allow_test_runs;
- the run complete, every issued sample completed and none failed;
- an accuracy score of the accuracy data set, over the round's accuracy sample count (a test run's subset is a
  warning with --allow_test_runs). The checker compares no endpoints figure with a target except
  qwen3-vl's; the toolkit gates the figures when the run is made (the run's record), not here;
- the accuracy folder's extra files where the round asks them (wan's videos/: `extra_files_check`);
- the client's own TEST04 audit (`audit/audit_output_caching_test.json`, passed) where the round asks TEST04 of the
  benchmark (main.py's compliance_endpoints_check: wan).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .checker_rules import (ERROR, ScenarioContext, check_artefacts, check_measurements, check_scenario,
                            read_json_object)
from .endpoints_tree import ACCURACY, AUDIT, CLIENT_AUDIT_TESTS, CONFIG, PERFORMANCE


def _again(ctx: ScenarioContext, accuracy: bool = False) -> str:
    """The command that makes this folder's run again on the endpoints client, then stages it."""
    mode = "AccuracyOnly" if accuracy else "PerformanceOnly"
    return f"run {ctx.harness(f' --harness_type=endpoints --test_mode={mode}')} then make stage_results"


def is_endpoints_tree(folder: Path) -> bool:
    """A scenario folder of the client's reports (what the checker's loader takes for one: no LoadGen logs)."""
    return (folder / CONFIG).is_file() or (folder / PERFORMANCE[0] / PERFORMANCE[1]).is_file()


def _config(ctx: ScenarioContext) -> dict[str, Any] | None:
    path, again = ctx.folder / CONFIG, _again(ctx)
    try:
        data = yaml.safe_load(path.read_text())
    except FileNotFoundError:
        ctx.report(ERROR, path, f"{CONFIG} is missing (the checker reads the seeds and duration from it); {again}.")
        return None
    except (OSError, yaml.YAMLError) as error:
        ctx.report(ERROR, path, f"{CONFIG} cannot be read ({error}); {again}.")
        return None
    return data if isinstance(data, dict) else {}


def _runtime(config: dict[str, Any]) -> dict[str, Any]:
    settings = config.get("settings") if isinstance(config.get("settings"), dict) else {}
    runtime = settings.get("runtime") if isinstance(settings.get("runtime"), dict) else {}
    return runtime


def check_any_scenario(ctx: ScenarioContext) -> None:
    """An endpoints tree's checks where the folder is one, LoadGen's (checker_rules.check_scenario) otherwise."""
    if is_endpoints_tree(ctx.folder):
        check_endpoints_scenario(ctx)
        check_measurements(ctx, user_conf=False)
    else:
        check_scenario(ctx)


def check_endpoints_scenario(ctx: ScenarioContext) -> None:
    config, again = _config(ctx), _again(ctx)
    if config is not None:
        runtime, seeds = _runtime(config), ctx.rules.seeds
        for key, want, name in (("dataloader_random_seed", seeds.sample_index_rng_seed, "sample_index_rng_seed"),
                                ("scheduler_random_seed", seeds.schedule_rng_seed, "schedule_rng_seed")):
            if runtime.get(key) != want:
                ctx.report(ERROR, ctx.folder / CONFIG, f"settings.runtime.{key} is {runtime.get(key)!r}, not the "
                                                       f"round's {name} {want} (the checker's seeds_check); "
                                                       f"{again}.")
        duration = runtime.get("min_duration_ms")
        if not isinstance(duration, int) or duration < ctx.rules.min_duration_ms:
            ctx.report(ctx.relaxed, ctx.folder / CONFIG,
                       f"settings.runtime.min_duration_ms is {duration!r}, below the round's "
                       f"{ctx.rules.min_duration_ms} (the checker's min_duration_check; a test run's); {again}.")
    summary_path = ctx.folder / PERFORMANCE[0] / PERFORMANCE[1]
    summary = read_json_object(ctx.report, summary_path, again) if summary_path.is_file() else None
    if summary is None and not summary_path.is_file():
        ctx.report(ERROR, summary_path, f"{PERFORMANCE[1]} is missing; {again}.")
    if summary is not None:
        issued, completed, failed = (summary.get(k) for k in ("n_samples_issued", "n_samples_completed",
                                                               "n_samples_failed"))
        if summary.get("state") != "complete" or failed != 0 or completed != issued:
            ctx.report(ERROR, summary_path, f"the client's run is not a complete one (state {summary.get('state')!r}, "
                                            f"{completed} of {issued} samples completed, {failed} failed); "
                                            f"{again}.")
    _check_accuracy(ctx)
    _check_audit(ctx)


def _check_audit(ctx: ScenarioContext) -> None:
    tests = ctx.benchmark.checked_compliance_tests if ctx.benchmark is not None else ()
    for test in (t for t in tests if t in CLIENT_AUDIT_TESTS):
        path = ctx.folder / AUDIT / f"audit_{CLIENT_AUDIT_TESTS[test]}.json"
        fix = (f"the client runs it after the performance phase of a performance test on the endpoints harness (the "
               f"YAML's audit block, test: {CLIENT_AUDIT_TESTS[test]}); {_again(ctx)}")
        if not path.is_file():
            ctx.report(ERROR, path, f"{path.name} is missing: main.py asks the client's {test} audit of an endpoints "
                                    f"tree of this benchmark; {fix}.")
            continue
        verdict = read_json_object(ctx.report, path, fix)
        if verdict is not None and (verdict.get("test") != CLIENT_AUDIT_TESTS[test] or verdict.get("passed") is not True):
            ctx.report(ERROR, path, f"{path.name} is not a passed {CLIENT_AUDIT_TESTS[test]} audit (test "
                                    f"{verdict.get('test')!r}, passed {verdict.get('passed')!r}); {fix}.")


def _check_accuracy(ctx: ScenarioContext) -> None:
    path, again = ctx.folder / ACCURACY[0] / ACCURACY[1], _again(ctx, accuracy=True)
    if not path.is_file():
        ctx.report(ERROR, path, f"{ACCURACY[1]} is missing (no accuracy run on the client was staged); {again}.")
        return
    results = read_json_object(ctx.report, path, again)
    if results is None:
        return
    entries = [e for e in results.get("accuracy_scores") or () if isinstance(e, dict)
               and e.get("dataset_type", "accuracy") == "accuracy"]
    if not entries or entries[0].get("score") is None:
        ctx.report(ERROR, path, f"{ACCURACY[1]} holds no accuracy score of an accuracy data set (the checker's "
                                f"accuracy_score); {again}.")
        return
    wanted = ctx.benchmark.accuracy_samples_for(ctx.scenario) if ctx.benchmark is not None else None
    scored = sum(int(e.get("total_samples") or 0) for e in entries)
    if wanted is not None and scored != wanted:
        ctx.report(ctx.relaxed, path, f"the accuracy run scored {scored} samples, not the round's {wanted} (a test "
                                      f"run's subset); {again}.")
    # main.py's extra_files_check reads accuracy/ of an endpoints tree as of a LoadGen one (wan's videos/).
    for folder, names in (ctx.benchmark.accuracy_artefacts.items() if ctx.benchmark is not None else ()):
        check_artefacts(ctx, path.parent / folder, names, wanted is None or scored == wanted,
                         again)
