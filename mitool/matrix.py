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
(:mod:`mitool.files`: a temporary file moved into place) under OUT/pairs and OUT/null, next to
OUT/config.json, which names the data (a fingerprint), the estimator and the seeds. A run stopped
at any point (Ctrl-C, SIGTERM, a lost machine) and started again with the same arguments reads the
finished blocks and computes the rest; other data or settings in the same folder are refused
(:class:`mitool.runner.SettingsDiffer`). The folder's lock keeps two runs from writing it at once.

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

import contextlib
import hashlib
import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from mitool import checks, estimators
from mitool.estimators.base import interval_text
from mitool.independence.features import feature_columns
from mitool.independence.permutation_test import check_size, permutation_count, run_test
from mitool.independence.pvalues import FDR_METHODS, FDR_NAMES, fdr_qvalues, min_p_combination
from mitool.independence.shared_null import (
    dequantised_columns,
    discrete_column,
    labelled_null_block,
    labelled_statistics,
    shared_null_block,
)
from mitool.independence.statistics import (
    TEST_DEFAULTS,
    ScoredSide,
    canonical_mi,
    digamma_table,
    ksg_statistic,
)
from mitool.independence.tails import TAIL_FLOOR, TAIL_REACHED, TailFit, bonferroni_tails, fit_tail

__all__ = [
    "CALIBRATION",
    "NULL_BLOCK",
    "MatrixResult",
    "block_size",
    "mi_matrix",
    "pair_seed",
    "shared_null_block",
]

COMBINED_FLOOR = 2 * TAIL_FLOOR
"""The least tail p-value of a pair: Bonferroni over its two statistics' tails, each at least
:data:`mitool.independence.tails.TAIL_FLOOR`; printed as "<2e-12" (the tails say only "below")."""

NULL_BLOCK = 100
"""Permutations of the shared null per block (a task of its own, a file of its own)."""

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

INTERVAL_BATCH = 8
"""Pairs whose interval subsets are computed together (all of their subsets' distances at once)."""

SMALL_SUBSET = 256
"""Subsets of the interval up to this many pairs are computed all pairs at once (the same numbers
as :func:`mitool.estimators.ksg.ksg`, tested); larger ones by ksg itself."""


def pair_seed(seed: int, a: int, b: int) -> int:
    """The seed of the pair of columns (a, b): its permutations, dequantisation and interval
    subsets, whatever runs it.

    Examples
    --------
    >>> pair_seed(0, 1, 2) == pair_seed(0, 1, 2) != pair_seed(0, 2, 1)
    True
    """
    return int(np.random.SeedSequence([seed, a, b, 0x3A7]).generate_state(1)[0])


def block_size(pairs: int) -> int:
    """Pairs per block: about 64 blocks in all, from 1 to 1000 pairs each (a function of the
    number of pairs alone, so that a resumed run, a cluster and one process cut the same blocks)."""
    return max(1, min(1000, math.ceil(pairs / 64)))


# --- the result ------------------------------------------------------------------------------------


@dataclass(frozen=True, repr=False)
class MatrixResult:
    """The MI matrix of :func:`mi_matrix`.

    columns: the column names. statistic, ci_low, ci_high, pvalue, qvalue: (p, p) arrays, symmetric,
    NaN on the diagonal: the MI (nats), the estimator's interval, the p-value and the
    Benjamini-Hochberg q-value over the p (p - 1) / 2 pairs. permutations: B. null: "shared",
    "pair" or "mixed" (which pairs used the shared null: ``shared_pairs``); null_values: the shared
    null (empty without one). method: what was done. notes: what was decided, each once. n_rows:
    the rows. seconds: wall time. reused_blocks: blocks read back from ``out`` rather than computed.
    tail: the ``tail`` asked for ("gpd" or "none"); tail_pairs: (p, p) booleans, the pairs whose
    p-value is the shared null's generalized Pareto tail (:func:`mitool.independence.tail_pvalue`)
    rather than a permutation p-value; tail_fit: that tail (None where none was fitted).
    linear: (p, p), the linear statistic of the pairs on the shared null (NaN elsewhere), and
    linear_null_values its shared null, on the same permutations as null_values.
    """

    columns: tuple[str, ...]
    statistic: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    pvalue: np.ndarray
    qvalue: np.ndarray
    permutations: int
    null: str
    method: str
    notes: tuple[str, ...]
    n_rows: int
    seconds: float
    reused_blocks: int = 0
    shared_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    null_values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tail: str = "none"
    tail_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=bool))
    tail_fit: TailFit | None = None
    linear_null_values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    linear: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    dequantised: tuple[str, ...] = ()
    """The columns dequantised once so that their pairs share a null (with ``null="shared"``)."""

    def __repr__(self) -> str:
        return (f"MatrixResult(columns={len(self.columns)}, n_rows={self.n_rows}, "
                f"permutations={self.permutations})")  # fmt: skip

    def pairs(self) -> list[tuple[str, str, float, float, float, float, float]]:
        """One row per pair a < b in the columns' order: (column_a, column_b, mi, ci_low, ci_high,
        pvalue, qvalue)."""
        rows = []
        for a, b in zip(*np.triu_indices(len(self.columns), 1), strict=True):
            rows.append((self.columns[a], self.columns[b], *(float(m[a, b]) for m in self._arrays())))
        return rows

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return self.statistic, self.ci_low, self.ci_high, self.pvalue, self.qvalue

    def to_csv(self, path: str | Path) -> Path:
        """Write the pairs (:meth:`pairs`) as CSV, atomically: column_a, column_b, mi, ci_low,
        ci_high, pvalue, qvalue; returns the path."""
        from mitool.files import write_csv

        path = Path(path)
        write_csv(path, ("column_a", "column_b", "mi", "ci_low", "ci_high", "pvalue", "qvalue"), self.pairs())
        return path

    def order(self) -> np.ndarray:
        """The columns in the order of a hierarchical clustering by MI (average linkage on the
        distance 1 - r, r = sqrt(1 - exp(-2 I)) the informational coefficient of correlation
        (Linfoot 1957), which is 0 for independence and tends to 1 with the MI)."""
        from scipy.cluster.hierarchy import leaves_list, linkage
        from scipy.spatial.distance import squareform

        count = len(self.columns)
        if count < 3:
            return np.arange(count)
        mi = np.nan_to_num(np.maximum(self.statistic, 0.0), nan=0.0)
        distance = np.sqrt(np.exp(-2.0 * mi))  # 1 - r <= sqrt(1 - r^2): the same order, no cancellation
        distance = (distance + distance.T) / 2
        np.fill_diagonal(distance, 0.0)
        return leaves_list(linkage(squareform(distance, checks=False), "average"))

    def figure(self, path: str | Path, alpha: float = 0.05) -> Path:
        """The heatmap of the MI (nats, negative estimates shown as 0), rows and columns in the
        clustering's order (:meth:`order`), a dot on each pair with q <= ``alpha``; written
        atomically to ``path`` (png, pdf or svg); returns the path."""
        from mitool.figures import PAGE_WIDTH, paper_style, save

        order = self.order()
        count = len(order)
        shown = np.maximum(self.statistic[np.ix_(order, order)], 0.0)
        found = self.qvalue[np.ix_(order, order)] <= alpha
        with paper_style() as plt:
            size = min(PAGE_WIDTH, max(3.5, 1.2 + 0.16 * count))
            figure, axes = plt.subplots(figsize=(size, size * 0.85))
            image = axes.imshow(shown, cmap="viridis", interpolation="nearest", vmin=0.0)
            rows, cols = np.nonzero(found)
            if len(rows):
                axes.scatter(cols, rows, s=max(1.0, 60.0 / max(count, 1)), c="white", marker="o",
                             linewidths=0, label=f"q <= {alpha:g}")  # fmt: skip
                axes.legend(loc="upper right", fontsize=7, frameon=True, markerscale=2)
            if count <= 60:
                names = [self.columns[index] for index in order]
                axes.set_xticks(range(count), names, rotation=90)
                axes.set_yticks(range(count), names)
            else:
                axes.set_xticks([])
                axes.set_yticks([])
            axes.set_title(f"MI of {count} columns, {self.n_rows} rows (clustered by MI)")
            figure.colorbar(image, ax=axes, label="MI (nats)", shrink=0.8)
            return save(figure, path)

    def __str__(self) -> str:
        """A sentence, and the pairs of highest MI (at most 10)."""
        count = len(self.columns)
        upper = np.triu_indices(count, 1)
        found = int(np.count_nonzero(self.qvalue[upper] <= 0.05))
        tailed = int(np.count_nonzero(self.tail_pairs[upper])) if self.tail_pairs.size else 0
        scheme = f"{self.null} null" + (f"; {tailed} p-value(s) from its GPD tail" if tailed else "")
        lines = [
            f"MI matrix of {count} columns ({len(upper[0])} pairs), {self.n_rows} rows; {self.permutations} "
            f"permutations ({scheme}); {found} pair(s) at q <= 0.05."
        ]
        best = sorted(self.pairs(), key=lambda row: -row[2] if math.isfinite(row[2]) else math.inf)[:10]
        if best:
            width = max(6, *(len(row[0]) + len(row[1]) + 3 for row in best))
            lines.append(f"{'pair':<{width}}  {'MI (nats)':>9}  {'interval':>17}  {'p':>7}  {'q':>7}")
            for a, b, mi, low, high, p, q in best:
                interval = interval_text(low, high)
                shown = f"<{COMBINED_FLOOR:.0e}" if p <= COMBINED_FLOOR else f"{p:.3g}"
                lines.append(f"{a + ' ~ ' + b:<{width}}  {mi:>9.4f}  {interval:>17}  {shown:>7}  {q:>7.3g}")
        return "\n".join(lines)


# --- the blocks: pure functions of the data and their seeds ----------------------------------------


@dataclass(frozen=True)
class _Job:
    """What every block of one matrix shares."""

    estimator: str | None
    permutations: int
    seed: int
    settings: dict[str, Any]
    n: int
    ks: tuple[int, ...] = ()
    """The fast path's k .. k_max (empty: no pair takes it)."""
    subsets: int = 0
    level: float = 0.95
    minimum: int = 2
    interval: Any = None
    """The fast path's estimator (KSG on rank scores), which gives the interval itself where it
    reports a bound rather than an estimate (near its ceiling)."""
    label_k: int = 0
    """Ross's k for a discrete column against a continuous one on a discrete column's null (0: none)."""


Columns = Sequence[np.ndarray]
"""The data as the blocks take them: one array per column, float64 numbers or object labels."""


def _column(data: Columns, index: int) -> np.ndarray:
    return data[index]


def _pair_block(data: Columns, given: np.ndarray | None, job: _Job, pairs: np.ndarray,
                fast: np.ndarray, shared: np.ndarray, labelled: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """The pairs of one block: statistic, interval, p-value (NaN where a shared null gives it) and
    the notes (each once). ``labelled``: for each pair on a discrete column's null, that column
    (-1 elsewhere)."""
    count = len(pairs)
    out = {name: np.full(count, np.nan) for name in ("statistic", "ci_low", "ci_high", "pvalue", "linear")}
    notes: list[str] = []
    sides: dict[int, ScoredSide] = {}
    waiting: list[tuple[int, int, int, int]] = []  # fast pairs whose interval is made in batches
    for row, (a, b) in enumerate(pairs.tolist()):
        seed = pair_seed(job.seed, a, b)
        if labelled[row] >= 0:  # Ross's and the linear statistic; the p-value from the column's null
            other = b if labelled[row] == a else a
            if other not in sides:
                sides[other] = ScoredSide.of(_column(data, other)[:, None], "rank")
            codes = _codes(_column(data, int(labelled[row])))
            statistic, out["linear"][row] = labelled_statistics(sides[other].scores, codes, job.label_k)(
                np.arange(job.n)
            )
            ross = estimators.get("ross", k=job.label_k, subsets=job.subsets, level=job.level)
            estimate = ross.estimate(sides[other].scores, codes[:, None], seed=seed)
            out["ci_low"][row], out["ci_high"][row] = estimate.ci_low, estimate.ci_high
            out["statistic"][row] = statistic
            continue
        if fast[row] and shared[row]:  # the statistic alone; the p-value from the shared null
            for index in (a, b):
                if index not in sides:
                    sides[index] = ScoredSide.of(_column(data, index)[:, None], "rank")
            statistic = ksg_statistic(sides[a], sides[b], job.ks[0], job.ks[-1])(np.arange(job.n))
            out["linear"][row] = canonical_mi(sides[a].basis, sides[b].basis)
        else:
            x, y = _column(data, a), _column(data, b)
            result, prepared = run_test(x, y, given, estimator=job.estimator, permutations=job.permutations,
                                        seed=seed, settings=job.settings)  # fmt: skip
            statistic, out["pvalue"][row] = result.statistic, result.pvalue
            notes.extend(note for note in result.notes if note not in notes and _general(note))
        out["statistic"][row] = statistic
        if fast[row] and _near_ceiling(statistic, job):  # the estimator's own answer: a bound, open above
            estimate = job.interval.estimate(_column(data, a), _column(data, b), seed=seed)
            out["ci_low"][row], out["ci_high"][row] = estimate.ci_low, estimate.ci_high
        elif fast[row]:
            waiting.append((row, a, b, seed))
        else:
            out["ci_low"][row], out["ci_high"][row] = _interval(prepared, seed)
    for begin in range(0, len(waiting), INTERVAL_BATCH):
        _fast_intervals(data, waiting[begin : begin + INTERVAL_BATCH], job, out)
    out["notes"] = notes
    return out


def _general(note: str) -> bool:
    """A note worth keeping for the matrix: not the per-pair description of x and y, nor a pair's
    share of repeats in its local permutations."""
    return not note.startswith(("x:", "y:", "x is the discrete side", "local permutation:"))


def _interval(prepared: Any, seed: int) -> tuple[float, float]:
    """The estimator's interval for a pair that is not on the fast path (as :func:`mitool.feature_mi`)."""
    if prepared.exact is not None:
        return 0.0, 0.0
    if prepared.z_discrete:  # the test's statistic is within the groups of Z
        return math.nan, math.nan
    estimate = prepared.estimator.estimate(prepared.x, prepared.y, prepared.z, seed=seed)
    return float(estimate.ci_low), float(estimate.ci_high)


def _used_subsets(job: _Job) -> tuple[int, int]:
    """(subsets, pairs per subset) of the estimator's interval, as
    :func:`mitool.estimators.subsets.subset_estimate` chooses them."""
    from mitool.estimators.subsets import subset_size

    used = min(job.subsets, job.n // max(job.minimum, 1))
    return used, subset_size(job.n, max(used, 1))


def _t_quantile(job: _Job) -> float:
    """The Student-t quantile of the fast path's interval (computed once per block)."""
    used, _ = _used_subsets(job)
    if not job.ks or used < 2:
        return math.nan
    from scipy import stats

    return float(stats.t.ppf(0.5 + job.level / 2, used - 1))


def _fast_intervals(data: Columns, waiting: list[tuple[int, int, int, int]], job: _Job,
                    out: dict[str, Any]) -> None:  # fmt: skip
    """The intervals of KSG's estimates of the pairs ``waiting`` (row, a, b, seed) into ``out``, as
    :func:`mitool.estimators.subsets.subset_estimate` makes them (the estimator on disjoint subsets
    of the pair's rows with its numbers of neighbours on them, their spread scaled by
    sqrt(size / n), Student's t around the estimate), the subsets of all the pairs computed at once."""
    from mitool.estimators.ksg import ksg
    from mitool.estimators.subsets import subset_neighbours

    used, size = _used_subsets(job)
    if used < 2 or not waiting:
        return
    quantile = _t_quantile(job)
    subsets = []
    for _, _, _, seed in waiting:
        order = np.random.default_rng(seed).permutation(job.n)
        subsets.append(np.stack(np.array_split(order[: size * used], used)))
    xs = np.concatenate([_column(data, a)[rows] for (_, a, _, _), rows in zip(waiting, subsets, strict=True)])
    ys = np.concatenate([_column(data, b)[rows] for (_, _, b, _), rows in zip(waiting, subsets, strict=True)])
    k, k_max = job.ks[0], job.ks[-1] if len(job.ks) > 1 else 0
    k, k_max = subset_neighbours({"k": k, "k_max": k_max}, size, job.n).values()
    if size <= SMALL_SUBSET:
        values = _small_ksg(xs, ys, range(k, max(k, k_max) + 1)).reshape(len(waiting), used)
    else:
        values = np.array([ksg(x[:, None], y[:, None], k=k, k_max=k_max, normalise="rank")
                           for x, y in zip(xs, ys, strict=True)]).reshape(len(waiting), used)  # fmt: skip
    for (row, _, _, _), spread in zip(waiting, values, strict=True):
        stderr = float(spread.std(ddof=1) * math.sqrt(size / job.n))
        half = quantile * stderr
        out["ci_low"][row], out["ci_high"][row] = out["statistic"][row] - half, out["statistic"][row] + half


def _near_ceiling(value: float, job: _Job) -> bool:
    """Whether KSG reports ``value`` as a lower bound (within its saturation gap of psi(n) -
    psi(k)), with a margin for the last bits in which the statistic and ksg's own value may differ."""
    from mitool.estimators import ksg as module

    k, k_max = job.ks[0], job.ks[-1] if len(job.ks) > 1 else 0
    return value >= module.ksg_ceiling(job.n, k, k_max) - module.saturation_gap(2, job.n, k, k_max) - 1e-9


def _small_ksg(x: np.ndarray, y: np.ndarray, ks: Sequence[int]) -> np.ndarray:
    """KSG on rank scores (:func:`mitool.estimators.ksg.ksg` with ``normalise="rank"``, the same
    numbers) of each row of x and y, (m, s) values without ties, the rows' joint distances all at
    once. The normal scores are those of :func:`mitool.estimators.preparation.normal_scores` (its
    interpolation is exact at the data: the score of rank r is g_r = Phi^-1((r + 1/2) / s)), so
    with the points of a row in the order of their x-rank the x-distances are the table
    |g_r - g_r'| and the y-distances the same table at the y-ranks: the k-d tree's floats, without a
    subtraction per pair of points. The counts strictly within are the sorted counts of
    :func:`mitool.independence.ksg_statistic` on the one sorted table of scores all rows share, and
    each row's mean is taken in its own order."""
    from scipy.special import digamma, ndtri

    from mitool.estimators.neighbours import sorted_counts, strict_reach

    m, size = x.shape
    table = ndtri((np.arange(size) + 0.5) / size)
    distances = np.abs(table[:, None] - table[None, :])
    by_x = np.argsort(x, axis=1, kind="stable")  # row i of a subset in x order: x-rank i
    rank_y = np.empty((m, size), dtype=np.intp)
    np.put_along_axis(rank_y, np.argsort(y, axis=1, kind="stable"), np.arange(size)[None, :], axis=1)
    y_in_x_order = np.take_along_axis(rank_y, by_x, axis=1)
    joint = distances[y_in_x_order[:, :, None], y_in_x_order[:, None, :]]
    np.maximum(joint, distances, out=joint)
    joint.partition(list(ks), axis=2)
    psi = digamma_table(size)
    ranks_x = np.broadcast_to(np.arange(size), (m, size)).reshape(-1)
    values = np.empty((m, len(ks)))
    for column, k in enumerate(ks):
        reach = strict_reach(joint[:, :, k].reshape(-1))
        count_x = sorted_counts(table, table[ranks_x], ranks_x, reach)
        count_y = sorted_counts(table, table[y_in_x_order.reshape(-1)], y_in_x_order.reshape(-1), reach)
        terms = np.empty((m, size))
        np.put_along_axis(terms, by_x, (psi[count_x + 1] + psi[count_y + 1]).reshape(m, size), axis=1)
        constant = digamma(k) + digamma(size)
        for row in range(m):
            values[row, column] = constant - np.mean(terms[row])
    return np.array([float(np.mean(values[row])) for row in range(m)])


def _null_task(data: Columns, given: np.ndarray | None, job: _Job, block: int, count: int) -> np.ndarray:
    return shared_null_block(job.n, job.ks, job.seed, block, count)


def _labelled_null_task(data: Columns, given: np.ndarray | None, job: _Job, column: int, block: int,
                        count: int) -> np.ndarray:  # fmt: skip
    return labelled_null_block(_codes(data[column]), job.label_k, job.seed, column, block, count)


def _codes(column: np.ndarray) -> np.ndarray:
    from mitool.estimators.rows import category_codes

    return category_codes(column[:, None])


# --- where the blocks run ---------------------------------------------------------------------------

_WORKER_DATA: tuple[Columns, np.ndarray | None] | None = None


def _set_worker_data(data: Columns, given: np.ndarray | None, owner: int) -> None:
    """A worker process's initializer: killed with its parent (:func:`mitool.processes.die_with_parent`;
    ``owner`` the PID that made the pool); the data, once; one thread for everything."""
    import os
    import signal

    from mitool.processes import die_with_parent

    die_with_parent(owner)
    global _WORKER_DATA
    _WORKER_DATA = (data, given)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's: it ends the workers
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from mitool import runtime

    runtime._chosen = 1  # a forked worker inherits the parent's count: the trees' queries get one thread
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[name] = "1"
    if "torch" in __import__("sys").modules:  # pragma: no cover - nothing here imports it
        __import__("torch").set_num_threads(1)


def _in_worker(function: Callable[..., Any], *arguments: Any) -> Any:
    assert _WORKER_DATA is not None
    return function(*_WORKER_DATA, *arguments)


Task = tuple[str, Callable[..., Any], tuple[Any, ...]]
"""A block: its key (its file's name), the function and its arguments after (data, given)."""


def _run_serial(tasks: list[Task], data: Columns, given: np.ndarray | None,
                done: Callable[[str, Any], None]) -> None:  # fmt: skip
    for key, function, arguments in tasks:
        done(key, function(data, given, *arguments))


def _run_processes(tasks: list[Task], data: Columns, given: np.ndarray | None,
                   done: Callable[[str, Any], None], workers: int) -> None:  # fmt: skip
    """The blocks in ``workers`` processes; an interrupt cancels what has not started. The workers
    are forked where the parent runs no other thread (they inherit the data and mitool's imports,
    and a script without a ``__main__`` guard works); otherwise they start from a fork server (or
    fresh, where there is none), which re-imports the main module as multiprocessing does. Either
    way a worker dies with this process (:func:`_set_worker_data`). A worker that dies under the
    run (killed, or by the out-of-memory killer) stops it with
    :class:`mitool.processes.WorkersLost`; the finished blocks are already saved."""
    import multiprocessing
    import os
    import threading
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    from mitool.processes import WorkersLost

    methods = multiprocessing.get_all_start_methods()
    if "fork" in methods and threading.active_count() == 1:
        method = "fork"
    else:
        method = "forkserver" if "forkserver" in methods else "spawn"
    context = multiprocessing.get_context(method)
    executor = ProcessPoolExecutor(
        max_workers=workers, mp_context=context, initializer=_set_worker_data,
        initargs=(data, given, os.getpid()),
    )  # fmt: skip
    finished_all, broken, started = False, False, {}
    try:
        running = {}
        for key, function, arguments in tasks:
            running[executor.submit(_in_worker, function, *arguments)] = key
            started.update(getattr(executor, "_processes", None) or {})
        while running:
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                done(running.pop(future), future.result())
        finished_all = True
    except BrokenProcessPool:
        broken = True
    finally:
        if not finished_all:  # stopped: the blocks under way are lost, their workers ended now
            for process in list((getattr(executor, "_processes", None) or {}).values()):
                process.terminate()
        executor.shutdown(wait=True, cancel_futures=True)
    if broken:  # the workers joined: their exit codes are known
        raise WorkersLost(_how_a_worker_ended(started.values()))


def _how_a_worker_ended(processes: Any) -> str:
    """What ended the pool's workers, from their exit codes, in words: the first that did not end
    by SIGTERM (what the pool sends the others once one is lost), else SIGTERM."""
    import signal

    codes = [process.exitcode for process in processes if process.exitcode not in (None, 0)]
    codes.sort(key=lambda code: code == -signal.SIGTERM)
    if not codes:
        return "a worker process ended abruptly"
    if codes[0] == -signal.SIGKILL:
        return "a worker process was killed (SIGKILL: by hand, or by the out-of-memory killer)"
    if codes[0] < 0:
        name = signal.Signals(-codes[0]).name if -codes[0] in signal.valid_signals() else -codes[0]
        return f"a worker process was killed by signal {name}"
    return f"a worker process exited with code {codes[0]}"


def _run_dask(tasks: list[Task], data: Columns, given: np.ndarray | None,
              done: Callable[[str, Any], None], client: Any) -> None:  # fmt: skip
    """The blocks on a Dask cluster: the data scattered once, one task per block. A lost scheduler
    or lost workers (the blocks under way cancelled, the scattered data gone with the workers that
    held it, a block whose workers died each time it ran) stop the run with
    :class:`mitool.processes.WorkersLost`; the finished blocks are already saved."""
    from concurrent.futures import CancelledError

    from distributed import KilledWorker, as_completed

    from mitool.processes import WorkersLost

    lost = (CancelledError, KilledWorker, OSError, TimeoutError)  # CommClosedError is an OSError
    futures: dict[Any, str] = {}
    try:
        try:
            data_future = client.scatter(data, broadcast=True, hash=False)
            given_future = None if given is None else client.scatter(given, broadcast=True, hash=False)
            for key, function, arguments in tasks:
                futures[client.submit(function, data_future, given_future, *arguments, pure=False)] = key
        except lost as error:
            raise WorkersLost(_dask_loss(error, client)) from None
        for future in as_completed(list(futures)):
            try:
                result = future.result()
            except lost as error:
                raise WorkersLost(_dask_loss(error, client)) from None
            done(futures[future], result)
    finally:
        with contextlib.suppress(*lost):
            client.cancel([future for future in futures if not future.done()])


def _dask_loss(error: BaseException, client: Any) -> str:
    """What a Dask error raised while the blocks ran says was lost, in words."""
    from distributed import KilledWorker

    address = getattr(getattr(client, "scheduler", None), "address", None) or "its address"
    if isinstance(error, KilledWorker):
        times = error.allowed_failures + 1
        return f"Dask workers died running a block, {times} times (killed, or out of memory: see their logs)"
    reason = getattr(error, "reason", None)
    if reason is None or reason == "scheduler-connection-lost":
        return f"the connection to the Dask scheduler at {address} was lost"
    return f"the Dask cluster lost its workers, and with them the data and the blocks under way ({reason})"


# --- the folder -------------------------------------------------------------------------------------


def _fingerprint(columns: Sequence[np.ndarray] | np.ndarray | None) -> str | None:
    """A short hash of the data, so that a folder is resumed only with the data that began it."""
    if columns is None:
        return None
    digest = hashlib.sha256()
    for array in [columns] if isinstance(columns, np.ndarray) else columns:
        digest.update(f"{array.shape}{array.dtype.kind}".encode())
        if array.dtype == object:
            digest.update("\x1f".join(map(repr, array.reshape(-1).tolist())).encode())
        else:
            digest.update(np.ascontiguousarray(array, dtype=np.float64).tobytes())
    return digest.hexdigest()[:24]


def _save(path: Path, result: Any) -> None:
    from mitool.files import atomic_writer

    with atomic_writer(path) as stream:
        if isinstance(result, dict):
            arrays = {name: value for name, value in result.items() if name != "notes"}
            np.savez(stream, notes=np.array(json.dumps(result["notes"])), **arrays)
        else:
            np.save(stream, np.asarray(result))


def _load(path: Path, rows: int) -> Any:
    """A finished block of ``rows`` pairs or permutations, or None when it is not there, or not
    whole (a file cut short or emptied by a crash of the disk or its machine, damaged, of another
    length): then it is computed again, and written anew. Whatever a damaged file makes numpy,
    zipfile or json raise (OSError, ValueError, EOFError, BadZipFile, NotImplementedError for an
    unknown compression, a tokenizer error in the header, ...) means the same."""
    if not path.is_file():
        return None
    try:
        if path.suffix == ".npy":
            result = np.load(path, allow_pickle=False)
            return result if result.ndim >= 1 and len(result) == rows else None
        with np.load(path, allow_pickle=False) as stored:
            result = {name: stored[name] for name in stored.files if name != "notes"}
            result["notes"] = json.loads(str(stored["notes"]))
        whole = isinstance(result["notes"], list) and all(
            value.ndim == 1 and len(value) == rows for name, value in result.items() if name != "notes"
        )
        return result if whole else None
    except Exception:  # any failure to read it means that it is not a finished block
        return None


@contextlib.contextmanager
def _folder(out: str | Path | None, config: dict[str, Any]) -> Iterator[Path | None]:
    """The output folder, made, its lock held and its config checked (None: no folder)."""
    if out is None:
        yield None
        return
    from mitool.locks import hold_folder
    from mitool.runner import check_config, make_out

    path = make_out(out)
    with hold_folder(path):
        check_config(path / "config.json", config, write=True, compared=sorted(config))
        (path / "pairs").mkdir(exist_ok=True)
        (path / "null").mkdir(exist_ok=True)
        yield path


# --- the matrix ---------------------------------------------------------------------------------------


def _columns_of(data: Any, columns: Sequence[str] | None) -> tuple[list[np.ndarray], tuple[str, ...]]:
    """The table's columns, each float64 numbers (NaN where missing) or an object array of labels
    (None where missing), and their names."""
    from mitool.estimators.base import FEWEST_PAIRS, holds_labels
    from mitool.estimators.values import safe_scale
    from mitool.independence.features import column_names

    parts = feature_columns(data)
    names = column_names(data, len(parts), columns)
    table = []
    for name, part in zip(names, parts, strict=True):
        if holds_labels(part):
            table.append(np.asarray(part, dtype=object))
            continue
        try:
            column = np.asarray(part, dtype=np.float64)
        except (TypeError, ValueError):
            raise checks.ParameterError(
                "data", f"column {name} must hold numbers or labels (strings), got {np.asarray(part).dtype}"
            ) from None
        if np.isinf(column).any():
            row = int(np.argmax(np.isinf(column)))
            raise checks.ParameterError("data", f"holds infinite values (first in column {name}, row {row})")
        safe_scale(f"column {name}", column[:, None])  # an extreme value is refused naming its column
        table.append(column)  # NaN: a missing value, left out of each pair it is in
    if len(table) and len(table[0]) < FEWEST_PAIRS:
        raise checks.TooFewSamples("data", f"has {len(table[0])} row(s); an MI needs at least {FEWEST_PAIRS}")
    if len(table) < 2:
        raise checks.ParameterError("data", f"needs at least two columns, got {len(table)}")
    if len(set(names)) != len(names):
        repeated = sorted({name for name in names if names.count(name) > 1})
        raise checks.ParameterError("columns", f"must name each column once; repeated: {', '.join(repeated)}")
    return table, names


def _given_rows(given: Any, n: int) -> np.ndarray:
    """Z as an array of n rows (checked as :func:`mitool.estimate` checks it; labels kept); its
    errors name ``given``."""
    from mitool.estimators.base import as_rows

    try:
        rows = len(given)
    except TypeError:
        rows = None
    if rows is not None and rows != n:
        raise checks.ParameterError(
            "given", f"must have one row per row of {{=data}}: {rows} rows against {n}", listed=("data",)
        )
    try:
        as_rows(np.zeros(n), given, None)
    except checks.ParameterError as error:
        if error.parameter != "y":
            raise
        raise checks.ParameterError("given", error.template, error.listed) from None
    if hasattr(given, "to_numpy"):
        given = given.to_numpy()
    if hasattr(given, "detach"):
        given = given.detach().cpu().numpy()
    return np.asarray(given)


def _rank_column(column: np.ndarray) -> bool:
    """Whether the shared null may serve the column: numbers without ties (so not constant, not
    discrete, nothing to dequantise) and without missing values (a pair with them has its own rows)."""
    return column.dtype != object and not np.isnan(column).any() and len(np.unique(column)) == len(column)


def _fast_job(table: Columns, candidates: np.ndarray, estimator: str | None, permutations: int, seed: int,
              settings: dict[str, Any]) -> _Job | None:  # fmt: skip
    """The job of the fast path (KSG on rank scores, 1 + 1 columns), or None when the statistic for
    two tie-free columns is another one (an estimator named, normalise="standard")."""
    from mitool.estimation import prepare

    first, second = (int(index) for index in candidates[:2])
    options = {"estimator": estimator, "seed": seed, **settings}
    prepared = prepare(table[first], table[second], defaults=TEST_DEFAULTS, **options)
    chosen = prepared.estimator
    if chosen is None or chosen.name != "ksg" or chosen.settings.normalise != "rank":
        return None
    check_size(chosen, prepared)
    ks = tuple(range(chosen.settings.k, max(chosen.settings.k, chosen.settings.k_max) + 1))
    return _Job(estimator, permutations, seed, dict(settings), len(table[0]), ks, chosen.settings.subsets,
                chosen.settings.level, chosen.minimum_pairs(1, 1), chosen)  # fmt: skip


def _labelled_pairs(
    table: Columns, pairs: np.ndarray, ranked: np.ndarray, job: _Job, allowed: bool
) -> np.ndarray:
    """For each pair of a discrete column and a continuous one without ties (on the fast path's
    rank scores), the discrete column; -1 for the others."""
    labelled = np.full(len(pairs), -1, dtype=np.intp)
    if not allowed or not job.ks:
        return labelled
    discrete = np.array([discrete_column(column) for column in table])
    for row, (a, b) in enumerate(pairs.tolist()):
        if discrete[a] and ranked[b]:
            labelled[row] = a
        elif discrete[b] and ranked[a]:
            labelled[row] = b
    return labelled


def _label_k(table: Columns, labelled: np.ndarray, pairs: np.ndarray, estimator: str | None, seed: int,
             settings: dict[str, Any]) -> int:  # fmt: skip
    """Ross's k as the test takes it for a discrete column against a continuous one, or 0 where its
    statistic is another (an estimator named)."""
    from mitool.estimation import prepare

    row = int(np.flatnonzero(labelled >= 0)[0])
    a, b = (int(index) for index in pairs[row])
    options = {"estimator": estimator, "seed": seed, **settings}
    prepared = prepare(table[a], table[b], defaults=TEST_DEFAULTS, **options)
    chosen = prepared.estimator
    if chosen is None or chosen.name != "ross":
        return 0
    check_size(chosen, prepared)
    return int(chosen.settings.k)


def _dequantised_notes(names: tuple[str, ...], moved: list[int]) -> list[str]:
    if not moved:
        return []
    listed = ", ".join(names[index] for index in moved[:8]) + (", ..." if len(moved) > 8 else "")
    return [
        f"{len(moved)} column(s) with repeated values ({listed}) were dequantised once each (uniform noise "
        "within their resolution, which leaves the MI unchanged; mitool.ties) so that their pairs share a "
        "null; point masses then blur the k-NN statistics (mitool estimate takes their chain rule), and "
        "null='pair' (--null pair) tests each pair as mitool test does"
    ]


PAIR_BYTES = 150
"""Memory a pair of columns takes while a matrix is made (its indices, flags, five results and
their q-value), beside the (p x p) matrices of the result, for :func:`_refuse_too_many_pairs`."""


def _refuse_too_many_pairs(width: int) -> None:
    """A one-line refusal, before any work, of a matrix whose pairs would not fit in the free memory
    (10 000 columns: 50 million pairs, once 6.7 GB before a word was said)."""
    from mitool.runtime import refuse_beyond_memory

    pairs = width * (width - 1) // 2
    refuse_beyond_memory(
        "data", PAIR_BYTES * pairs + 6 * 8.0 * width**2, f"a matrix of {width} columns ({pairs} pairs)",
        "pair fewer columns (--columns), or reduce them first (clusters, principal components)",
    )  # fmt: skip


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
    fingerprint, moved = _fingerprint(table), []
    if given_rows is None and null == "shared":  # ties broken within their resolution: no ties left
        table, moved = dequantised_columns(table, seed)
    ranked = np.array([_rank_column(column) for column in table])
    fast = ranked[pairs[:, 0]] & ranked[pairs[:, 1]] if given_rows is None else np.zeros(len(pairs), bool)
    job = None
    if fast.any():
        job = _fast_job(table, np.flatnonzero(ranked), estimator, count, seed, settings)
    if job is None:
        fast[:] = False
        job = _Job(estimator, count, seed, dict(settings), n)
    shared = fast & (null == "shared")
    labelled = _labelled_pairs(table, pairs, ranked, job, given_rows is None and null == "shared")
    if (labelled >= 0).any():
        job = replace(job, label_k=_label_k(table, labelled, pairs, estimator, seed, settings))
        if not job.label_k:
            labelled[:] = -1
    if not shared.any() and not (labelled >= 0).any() and moved:  # no pair shares a null: the data as given
        table, moved = _columns_of(data, columns)[0], []
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
            small = n * sum(units[key] for key, _, _ in pending) < PARALLEL_WORK
            chosen = workers if workers is not None else 1 if small else _free_cores()
            parallel = min(chosen, len(pending))
            if parallel <= 1:
                _run_serial(pending, table, given_rows, done)
            else:
                _run_processes(pending, table, given_rows, done, parallel)
    notes = [*permutation_notes, *_dequantised_notes(names, moved)]
    return _assemble(names, n, pairs, blocks, fast, shared, null_blocks, results, job, null, reused,
                     notes, time.perf_counter() - start, tail, fdr, labelled=labelled,
                     discrete_nulls=discrete_nulls,
                     dequantised=tuple(names[index] for index in moved))  # fmt: skip


def _free_cores() -> int:
    from mitool.runtime import free_cores

    return free_cores()


def _assemble(names: tuple[str, ...], n: int, pairs: np.ndarray, blocks: list[slice], fast: np.ndarray,
              shared: np.ndarray, null_blocks: list, results: dict[str, Any], job: _Job, null: str,
              reused: int, notes: list[str], seconds: float, tail: str = "none", fdr: str = "bh", *,
              labelled: np.ndarray, discrete_nulls: list[int],
              dequantised: tuple[str, ...]) -> MatrixResult:  # fmt: skip
    width = len(names)
    per_pair = {name: np.concatenate([results[f"pairs-{index:05d}"][name] for index in range(len(blocks))])
                for name in ("statistic", "ci_low", "ci_high", "pvalue", "linear")}  # fmt: skip
    null_rows = (np.concatenate([results[f"null-{block:05d}"] for block, _ in null_blocks])
                 if null_blocks else np.zeros((0, 2)))  # fmt: skip
    reached = np.zeros(len(pairs), dtype=np.intp)
    if shared.any():
        observed = np.column_stack([per_pair["statistic"][shared], per_pair["linear"][shared]])
        per_pair["pvalue"][shared] = min_p_combination(observed, null_rows)[0]
        reached[shared] = np.round(per_pair["pvalue"][shared] * (len(null_rows) + 1)).astype(np.intp) - 1
    for column in discrete_nulls:  # each discrete column's pairs against its own null
        rows = labelled == column
        column_null = np.concatenate(
            [results[key] for key in sorted(results) if key.startswith(f"labels{column}-")]
        )
        observed = np.column_stack([per_pair["statistic"][rows], per_pair["linear"][rows]])
        per_pair["pvalue"][rows] = min_p_combination(observed, column_null)[0]
    tailed, fitted, unfitted = _tail_pvalues(per_pair, shared, null_rows, tail, reached)
    linear = per_pair.pop("linear")
    null_values = null_rows[:, 0]
    per_pair["qvalue"] = fdr_qvalues(per_pair["pvalue"], fdr)
    matrices = {}
    for name, values in per_pair.items():
        matrix = np.full((width, width), np.nan)
        matrix[pairs[:, 0], pairs[:, 1]] = values
        matrix[pairs[:, 1], pairs[:, 0]] = values
        matrices[name] = matrix
    shared_matrix, tail_matrix = np.zeros((width, width), dtype=bool), np.zeros((width, width), dtype=bool)
    shared_matrix[pairs[:, 0], pairs[:, 1]] = shared | (labelled >= 0)
    shared_matrix[pairs[:, 1], pairs[:, 0]] = shared | (labelled >= 0)
    tail_matrix[pairs[:, 0], pairs[:, 1]] = tailed
    tail_matrix[pairs[:, 1], pairs[:, 0]] = tailed
    for index in range(len(blocks)):
        notes.extend(note for note in results[f"pairs-{index:05d}"]["notes"] if note not in notes)
    on_shared = shared | (labelled >= 0)
    scheme = "shared" if on_shared.all() else "pair" if not on_shared.any() else "mixed"
    count = job.permutations
    notes.extend(_tail_notes(names, pairs, tailed, unfitted, count, per_pair["pvalue"]))
    notes.extend(_resolution_notes(per_pair["pvalue"], per_pair["qvalue"], count, ~tailed))
    method = (f"Each pair of columns a < b by independence_test (column a as X, b as Y; the pair's seed "
              f"pair_seed(seed, a, b)); p = (1 + #{{null >= observed}}) / (1 + {count}) (for a KSG or Ross "
              "statistic, its min-p combination with the linear statistic, as independence_test makes it), "
              f"never 0, at least 1/{count + 1}; q: {FDR_NAMES[fdr]} over the {len(pairs)} "
              "pairs.")  # fmt: skip
    if shared.any():
        method += (f" {int(shared.sum())} pair(s) of tie-free numeric columns share one null: KSG (k = "
                   f"{job.ks[0]}) and the linear statistic on rank scores are distribution-free under "
                   f"independence, so {count} permutations of the ranks serve them all, and each pair's p "
                   "is the min-p combination of the two against them.")  # fmt: skip
    if discrete_nulls:
        method += (f" {int((labelled >= 0).sum())} pair(s) of a discrete column and a tie-free numeric one "
                   f"share their discrete column's null ({len(discrete_nulls)} null(s)): Ross's statistic "
                   f"(k = {job.label_k}) and Wilks' linear statistic on the numeric column's rank scores see "
                   f"it only through its ranks, so {count} permutations of the discrete column's classes "
                   "serve all of its pairs.")  # fmt: skip
    if not on_shared.all():
        method += f" The other pairs have their own {count} permutations each."
    if fitted is not None:
        method += (f" {int(tailed.sum())} of them, which fewer than {TAIL_REACHED} null values reach, have "
                   f"the p-value of the {fitted.describe()}: p = (N_exc / B) (1 - F(observed - threshold)) "
                   "(Knijnenburg et al. 2009; mitool.independence.tail_pvalue), an estimate that goes "
                   f"below 1/{count + 1}.")  # fmt: skip
    return MatrixResult(
        columns=names, statistic=matrices["statistic"], ci_low=matrices["ci_low"],
        ci_high=matrices["ci_high"], pvalue=matrices["pvalue"], qvalue=matrices["qvalue"],
        permutations=count, null=scheme, method=method, notes=tuple(notes), n_rows=n, seconds=seconds,
        reused_blocks=reused, shared_pairs=shared_matrix, null_values=null_values, tail=tail,
        tail_pairs=tail_matrix, tail_fit=fitted, linear_null_values=null_rows[:, 1],
        linear=_symmetric(linear, pairs, width), dequantised=dequantised,
    )  # fmt: skip


def _symmetric(values: np.ndarray, pairs: np.ndarray, width: int) -> np.ndarray:
    """(width, width): the pairs' values at (a, b) and (b, a), NaN elsewhere."""
    matrix = np.full((width, width), np.nan)
    matrix[pairs[:, 0], pairs[:, 1]] = values
    matrix[pairs[:, 1], pairs[:, 0]] = values
    return matrix


def _tail_pvalues(per_pair: dict[str, np.ndarray], shared: np.ndarray, null_rows: np.ndarray, tail: str,
                  reached: np.ndarray) -> tuple[np.ndarray, TailFit | None, np.ndarray]:  # fmt: skip
    """With ``tail="gpd"``, the p-values of the pairs on the shared null that fewer than
    :data:`~mitool.independence.TAIL_REACHED` null rows reach (``reached``: in the min-p order),
    from generalized Pareto tails fitted once to the shared null of each statistic (what
    :func:`mitool.independence.tail_pvalue` gives each), twice the smaller of the two (Bonferroni;
    a statistic whose tail does not fit keeps its permutation p-value there), written into
    ``per_pair``; returns (those pairs, the KSG statistic's fit, the pairs left with their
    permutation p-value because neither fit passed)."""
    statistic = per_pair["statistic"]
    far = np.zeros(len(statistic), dtype=bool)
    if tail == "gpd":
        far = shared & np.isfinite(statistic) & (reached < TAIL_REACHED)
    fits = [fit_tail(null_rows[:, column]) for column in range(2)] if far.any() else [None, None]
    if fits[0] is None and fits[1] is None:
        return np.zeros_like(far), None, far
    for row in np.flatnonzero(far):
        observed = (statistic[row], per_pair["linear"][row])
        per_pair["pvalue"][row] = bonferroni_tails(observed, null_rows, fits)[0]
    return far, fits[0], np.zeros_like(far)


def _tail_notes(names: tuple[str, ...], pairs: np.ndarray, tailed: np.ndarray, unfitted: np.ndarray,
                count: int, pvalues: np.ndarray) -> list[str]:  # fmt: skip
    """Which pairs have a tail p-value (``tail_pairs`` holds them all), or why none has."""
    notes = []
    if tailed.any():
        rows = np.flatnonzero(tailed)
        named = ", ".join(f"{names[pairs[row, 0]]} ~ {names[pairs[row, 1]]}" for row in rows[:10])
        more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
        notes.append(f"{len(rows)} pair(s) have a generalized Pareto tail p-value, estimated beyond the "
                     f"{count} permutations: {named}{more}")  # fmt: skip
        floored = int(np.count_nonzero(pvalues[tailed] <= COMBINED_FLOOR))
        if floored:
            notes.append(f"{floored} of them at the tails' floor, p = {COMBINED_FLOOR:.0e}: the tail "
                         "says only that p is below it")  # fmt: skip
    if unfitted.any():
        notes.append(f"{int(unfitted.sum())} pair(s) are reached by fewer than {TAIL_REACHED} of the {count} "
                     "null values, but no generalized Pareto tail fitted the shared null (it needs 397 "
                     "permutations or more): their p-value is the permutation one")  # fmt: skip
    return notes


def _resolution_notes(pvalues: np.ndarray, qvalues: np.ndarray, count: int,
                      permuted: np.ndarray | None = None) -> list[str]:  # fmt: skip
    """A note when pairs at the smallest p that ``count`` permutations give (among the ``permuted``
    ones: those without a tail p-value) miss q <= 0.05 for want of resolution (see the module)."""
    floor = 1 / (count + 1)
    at_floor = pvalues <= floor * (1 + 1e-9)
    if permuted is not None:
        at_floor &= permuted
    missed = int(np.count_nonzero(at_floor & (qvalues > 0.05)))
    if not missed:
        return []
    note = (f"{int(at_floor.sum())} pair(s) have the smallest p that {count} permutations can give "
            f"(1/{count + 1}), and over {len(pvalues)} pairs {missed} of them have q > 0.05 for that "
            "alone: more permutations resolve smaller p-values (a shared null costs them once)")  # fmt: skip
    return [note]
