"""MI matrices: the MI of every pair of columns of a table, its permutation p-value and the
Benjamini-Hochberg q-value over all pairs.

    from mitool.matrix import mi_matrix
    result = mi_matrix(data)                          # data (n, p): rows are samples
    result.statistic, result.pvalue, result.qvalue    # (p, p), symmetric, NaN on the diagonal
    result.to_csv("matrix.csv")                       # one row per pair i < j
    result.figure("matrix.png")                       # the heatmap, clustered by MI
    mi_matrix(data, out="runs/matrix")                # resumable: finished blocks are kept
    mi_matrix(data, client=Client("tcp://host:8786")) # on a Dask cluster, the same numbers

**Each pair** (a, b), a < b, is what :func:`mitool.independence_test` makes of column a as X and
column b as Y: the same statistic (KSG, k = 20, on rank scores for continuous columns, with the
linear statistic beside it and the min-p combination of the two for the p-value; the plug-in,
Ross, the chain rule over atoms for discrete columns and ties; Frenzel & Pompe's conditional KSG
with ``given``) and the estimator's interval, as :func:`mitool.feature_mi` gives it.
The pair's randomness is its own seed, :func:`pair_seed` (seed, a, b), whatever order the pairs
are computed in, by which process or on which machine: ``independence_test(data[:, a], data[:, b],
permutations=B, seed=pair_seed(seed, a, b))`` alone gives the pair's statistic (and, with
``null="pair"``, its p-value).

**The shared null** (``null="shared"``, the default). The KSG and linear statistics on rank scores
depend on the data only through the ranks, and under H0 (X and Y independent, continuous, no ties) the ranks
of Y given those of X are a uniform random permutation, whatever the marginals. The permutation
distribution of the statistics is therefore the same for every such pair: that of
(T(g, g o sigma), L(g, g o sigma)), g the n normal scores and sigma uniform. One set of B
permutations, made once, serves all of them, and each p-value, the min-p combination of the pair's
(T_ab, L_ab) against those B rows (:func:`mitool.independence.min_p_combination`; for one
statistic p = (1 + #{b : T_b >= T_ab}) / (1 + B)), is exactly as valid as the pair's own
permutation test (Phipson & Smyth 2010): the null rows are draws from the pair's own permutation
distribution, independent of its data. The cost is B statistics in all instead of B
per pair: 200 columns (19 900 pairs) of 1000 rows take 30 s on this project's 2-core machine with
2 workers and numba (``python bench/matrix_planted.py --columns 200 --rows 1000 --planted 20 --rho
0.3 --workers 2``; 106 s before the compiled neighbour search and counts), where B = 999 permutations per pair
would cost about 17 CPU hours. The p-values of different pairs share
the null draws, so they are positively dependent, which the Benjamini-Hochberg procedure allows
(Benjamini & Yekutieli 2001, positive regression dependence). Calibration, measured on 4350
independent pairs (30 columns of 1000 rows, Gaussian, Student t with 2 degrees of freedom and
exponential, 10 seeds, a null of 999 each): p <= 0.01, 0.05, 0.1 in 0.90%, 4.41%, 9.31% of them
(:data:`CALIBRATION`). A numeric column with repeated values is dequantised once (its own stream),
and each discrete column shares one null among its pairs with the numeric columns (Ross's and
Wilks' statistics on rank scores): :mod:`mitool.independence.shared_null` says why both are exact.
Pairs of two discrete columns, with missing values, a constant column, another estimator or
``given`` are tested by their own permutations (``null="pair"``: every pair, as
:func:`mitool.independence_test` tests it).

**Resolution.** With B permutations the smallest permutation p is 1 / (B + 1) (0.001 by
default). Over m pairs, the Benjamini-Hochberg q of a pair at that floor is at least m / ((B + 1) r)
when r pairs reach it: with 19 900 pairs and B = 999, a pair is found at q <= 0.05 only among about
400 such pairs or more. So for the pairs on the shared null that fewer than 10 null values reach,
the p-value is by default (``tail="gpd"``) that of a generalized Pareto tail fitted once to the
shared null (Knijnenburg et al. 2009, :func:`mitool.independence.tail_pvalue`): p = (N_exc / B)
(1 - F(T - t)) over the threshold t of the N_exc largest null values, an estimate that goes below
1 / (B + 1). The result's ``tail_pairs`` and notes say which pairs have one, ``tail_fit`` the fit.
On the KSG rank null it is conservative (a negative fitted shape is extrapolated as the exponential
tail; measured in tail_pvalue's docstring), and an estimate rather than a p-value exact by
construction; ``tail="none"`` keeps the permutation p-values, and the notes then say when pairs
miss q <= 0.05 for want of resolution alone. Raising B also helps (``permutations=99_999``: the
shared null costs B statistics once, spread over the workers in blocks of :data:`NULL_BLOCK`). A
normal tail fitted to the null would not be a valid way round it: the null is skewed to the right
(skewness 0.21 at n = 1000, k = 20, from 20 000 permutations), and the normal puts 3e-4 beyond its
0.999 quantile.

**Resumable.** With ``out`` a folder, the pairs go in blocks (:func:`block_size` pairs each, a
number that depends only on the number of pairs) and the shared null in blocks of
:data:`NULL_BLOCK` permutations; each finished block is written atomically
(:mod:`mitool._infra.files`: a temporary file moved into place) under OUT/pairs and OUT/null, next to
OUT/config.json, which names the data (a fingerprint), the estimator and the seeds. A run stopped
at any point (Ctrl-C, SIGTERM, a lost machine) and started again with the same arguments reads the
finished blocks and computes the rest; other data or settings in the same folder are refused
(:class:`mitool._infra.runner.SettingsDiffer`). The folder's lock keeps two runs from writing it at once.

**Where it runs.** On one machine, in ``workers`` processes (default: the free cores,
:func:`mitool.runtime.free_cores`), each computing one block at a time on one thread (the k-d
trees' queries use :func:`mitool.runtime.chosen_threads`, 1 in a worker; nothing here uses BLAS or
torch), so the cores are not oversubscribed. With ``client``, a ``dask.distributed.Client``, the
blocks are submitted to its cluster instead, the data scattered to the workers once. Dask rather
than Ray: ``dask[distributed]`` is pure Python (pip installs it anywhere mitool installs, no
compiled core or its own object store), a ``LocalCluster`` starts in the test itself within
seconds (threads or processes), its futures map one-to-one onto our blocks (submit, as_completed,
cancel), a scheduler on an HPC or cloud cluster is one address (``--scheduler tcp://...``), and
its workers are ordinary Python processes, the process model of the rest of mitool (one thread
each, signals, no daemon to manage). The blocks are pure functions of the data and their seeds, so
a cluster gives the numbers a single process gives, bit for bit.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from mitool import checks
from mitool.independence.permutation_test import permutation_count
from mitool.independence.pvalues import FDR_METHODS
from mitool.independence.shared_null import dequantised_columns
from mitool.matrix.assemble import _assemble
from mitool.matrix.blocks import (
    NULL_BLOCK,
    Columns,
    Job,
    _labelled_null_task,
    _null_task,
    _pair_block,
    block_size,
    pair_seed,
    shared_null_block,
)
from mitool.matrix.blocks import _small_ksg as _small_ksg
from mitool.matrix.columns import (
    _columns_of,
    _dequantised_notes,
    _fast_job,
    _given_rows,
    _labelled_estimator,
    _labelled_pairs,
    _rank_column,
    _refuse_too_many_pairs,
)
from mitool.matrix.folder import _fingerprint, _folder, _load, _save
from mitool.matrix.result import COMBINED_FLOOR as COMBINED_FLOOR
from mitool.matrix.result import MatrixResult
from mitool.matrix.running import Task, _run_dask, _run_processes, _run_serial
from mitool.matrix.running import _dask_loss as _dask_loss

__all__ = [
    "CALIBRATION",
    "NULL_BLOCK",
    "MatrixResult",
    "block_size",
    "mi_matrix",
    "pair_seed",
    "shared_null_block",
]

CALIBRATION = {
    "setting": "30 independent columns of 1000 rows (Gaussian, Student t with 2 degrees of freedom, "
    "exponential, in turn), 435 pairs, 10 seeds (4350 p-values), a shared null of 999 permutations each",
    "alpha": (0.01, 0.05, 0.1),
    "rejection_rate": (0.009, 0.0441, 0.0931),
    "command": "python bench/matrix_calibration.py --columns 30 --rows 1000 --seeds 10",
}
"""The shared null's calibration as measured (bench/results/independence/matrix_calibration.json):
the fraction of independent pairs with p <= alpha, p the min-p combination of KSG and the linear
statistic, ``tail="none"`` (a test of exact size has 0.01, 0.05, 0.1; the binomial standard error
at 0.05 is 0.003)."""

PARALLEL_WORK = 300_000
"""Rows times work units (pairs, permutations) below which the default is this process alone
(about a second of work: less than starting the worker processes costs)."""


def mi_matrix(
    data: Any,
    *,
    given: Any = None,
    estimator: str | None = None,
    permutations: int | None = None,
    seed: int = 0,
    workers: int | None = None,
    client: Any = None,
    out: str | Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    columns: Sequence[str] | None = None,
    null: str = "shared",
    tail: str = "gpd",
    fdr: str = "bh",
    **settings: Any,
) -> MatrixResult:
    """The MI of every pair of columns of ``data``, its p-value (by permutations, or from the shared
    null's tail) and the Benjamini-Hochberg (or, ``fdr="by"``, Benjamini-Yekutieli) q-value over all
    pairs (see the module).

    Parameters
    ----------
    data : array_like or pandas DataFrame, shape (n, p)
        One row per sample, one variable per column (numbers, or labels in a DataFrame's or an
        object array's columns).
    given : array_like, shape (n, dz), optional
        Z: each pair tested given Z (its own local permutations; no shared null).
    estimator : str, optional
        The statistic, as :func:`mitool.independence_test` takes it (default: the k-NN statistic).
    permutations : int, optional
        B (default 999): of the shared null, or of each pair that has its own.
    seed : int
        All the randomness; pair (a, b) has :func:`pair_seed` (seed, a, b), the shared null the
        streams (seed, block).
    workers : int, optional
        Processes on this machine (default: the free cores; 1: this process). Ignored with ``client``.
    client : dask.distributed.Client, optional
        Run the blocks on its cluster.
    out : str or Path, optional
        A folder for the finished blocks: a run started again with the same arguments goes on
        from them.
    progress : callable, optional
        ``progress(done, total)`` in work units (a pair, or a permutation of the shared null) after
        each block.
    columns : sequence of str, optional
        The columns' names (default: a DataFrame's, else x0, x1, ...).
    null : "shared" or "pair"
        The shared nulls (default): one for the pairs of numeric columns (those with repeated
        values dequantised once: ``.dequantised``), one per discrete column for its pairs with
        them; or every pair its own permutations (p-values equal to independence_test's with the
        pair's seed; B per pair).
    tail : "gpd" or "none"
        For the pairs on the shared null that fewer than 10 null values reach: "gpd" (default), the
        p-value of a generalized Pareto tail fitted once to the shared null
        (:func:`mitool.independence.tail_pvalue`; needs B >= 397, else the permutation p-value with a
        note); "none", the permutation p-value, whose floor is 1 / (B + 1). Pairs with their own
        permutations always have the permutation p-value.
    fdr : "bh" or "by"
        The q-values over the pairs: Benjamini-Hochberg (default; its bound needs the null pairs'
        p-values independent or positively dependent), or Benjamini-Yekutieli (a bound under any
        dependence, the q-values times sum_{i<=m} 1/i; :func:`mitool.independence.benjamini_yekutieli`).
    **settings
        The statistic's settings (``k=10``).

    Returns
    -------
    MatrixResult
        ``.statistic``, ``.ci_low``, ``.ci_high``, ``.pvalue``, ``.qvalue`` ((p, p), NaN on the
        diagonal), ``.columns``; ``.to_csv(path)``, ``.figure(path)``; ``print(result)``.

    Raises
    ------
    ParameterError
        Bad input in one line: fewer than two columns, NaN, a bad ``permutations``, a folder
        holding another matrix.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> data = rng.normal(size=(300, 4)); data[:, 1] += data[:, 0]
    >>> result = mi_matrix(data, permutations=99, workers=1)
    >>> result.statistic.shape, float(result.pvalue[0, 1]), bool(result.pvalue[2, 3] > 0.05)
    ((4, 4), 0.01, True)
    """
    start = time.perf_counter()
    checks.choice("null", null, ("shared", "pair"))
    checks.choice("tail", tail, ("gpd", "none"))
    checks.choice("fdr", fdr, FDR_METHODS)
    count, permutation_notes = permutation_count(permutations, estimator)
    table, names = _columns_of(data, columns)
    n, width = len(table[0]), len(table)
    given_rows = None if given is None else _given_rows(given, n)
    if workers is not None:
        checks.whole_number("workers", workers, 1)
    _refuse_too_many_pairs(width)
    pairs = np.column_stack(np.triu_indices(width, 1)).astype(np.intp)  # (a, b), a < b, row by row
    fingerprint, given_table, moved = _fingerprint(table), table, []
    if given_rows is None and null == "shared":  # ties broken within their resolution: no ties left
        table, moved = dequantised_columns(table, seed)
    ranked = np.array([_rank_column(column) for column in table])
    fast = ranked[pairs[:, 0]] & ranked[pairs[:, 1]] if given_rows is None else np.zeros(len(pairs), bool)
    job = None
    if fast.any():
        job = _fast_job(table, np.flatnonzero(ranked), estimator, count, seed, settings)
    if job is None:
        fast[:] = False
        job = Job(estimator, count, seed, dict(settings), n)
    shared = fast & (null == "shared")
    labelled = _labelled_pairs(table, pairs, ranked, job, given_rows is None and null == "shared")
    if (labelled >= 0).any():
        job = replace(job, labelled=_labelled_estimator(table, labelled, pairs, estimator, seed, settings))
        if job.labelled is None:
            labelled[:] = -1
    if not shared.any() and not (labelled >= 0).any() and moved:  # no pair shares a null: the data as given
        table, moved = given_table, []
    discrete_nulls = sorted({int(column) for column in labelled[labelled >= 0]})
    every_block = [
        (block, min(NULL_BLOCK, count - block * NULL_BLOCK)) for block in range(math.ceil(count / NULL_BLOCK))
    ]
    null_blocks = every_block if shared.any() else []
    size = block_size(len(pairs))
    blocks = [slice(begin, min(begin + size, len(pairs))) for begin in range(0, len(pairs), size)]
    config = {
        "kind": "mitool matrix", "version": 3, "data": fingerprint, "given": _fingerprint(given_rows),
        "columns": list(names), "estimator": estimator, "permutations": count, "seed": seed, "null": null,
        "settings": {key: repr(value) for key, value in sorted(settings.items())}, "block_pairs": size,
    }  # fmt: skip
    tasks: list[Task] = [
        (f"null-{block:05d}", _null_task, (job, block, number)) for block, number in null_blocks
    ]
    tasks += [(f"labels{column}-{block:05d}", _labelled_null_task, (job, column, block, number))
              for column in discrete_nulls for block, number in every_block]  # fmt: skip
    flags = (fast, shared, labelled)
    tasks += [(f"pairs-{index:05d}", _pair_block, (job, pairs[part], *(flag[part] for flag in flags)))
              for index, part in enumerate(blocks)]  # fmt: skip
    units = {
        key: (len(arguments[1]) if key.startswith("pairs") else arguments[-1]) for key, _, arguments in tasks
    }
    results, reused = _run_blocks(tasks, units, table, given_rows, config, out=out, progress=progress,
                                  client=client, workers=workers)  # fmt: skip
    notes = [*permutation_notes, *_dequantised_notes(names, moved)]
    return _assemble(names, n, pairs, blocks, fast, shared, null_blocks, results, job, null, reused,
                     notes, time.perf_counter() - start, tail, fdr, labelled=labelled,
                     discrete_nulls=discrete_nulls,
                     dequantised=tuple(names[index] for index in moved))  # fmt: skip


def _run_blocks(tasks: list[Task], units: dict[str, int], table: Columns, given_rows: np.ndarray | None,
                config: dict[str, Any], *, out: str | Path | None, client: Any, workers: int | None,
                progress: Callable[[int, int], None] | None) -> tuple[dict[str, Any], int]:  # fmt: skip
    """Every block's result by its key, and how many were read back from ``out``: the finished
    blocks kept there read first, the rest computed (on a Dask cluster, in worker processes or in
    this one), each saved as it finishes, ``progress`` told in work units."""
    total, results, reused = sum(units.values()), {}, 0
    with _folder(out, config) as folder:

        def path_of(key: str) -> Path:
            assert folder is not None
            kind, number = key.split("-")
            if kind == "pairs":
                return folder / "pairs" / f"block-{number}.npz"
            return folder / "null" / f"{'' if kind == 'null' else kind + '-'}block-{number}.npy"

        if folder is not None:
            for key, _, _ in tasks:
                stored = _load(path_of(key), units[key])
                if stored is not None:
                    results[key] = stored
            reused = len(results)
        pending = [task for task in tasks if task[0] not in results]

        def done(key: str, result: Any) -> None:
            if folder is not None:
                _save(path_of(key), result)
            results[key] = result
            if progress is not None:
                progress(sum(units[name] for name in results), total)

        if progress is not None:
            progress(sum(units[name] for name in results), total)
        if client is not None:
            _run_dask(pending, table, given_rows, done, client)
        else:
            small = len(table[0]) * sum(units[key] for key, _, _ in pending) < PARALLEL_WORK
            chosen = workers if workers is not None else 1 if small else _free_cores()
            parallel = min(chosen, len(pending))
            if parallel <= 1:
                _run_serial(pending, table, given_rows, done)
            else:
                _run_processes(pending, table, given_rows, done, parallel)
    return results, reused


def _free_cores() -> int:
    from mitool.runtime import free_cores

    return free_cores()
