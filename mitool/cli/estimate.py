"""``mitool estimate X Y``: a thin click shell over :func:`mitool.estimate`.

The estimators, their settings, defaults and help come from the registry
(:mod:`mitool.estimators`); an option the chosen estimator does not have is an error naming it.
"""

from __future__ import annotations

import click

from mitool import estimators
from mitool.cli.errors import FriendlyCommand
from mitool.cli.options import given_options, help_all_option, option_specs, settings_options, table_options
from mitool.estimators.base import CASES
from mitool.ties import TIES_CHOICES

__all__ = ["estimate_command", "estimator_help"]

_OPTIONS = option_specs(
    [(name, estimators.estimator_class(name).Settings) for name in estimators.names()],
    routes=estimators.DEFAULTS,
)


WIDE = 1000
"""Above this many columns in all, the command says before it starts that the first stage will be long."""


def estimator_help() -> str:
    """One line per estimator, from the registry (the help's epilog)."""
    lines = []
    for name in estimators.names():
        estimator = estimators.estimator_class(name)
        lines.append(f"{name:10s} {estimator.summary}: {estimator.value_is}.")

    def option(key: str, value: object) -> str:
        flag = key.replace("_", "-")
        if isinstance(value, bool):
            return f" --{flag}" if value else f" --no-{flag}"
        return f" --{flag} {value}"

    def shown(default: estimators.Default) -> str:
        settings = "".join(option(key, value) for key, value in default.settings.items())
        bands = "; ".join(
            f"{sizes}:{''.join(option(key, value) for key, value in extra.items())}"
            for sizes, _, extra in default.by_size()
        )
        return default.name + settings + (f" ({bands})" if bands else "")

    defaults = "; ".join(f"{CASES[case]}: {shown(default)}" for case, default in estimators.DEFAULTS.items())
    return "Estimators (--estimator):\n\n\b\n" + "\n".join(lines) + f"\n\nDefaults: {defaults}."


def _details() -> str:
    """What ``--help-all`` adds: how the estimate is made, then the estimators and their defaults."""
    return "\b\n" + HOW + "\n\n" + estimator_help()


HOW = """How: a neural estimator trains critics on a training split and reports the bound on the held-out
split. The interval says what it covers: for the default neural estimate the noise of the held-out
evaluation and of training (the spread of its two critics); for the k-NN, Gaussian and plug-in
estimators the sampling noise of the pairs; never a bound's own bias. InfoNCE-type estimates
cannot exceed log(K + 1) (K = held-out rows - 1, at most 1023; eqco: log(alpha + 1)), KSG's
psi(n) - psi(k): an estimate near its ceiling is a lower bound, its interval open above ("at
least"); the default then estimates with flow (normalizing flows to a joint Gaussian, not capped)
and reports it where it agrees. Images: .npy arrays of shape (n, H, W) or (n, C, H, W), read as
rows of pixels; where the pixels lie near a surface of lower dimension, the default encodes each
side to that dimension before the flows."""


@click.command(
    "estimate", cls=FriendlyCommand,
    epilog="--help-all lists the estimators' own settings, the estimators and their defaults.",
)  # fmt: skip
@help_all_option(_details)
@click.argument("x", metavar="X", type=click.Path(dir_okay=False))
@click.argument("y", metavar="Y", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--given", "z", default=None,
    help="Z, a file of one row per sample (with --x: columns of the table): estimate I(X; Y | Z), the MI "
    "given Z.",
)  # fmt: skip
@table_options
@click.option(
    "--estimator", type=click.Choice(estimators.names()), default=None,
    help="The estimator (listed below) [default: the one for the data, see Defaults below].",
)  # fmt: skip
@click.option(
    "--discrete", default="auto", show_default=True,
    help="Which variables are discrete: auto (whole numbers with at most max(2, sqrt(n)) distinct values in "
    "n rows), none, or a comma-separated list of x, y, z (both: x,y). The result's notes say what was "
    "decided.",
)  # fmt: skip
@click.option(
    "--ties", default="auto", show_default=True, type=click.Choice(list(TIES_CHOICES)),
    help="How repeated values of continuous data are read: "
    + "; ".join(f"{name}: {meaning}" for name, meaning in TIES_CHOICES.items())
    + ". The result's notes say what was done.",
)  # fmt: skip
@settings_options(_OPTIONS, hidden=True)
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the split, weights, batches, subsets."
)
@click.option(
    "--json", "as_json", is_flag=True,
    help="Print one JSON object instead of a sentence (the value under 'value', also under 'estimate').",
)  # fmt: skip
@click.option(
    "--explain", is_flag=True,
    help="Print the estimate as a paragraph: what the interval covers, what was trained, every note "
    "(by default one line).",
)  # fmt: skip
@click.option(
    "--quiet",
    is_flag=True,
    help="No progress bar (a run of more than 10 s still says how long, in one line).",
)
@click.pass_context
def estimate_command(
    context: click.Context, x: str, y: str | None, z: str | None, x_columns: str | None,
    y_columns: str | None, missing: str, estimator: str | None, discrete: str, ties: str, seed: int,
    as_json: bool, explain: bool, quiet: bool, **_: object,
) -> None:  # fmt: skip
    """Estimate I(X; Y) in nats from paired samples: row i of X goes with row i of Y.

    X and Y (and Z of --given) are .npy, .npz (one array) or .csv files, one row per sample, or
    columns of one CSV table named by --x and --y. The estimator is the one for the kind of data
    unless --estimator names one; --explain says what was decided and what the interval covers.
    """
    import numpy as np

    from mitool.cli.common import EstimateProgress, json_text, log_line
    from mitool.cli.io import read_variables
    from mitool.estimation import estimate
    from mitool.runtime import set_threads_to_free_cores

    set_threads_to_free_cores()
    settings = given_options(context, _OPTIONS)
    if estimator is not None:
        estimators.get(estimator, **settings)  # an unknown setting is refused before the data are read
    read = read_variables(x, y, z, x_columns, y_columns)
    x_data, y_data = read[0].as_given(), read[1].as_given()
    z_data = None if z is None else read[2].as_given()
    columns = sum(int(np.prod(part.shape[1:])) for part in (x_data, y_data, z_data) if part is not None)
    if columns > WIDE:  # before the work whose first stage (d x d matrices) says nothing for minutes
        log_line(f"estimate: {columns} columns in all ({len(x_data)} rows): their d x d matrices come first "
                 "and may take minutes before the progress bar starts")  # fmt: skip
    progress = EstimateProgress(f"{estimator or 'estimate'}", enabled=not quiet)
    try:
        result = estimate(
            x_data, y_data, z_data, estimator=estimator, discrete=discrete, ties=ties, seed=seed,
            missing=missing, progress=progress, **settings,
        )  # fmt: skip
    finally:
        progress.close()
    noted = {note.lower() for note in result.notes}  # images: estimate() noted them itself ("x: ...")
    result = result.with_notes(
        *(note for samples in read for note in samples.notes if note.lower() not in noted)
    )
    click.echo(json_text(result.as_dict()) if as_json else result.explain() if explain else result.summary())
