"""The arithmetic of p and q: the permutation p-value, the min-p combination of statistics computed
on the same permutations, and the false-discovery-rate q-values.

**The null distribution** comes from B permutations pi_1 .. pi_B of Y's rows: under H0 the pairing
of the rows carries no information, so T(x, y) and the T_b = T(x, y_{pi_b}) are exchangeable, and

    p = (1 + #{b : T_b >= T}) / (1 + B)

is a valid p-value: P(p <= alpha) <= alpha for every alpha, exactly, at any n (Phipson & Smyth
2010, "Permutation p-values should never be zero", Stat. Appl. Genet. Mol. Biol. 9:39). The +1
counts the observed data among the permutations: p is never 0, and with B permutations the
smallest p is 1 / (B + 1) (0.001 for the default B = 999). Values of T_b within 1e-12 of T count
as equal (the same statistic up to rounding, as on a permuted table with the same counts).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from mitool import checks

EQUAL_TOLERANCE = 1e-12
"""Null values within this of the statistic (times 1 + |statistic|) count as equal to it."""


def reached_count(observed: float, null: np.ndarray) -> int:
    """#{b : T_b >= T}, null values within 1e-12 (1 + |T|) of T counted as equal."""
    return int(np.count_nonzero(null >= observed - EQUAL_TOLERANCE * (1 + abs(observed))))


def permutation_pvalue(observed: float, null: np.ndarray) -> float:
    """The permutation p-value with the +1 of Phipson & Smyth (2010):
    p = (1 + #{b : T_b >= T}) / (1 + B), null values within 1e-12 (1 + |T|) of T counted as equal.

    Examples
    --------
    >>> permutation_pvalue(0.5, np.array([0.1, 0.2, 0.3]))      # none as large: the smallest p, 1/4
    0.25
    >>> permutation_pvalue(0.2, np.array([0.1, 0.2, 0.3]))      # 0.2 and 0.3 reach it: 3/4
    0.75
    """
    null = np.asarray(null, dtype=float)
    return float((1 + reached_count(observed, null)) / (1 + len(null)))


def benjamini_hochberg(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """The Benjamini-Hochberg q-values (adjusted p-values) of m p-values, in their order:
    q_(i) = min_{j >= i} min(1, m p_(j) / j) over the p-values sorted increasingly. Rejecting every
    hypothesis with q <= alpha keeps the expected false discovery rate at most alpha (independent
    or positively dependent tests; Benjamini & Hochberg 1995, J. R. Stat. Soc. B 57:289).

    Examples
    --------
    >>> benjamini_hochberg([0.01, 0.04, 0.03, 0.5]).round(3).tolist()
    [0.04, 0.053, 0.053, 0.5]
    """
    values = np.asarray(pvalues, dtype=float)
    count = len(values)
    if not count:
        return values.copy()
    order = np.argsort(values, kind="stable")
    scaled = values[order] * count / np.arange(1, count + 1)
    smallest_after = np.minimum.accumulate(scaled[::-1])[::-1]
    qvalues = np.empty(count)
    qvalues[order] = np.minimum(smallest_after, 1.0)
    return qvalues


FDR_METHODS = ("bh", "by")
"""The q-values :func:`feature_mi` and :func:`mitool.matrix.mi_matrix` offer (``fdr=``):
Benjamini-Hochberg (the default) and Benjamini-Yekutieli."""


def benjamini_yekutieli(pvalues: Sequence[float] | np.ndarray) -> np.ndarray:
    """The Benjamini-Yekutieli q-values of m p-values, in their order: the Benjamini-Hochberg
    q-values with m replaced by m c(m), c(m) = sum_{i=1}^m 1/i (about ln m + 0.58),

        q_(i) = min_{j >= i} min(1, m c(m) p_(j) / j).

    Rejecting every hypothesis with q <= alpha keeps the expected false discovery rate at most
    alpha m_0 / m (m_0 the true nulls) whatever the dependence between the p-values, provided each
    null p-value is valid, P(p <= t) <= t (Benjamini & Yekutieli 2001, "The control of the false
    discovery rate in multiple testing under dependency", Ann. Stat. 29:1165, Theorem 1.3). The
    price is the factor c(m): 3.6 at m = 20, 5.2 at m = 100, 9.8 at m = 10 000.
    :func:`benjamini_hochberg` needs no factor, and its guarantee needs the p-values of the true
    nulls to be independent of each other and of the others', or positively regression dependent
    on them (PRDS, Benjamini & Yekutieli's Theorem 1.2), which permutation p-values of correlated
    columns are not known to be.

    Examples
    --------
    >>> benjamini_yekutieli([0.01, 0.04, 0.03, 0.5]).round(3).tolist()      # c(4) = 25 / 12
    [0.083, 0.111, 0.111, 1.0]
    """
    values = np.asarray(pvalues, dtype=float)
    harmonic = float(np.sum(1.0 / np.arange(1, len(values) + 1)))
    return np.minimum(benjamini_hochberg(values) * harmonic, 1.0)


FDR_NAMES = {"bh": "Benjamini-Hochberg", "by": "Benjamini-Yekutieli"}


def fdr_qvalues(pvalues: Sequence[float] | np.ndarray, fdr: str = "bh") -> np.ndarray:
    """The q-values of ``fdr`` ("bh": :func:`benjamini_hochberg`; "by": :func:`benjamini_yekutieli`).

    Examples
    --------
    >>> fdr_qvalues([0.01, 0.02], "by").round(3).tolist()                   # c(2) = 3 / 2
    [0.03, 0.03]
    """
    checks.choice("fdr", fdr, FDR_METHODS)
    return benjamini_yekutieli(pvalues) if fdr == "by" else benjamini_hochberg(pvalues)


def min_p_combination(
    observed: np.ndarray, null: np.ndarray, weights: np.ndarray | None = None
) -> tuple[Any, np.ndarray]:
    """One permutation p-value from J statistics computed on the same permutations (the min-p
    combination, Westfall & Young 1993; Pesarin 2001):

        p_j(v) = #{b in 0..B : T_j,b >= v} / (B + 1)         (b = 0 the data, T_j,0 = observed_j)
        m_b    = min_j p_j(T_j,b) / w_j
        p      = #{b in 0..B : m_b < m_0, or m_b = m_0 and t_b <= t_0} / (B + 1)

    w_j the ``weights`` (all 1 when None; only their ratios matter): a statistic of weight 2 counts
    as reached at half the p-value of one of weight 1, as a weighted Bonferroni would spend the
    level, so that more of the power goes where the weight is. t_b = min_j S_j,b(T_j,b) / w_j
    breaks the ties of m: S_j,b the upper tail of a Pearson type
    III law (a gamma of any sign of skew, the normal at none) with the mean, standard deviation and
    skewness of column j over the B rows other than b (leaving b out keeps a far statistic from
    inflating the moments it is judged by). Without it, a statistic at the top of its null and the
    other statistic's top on some permutation give p = 2 / (B + 1) (a noisy circle: KSG 20 standard
    deviations above its null, the linear statistic's largest permutation 3); with plain standard
    deviations instead of the tail, the skewed null of the linear statistic (about chi-square with
    dx dy degrees of freedom, over 2n) would win such ties. Under H0 the B + 1 rows (T_1,b ..
    T_J,b) are exchangeable and (m_b, t_b) is the same function of row b and the others for every
    b, so the data's row is as likely to hold any rank and p is a valid p-value, as the single
    statistic's (1 + #{T_b >= T}) / (B + 1), to which it reduces for J = 1; never 0, at least
    1 / (B + 1). Looking at J statistics is paid for through the permutation distribution of the
    smallest p, not a Bonferroni factor: about the power of the better statistic on each
    alternative.

    ``observed`` (J,), ``null`` (B, J); returns p and each statistic's own p-value (J,). With
    ``observed`` (m, J), m sets of statistics against the same null rows (a matrix's pairs on its
    shared null): p (m,) and the own p-values (m, J), each row what it would get alone.

    Examples
    --------
    >>> null = np.array([[0.1, 0.0], [0.2, 0.3], [0.3, 0.1]])
    >>> p, own = min_p_combination(np.array([0.25, 0.05]), null)
    >>> own.tolist(), p                      # p_1 = 2/4, p_2 = 3/4; the smallest, 2/4, reached by 3 rows
    ([0.5, 0.75], 0.75)
    """
    rows = np.atleast_2d(np.asarray(observed, dtype=float))
    null = np.asarray(null, dtype=float).reshape(-1, rows.shape[1])
    count, width = null.shape
    total = count + 1
    scale = np.ones(width) if weights is None else 1.0 / np.asarray(weights, dtype=float)

    def lowest(values: np.ndarray) -> np.ndarray:  # values within the tolerance count as reached
        return values - EQUAL_TOLERANCE * (1 + np.abs(values))

    ordered = np.sort(null, axis=0)
    own, reaching = np.empty_like(rows), np.empty_like(null)
    for column in range(width):
        own[:, column] = (
            total - np.searchsorted(ordered[:, column], lowest(rows[:, column]), "left")
        ) / total
        reaching[:, column] = count - np.searchsorted(ordered[:, column], lowest(null[:, column]), "left")
    sums = [np.sum(null**power, axis=0) for power in (1, 2, 3)]
    pvalues = np.empty(len(rows))
    chunk = max(1, 4_000_000 // max(count * width, 1))
    for begin in range(0, len(rows), chunk):
        block = rows[begin : begin + chunk]
        reached = block[:, None, :] >= lowest(null)[None]  # the row's observed value reaches null value b
        smallest_null = ((reaching[None] + reached) / total * scale).min(axis=2)
        smallest = (own[begin : begin + chunk] * scale).min(axis=1)
        margin = 1e-12 * smallest[:, None]
        below = np.count_nonzero(smallest_null < smallest[:, None] - margin, axis=1)
        tied_rows, tied_nulls = np.nonzero(np.abs(smallest_null - smallest[:, None]) <= margin)
        at_data = _pearson_tail(block, *sums, count, scale)  # each row against the null alone
        tied, swapped = null[tied_nulls], block[tied_rows]  # a null row against the others and the data
        others = [sums[power - 1] - tied**power + swapped**power for power in (1, 2, 3)]
        at_tie = _pearson_tail(tied, *others, count, scale)
        as_extreme = at_tie <= at_data[tied_rows] * (1 + 1e-9) + 1e-300
        pvalues[begin : begin + chunk] = (
            1 + below + np.bincount(tied_rows[as_extreme], minlength=len(block))
        ) / total
    if np.ndim(observed) == 1:
        return float(pvalues[0]), own[0]
    return pvalues, own


def _pearson_tail(values: np.ndarray, first: np.ndarray, second: np.ndarray, third: np.ndarray,
                  count: int, scale: np.ndarray) -> np.ndarray:  # fmt: skip
    """For :func:`min_p_combination`'s ties: min_j of ``scale[j]`` times the upper tail at
    values[:, j] of the Pearson type III law with the mean, standard deviation and skewness of the
    ``count`` values whose sums of powers 1, 2, 3 are ``first``, ``second``, ``third`` (per value,
    per column)."""
    mean, raw_second = first / count, second / count
    variance = np.maximum(raw_second - mean**2, 0.0)
    central_third = third / count - 3 * mean * raw_second + 2 * mean**3
    spread = np.sqrt(variance)
    positive = spread > 1e-300
    skew = np.where(positive, central_third / np.where(positive, variance, 1.0) ** 1.5, 0.0)
    upper = pearson3_sf((values - mean) / np.where(positive, spread, 1.0), skew)
    return (np.where(positive, upper, 1.0) * scale).min(axis=1, initial=float(scale.max()))


NORMAL_SKEW = 1.6e-5
"""Below this skewness the Pearson type III law is taken as the normal (as scipy.stats does)."""


def pearson3_sf(standard: np.ndarray, skew: np.ndarray) -> np.ndarray:
    """The upper tail P(Y > y) of the standardised Pearson type III law with skewness g at
    y = ``standard``: with a = 4 / g^2, b = 2 / g and t = b (y + 2 / g) = a + b y (a gamma variable
    of shape a, shifted and scaled to mean 0 and variance 1), Q(a, t) for g > 0 and P(a, t) for
    g < 0 (the regularised incomplete gamma functions; 1 and 0 beyond the law's end), and the
    normal's tail where |g| < :data:`NORMAL_SKEW`. scipy.stats.pearson3.sf computes the same; this
    spares its import (a third of a second) on every test."""
    from scipy import special

    standard, skew = np.broadcast_arrays(np.asarray(standard, float), np.asarray(skew, float))
    normal = np.abs(skew) < NORMAL_SKEW
    safe = np.where(normal, 1.0, skew)
    shape = 4.0 / safe**2
    t = np.clip(shape + 2.0 / safe * standard, 0.0, None)
    gamma_tail = np.where(safe > 0, special.gammaincc(shape, t), special.gammainc(shape, t))
    return np.where(normal, special.ndtr(-standard), gamma_tail)
