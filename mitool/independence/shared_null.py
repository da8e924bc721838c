"""Nulls that many pairs of columns share: why one set of permutations may serve them all, and the
columns it serves.

A permutation test of the pair (X, Y) compares the statistic T(x, y) with its values on the
pairings y o sigma, sigma uniform. Where T depends on the data only through what a pair's null
does not change, one set of B pairings serves every such pair, and each pair's p-value is exactly
as valid as with its own (Phipson & Smyth 2010: the null rows are draws of the pair's own
permutation distribution, independent of its data).

* **Two continuous columns without ties** (:func:`shared_null_block`): KSG and the linear statistic
  on rank normal scores see the data only through the ranks; under independence the ranks of Y
  given those of X are a uniform permutation whatever the marginals, so the null is that of
  (T(g, g o sigma), L(g, g o sigma)), g the n normal scores of 0 .. n - 1.
* **A discrete column D against continuous columns without ties** (:func:`labelled_null_block`):
  Ross's statistic and Wilks' linear statistic on the continuous column's rank normal scores see
  it only through its ranks, so the pairs of D share the null of (R(g, d o sigma), W(g, d o
  sigma)), d D's codes: one null per discrete column (its counts per class fix it).
* **Columns with repeated values** (:func:`dequantised_columns`): dequantised once each, within
  their resolution (:func:`mitool.ties.dequantise`), they have no ties, and I(X + U; Y) = I(X; Y)
  for the data as given, so they join the nulls above. The noise is independent of the other
  column, so under independence X + U and Y are independent too and the test stays exact. Where a
  column has point masses, the k-NN statistics see them dequantised (they resolve a spike of many
  rows badly; :mod:`mitool.ties`), which costs power, not validity; ``mitool estimate`` takes the
  atoms' chain rule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from mitool.estimation import is_discrete
from mitool.independence.statistics import ScoredSide, ksg_statistic, linear_statistic
from mitool.ties import dequantise

__all__ = [
    "dequantised_columns",
    "discrete_column",
    "labelled_null_block",
    "labelled_statistics",
    "shared_null_block",
]

SHARED_STREAM = 0x5AED
"""Keeps the shared null's permutations apart from every other random stream."""

LABELLED_STREAM = 0x1ABE
"""Keeps each discrete column's null apart from every other random stream."""

DEQUANTISE_STREAM = 0xDE9A
"""Keeps each column's dequantisation apart from every other random stream."""


def discrete_column(column: np.ndarray) -> bool:
    """Whether a complete column is discrete as :func:`mitool.estimate` finds it: labels, or whole
    numbers with at most max(2, sqrt(n)) distinct values (:func:`mitool.estimation.is_discrete`)."""
    if column.dtype == object:
        return not any(value is None for value in column)
    return not np.isnan(column).any() and is_discrete(column[:, None])


def dequantised_columns(table: Sequence[np.ndarray], seed: int) -> tuple[list[np.ndarray], list[int]]:
    """The columns with the complete, continuous ones that repeat a value dequantised (each with its
    own stream (seed, column)), and the indices of those dequantised."""
    columns, moved = [], []
    for index, column in enumerate(table):
        complete = column.dtype != object and not np.isnan(column).any()
        if complete and len(np.unique(column)) < len(column) and not discrete_column(column):
            rng = np.random.default_rng([seed, DEQUANTISE_STREAM, index])
            columns.append(dequantise(column, rng))
            moved.append(index)
        else:
            columns.append(column)
    return columns, moved


Statistics = Callable[[np.ndarray], tuple[float, float]]
"""Two statistics (a k-NN one and the linear one) as a function of the pairing ``order``."""


def _reference(n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float64)[:, None]


def shared_null_block(n: int, ks: Sequence[int], seed: int, block: int, count: int) -> np.ndarray:
    """(count, 2): ``count`` rows of the null of two continuous columns without ties, KSG (k .. k_max
    of ``ks``) and the linear statistic (:func:`mitool.independence.linear_statistic`) on rank
    scores of the ranks 0 .. n - 1 against themselves permuted, the permutations from the stream
    (seed, block)."""
    side = ScoredSide.of(_reference(n), "rank")
    statistic = ksg_statistic(side, side, ks[0], ks[-1])
    linear = linear_statistic(_reference(n), _reference(n))
    rng = np.random.default_rng([seed, SHARED_STREAM, block])
    rows = np.empty((count, 2))
    for row in range(count):
        order = rng.permutation(n)
        rows[row] = statistic(order), linear(order)
    return rows


def labelled_statistics(scores: np.ndarray, codes: np.ndarray, k: int) -> Statistics:
    """Ross's statistic (k neighbours) and Wilks' linear statistic of continuous ``scores`` (n, 1)
    against the class ``codes`` (n,) in the pairing ``order`` (the codes' row order[i] with row i)."""
    from mitool.estimators.ross import ross_mi

    linear = linear_statistic(scores, codes[:, None], y_discrete=True)
    return lambda order: (ross_mi(scores, codes[order][:, None], k=k), linear(order))


def labelled_null_block(codes: np.ndarray, k: int, seed: int, column: int, block: int,
                        count: int) -> np.ndarray:  # fmt: skip
    """(count, 2): ``count`` rows of the null of the discrete column ``column`` (its class
    ``codes``) against continuous columns without ties: Ross's statistic (k) and Wilks' linear
    statistic of the normal scores of 0 .. n - 1 against the codes permuted, the permutations from
    the stream (seed, column, block)."""
    n = len(codes)
    statistics = labelled_statistics(ScoredSide.of(_reference(n), "rank").scores, codes, k)
    rng = np.random.default_rng([seed, LABELLED_STREAM, column, block])
    rows = np.empty((count, 2))
    for row in range(count):
        rows[row] = statistics(rng.permutation(n))
    return rows
