"""``mitool toy`` (run, sweep, plot, demo): thin click shells over :mod:`mitool.toy`.

Lists are comma-separated. The choices and their help come from the registries:
:data:`mitool.bounds.BOUNDS` (with each bound's summary), :data:`mitool.critics.NAMES`,
:data:`mitool.tasks.TRANSFORMS`; the defaults from :class:`mitool.toy.config.ToySettings`. A bad value
raises :class:`mitool.checks.ParameterError` naming the Python parameter, which the friendly group
prints as one line with the option of the same Python name (``--batch-size must be ...``), exit 2.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import click

from mitool import bounds, critics, tasks
from mitool.cli.common import check_device, log_line, parse_list, progress_reporter, resumable_run
from mitool.cli.errors import FriendlyGroup
from mitool.progress import Progress
from mitool.runner import Launch
from mitool.runtime import set_threads_to_free_cores
from mitool.toy import plots, study
from mitool.toy.config import DEFAULT_ALPHA, MAX_NEGATIVES, ToySettings

__all__ = ["toy"]

DEFAULTS = ToySettings()
DEMO_ESTIMATORS = ("infonce", "eqco", "dcl", "nwj")
DEMO_CRITICS = ("separable", "cosine")
DEMO_NEGATIVES = (4, 16, 64, 256, 1024)
DEMO_STEPS_PER_STAGE = 150


def _listing(names: tuple[str, ...] | list[str]) -> str:
    return ", ".join(names)


def _bound_help() -> str:
    summaries = "; ".join(f"{name}: {bound.summary}" for name, bound in bounds.BOUNDS.items())
    return f"Comma-separated bounds to train, of: {summaries}."


def _option(flag: str, default: object, help: str, name: str | None = None) -> Callable:
    """An option shown with its default; its type is the default's (int, float or text)."""
    declarations = (flag, name) if name else (flag,)
    return click.option(*declarations, default=default, show_default=True, help=help)


def _apply(options: list[Callable], function: Callable) -> Callable:
    for option in reversed(options):
        function = option(function)
    return function


_FORMAT = _option(
    "--format",
    "png",
    f"Figure format, one of {_listing(plots.FORMATS)} (pdf and svg are vector).",
    "file_format",
)
_QUIET = click.option("--quiet", is_flag=True, help="No progress display.")


def _grid_options(function: Callable) -> Callable:
    """What a study varies (options shared by ``toy run`` and ``toy sweep``)."""
    return _apply(
        [
            _option("--estimators", ",".join(DEMO_ESTIMATORS), _bound_help()),
            _option("--alpha", DEFAULT_ALPHA, "EqCo's alpha (> 0), the same for every K: its estimate is "
                    "capped at log(alpha + 1)."),
            _option("--seeds", 1, "Seeds per configuration (>= 1)."),
            _option("--seed", 0, "The first seed (>= 0).", "first_seed"),
        ],
        function,
    )  # fmt: skip


def _settings_options(function: Callable) -> Callable:
    """What every run of a study shares: the fields of ToySettings, under the same Python names."""
    transforms = _listing(("none", *tasks.TRANSFORMS))
    return _apply(
        [
            _option("--dim", DEFAULTS.dim, "Dimension d of x and y (>= 1)."),
            _option("--mi", ",".join(f"{v:g}" for v in DEFAULTS.mi_values),
                    "The staircase: comma-separated true MI of each stage, in nats (>= 0).", "mi_values"),
            _option("--steps-per-stage", DEFAULTS.steps_per_stage, "Training steps per stage (>= 2)."),
            _option("--batch-size", DEFAULTS.batch_size, "Anchors B per step (>= 2)."),
            _option("--lr", DEFAULTS.lr, "Adam's learning rate."),
            _option("--transform", "none", f"Invertible map of each coordinate of y (the MI is unchanged): "
                    f"{transforms}."),
            _option("--embed-dim", DEFAULTS.embed_dim, "Embedding size of the separable and cosine critics."),
            _option("--hidden", DEFAULTS.hidden, "Width of the critics' MLPs."),
            _option("--hidden-layers", DEFAULTS.hidden_layers, "Hidden layers of the critics' MLPs (>= 1)."),
            _option("--temperature", DEFAULTS.temperature, "Temperature of the cosine critic (scores in "
                    "[-1/T, 1/T])."),
            _option("--divergence-threshold", DEFAULTS.divergence_threshold, "A run whose estimate is NaN, "
                    "infinite or beyond this many nats is stopped."),
            _option("--device", DEFAULTS.device, "torch device: cpu, cuda, cuda:1, ..."),
        ],
        function,
    )  # fmt: skip


def _settings(values: dict) -> ToySettings:
    """ToySettings from the options of the same names (``--mi`` parsed as a list)."""
    settings = {field.name: values[field.name] for field in fields(ToySettings)}
    settings["mi_values"] = tuple(parse_list("mi_values", values["mi_values"], float, unique=False))
    return ToySettings(**settings)


def _grid(values: dict) -> study.Grid:
    return study.Grid(
        estimators=tuple(parse_list("estimators", values["estimators"], str)),
        critics=tuple(parse_list("critics", values["critics"], str)),
        negatives=tuple(parse_list("negatives", values["negatives"], int)),
        alpha=values["alpha"],
        seeds=values["seeds"],
        first_seed=values["first_seed"],
    )


def _echo_written(paths: list[Path]) -> None:
    for path in paths:
        click.echo(f"wrote {path}")


@click.group(cls=FriendlyGroup)
def toy() -> None:
    """Train MI critics on correlated Gaussians with a known MI staircase and compare the bounds.

    The default protocol (Poole et al. 2019): d = 20, stages of 2, 4, 6, 8, 10 nats with 4000
    steps each, fresh samples every step, batch 64, Adam lr 5e-4, separable critic with 256-wide
    ReLU MLPs and a 32-dim embedding. K negatives per anchor: K <= B-1 takes K other rows of the
    batch; K >= B scores every anchor against a shared pool of K fresh samples of p(y).
    """


@toy.command("run")
@_grid_options
@_settings_options
@_option("--critic", "separable", f"The critic, one of {_listing(critics.NAMES)}.", "critics")
@_option("--negatives", "63", f"K, negatives per anchor (1 to {MAX_NEGATIVES}).")
@_option("--out", "runs/toy-run", "Output directory.")
@_FORMAT
@_QUIET
def run_command(out: str, file_format: str, quiet: bool, **values) -> None:
    """One configuration (one critic, one K, the given bounds and seeds) over the staircase.

    Writes OUT/curves.csv (run, estimator, critic, negatives, alpha, seed, step, true_mi, estimate),
    OUT/summary.csv, OUT/staircase.FORMAT and OUT/config.json.
    """
    set_threads_to_free_cores()
    settings, grid = _settings(values), _grid(values)
    check_device(settings.device)
    plots.check_format(file_format)
    out_path = Path(out)
    with Progress(settings.total_steps, "toy run", enabled=not quiet) as bar:
        study.run(out_path, grid, settings, progress=progress_reporter(bar), log=log_line)
    written = plots.redraw(out_path, file_format)
    _echo_written([out_path / "curves.csv", out_path / "summary.csv", *written, out_path / "config.json"])


def _run_sweep(out: str, grid: study.Grid, settings: ToySettings, quiet: bool, file_format: str) -> None:
    """Run the sweep; on SIGINT or SIGTERM say which cells are saved and how to resume, then exit
    with 128 + the signal's number."""
    check_device(settings.device)
    plots.check_format(file_format)
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
        return
    _echo_written([summary, *plots.redraw(out_path, file_format)])


@toy.command("sweep")
@_grid_options
@_settings_options
@_option("--critic", "separable", f"Comma-separated critics, of: {_listing(critics.NAMES)}.", "critics")
@_option(
    "--negatives", ",".join(str(k) for k in DEMO_NEGATIVES), f"Comma-separated K (1 to {MAX_NEGATIVES})."
)
@_option("--out", "runs/toy-sweep", "Output directory (a rerun with the same options resumes).")
@_FORMAT
@_QUIET
def sweep_command(out: str, file_format: str, quiet: bool, **values) -> None:
    """A grid of bounds x critics x K x seeds over the staircase, resumable, shared under torchrun.

    Each (critic, K) cell trains all its bounds and seeds as one batched model and is saved under
    OUT/cells/ when done; the same command on the same OUT skips finished cells (Ctrl-C or SIGTERM
    says which are saved). Under `torchrun --nproc-per-node N` (RANK, WORLD_SIZE) cell i goes to
    rank i mod N and rank 0 writes OUT/summary.csv (one row per estimator, critic, negatives, alpha,
    true_mi: n_seeds, mean, bias, std, mse, grad_norm, steps_per_s, diverged) and the figures
    bias_vs_k, std_vs_k, gradnorm_vs_k and staircase_<critic>-K<K> (.FORMAT).
    """
    set_threads_to_free_cores()
    _run_sweep(out, _grid(values), _settings(values), quiet, file_format)


@toy.command("demo")
@_option("--out", "runs/demo", "Output directory (a rerun resumes).")
@_option(
    "--steps-per-stage",
    DEMO_STEPS_PER_STAGE,
    "Shortened from the protocol's 4000 to fit in 5 minutes on 2 cores.",
)
@_option("--device", DEFAULTS.device, "torch device.")
@_FORMAT
@_QUIET
def demo_command(out: str, steps_per_stage: int, device: str, file_format: str, quiet: bool) -> None:
    """The default study, one command: bounds infonce, eqco, dcl, nwj with the separable and the
    cosine critic, K = 4, 16, 64, 256, 1024, the 2-4-6-8-10 nat staircase, 3 seeds, steps per stage
    shortened to fit in about 5 minutes on a 2-core CPU.

    The same as `mitool toy sweep --estimators infonce,eqco,dcl,nwj --critic separable,cosine
    --negatives 4,16,64,256,1024 --seeds 3 --steps-per-stage N --out OUT`.
    """
    set_threads_to_free_cores()
    settings = ToySettings(steps_per_stage=steps_per_stage, device=device)
    grid = study.Grid(DEMO_ESTIMATORS, DEMO_CRITICS, DEMO_NEGATIVES, alpha=DEFAULT_ALPHA, seeds=3)
    _run_sweep(out, grid, settings, quiet, file_format)
    figures = ", ".join(f"{name}.{file_format}" for name in ("bias_vs_k", "std_vs_k", "gradnorm_vs_k"))
    click.echo(f"demo results in {Path(out)}: summary.csv, {figures}")


@toy.command("plot")
@click.argument("out", type=click.Path(file_okay=False))
@_FORMAT
@click.option("--quiet", is_flag=True, help="Do not print the figures' paths.")
def plot_command(out: str, file_format: str, quiet: bool) -> None:
    """Redraw every figure of a `toy run` or `toy sweep` directory OUT from its CSV files."""
    set_threads_to_free_cores()
    written = plots.redraw(Path(out), file_format)
    if not quiet:
        _echo_written(written)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(toy())
