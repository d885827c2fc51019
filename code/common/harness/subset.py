"""Data sets that are not the published one: counted as prepared, labelled a subset everywhere, and refused for a
closed-division run (its figures would read as the whole set's, and it could never be submitted)."""
from __future__ import annotations

from ..errors import EXIT_FAILURE, UserError
from ..records.record import subset_text


def prepared_size(benchmark, model: str, dataset: str, paths) -> int | None:
    """Samples of the data set as it is prepared here (its files counted, nothing decoded); None where it is not
    prepared yet or the benchmark does not count it."""
    return benchmark.prepared_size(model, dataset, paths)


def checked_subset(ctx, benchmark, model_spec, fields) -> tuple[int | None, int | None, str]:
    """(samples prepared, samples published, the subset label or "") of the test's data set; UserError (exit
    status 1) for a closed-division run that is not a --test_run on a set that is not the published one: it could
    never be submitted, and its figures would read as the whole set's."""
    dataset = fields["dataset"]
    published = benchmark.datasets[dataset].sample_count
    prepared = prepared_size(benchmark, fields["model"], dataset, ctx.paths)
    subset = subset_text(prepared, published)
    if subset and model_spec.division == "closed" and not ctx.args.test_run:
        raise UserError(f"{benchmark.name}: the data set {dataset} prepared here is {subset}; a closed-division run "
                        f"needs the whole published set. Bring all of its files (`make download_data "
                        f"RUN_ARGS=\"--benchmarks={benchmark.name} --dataset={dataset}\"` says what it needs), then "
                        f"run `make preprocess_data` again; or add --test_run for a look at the part you have.",
                        exit_code=EXIT_FAILURE)
    return prepared, published, subset
