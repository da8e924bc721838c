"""``mitool test X Y``: a thin click shell over :func:`mitool.independence_test` and, with
``--per-feature``, :func:`mitool.feature_mi`.
"""

from __future__ import annotations

import click

from mitool import estimators
from mitool.cli.errors import FriendlyCommand
from mitool.cli.options import Z_METHOD_CHOICES, fdr_option, neighbours_option, table_options
from mitool.ties import TIES_CHOICES

__all__ = ["test_command"]


@click.command("test", cls=FriendlyCommand)
@click.argument("x", metavar="X", type=click.Path(dir_okay=False))
@click.argument("y", metavar="Y", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--given", "z", default=None,
    help="Z, a file of one row per sample (with --x: columns of the table): test whether X and Y are "
    "independent given Z.",
)  # fmt: skip
@table_options
@click.option(
    "--estimator", type=click.Choice(estimators.names()), default=None,
    help="The statistic [default: the k-NN estimate for the data: KSG on rank scores, Ross for discrete Y, "
    "the plug-in for discrete X and Y, and given a continuous Z KSG on the residuals of X and Y after their "
    "regressions on Z (--z-method); with the linear statistic beside them (see --linear)]. One that trains a "
    "network retrains for every permutation and needs --permutations.",
)  # fmt: skip
@click.option(
    "--permutations", type=int, default=None,
    help="Permutations B; p = (1 + #{null >= observed}) / (1 + B), at least 1 / (B + 1) [default: 999].",
)  # fmt: skip
@click.option(
    "--seed", type=int, default=0, show_default=True, help="Seed of the permutations and dequantisation."
)
@click.option(
    "--discrete", default="auto", show_default=True,
    help="Which variables are discrete: auto, none, or a comma-separated list of x, y, z (both: x,y).",
)  # fmt: skip
@click.option(
    "--ties", default="auto", show_default=True, type=click.Choice(list(TIES_CHOICES)),
    help="How repeated values of continuous data are read (as mitool estimate reads them).",
)  # fmt: skip
@neighbours_option()
@click.option(
    "--linear/--no-linear", default=None,
    help="Add the linear statistic (canonical correlations of rank normal scores) beside a k-NN one and "
    "combine the two p-values by min-p [default: with the default statistic, not with --estimator].",
)  # fmt: skip
@click.option(
    "--z-method", type=click.Choice(Z_METHOD_CHOICES), default="auto", show_default=True,
    help="Given a continuous Z: residual (X's and Y's residuals after flexible regressions on Z, X's "
    "permuted within Z-neighbourhoods; the default), local (Runge's local permutation of X itself, the "
    "default with --estimator), gcm (the generalised covariance measure of the residuals). The result warns "
    "where Z's neighbourhoods are too wide for the dependence on Z.",
)  # fmt: skip
@click.option(
    "--z-neighbours", type=int, default=5, show_default=True,
    help="Given a continuous Z: each row takes the X of one of its this many nearest rows in Z.",
)  # fmt: skip
@click.option(
    "--per-feature", is_flag=True,
    help="Test each column of X against Y: MI, interval, p-value and Benjamini-Hochberg q-value per column "
    "(names from the CSV header).",
)  # fmt: skip
@fdr_option("columns", " (with --per-feature)")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (statistic, pvalue, null, ...).")
@click.option(
    "--explain",
    is_flag=True,
    help="After the result, how the test was made and every note (by default one line).",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def test_command(
    x: str, y: str | None, z: str | None, x_columns: str | None, y_columns: str | None, missing: str,
    estimator: str | None, permutations: int | None, seed: int, discrete: str, ties: str, k: int | None,
    linear: bool | None, z_method: str, z_neighbours: int, per_feature: bool, fdr: str, as_json: bool,
    explain: bool, quiet: bool,
) -> None:  # fmt: skip
    """Test whether X and Y are dependent: a permutation test with the MI estimate as the statistic.

    X and Y (and Z of --given) are .npy, .npz (one array) or .csv files, one row per sample, row i
    of X with row i of Y. The statistic is the MI estimate of the data, recomputed on B
    permutations of Y's rows (given a continuous Z: X's residuals after a regression on Z permuted
    within Z-neighbourhoods, --z-method; a discrete Z: X permuted within its groups), with the
    linear statistic beside it by default (the p-value their min-p combination); the p-value
    counts the data among the permutations, so it is never 0. Bad input (too few rows, rows that do
    not pair) is one line and exit code 2.
    """
    from mitool.checks import ParameterError
    from mitool.cli.common import PermutationProgress, json_text
    from mitool.cli.io import read_variables
    from mitool.independence import feature_mi, independence_test
    from mitool.runtime import set_threads_to_free_cores

    if (
        permutations is not None and permutations < 1
    ):  # a test needs its permutations; scores alone: feature_scores
        raise ParameterError("permutations", f"must be a whole number >= 1, got {permutations}")
    if per_feature and z is not None:
        raise ParameterError("z", "cannot be given with --per-feature (each column of X against Y alone)")
    if per_feature and estimator is not None:
        raise ParameterError(
            "estimator", "cannot be given with --per-feature (the k-NN statistic for each column)"
        )
    settings: dict[str, object] = {"missing": missing} if k is None else {"k": k, "missing": missing}
    set_threads_to_free_cores()
    read = read_variables(x, y, z, x_columns, y_columns)
    file_notes = [note for samples in read for note in samples.notes]
    if per_feature:
        features = feature_mi(
            read[0].values, read[1].values, permutations=999 if permutations is None else permutations,
            seed=seed, ties=ties, columns=read[0].columns,
            discrete_features=_side_declared(discrete, "x"), discrete_target=_side_declared(discrete, "y"),
            fdr=fdr, **settings,
        )  # fmt: skip
        if as_json:
            click.echo(json_text({**features.as_dict(), "file_notes": file_notes}))
            return
        click.echo(str(features))
        if explain:
            click.echo(f"How: {features.method}")
        return
    bar = PermutationProgress("test", enabled=not quiet)
    try:
        result = independence_test(
            read[0].values, read[1].values, None if z is None else read[2].values, estimator=estimator,
            permutations=permutations, seed=seed, ties=ties, discrete=discrete, z_neighbours=z_neighbours,
            z_method=z_method, linear=linear, progress=bar, **settings,
        )  # fmt: skip
    finally:
        bar.close()
    notes = [*file_notes, *result.notes]
    if as_json:
        click.echo(json_text({**result.as_dict(), "notes": notes}))
        return
    click.echo(str(result))
    if explain:
        click.echo(f"How: {result.method}")
        click.echo("Notes: " + "; ".join(notes) + ".")


def _side_declared(discrete: str, side: str) -> str | bool:
    """--discrete as :func:`mitool.feature_mi` takes it for one side: "auto", or whether it is named."""
    from mitool.estimation import DISCRETE_CHOICES

    chosen = [item.strip() for item in discrete.split(",") if item.strip()]
    for item in chosen:
        if item not in DISCRETE_CHOICES:
            from mitool.checks import ParameterError

            raise ParameterError("discrete", f"must be one of {', '.join(DISCRETE_CHOICES)}, got {item!r}")
    if chosen == ["auto"]:
        return "auto"
    return side in chosen or "both" in chosen
