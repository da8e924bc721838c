"""``mitool estimate X Y``: a thin click shell over :func:`mitool.estimate.estimate`.

The estimators, their settings, defaults and help come from the registry
(:mod:`mitool.estimators`); an option the chosen estimator does not have is an error naming it.
"""

from __future__ import annotations

import json
import math

import click

from mitool import estimators
from mitool.cli.errors import FriendlyCommand
from mitool.cli.options import given_options, option_specs, settings_options
from mitool.estimators.base import CASES, Estimate

__all__ = ["describe", "estimate_command", "estimator_help"]

_OPTIONS = option_specs([(name, estimators.estimator_class(name).Settings) for name in estimators.names()])


def estimator_help() -> str:
    """One line per estimator, from the registry (the help's epilog)."""
    lines = []
    for name in estimators.names():
        estimator = estimators.estimator_class(name)
        lines.append(f"{name:10s} {estimator.summary}: {estimator.number}.")
    defaults = "; ".join(f"{CASES[case]}: {name}" for case, name in estimators.DEFAULTS.items())
    return "Estimators (--estimator):\n\n\b\n" + "\n".join(lines) + f"\n\nDefaults: {defaults}."


@click.command("estimate", cls=FriendlyCommand, epilog=estimator_help())
@click.argument("x", metavar="X", type=click.Path(dir_okay=False))
@click.argument("y", metavar="Y", type=click.Path(dir_okay=False))
@click.option(
    "--estimator", type=click.Choice(estimators.names()), default=None,
    help=f"The estimator (listed below) [default: {estimators.DEFAULTS['continuous']} for continuous data].",
)  # fmt: skip
@settings_options(_OPTIONS)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the split, weights, batches, subsets."
)
@click.option(
    "--json", "as_json", is_flag=True,
    help="Print one JSON object instead of a sentence (the value under 'value', also under 'estimate').",
)  # fmt: skip
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.pass_context
def estimate_command(context: click.Context, x: str, y: str, estimator: str | None, seed: int, as_json: bool,
                     quiet: bool, **_: object) -> None:  # fmt: skip
    """Estimate I(X; Y) in nats from paired samples: row i of X goes with row i of Y.

    X and Y are .npy, .npz (one array) or .csv files (comma-separated, optional header), one row per
    sample. A neural estimator trains a critic with its bound on a training split and reports the
    bound on the held-out split; the interval says what it covers (for a neural estimator: the noise
    of the held-out evaluation, not retraining, not the bound's own bias). InfoNCE-type estimates
    cannot exceed log(K + 1) (K = held-out rows - 1, at most 1023; eqco: log(alpha + 1)): an estimate
    at that ceiling is flagged, and for large MI smile or nwj are not capped. ksg and gaussian train
    nothing; their interval comes from 10 disjoint subsets of the pairs.
    """
    from mitool.cli.common import progress_reporter
    from mitool.cli.io import load_samples
    from mitool.estimate import estimate
    from mitool.progress import Progress
    from mitool.runtime import set_threads_to_free_cores

    set_threads_to_free_cores()
    name = estimator or estimators.DEFAULTS["continuous"]
    settings = given_options(context, _OPTIONS)
    estimators.estimator_class(name)(**settings)  # an unknown setting is refused before the data are read
    x_data, y_data = load_samples(x, "X"), load_samples(y, "Y")
    steps = settings.get("steps", getattr(estimators.estimator_class(name).Settings, "steps", 0))
    with Progress(steps, f"training {name} critic", enabled=not quiet and steps > 0) as bar:
        result = estimate(x_data, y_data, name, seed=seed, progress=progress_reporter(bar), **settings)
    click.echo(json.dumps(result.as_dict()) if as_json else describe(result))


def describe(result: Estimate) -> str:
    """The estimate as a sentence: the value, its standard error and interval and what they cover,
    what was trained and evaluated, and the notes (a warning at InfoNCE's ceiling among them)."""
    level = f"{100 * result.ci_level:g}%" if math.isfinite(result.ci_level) else "exact"
    head = (f"I(X; Y) = {result.value:.4f} +- {result.stderr:.4f} nats, {level} interval "
            f"[{result.ci_low:.4f}, {result.ci_high:.4f}]")  # fmt: skip
    details = result.details
    if "critic" in details:
        evaluated = (
            "" if details["evaluator"] == result.estimator else f", scored with {details['evaluator']}"
        )
        what = (
            f"({result.estimator}, {details['critic']} critic{evaluated}; trained on "
            f"{details['n_fit'] + details['n_validation']} pairs, kept at step {details['best_step']} of "
            f"{details['steps']}; evaluated on {details['n_test']} held-out pairs, "
            f"K = {details['negatives_test']})"
        )
    else:
        what = f"({result.estimator} on all {result.n_pairs} pairs)"
    text = f"{head} {what}. The +- and the interval: {result.interval}."
    for note in result.notes:
        text += f" {note[0].upper()}{note[1:]}."
    return text
