"""``mitool benchmark``: a thin click shell over :mod:`mitool.benchmark`."""

from __future__ import annotations

from pathlib import Path

import click

from mitool.benchmark.suites import SUITES
from mitool.cli.common import check_device, log_line, parse_list, resumable_run
from mitool.cli.errors import FriendlyCommand
from mitool.figures import FORMATS, check_format

__all__ = ["benchmark"]


@click.command("benchmark", cls=FriendlyCommand)
@click.option(
    "--estimators",
    default="default,ksg,gaussian",
    show_default=True,
    help="Comma-separated estimators: default (mitool estimate's defaults), ksg, gaussian, a bound "
    "(with the separable critic) or <bound>-<critic>, e.g. infonce-concat, smile-separable; each may "
    "add settings of mitool estimate as :key=value, e.g. infonce-concat:hidden=64:batch_size=64.",
)
@click.option(
    "--tasks", default=None, help="Comma-separated task names (see --list-tasks); default: the suite."
)
@click.option(
    "--suite",
    "suite_name",
    default=None,
    help=f"A named suite, one of {', '.join(SUITES)} (default main), or tables: scikit-learn's bundled "
    "data sets against three references (OUT/tables.csv, OUT/tables.md; only --out and --quiet apply).",
)
@click.option("--sizes", default="5000", show_default=True, help="Comma-separated sample sizes n.")
@click.option("--seeds", type=int, default=5, show_default=True, help="Seeds per cell (0 .. N-1).")
@click.option(
    "--dtype", default="float64", show_default=True, type=click.Choice(["float64", "float32"]),
    help="The precision the estimators get the samples in (bmi's own samples are float32).",
)  # fmt: skip
@click.option(
    "--round", "digits", type=click.IntRange(0, 15), default=0, show_default=True,
    help="Round every sample to this many significant digits, as a CSV export might (0: not rounded).",
)  # fmt: skip
@click.option("--out", type=click.Path(file_okay=False), default="runs/benchmark", show_default=True)
@click.option("--device", default="cpu", show_default=True, help="torch device of the neural estimators.")
@click.option(
    "--format", "file_format", default="png", show_default=True, help=f"Figure format: {', '.join(FORMATS)}."
)
@click.option("--list-tasks", is_flag=True, help="Print the tasks of every suite with their MI and stop.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def benchmark(
    estimators: str,
    tasks: str | None,
    suite_name: str | None,
    sizes: str,
    seeds: int,
    dtype: str,
    digits: int,
    out: str,
    device: str,
    file_format: str,
    list_tasks: bool,
    quiet: bool,
) -> None:
    """Estimators x tasks with closed-form MI x sample sizes x seeds.

    Writes OUT/results.csv (task, family, dim_x, dim_y, true_mi, n, seed, estimator, estimate,
    ci_low, ci_high, seconds, dim_z, bias_high), OUT/summary.md (mean error per task and estimator,
    best marked; mean absolute error; tasks of at most 2 nats within max(0.1 nats, 10%); the worst
    task; how often the interval holds the truth on the tasks within target, and [ci_low,
    bias_high] on all tasks, bias_high allowing for the default's downward bias; seconds per
    estimate; errors by family) and per size the figures
    errors_n<N> (each task's error per estimator, a panel per family) and heatmap_n<N> (mean errors).
    Each (estimator, task, size) cell is saved under OUT/cells/ when done; the same command on the
    same OUT skips finished cells (Ctrl-C or SIGTERM says which are saved). Under `torchrun
    --nproc-per-node N` cell i goes to rank i mod N and rank 0 writes the results.
    """
    from mitool._infra.runner import Launch
    from mitool.benchmark import figures, suites
    from mitool.benchmark.run import Precision, plan_from_names
    from mitool.runtime import set_threads_to_free_cores

    set_threads_to_free_cores()
    if list_tasks:
        for name in suites.SUITES:
            for task in suites.suite(name):
                click.echo(f"{name}\t{task.name}\t{task.family}\t{task.dim_x}x{task.dim_y}\t{task.mi:.4f}")
        return
    if suite_name == "tables":
        _tables(out_path=Path(out), quiet=quiet)
        return
    check_device(device)
    check_format(file_format)
    plan = plan_from_names(
        parse_list("estimators", estimators, str),
        parse_list("tasks", tasks, str) if tasks else None,
        suite_name,
        parse_list("sizes", sizes, int),
        seeds,
        Precision(dtype, digits),
    )
    out_path = Path(out)
    launch = Launch.from_environment()
    results = _run(out_path, plan, device, quiet, launch)
    if results is None:
        click.echo(
            f"rank {launch.rank} of {launch.world}: cells done; rank 0 writes {out_path / 'results.csv'}"
        )
        return
    for path in [results, *figures.redraw(out_path, file_format)]:
        click.echo(f"wrote {path}")


def _run(out: Path, plan, device: str, quiet: bool, launch) -> Path | None:
    """run_benchmark with a progress bar over this rank's cells, in :func:`resumable_run`'s shell."""
    from mitool._infra.progress import Progress
    from mitool.benchmark.run import interruption_note, run_benchmark

    bars: list[Progress] = []

    def factory(total: int):
        bars.append(Progress(total, "benchmark", enabled=not quiet))
        return bars[-1].set_done

    with resumable_run("benchmark", lambda: interruption_note(out, plan), bars):
        return run_benchmark(out, plan, factory, log_line, launch, device)


_NOT_FOR_TABLES = ("estimators", "tasks", "sizes", "seeds", "device", "file_format")
"""Options of the closed-form suites that ``--suite tables`` refuses when given."""


def _tables(out_path: Path, quiet: bool) -> None:
    """``--suite tables``: :func:`mitool.benchmark.tables.run_tables` with a progress bar, then its
    summary; without scikit-learn one line and exit 2."""
    from mitool._infra.progress import Progress
    from mitool.benchmark import tables
    from mitool.cli.errors import flag_of

    context = click.get_current_context()
    for name in _NOT_FOR_TABLES:
        if context.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT):
            raise click.UsageError(
                f"{flag_of(context.command, name)} does not apply to --suite tables", ctx=None
            )
    try:
        tables.require_sklearn()
    except tables.SklearnMissing as error:
        raise click.UsageError(str(error), ctx=None) from None
    bars: list[Progress] = []

    def progress(done: int, total: int, label: str) -> None:
        if not bars:
            bars.append(Progress(total, "tables", enabled=not quiet))
        bars[0].set_done(done, label)

    try:
        rows, paths, seconds = tables.run_tables(out_path, progress=progress)
    finally:
        for bar in bars:
            bar.close()
    for path in paths:
        click.echo(f"wrote {path}")
    for line in tables.summary_lines(rows, seconds):
        click.echo(line)
