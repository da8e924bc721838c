"""``mitool estimate X Y``: a thin click shell over the estimator of paired samples."""

from __future__ import annotations

import json

import click

from mitool.cli.common import check_device, progress_reporter
from mitool.cli.errors import FriendlyCommand
from mitool.progress import Progress
from mitool.runtime import set_threads_to_free_cores
from mitool.toy.config import DEFAULT_ALPHA, ESTIMATORS
from mitool.toy.estimate import estimate_mi, load_samples

__all__ = ["estimate"]


@click.command("estimate", cls=FriendlyCommand)
@click.argument("x_path", metavar="X", type=click.Path(dir_okay=False))
@click.argument("y_path", metavar="Y", type=click.Path(dir_okay=False))
@click.option(
    "--estimator", default="infonce", show_default=True, help=f"The bound: one of {', '.join(ESTIMATORS)}."
)
@click.option(
    "--critic", default="separable", show_default=True, help="separable, concat, bilinear or cosine."
)
@click.option("--steps", type=int, default=2000, show_default=True, help="Most training steps.")
@click.option(
    "--validation-fraction",
    type=float,
    default=0.15,
    show_default=True,
    help="Share of the training split scored for early stopping (the critic is kept at its best value).",
)
@click.option(
    "--eval-every", type=int, default=50, show_default=True, help="Steps between validation scores."
)
@click.option(
    "--patience",
    type=int,
    default=10,
    show_default=True,
    help="Stop after this many validation scores without improvement.",
)
@click.option(
    "--batch-size",
    type=int,
    default=128,
    show_default=True,
    help="Training batch B (K = B - 1 in-batch negatives).",
)
@click.option("--lr", type=float, default=5e-4, show_default=True, help="Adam learning rate.")
@click.option(
    "--test-fraction",
    type=float,
    default=0.2,
    show_default=True,
    help="Share of the pairs held out for the estimate.",
)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the split, the weights and the batches."
)
@click.option("--hidden", type=int, default=256, show_default=True, help="Width of the critic's MLPs.")
@click.option(
    "--hidden-layers", type=int, default=2, show_default=True, help="Hidden layers of the critic's MLPs."
)
@click.option("--embed-dim", type=int, default=32, show_default=True, help="Critic embedding size.")
@click.option(
    "--alpha", type=float, default=DEFAULT_ALPHA, show_default=True, help="EqCo's alpha (eqco only)."
)
@click.option("--device", default="cpu", show_default=True, help="torch device.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a sentence.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def estimate(x_path: str, y_path: str, as_json: bool, quiet: bool, **options) -> None:
    """Estimate I(X; Y) in nats from paired samples: row i of X goes with row i of Y.

    X and Y are .npy, .npz (one array) or .csv files (comma-separated, optional header), one row per
    sample. The critic is trained with the chosen bound on a training split; the bound is reported on
    the held-out split with a standard error. InfoNCE-type estimates cannot exceed log(K + 1) of the
    evaluation (K = held-out rows - 1, at most 1023); for large MI use nwj, dv or smile.
    """
    set_threads_to_free_cores()
    check_device(options["device"])
    x = load_samples(x_path, "X")
    y = load_samples(y_path, "Y")
    if x.shape[0] != y.shape[0]:
        raise ValueError(
            f"X and Y must have the same number of rows (samples), got {x.shape[0]} and {y.shape[0]}"
        )
    with Progress(options["steps"], f"training {options['estimator']} critic", enabled=not quiet) as bar:
        result = estimate_mi(x, y, progress=progress_reporter(bar), **options)
    if as_json:
        click.echo(json.dumps(result.as_dict()))
    else:
        click.echo(
            f"I(X; Y) = {result.estimate:.4f} +- {result.stderr:.4f} nats "
            f"({result.estimator}, {result.critic} critic; trained on {result.n_train} pairs, kept at step "
            f"{result.best_step} of {result.steps}; evaluated on {result.n_test} held-out pairs)"
        )
