"""``mitool toy`` (run, sweep, plot, demo): thin click shells over :mod:`mitool.toy`.

Lists are comma-separated. Progress bars (with ETA and the current estimate) go to stderr and are
off with --quiet. Bad values raise ValueError in :mod:`mitool.toy`, which the main group prints as one line
``Error: ...`` with exit code 2.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

import click

from mitool.cli.common import check_device, log_line, progress_reporter
from mitool.cli.errors import FriendlyGroup
from mitool.progress import Progress
from mitool.runtime import set_threads_to_free_cores
from mitool.toy import plots, study
from mitool.toy.config import DEFAULT_ALPHA, DIVERGENCE_THRESHOLD, ESTIMATORS, ToySettings, parse_list

__all__ = ["toy"]

DEMO_ESTIMATORS = "infonce,eqco,dcl,nwj"
DEMO_NEGATIVES = "4,16,64,256,1024"
DEMO_STEPS_PER_STAGE = 150


def _study_options(function: Callable) -> Callable:
    """The options that ``toy run`` and ``toy sweep`` share (names that scripts and docs rely on)."""
    options = [
        click.option(
            "--estimators",
            default="infonce,eqco,dcl,nwj",
            show_default=True,
            help=f"Comma-separated bounds to train; any of {', '.join(ESTIMATORS)}.",
        ),
        click.option(
            "--alpha",
            type=float,
            default=DEFAULT_ALPHA,
            show_default=True,
            help="EqCo's alpha (> 0), the same for every K: the estimate is capped at log(alpha + 1).",
        ),
        click.option("--dim", type=int, default=20, show_default=True, help="Dimension d of x and y (>= 1)."),
        click.option(
            "--mi",
            "mi_values",
            default="2,4,6,8,10",
            show_default=True,
            help="The staircase: comma-separated true MI of each stage, in nats (>= 0).",
        ),
        click.option(
            "--steps-per-stage", type=int, default=4000, show_default=True, help="Training steps per stage."
        ),
        click.option(
            "--batch-size", type=int, default=64, show_default=True, help="Anchors B per step (>= 2)."
        ),
        click.option("--lr", type=float, default=5e-4, show_default=True, help="Adam learning rate."),
        click.option(
            "--seeds",
            type=int,
            default=1,
            show_default=True,
            help="Number of seeds per configuration (>= 1).",
        ),
        click.option(
            "--seed", "first_seed", type=int, default=0, show_default=True, help="The first seed (>= 0)."
        ),
        click.option(
            "--transform",
            default="none",
            show_default=True,
            help="Invertible map applied to y (MI unchanged): none, cubic, asinh or half-cube.",
        ),
        click.option("--embed-dim", type=int, default=32, show_default=True, help="Critic embedding size."),
        click.option(
            "--hidden", type=int, default=256, show_default=True, help="Width of the critic's MLPs."
        ),
        click.option(
            "--hidden-layers",
            type=int,
            default=2,
            show_default=True,
            help="Hidden layers of the critic's MLPs.",
        ),
        click.option(
            "--temperature",
            type=float,
            default=0.1,
            show_default=True,
            help="Temperature of the cosine critic (scores in [-1/T, 1/T]).",
        ),
        click.option(
            "--divergence-threshold",
            type=float,
            default=DIVERGENCE_THRESHOLD,
            show_default=True,
            help="A run whose estimate is NaN, infinite or beyond this many nats is stopped as diverged.",
        ),
        click.option(
            "--device", default="cpu", show_default=True, help="torch device: cpu, cuda, cuda:1, ..."
        ),
        click.option("--quiet", is_flag=True, help="No progress bar."),
    ]
    for option in reversed(options):
        function = option(function)
    return function


def _settings(values: dict) -> ToySettings:
    transform = values["transform"]
    return ToySettings(
        dim=values["dim"],
        mi_values=tuple(parse_list("mi_values", values["mi_values"], float, unique=False)),
        steps_per_stage=values["steps_per_stage"],
        batch_size=values["batch_size"],
        lr=values["lr"],
        transform=None if transform in ("none", "", None) else transform,
        embed_dim=values["embed_dim"],
        hidden=values["hidden"],
        hidden_layers=values["hidden_layers"],
        temperature=values["temperature"],
        divergence_threshold=values["divergence_threshold"],
        device=_device_of_this_process(values["device"]),
    )


def _device_of_this_process(device: str) -> str:
    """Under torchrun (LOCAL_RANK set) a plain ``cuda`` means this process's own GPU, cuda:LOCAL_RANK
    (modulo the GPUs present), so that N processes of one machine do not all share cuda:0."""
    local_rank = os.environ.get("LOCAL_RANK")
    if device != "cuda" or local_rank is None:
        return device
    import torch

    count = torch.cuda.device_count()
    return f"cuda:{int(local_rank) % count}" if count else device


def _grid(values: dict, critics: str, negatives: str) -> study.Grid:
    return study.Grid(
        estimators=tuple(parse_list("estimators", values["estimators"], str)),
        critics=tuple(parse_list("critics", critics, str)),
        negatives=tuple(parse_list("negatives", negatives, int)),
        alpha=values["alpha"],
        seeds=values["seeds"],
        first_seed=values["first_seed"],
    )


@click.group(cls=FriendlyGroup)
def toy() -> None:
    """Train MI critics on correlated Gaussians with a known MI staircase and compare the bounds.

    The default protocol (Poole et al. 2019): d = 20, stages of 2, 4, 6, 8, 10 nats with 4000
    steps each, fresh samples every step, batch 64, Adam lr 5e-4, separable critic with 256-wide
    ReLU MLPs and a 32-dim embedding. K negatives per anchor: K <= B-1 takes K other rows of the
    batch; K >= B scores every anchor against a shared pool of K fresh samples of p(y).
    """


@toy.command("run")
@_study_options
@click.option(
    "--critic",
    "critics",
    default="separable",
    show_default=True,
    help="separable, concat, bilinear or cosine.",
)
@click.option("--negatives", default="63", show_default=True, help="K, negatives per anchor (1 to 65536).")
@click.option("--out", type=click.Path(file_okay=False), default="runs/toy-run", show_default=True)
def run_command(critics: str, negatives: str, out: str, **values) -> None:
    """One configuration (one critic, one K, the given bounds and seeds) over the staircase.

    Writes OUT/curves.csv (run, estimator, critic, negatives, alpha, seed, step, true_mi, estimate),
    OUT/summary.csv, OUT/staircase.png and OUT/config.json.
    """
    set_threads_to_free_cores()
    settings = _settings(values)
    grid = _grid(values, critics, negatives)
    check_device(settings.device)
    out_path = Path(out)
    with Progress(settings.total_steps, "toy run", enabled=not values["quiet"]) as bar:
        study.run(out_path, grid, settings, progress=progress_reporter(bar), log=log_line)
    written = plots.redraw(out_path)
    for path in [out_path / "curves.csv", out_path / "summary.csv", *written, out_path / "config.json"]:
        click.echo(f"wrote {path}")


def _run_sweep(out: str, grid: study.Grid, settings: ToySettings, quiet: bool) -> None:
    check_device(settings.device)
    out_path = Path(out)
    bars: list[Progress] = []

    def factory(total: int) -> Callable[..., None]:
        bars.append(Progress(total, "toy sweep", enabled=not quiet))
        return progress_reporter(bars[-1])

    try:
        summary = study.sweep(out_path, grid, settings, progress_factory=factory, log=log_line)
    finally:
        for bar in bars:
            bar.close()
    if summary is None:
        rank, world = study.distributed_rank()
        click.echo(f"rank {rank} of {world}: cells done; rank 0 writes {out_path / 'summary.csv'}")
        return
    written = plots.redraw(out_path)
    click.echo(f"wrote {summary}")
    for path in written:
        click.echo(f"wrote {path}")


@toy.command("sweep")
@_study_options
@click.option(
    "--critic",
    "critics",
    default="separable",
    show_default=True,
    help="Comma-separated critics: separable, concat, bilinear, cosine.",
)
@click.option(
    "--negatives",
    default="4,16,64,256,1024",
    show_default=True,
    help="Comma-separated K values (1 to 65536).",
)
@click.option("--out", type=click.Path(file_okay=False), default="runs/toy-sweep", show_default=True)
def sweep_command(critics: str, negatives: str, out: str, **values) -> None:
    """A grid of bounds x critics x K x seeds over the staircase, resumable, shared under torchrun.

    Each (critic, K) cell trains all its bounds and seeds as one batched model and is saved under
    OUT/cells/ when done; the same command on the same OUT skips finished cells. Under
    `torchrun --nproc-per-node N` (RANK, WORLD_SIZE) cell i goes to rank i mod N and rank 0 writes
    OUT/summary.csv (one row per estimator, critic, negatives, alpha, true_mi: n_seeds, mean, bias,
    std, mse, grad_norm, steps_per_s, diverged) and the figures bias_vs_k.png, std_vs_k.png,
    gradnorm_vs_k.png and staircase_<critic>-K<K>.png.
    """
    set_threads_to_free_cores()
    _run_sweep(out, _grid(values, critics, negatives), _settings(values), values["quiet"])


@toy.command("demo")
@click.option("--out", type=click.Path(file_okay=False), default="runs/demo", show_default=True)
@click.option(
    "--steps-per-stage",
    type=int,
    default=DEMO_STEPS_PER_STAGE,
    show_default=True,
    help="Shortened from the protocol's 4000 so that the demo fits in 5 minutes on a 2-core CPU.",
)
@click.option("--device", default="cpu", show_default=True, help="torch device.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def demo_command(out: str, steps_per_stage: int, device: str, quiet: bool) -> None:
    """The default study, one command: bounds infonce, eqco, dcl, nwj with the separable and the
    cosine critic, K = 4, 16, 64, 256, 1024, the 2-4-6-8-10 nat staircase, 3 seeds, steps per stage
    shortened to fit in about 5 minutes on a 2-core CPU.

    The same as `mitool toy sweep --estimators infonce,eqco,dcl,nwj --critic separable,cosine
    --negatives 4,16,64,256,1024 --seeds 3 --steps-per-stage N --out OUT`.
    """
    set_threads_to_free_cores()
    check_device(device)
    settings = ToySettings(steps_per_stage=steps_per_stage, device=device)
    grid = study.Grid(
        estimators=tuple(DEMO_ESTIMATORS.split(",")),
        critics=("separable", "cosine"),
        negatives=tuple(int(k) for k in DEMO_NEGATIVES.split(",")),
        alpha=DEFAULT_ALPHA,
        seeds=3,
    )
    _run_sweep(out, grid, settings, quiet)
    click.echo(f"demo results in {Path(out)}: summary.csv, bias_vs_k.png, std_vs_k.png, gradnorm_vs_k.png")


@toy.command("plot")
@click.argument("out", type=click.Path(file_okay=False))
def plot_command(out: str) -> None:
    """Redraw every figure of a `toy run` or `toy sweep` directory OUT from its CSV files."""
    set_threads_to_free_cores()
    for path in plots.redraw(Path(out)):
        click.echo(f"wrote {path}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(toy())
