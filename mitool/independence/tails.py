"""Tail p-values: a generalised Pareto fit to the permutations' largest values, for a p-value beyond
what B permutations can resolve.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mitool import checks
from mitool.independence.pvalues import permutation_pvalue, reached_count

TAIL_EXCEEDANCES = 250
"""N_exc to start from: the largest 250 null values (Knijnenburg et al. 2009)."""

TAIL_REACHED = 10
"""The tail p-value replaces the permutation p-value where fewer than this many null values reach
the observed statistic (Knijnenburg et al.'s M < 10); with 10 or more, the permutation p-value's
relative standard error is below a third."""

TAIL_STEP = 10
"""Exceedances dropped at a time when the fit is rejected (Knijnenburg et al.)."""

TAIL_MINIMUM = 100
"""The fewest exceedances a fit may use: with fewer, the shape's standard error (1 + xi) / sqrt(N_exc)
exceeds 0.1, and an extrapolation two decades below the threshold moves by more than a factor of e
for it alone. A null of B values offers at most ceil(B / 4) exceedances (the threshold stays in its
upper quarter), so a tail needs B >= 397."""

TAIL_METHODS = ("permutation", "gpd", "permutation-no-fit")
"""What :func:`tail_pvalue` says it did: the permutation p-value (10 or more null values reach the
observed one); the generalized Pareto tail; the permutation p-value because no fit passed."""

TAIL_FLOOR = 1e-12
"""The smallest p-value a fitted tail reports: past it the extrapolation says only "below". At an
exact 1e-6, 999 permutations' tails were off by factors of 1/58 to 190 on single nulls (see
:func:`tail_pvalue`); six decades further a number would be the model's, not the data's (diamonds'
carat ~ price had p = 4.45e-308). The floor still lets Benjamini-Hochberg reach q <= 0.05 over
5 x 10^10 pairs."""

_AD_SHAPES = np.array([-0.5, -0.4, -0.3, -0.2, -0.1, 0.0, 0.1, 0.2, 0.5, 0.9])
_AD_CRITICAL = np.array([1.321, 1.221, 1.140, 1.074, 1.020, 0.974, 0.935, 0.903, 0.830, 0.771])
"""The 5% points of the Anderson-Darling A^2 of a generalized Pareto fit, scale and shape both
estimated by maximum likelihood, against the shape xi (Choulakian & Stephens 2001, Technometrics
43:478, Table 2, whose k is -xi: the points rise as the tail gets lighter). A fit whose A^2 exceeds
its point is rejected at level 0.05. PALM's palm_pareto.m lists the same points against the
opposite sign; a Monte Carlo here (250 exceedances, scipy's fit, 400 draws each) decided: 0.875,
0.941, 0.953, 0.970, 0.993, 1.131 at xi = 0.4, 0.1, 0, -0.1, -0.2, -0.4. Between the shapes
tabulated the point is interpolated; beyond them it is the nearest end's."""


@dataclass(frozen=True)
class TailFit:
    """A generalized Pareto tail fitted to a null distribution (:func:`fit_tail`).

    threshold: t, midway between the N_exc-th and the (N_exc + 1)-th largest null value.
    exceedances: N_exc. permutations: B, the null values. shape, scale: the maximum-likelihood xi
    and sigma of the N_exc excesses over t. anderson_darling, critical: the fit's A^2 and its 5%
    point. tail_shape, tail_scale: the tail extrapolated, (xi, sigma), or (0, the mean excess) where
    xi < 0 (see :func:`tail_pvalue`).
    """

    threshold: float
    exceedances: int
    permutations: int
    shape: float
    scale: float
    anderson_darling: float
    critical: float
    tail_shape: float
    tail_scale: float

    def pvalue(self, observed: float) -> float:
        """(N_exc / B) (1 - F(observed - t)), F the tail's generalized Pareto distribution function,
        never below :data:`TAIL_FLOOR` (a p-value there reads "below 1e-12")."""
        from scipy.stats import genpareto

        excess = max(float(observed) - self.threshold, 0.0)
        survival = float(genpareto.sf(excess, self.tail_shape, 0.0, self.tail_scale))
        return max(self.exceedances / self.permutations * survival, TAIL_FLOOR)

    def describe(self) -> str:
        """The fit in a clause."""
        shape = (f"shape {self.shape:.3f} < 0 fitted, extrapolated as exponential, scale the mean excess "
                 f"{self.tail_scale:.4g}" if self.tail_shape != self.shape else
                 f"shape {self.shape:.3f}, scale {self.scale:.4g}")  # fmt: skip
        return (f"generalized Pareto tail of the {self.exceedances} largest of {self.permutations} null "
                f"values over {self.threshold:.4g} ({shape}; Anderson-Darling {self.anderson_darling:.3f} "
                f"<= {self.critical:.3f}, its 5% point)")  # fmt: skip


def _anderson_darling(probabilities: np.ndarray) -> float:
    """A^2 = -N - (1/N) sum_i (2i - 1) [ln z_(i) + ln(1 - z_(N+1-i))] of the fitted distribution
    function's values z at the N points."""
    z = np.clip(np.sort(probabilities), np.finfo(float).tiny, 1.0 - np.finfo(float).epsneg)
    count = len(z)
    weights = 2.0 * np.arange(1, count + 1) - 1.0
    return float(-count - np.mean(weights * (np.log(z) + np.log1p(-z[::-1]))))


def fit_tail(null: np.ndarray, *, exceedances: int = TAIL_EXCEEDANCES) -> TailFit | None:
    """The generalized Pareto tail of a null distribution as Knijnenburg et al. (2009) choose it, or
    None when no fit passes (see :func:`tail_pvalue`).

    Starting from N_exc = min(``exceedances``, ceil(B / 4)) and dropping :data:`TAIL_STEP` at a
    time down to :data:`TAIL_MINIMUM`: the threshold t midway between the N_exc-th and the
    (N_exc + 1)-th largest value (skipped where they are equal), the maximum-likelihood shape and
    scale of the excesses over t (location fixed at 0), and the first fit whose Anderson-Darling
    statistic is within its 5% point (:data:`_AD_CRITICAL`) is kept.

    Examples
    --------
    >>> null = np.random.default_rng(0).exponential(size=999)
    >>> fitted = fit_tail(null)
    >>> fitted.exceedances, round(fitted.threshold, 2), round(fitted.shape, 2), round(fitted.scale, 2)
    (250, 1.4, 0.03, 0.97)
    """
    import warnings

    from scipy.stats import genpareto

    exceedances = checks.whole_number("exceedances", exceedances, TAIL_MINIMUM)
    values = np.asarray(null, dtype=float).reshape(-1)
    if not np.isfinite(values).all():
        return None
    count = len(values)
    largest = np.sort(values)[::-1]
    for size in range(min(exceedances, math.ceil(count / 4)), TAIL_MINIMUM - 1, -TAIL_STEP):
        if not largest[size - 1] > largest[size]:  # tied at the threshold: no excess may be 0
            continue
        threshold = 0.5 * (largest[size - 1] + largest[size])
        excess = largest[:size] - threshold
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            shape, _, scale = (float(value) for value in genpareto.fit(excess, floc=0.0))
            if not (math.isfinite(shape) and math.isfinite(scale) and scale > 0):
                continue
            statistic = _anderson_darling(genpareto.cdf(excess, shape, 0.0, scale))
        critical = float(np.interp(shape, _AD_SHAPES, _AD_CRITICAL))
        if statistic <= critical:
            tail_shape, tail_scale = (shape, scale) if shape >= 0 else (0.0, float(np.mean(excess)))
            return TailFit(float(threshold), size, count, shape, scale, statistic, critical, tail_shape,
                           tail_scale)  # fmt: skip
    return None


def tail_pvalue(
    observed: float, null: np.ndarray, *, exceedances: int = TAIL_EXCEEDANCES
) -> tuple[float, str]:
    """The p-value of ``observed`` against the null values, with a generalized Pareto tail beyond
    them (Knijnenburg, Wessels, Reinders & Shmulevich 2009, "Fewer permutations, more accurate
    P-values", Bioinformatics 25(12):i161): (p, method), method one of :data:`TAIL_METHODS`.

    With M = #{b : T_b >= T} of the B null values reaching the observed T (within 1e-12, as
    :func:`permutation_pvalue` counts them):

    * M >= 10: the permutation p-value, p = (1 + M) / (1 + B); method "permutation".
    * M < 10: by the theorem of Pickands (1975) and Balkema & de Haan (1974), the excesses of T
      over a high threshold t are nearly generalized Pareto,
      P(T - t > y | T > t) = 1 - F(y) = (1 + xi y / sigma)^(-1/xi) (exp(-y / sigma) for xi = 0), so

          p = P(T >= T_obs) = (N_exc / B) (1 - F(T_obs - t)),

      N_exc the null values above t. The threshold is chosen as Knijnenburg et al. do
      (:func:`fit_tail`): the largest N_exc = ``exceedances`` (250) values first, at most a quarter
      of the null (t midway between the 250th and the 251st), xi and sigma by maximum
      likelihood, the fit tested by Anderson-Darling at level 0.05 with the 5% points of
      Choulakian & Stephens (2001), and 10 exceedances dropped at a time until it
      passes; method "gpd". The p-value is never below :data:`TAIL_FLOOR` (1e-12), which reads
      "below 1e-12".
    * No fit passes (from 250 down to :data:`TAIL_MINIMUM` exceedances, or B < 397, or a null that
      is not finite): no extrapolation; the permutation p-value with its +1, method
      "permutation-no-fit".

    One departure from Knijnenburg et al.: a negative fitted shape (a tail with an end point,
    sigma / |xi| past t) is not extrapolated; the exponential tail (xi = 0) with the mean excess as
    its scale, its maximum-likelihood fit, is used instead. The null of the KSG rank statistic
    (k = 20; n = 300, 40 000 permutations) has shapes that rise towards 0 as the threshold rises
    (-0.13, -0.11, -0.06, -0.02 over its 0.9, 0.975, 0.9875 and 0.994 quantiles), so the negative
    shape fitted over the 0.75 quantile of 999 values (median -0.17) describes the body, not the
    far tail. Measured on 200 nulls of 999 values drawn from those 40 000, the other 39 001 as
    fresh null statistics: with the fitted shape, p <= 1e-3 for 1.3e-3 of them and p <= 1e-4 for
    3.8e-4 (n = 500, 60 000 permutations: 1.7e-3 and 5.5e-4), and half of the fits gave p = 0 to
    some (past their end point); with the exponential tail, 0.9e-4 and 1e-7 (n = 500: 1.5e-4 and
    5e-7): conservative. A tail p-value estimates the exact p-value; it is not valid by
    construction as the permutation p-value is, and its error grows with the extrapolation. From
    999 draws of chi-square (1 to 3 degrees of freedom) or gamma(2), 40 nulls each, the tail
    p-value at an exact 1e-6 was 2 to 5 times too large in the median over the nulls, and single
    nulls ranged from 1/58 to 190 times; at 1e-3 the medians were within a factor of 1.6. From
    9999 draws (the threshold higher, the extrapolation shorter) the medians were within a factor
    of 2.8 at 1e-6 (tests/test_tail_pvalues.py).

    Examples
    --------
    >>> null = np.random.default_rng(0).exponential(size=999)       # P(T >= x) = exp(-x)
    >>> tail_pvalue(2.0, null)                  # 131 null values reach 2: (1 + 131) / 1000
    (0.132, 'permutation')
    >>> p, method = tail_pvalue(9.0, null)      # none reaches 9, where P(T >= 9) = 1.2e-04
    >>> method, f"{p:.1e}"
    ('gpd', '2.0e-04')
    """
    pvalue, method, _ = chosen_tail_pvalue(observed, null, exceedances)
    return pvalue, method


def chosen_tail_pvalue(
    observed: float, null: np.ndarray, exceedances: int
) -> tuple[float, str, TailFit | None]:
    """:func:`tail_pvalue`, and the fit where one was made."""
    values = np.asarray(null, dtype=float).reshape(-1)
    reached = reached_count(observed, values)
    permutation = (1 + reached) / (1 + len(values))
    if reached >= TAIL_REACHED or not math.isfinite(observed):
        return float(permutation), "permutation", None
    fitted = fit_tail(values, exceedances=exceedances)
    if fitted is None:
        return float(permutation), "permutation-no-fit", None
    return fitted.pvalue(observed), "gpd", fitted


def bonferroni_tails(
    observed: Sequence[float], null_rows: np.ndarray, fits: Sequence[TailFit | None]
) -> tuple[float, bool]:
    """Beyond the permutations of a combined test (fewer than :data:`TAIL_REACHED` null rows as
    extreme as the data in the min-p order): p = min(1, J min_j p_j), p_j statistic j's
    :func:`tail_pvalue` from its fitted tail ``fits[j]`` (its permutation p-value where 10 or more
    of its null values reach it, or where it has no fit). Returns p and whether a tail gave it."""
    each, tailed = [], False
    for column, (value, fitted) in enumerate(zip(observed, fits, strict=True)):
        values = null_rows[:, column]
        if fitted is None or reached_count(value, values) >= TAIL_REACHED or not math.isfinite(value):
            each.append(permutation_pvalue(value, values))
        else:
            each.append(fitted.pvalue(value))
            tailed = True
    return min(1.0, len(each) * min(each)), tailed
