"""``mitool matrix DATA``: a thin click shell over :func:`mitool.matrix.mi_matrix`, writing
matrix.csv and matrix.png to --out.
"""

from __future__ import annotations

from pathlib import Path

import click

from mitool import estimators
from mitool.cli.errors import FriendlyCommand
from mitool.cli.options import fdr_option, neighbours_option

__all__ = ["matrix_command"]


@click.command("matrix", cls=FriendlyCommand)
@click.argument("data", metavar="DATA", type=click.Path(dir_okay=False))
@click.option(
    "--given", "given", type=click.Path(dir_okay=False), default=None,
    help="Z, a file of one row per sample: test each pair given Z (each pair its own permutations).",
)  # fmt: skip
@click.option(
    "--estimator", type=click.Choice(estimators.names()), default=None,
    help="The statistic of every pair [default: the k-NN estimate for the data, as mitool test chooses it].",
)  # fmt: skip
@click.option(
    "--permutations", type=int, default=None,
    help="Permutations B: of each shared null (numeric columns; each discrete column against them), or of "
    "each other pair; p >= 1 / (B + 1) [default: 999].",
)  # fmt: skip
@click.option(
    "--null", "null", type=click.Choice(["shared", "pair"]), default="shared", show_default=True,
    help="shared: KSG on rank scores is distribution-free under independence, so one set of permutations "
    "serves every pair of numeric columns (repeated values dequantised once), and one per discrete column "
    "its pairs with them (Ross's statistic); pair: every pair its own, as mitool test (B per pair: slow).",
)  # fmt: skip
@click.option(
    "--tail", type=click.Choice(["gpd", "none"]), default="gpd", show_default=True,
    help="gpd: a pair beyond the shared null's tenth largest value gets a p-value from a generalized "
    "Pareto fit to the null's tail (Knijnenburg et al. 2009), so that many pairs can pass the q-values; "
    "none: permutation p-values only (at least 1 / (B + 1)).",
)  # fmt: skip
@fdr_option("pairs")
@click.option(
    "--columns", default=None, metavar="NAMES",
    help="The columns of DATA to pair, comma-separated as its header names them [default: all].",
)  # fmt: skip
@neighbours_option()
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of every pair and of the null.")
@click.option(
    "--out", type=click.Path(file_okay=False), default=None,
    help="Folder for matrix.csv, matrix.png and the finished blocks (the same command again resumes) "
    "[default: DATA's name with -matrix, here].",
)  # fmt: skip
@click.option(
    "--workers", type=int, default=None,
    help="Processes on this machine [default: the free cores]. Ignored with --scheduler.",
)  # fmt: skip
@click.option(
    "--scheduler", default=None, metavar="ADDRESS",
    help="A Dask scheduler (tcp://host:8786, or tls://host:8786 with Dask's TLS settings): the blocks run "
    "on its cluster (needs mitool[distributed]). tcp:// is plain text and unauthenticated: see "
    "docs/independence.md.",
)  # fmt: skip
@click.option("--quiet", is_flag=True, help="No progress bar.")
def matrix_command(
    data: str, given: str | None, estimator: str | None, permutations: int | None, null: str, tail: str,
    fdr: str, columns: str | None, k: int | None, seed: int, out: str | None, workers: int | None,
    scheduler: str | None, quiet: bool,
) -> None:  # fmt: skip
    """The MI of every pair of columns of DATA, with permutation p-values and Benjamini-Hochberg
    q-values over all pairs (Benjamini-Yekutieli's with --fdr by).

    DATA is a .csv (a header names the columns), .npy or .npz file, one row per sample. Writes
    OUT/matrix.csv (one row per pair: column_a, column_b, mi, ci_low, ci_high, pvalue, qvalue) and
    OUT/matrix.png (the heatmap, clustered by MI; left out, with a note, where matplotlib cannot
    be imported). Finished blocks of pairs are kept in OUT: stopped
    (Ctrl-C, SIGTERM), the same command goes on from them. Bad input is one line and exit code 2;
    a lost worker, Dask scheduler or Dask workers, one line with the command that resumes, exit 1.
    """
    from mitool._infra.processes import WorkersLost
    from mitool._infra.progress import Progress
    from mitool.checks import ParameterError
    from mitool.cli.common import command_line, log_line, resumable_run
    from mitool.cli.io import load_samples
    from mitool.matrix import mi_matrix

    if permutations is not None and permutations < 1:
        raise ParameterError("permutations", f"must be a whole number >= 1, got {permutations}")
    if workers is not None and workers < 1:
        raise ParameterError("workers", f"must be a whole number >= 1, got {workers}")
    samples = load_samples(data, "DATA")
    if columns is not None:
        samples = samples.select("DATA", "columns", columns, data)
    z = None if given is None else load_samples(given, "Z").values
    folder = Path(out) if out is not None else Path(f"{Path(data).stem}-matrix")
    client = _client(scheduler) if scheduler is not None else None
    bars: list[Progress] = []

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(Progress(total, "matrix", enabled=not quiet, done=done))
        bars[0].set_done(done)

    note = f"finished blocks are saved in {folder}; the same command resumes from them"
    try:
        with resumable_run("matrix", lambda: note, bars):
            result = mi_matrix(
                samples.values, given=z, estimator=estimator, permutations=permutations, seed=seed,
                workers=workers, client=client, out=folder, progress=progress, columns=samples.columns,
                null=null, tail=tail, fdr=fdr, **({} if k is None else {"k": k}),
            )  # fmt: skip
    except WorkersLost as lost:
        raise click.ClickException(
            f"matrix stopped: {lost}; finished blocks are saved in {folder}; resume with the same command: "
            f"{command_line()}"
        ) from None
    finally:
        if client is not None:
            _close(client)
    csv_path = result.to_csv(folder / "matrix.csv")
    try:
        written = f"{csv_path} and {result.figure(folder / 'matrix.png')}"
    except ModuleNotFoundError as error:  # the numbers stand without the heatmap
        if error.name is None or error.name.partition(".")[0] != "matplotlib":
            raise
        written = f"{csv_path} (not matrix.png: the figure needs matplotlib; pip install matplotlib)"
    click.echo(str(result))
    click.echo(f"How: {result.method}")
    notes = [*samples.notes, *result.notes]
    if notes:
        click.echo("Notes: " + "; ".join(notes) + ".")
    if result.reused_blocks:
        log_line(f"matrix: {result.reused_blocks} finished block(s) read back from {folder}")
    click.echo(f"Wrote {written}.")


def _client(address: str):
    """A Dask client of the scheduler at ``address``, with Dask's own security settings (TLS
    certificates from its configuration); one line when Dask is missing, when ``tls://`` comes
    without those settings, or when the scheduler does not answer."""
    import logging

    from mitool.checks import ParameterError

    try:
        from distributed import Client
    except ImportError:
        raise ParameterError(
            "scheduler", "needs Dask's distributed scheduler: pip install 'mitool[distributed]'"
        ) from None
    for name in ["distributed", *logging.root.manager.loggerDict]:  # a loss is the command's one line
        if name.split(".")[0] == "distributed":
            logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        return Client(address, timeout=10)
    except TypeError:  # distributed's words for tls:// with no TLS settings
        if not address.startswith("tls://"):
            raise
        raise ParameterError(
            "scheduler",
            f"{address!r} needs Dask's TLS settings: the CA file and this client's certificate and key "
            "(DASK_DISTRIBUTED__COMM__TLS__CA_FILE, DASK_DISTRIBUTED__COMM__TLS__CLIENT__CERT and "
            "DASK_DISTRIBUTED__COMM__TLS__CLIENT__KEY, or Dask's configuration file: docs/independence.md)",
        ) from None
    except (OSError, TimeoutError, ValueError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ParameterError("scheduler", f"cannot reach a Dask scheduler at {address!r}: {first}") from None


def _close(client) -> None:
    """Close the Dask client, quietly when its scheduler is gone already."""
    import contextlib

    with contextlib.suppress(Exception):
        client.close(timeout=10)
