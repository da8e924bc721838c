"""The blocks of a matrix: pure functions of the data and their seeds (a block of pairs, a block of
the shared null, a block of a discrete column's null), the same numbers whatever runs them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from mitool.independence.permutation_test import run_test
from mitool.independence.shared_null import labelled_null_block, labelled_statistics, shared_null_block
from mitool.independence.statistics import ScoredSide, canonical_mi, digamma_table, ksg_statistic

NULL_BLOCK = 100
"""Permutations of the shared null per block (a task of its own, a file of its own)."""

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


@dataclass(frozen=True)
class Job:
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
    labelled: Any = None
    """Ross's estimator as the test takes it for a discrete column against a numeric one, for the
    pairs on a discrete column's null (None: no such pair)."""

    @property
    def label_k(self) -> int:
        return int(self.labelled.settings.k) if self.labelled is not None else 0

    """Ross's k for a discrete column against a continuous one on a discrete column's null (0: none)."""


Columns = Sequence[np.ndarray]
"""The data as the blocks take them: one array per column, float64 numbers or object labels."""


def _column(data: Columns, index: int) -> np.ndarray:
    return data[index]


def _pair_block(data: Columns, given: np.ndarray | None, job: Job, pairs: np.ndarray,
                fast: np.ndarray, shared: np.ndarray, labelled: np.ndarray) -> dict[str, Any]:  # fmt: skip
    """The pairs of one block: statistic, interval, p-value (NaN where a shared null gives it) and
    the notes (each once). ``labelled``: for each pair on a discrete column's null, that column
    (-1 elsewhere)."""
    count = len(pairs)
    out = {name: np.full(count, np.nan) for name in ("statistic", "ci_low", "ci_high", "pvalue", "linear")}
    notes: list[str] = []
    sides: dict[int, ScoredSide] = {}  # each column's rank scores, its class codes: once a block
    codes: dict[int, np.ndarray] = {}
    waiting: list[tuple[int, int, int, int]] = []  # fast pairs whose interval is made in batches

    def side(index: int) -> ScoredSide:
        if index not in sides:
            sides[index] = ScoredSide.of(_column(data, index)[:, None], "rank")
        return sides[index]

    for row, (a, b) in enumerate(pairs.tolist()):
        seed = pair_seed(job.seed, a, b)
        if labelled[row] >= 0:  # Ross's and the linear statistic; the p-value from the column's null
            discrete = int(labelled[row])
            scores = side(b if discrete == a else a).scores
            if discrete not in codes:
                codes[discrete] = _codes(_column(data, discrete))
            statistic, out["linear"][row] = labelled_statistics(scores, codes[discrete], job.label_k)(
                np.arange(job.n)
            )
            estimate = job.labelled.estimate(scores, codes[discrete][:, None], seed=seed)
            out["ci_low"][row], out["ci_high"][row] = estimate.ci_low, estimate.ci_high
            out["statistic"][row] = statistic
            continue
        if fast[row] and shared[row]:  # the statistic alone; the p-value from the shared null
            statistic = ksg_statistic(side(a), side(b), job.ks[0], job.ks[-1])(np.arange(job.n))
            out["linear"][row] = canonical_mi(side(a).basis, side(b).basis)
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


def _used_subsets(job: Job) -> tuple[int, int]:
    """(subsets, pairs per subset) of the estimator's interval, as
    :func:`mitool.estimators.subsets.subset_estimate` chooses them."""
    from mitool.estimators.subsets import subset_size

    used = min(job.subsets, job.n // max(job.minimum, 1))
    return used, subset_size(job.n, max(used, 1))


def _t_quantile(job: Job) -> float:
    """The Student-t quantile of the fast path's interval (computed once per block)."""
    used, _ = _used_subsets(job)
    if not job.ks or used < 2:
        return math.nan
    from scipy import stats

    return float(stats.t.ppf(0.5 + job.level / 2, used - 1))


def _fast_intervals(data: Columns, waiting: list[tuple[int, int, int, int]], job: Job,
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


def _near_ceiling(value: float, job: Job) -> bool:
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


def _null_task(data: Columns, given: np.ndarray | None, job: Job, block: int, count: int) -> np.ndarray:
    return shared_null_block(job.n, job.ks, job.seed, block, count)


def _labelled_null_task(data: Columns, given: np.ndarray | None, job: Job, column: int, block: int,
                        count: int) -> np.ndarray:  # fmt: skip
    return labelled_null_block(_codes(data[column]), job.label_k, job.seed, column, block, count)


def _codes(column: np.ndarray) -> np.ndarray:
    from mitool.estimators.rows import category_codes

    return category_codes(column[:, None])
