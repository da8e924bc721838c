"""``mitool estimate X Y``: a thin click shell over :func:`mitool.estimate.estimate`."""

from __future__ import annotations

import json
from collections.abc import Callable

import click

from mitool import baselines, bounds, critics
from mitool.cli.common import check_device, progress_reporter
from mitool.cli.errors import FriendlyCommand
from mitool.cli.io import load_samples
from mitool.estimate import (
    CEILING_MARGIN,
    DEFAULT_CRITIC,
    DEFAULT_ESTIMATOR,
    ESTIMATORS,
    Estimate,
    Settings,
    estimate,
)
from mitool.progress import Progress
from mitool.runtime import set_threads_to_free_cores
from mitool.toy.config import DEFAULT_ALPHA

__all__ = ["describe", "estimate_command", "estimator_help"]

_CLI_SETTINGS = (
    "steps", "validation_fraction", "eval_every", "patience", "batch_size", "lr", "test_fraction",
    "hidden", "hidden_layers", "embed_dim", "temperature", "eval_block", "chunk", "level", "normalise",
    "canonical", "ensemble",
)  # fmt: skip
"""The fields of :class:`mitool.estimate.Settings` offered as options (defaults and help from it)."""

_OPTION_DEFAULTS = {"alpha": DEFAULT_ALPHA}
"""Bound options with a command-line default where the bound has none (eqco's alpha: the toy
study's value)."""


def estimator_help() -> str:
    """One line per estimator, from the tables of bounds and baselines (the help's epilog)."""
    lines = [f"{name:9s} {bound.summary}: {bound.estimate}." for name, bound in bounds.BOUNDS.items()]
    lines += [f"{name:9s} {baseline.summary}." for name, baseline in baselines.BASELINES.items()]
    return "Estimators (--estimator):\n\n\b\n" + "\n".join(lines)


def _bound_options() -> dict[str, tuple[str, list[str]]]:
    """Each bound option's name -> (meaning, the bounds that take it), from the table."""
    found: dict[str, tuple[str, list[str]]] = {}
    for name, bound in bounds.BOUNDS.items():
        for option in bound.options:
            if not option.score_temperature:
                found.setdefault(option.name, (option.meaning, []))[1].append(name)
    return found


def _option(name: str, default: object, meaning: str) -> Callable:
    """A click option named after the Python parameter ``name``: a --name/--no-name flag for a
    bool default, else a value of the default's type."""
    flag = name.replace("_", "-")
    flags = f"--{flag}/--no-{flag}" if isinstance(default, bool) else f"--{flag}"
    kind = bool if isinstance(default, bool) else type(default)
    return click.option(flags, name, type=kind, default=default, show_default=True, help=meaning)


def _with_table_options(function: Callable) -> Callable:
    """Options from the tables: the Settings fields of :data:`_CLI_SETTINGS`, every bound option,
    and the baselines' options."""
    help_of = Settings.help()
    options = [_option(name, *help_of[name]) for name in _CLI_SETTINGS]
    for name, (meaning, users) in _bound_options().items():
        default = _OPTION_DEFAULTS.get(name)
        options.append(
            click.option(f"--{name}", type=float, default=default, show_default=default is not None,
                         help=f"{meaning} ({', '.join(users)} only).")
        )  # fmt: skip
    for baseline in baselines.BASELINES.values():
        options += [
            _option(name, default, f"{baseline.meanings[name]} ({baseline.name} only).")
            for name, default in baseline.options.items()
        ]
    for option in reversed(options):
        function = option(function)
    return function


@click.command("estimate", cls=FriendlyCommand, epilog=estimator_help())
@click.argument("x", metavar="X", type=click.Path(dir_okay=False))
@click.argument("y", metavar="Y", type=click.Path(dir_okay=False))
@click.option(
    "--estimator",
    default=DEFAULT_ESTIMATOR,
    show_default=True,
    help=f"One of {', '.join(ESTIMATORS)} (listed below).",
)
@click.option(
    "--evaluator",
    default=None,
    help="The bound scored on the held-out pairs (default: the estimator). Only bounds tight at the "
    "critic the estimator trains are allowed: the InfoNCE family for infonce, eqco, dcl and dclw; "
    "js, dv, mine or smile for js and smile (js is NWJ at the critic + 1); nwj for nwj.",
)
@click.option(
    "--critic", default=DEFAULT_CRITIC, show_default=True, help=f"One of {', '.join(critics.NAMES)}."
)
@_with_table_options
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the split, the weights and the batches."
)
@click.option("--device", default="cpu", show_default=True, help="torch device.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of a sentence.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def estimate_command(x: str, y: str, as_json: bool, quiet: bool, **options) -> None:
    """Estimate I(X; Y) in nats from paired samples: row i of X goes with row i of Y.

    X and Y are .npy, .npz (one array) or .csv files (comma-separated, optional header), one row per
    sample. A neural estimator trains a critic with its bound on a training split and reports the
    bound on the held-out split: the +- is the standard error over chunks of held-out anchors and the
    interval mean +- t * se; both cover the noise of that held-out evaluation for this one trained
    critic, not retraining with other seeds, and not the bound's own bias. InfoNCE-type estimates
    cannot exceed log(K + 1) (K = held-out rows - 1, at most 1023; eqco: log(alpha + 1)): an estimate
    at that ceiling is flagged, and for large MI smile or nwj are not capped. ksg and gaussian
    train nothing; their +- comes from 10 disjoint subsets of the pairs.
    """
    set_threads_to_free_cores()
    check_device(options["device"])
    x_data, y_data = load_samples(x, "X"), load_samples(y, "Y")
    estimator = options.pop("estimator")
    options = _applicable(estimator, options)
    with Progress(options.get("steps", 0), f"training {estimator} critic", enabled=not quiet) as bar:
        result = estimate(x_data, y_data, estimator, progress=progress_reporter(bar), **options)
    click.echo(json.dumps(result.as_dict()) if as_json else describe(result))


def _applicable(estimator: str, options: dict) -> dict:
    """The options that apply to ``estimator``: a baseline's own options (and the seed and level),
    or everything but the baselines' options; eqco's alpha default only for eqco; None dropped."""
    if not bounds.takes_option(estimator, "alpha") and options.get("alpha") == DEFAULT_ALPHA:
        options.pop("alpha")
    options = {key: value for key, value in options.items() if value is not None}
    if estimator in baselines.BASELINES:
        keep = {*baselines.BASELINES[estimator].options, "seed", "level"}
        return {key: value for key, value in options.items() if key in keep}
    foreign = {name for baseline in baselines.BASELINES.values() for name in baseline.options}
    return {key: value for key, value in options.items() if key not in foreign}


def describe(result: Estimate) -> str:
    """The estimate as a sentence: the value, its standard error and interval and what they cover,
    what was trained and evaluated, and a warning at InfoNCE's ceiling."""
    level = f"{100 * result.ci_level:g}%"
    head = (
        f"I(X; Y) = {result.value:.4f} +- {result.stderr:.4f} nats, {level} interval "
        f"[{result.ci_low:.4f}, {result.ci_high:.4f}]"
    )
    if result.critic is None:
        what = f"({result.estimator} on all {result.n_pairs} pairs)"
    else:
        evaluated = "" if result.evaluator == result.estimator else f", scored with {result.evaluator}"
        what = (
            f"({result.estimator}, {result.critic} critic{evaluated}; trained on {result.n_train} pairs, "
            f"kept at step {result.best_step} of {result.steps}; evaluated on {result.n_test} held-out "
            f"pairs, K = {result.negatives_test})"
        )
    text = f"{head} {what}. The +- and the interval: {result.interval}."
    if result.at_ceiling:
        text += (
            f" At the ceiling: {result.evaluator} cannot exceed {result.ceiling:.4f} nats (log(K + 1); "
            f"eqco: log(alpha + 1)) and this is within {CEILING_MARGIN} of it, so this is a lower bound "
            "at its ceiling and the MI may be much larger; use --estimator smile or nwj (not capped), "
            "or more held-out pairs."
        )
    return text
