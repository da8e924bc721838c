"""``mitool toy`` (run, sweep, plot, demo): thin click shells over :mod:`mitool.toy`.

The options are made from the settings (:class:`mitool.toy.study.Grid`: what a study varies;
:class:`mitool.toy.config.ToySettings`: what its runs share), their names, defaults and help
written there; lists are comma-separated. A bad value raises :class:`mitool.checks.ParameterError`
naming the Python parameter, which the friendly group prints as one line with the option
(``--batch-size must be ...``), exit 2. torch and matplotlib load when a command runs, not for its
help.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import click

from mitool.cli.common import log_line, progress_reporter, resumable_run
from mitool.cli.errors import FriendlyGroup
from mitool.cli.options import given_options, option_specs, settings_options
from mitool.figures import FORMATS
from mitool.toy.config import (
    DEMO_CRITICS,
    DEMO_HIDDEN,
    DEMO_NEGATIVES,
    DEMO_STEPS_PER_STAGE,
    RUN_NEGATIVES,
    ToySettings,
)
from mitool.toy.study import Grid

__all__ = ["toy"]

_SETTINGS = option_specs([("study", ToySettings)])
_SWEEP = option_specs([("sweep", Grid)])
_RUN = option_specs([("run", Grid)], defaults={"negatives": (RUN_NEGATIVES,)})

_FORMAT = click.option(
    "--format", "file_format", default="png", show_default=True,
    help=f"Figure format, one of {', '.join(FORMATS)} (pdf and svg are vector).",
)  # fmt: skip
_QUIET = click.option("--quiet", is_flag=True, help="No progress display.")
_CAPTION = click.option(
    "--caption/--no-caption", default=True, show_default=True,
    help="Write the caption line under each figure (what the lines and bands are, steps per stage, seeds, "
    "batch, d); --no-caption for a paper, whose own caption says it.",
)  # fmt: skip


def _study(context: click.Context, grid: dict, **fixed: object) -> tuple[Grid, ToySettings]:
    """The Grid and ToySettings from the options the user gave (the others at their defaults)."""
    return Grid(**{**given_options(context, grid), **fixed}), ToySettings(**given_options(context, _SETTINGS))


def _echo_written(paths: list[Path]) -> None:
    for path in paths:
        click.echo(f"wrote {path}")


@click.group(cls=FriendlyGroup)
def toy() -> None:
    """Train MI critics on correlated Gaussians with a known MI staircase and compare the bounds.

    The default protocol (Poole et al. 2019): d = 20, stages of 2, 4, 6, 8, 10 nats with 4000
    steps each, fresh samples every step, batch 64, Adam lr 5e-4, separable critic with 256-wide
    ReLU MLPs and a 32-dim embedding. K negatives per anchor: K <= B-1 takes K other rows of the
    batch; K >= B scores every anchor against a shared pool of K fresh samples of p(y). The
    --estimators of these commands are the bounds the critics are trained with (mitool.bounds).
    """


@toy.command("run")
@settings_options(_RUN)
@settings_options(_SETTINGS)
@click.option("--out", default="runs/toy-run", show_default=True, help="Output directory.")
@click.option(
    "--beside", default="", help="Comma-separated estimators of `mitool estimate` (flow, ksg, gaussian, "
    "...) run at each stage on fresh pairs of its law and drawn beside the bounds; default: none.",
)  # fmt: skip
@click.option(
    "--beside-pairs", default=10_000, show_default=True, type=click.IntRange(min=2),
    help="Pairs per stage for the --beside estimators.",
)  # fmt: skip
@_FORMAT
@_CAPTION
@_QUIET
@click.pass_context
def run_command(
    context: click.Context, out: str, beside: str, beside_pairs: int, file_format: str, caption: bool,
    quiet: bool, **_: object,
) -> None:  # fmt: skip
    """One configuration (one critic, one K, the given bounds and seeds) over the staircase.

    Writes OUT/curves.csv (run, estimator, critic, negatives, alpha, seed, step, true_mi, estimate),
    OUT/summary.csv, OUT/staircase.FORMAT and OUT/config.json; with --beside, OUT/beside.csv (each
    estimator's estimate at each stage, its interval open above where it is a lower bound).
    """
    from mitool._infra.progress import Progress
    from mitool.cli.common import check_device, parse_list
    from mitool.figures import check_format
    from mitool.runtime import set_threads_to_free_cores
    from mitool.toy import plots, study
    from mitool.toy.beside import check_beside, estimates_beside, write_beside

    set_threads_to_free_cores()
    grid, settings = _study(
        context, _RUN, negatives=given_options(context, _RUN).get("negatives", (RUN_NEGATIVES,))
    )
    check_device(settings.device)
    check_format(file_format)
    estimators_beside = check_beside(parse_list("beside", beside, str)) if beside else ()
    out_path = Path(out)
    with Progress(settings.total_steps, "toy run", enabled=not quiet) as bar:
        study.run(out_path, grid, settings, progress=progress_reporter(bar), log=log_line)
    extra = []
    if estimators_beside:
        rows = estimates_beside(estimators_beside, settings, beside_pairs, seed=grid.first_seed, log=log_line)
        extra.append(write_beside(out_path, rows))
    written = plots.redraw(out_path, file_format, caption)
    tables = [out_path / "curves.csv", out_path / "summary.csv", *extra]
    _echo_written([*tables, *written, out_path / "config.json"])


def _run_sweep(
    out: str, grid: Grid, settings: ToySettings, quiet: bool, file_format: str, caption: bool = True
) -> list[Path]:
    """Run the sweep in :func:`resumable_run`'s shell; the paths written (none on ranks above 0)."""
    from mitool._infra.progress import Progress
    from mitool._infra.runner import Launch
    from mitool.cli.common import check_device
    from mitool.figures import check_format
    from mitool.toy import plots, study

    check_device(settings.device)
    check_format(file_format)
    out_path = Path(out)
    bars: list[Progress] = []

    def factory(total: int) -> Callable[..., None]:
        bars.append(Progress(total, "toy sweep", enabled=not quiet))
        return progress_reporter(bars[-1])

    with resumable_run("toy sweep", lambda: study.interruption_note(out_path, grid), bars):
        summary = study.sweep(out_path, grid, settings, progress_factory=factory, log=log_line)
    if summary is None:
        launch = Launch.from_environment()
        click.echo(
            f"rank {launch.rank} of {launch.world}: cells done; rank 0 writes {out_path / 'summary.csv'}"
        )
        return []
    written = [summary, *plots.redraw(out_path, file_format, caption)]
    _echo_written(written)
    return written


@toy.command("sweep")
@settings_options(_SWEEP)
@settings_options(_SETTINGS)
@click.option(
    "--out", default="runs/toy-sweep", show_default=True, help="Output directory (a rerun resumes)."
)
@_FORMAT
@_CAPTION
@_QUIET
@click.pass_context
def sweep_command(
    context: click.Context, out: str, file_format: str, caption: bool, quiet: bool, **_: object
) -> None:
    """A grid of bounds x critics x K x seeds over the staircase, resumable, shared under torchrun.

    Each (critic, K) cell trains all its bounds and seeds as one batched model and is saved under
    OUT/cells/ when done; the same command on the same OUT skips finished cells (Ctrl-C or SIGTERM
    says which are saved). Under `torchrun --nproc-per-node N` (RANK, WORLD_SIZE) cell i goes to
    rank i mod N and rank 0 writes OUT/summary.csv (one row per estimator, critic, negatives, alpha,
    true_mi: n_seeds, mean, bias, std, mse, grad_norm, steps_per_s, diverged) and the figures
    bias_vs_k, std_vs_k, gradnorm_vs_k and staircase_<critic>-K<K> (.FORMAT).
    """
    from mitool.runtime import set_threads_to_free_cores

    set_threads_to_free_cores()
    grid, settings = _study(context, _SWEEP)
    _run_sweep(out, grid, settings, quiet, file_format, caption)


@toy.command("demo")
@click.option("--out", default="runs/demo", show_default=True, help="Output directory (a rerun resumes).")
@click.option(
    "--steps-per-stage", type=int, default=DEMO_STEPS_PER_STAGE, show_default=True,
    help="Shortened from the protocol's 4000 to fit `make demo` in 3 minutes on 2 cores.",
)  # fmt: skip
@click.option("--device", default="cpu", show_default=True, help="torch device.")
@click.option(
    "--processes", type=int, default=None,
    help="Processes sharing the cells on a CPU, one torch thread each (the results do not depend on it) "
    "[default: the free cores, at most 4].",
)  # fmt: skip
@_FORMAT
@_CAPTION
@_QUIET
def demo_command(
    out: str, steps_per_stage: int, device: str, processes: int | None, file_format: str, caption: bool,
    quiet: bool,
) -> None:  # fmt: skip
    """The default study, shortened to a few minutes: the bounds infonce, eqco, dcl, nwj with the
    separable and the cosine critic (MLPs 128 wide), K = 4, 16, 64, 256, the 2-4-6-8-10 nat
    staircase, 3 seeds, steps per stage shortened (see --steps-per-stage).

    The same as `mitool toy sweep --critic separable,cosine --negatives 4,16,64,256 --hidden 128
    --seeds 3 --steps-per-stage N --out OUT`, shared by a process per free core; `toy sweep` with its
    defaults runs the full protocol (K up to 1024, 4000 steps per stage).
    """
    from mitool import checks
    from mitool._infra.runner import local_ranks
    from mitool.cli.common import program_words
    from mitool.runtime import free_cores, set_threads_to_free_cores

    count = 1 if device != "cpu" else checks.whole_number("processes", processes or min(free_cores(), 4), 1)
    settings = ToySettings(steps_per_stage=steps_per_stage, device=device, hidden=DEMO_HIDDEN)
    with local_ranks(count, [*program_words(), *sys.argv[1:]]):
        set_threads_to_free_cores()
        grid = Grid(critics=DEMO_CRITICS, negatives=DEMO_NEGATIVES, seeds=3)
        written = _run_sweep(out, grid, settings, quiet, file_format, caption)
    if written:
        figures = ", ".join(f"{name}.{file_format}" for name in ("bias_vs_k", "std_vs_k", "gradnorm_vs_k"))
        click.echo(f"demo results in {Path(out)}: summary.csv, {figures}")


@toy.command("plot")
@click.argument("out", type=click.Path(file_okay=False))
@_FORMAT
@_CAPTION
@click.option("--quiet", is_flag=True, help="Do not print the figures' paths.")
def plot_command(out: str, file_format: str, caption: bool, quiet: bool) -> None:
    """Redraw every figure of a `toy run` or `toy sweep` directory OUT from its CSV files."""
    from mitool.toy import plots

    written = plots.redraw(Path(out), file_format, caption)
    if not quiet:
        _echo_written(written)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(toy())
