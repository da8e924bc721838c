"""A lower bound of I(X; Y) from single columns: the Gaussian copula of one column of X and one of Y.

Let u = Phi^-1(F(x_j)) and v = Phi^-1(G(y_l)) be a continuous column of each side sent to standard
normal marginals (an invertible map of each, so I(u; v) = I(x_j; y_l)) and rho their correlation.
Among laws with standard normal marginals and correlation rho the Gaussian has the largest joint
entropy, so

    I(x_j; y_l) = h(u) + h(v) - h(u, v) >= -1/2 log(1 - rho^2),

and by the chain rule I(X; Y) >= I(x_j; y_l) for every pair of columns. :func:`copula_bound` gives
the largest such bound over the pairs, at the lower end of a one-sided confidence interval for
each rho (Fisher's z, standard error 1 / sqrt(n - 3), Bonferroni over the pairs): an estimate of
I(X; Y) whose whole interval lies below it falls short of the MI, which the estimate's notes then say.
"""

from __future__ import annotations

import math

import numpy as np

from mitool.estimators.preparation import normal_scores

__all__ = ["CONFIDENCE", "MOST_PAIRS", "copula_bound"]

CONFIDENCE = 0.95
"""The one-sided confidence of :func:`copula_bound` over all the pairs of columns together."""

MOST_PAIRS = 10_000
"""Above this many pairs of columns (an image against an image) no bound is computed."""


def copula_bound(x: np.ndarray, y: np.ndarray) -> tuple[float, int, int]:
    """(bound, j, l): the largest lower confidence bound of -1/2 log(1 - rho^2) over the columns j
    of ``x`` and l of ``y`` (both (n, d), continuous), and the pair that gives it; (0, -1, -1) where
    no pair's correlation is distinguishable from 0, with fewer than 5 rows, or above
    :data:`MOST_PAIRS` pairs."""
    from scipy.special import ndtri  # scipy.stats.norm.ppf's own quantile, without its import

    n, pairs = len(x), x.shape[1] * y.shape[1]
    if n < 5 or pairs > MOST_PAIRS or pairs == 0:
        return 0.0, -1, -1
    u, v = normal_scores(x)[0], normal_scores(y)[0]  # as the tests' linear statistic scores a column
    u, v = u - u.mean(axis=0), v - v.mean(axis=0)
    norms = np.outer(np.linalg.norm(u, axis=0), np.linalg.norm(v, axis=0))
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = np.where(norms > 0, (u.T @ v) / norms, 0.0)
    margin = ndtri(1 - (1 - CONFIDENCE) / (2 * pairs)) / math.sqrt(n - 3)  # both signs of rho
    low = np.clip(np.abs(np.arctanh(np.clip(rho, -1 + 1e-15, 1 - 1e-15))) - margin, 0.0, None)
    j, l = np.unravel_index(int(np.argmax(low)), low.shape)
    if low[j, l] <= 0:
        return 0.0, -1, -1
    return float(-0.5 * math.log1p(-(math.tanh(low[j, l]) ** 2))), int(j), int(l)
