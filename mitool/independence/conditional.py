"""Tests given a continuous Z: regressions on Z, the generalised covariance measure and the
neighbourhood diagnostic.

**Conditional tests**, H0: X independent of Y given Z. Permuting all of X would break its
dependence on Z as well, and reject a common cause. Given a continuous Z, the local permutation of
Runge (2018, "Conditional independence testing based on a nearest-neighbor estimator of
conditional mutual information", AISTATS, Algorithm 1) keeps it: each row's k_perm nearest rows in
Z (max-norm on Z's rank scores, the row itself included) are its candidates; the rows are visited
in a random order, and each takes the X of the first of its candidates, in a random order, that no
row has taken yet (the last candidate when all are taken: a repeat, the only case). X then moves
only within neighbourhoods of Z, so its law given Z is kept as far as it changes little within a
neighbourhood (Kim, Neykov, Balakrishnan & Wasserman 2022, "Local permutation tests for conditional
independence", Ann. Stat. 50:3388). Where X and Y both depend strongly on a Z of several
dimensions, five-neighbour cells are too wide: the draws lose the part of X's dependence on Z that
varies within a cell, and with it the dependence of X and Y through Z, so true nulls are rejected
(30% at 0.05 with a 3-D Z, n = 400; docs/independence.md). The default test given a continuous Z
(``z_method="residual"``) therefore draws what is left of X once Z has explained what it can: X
and Y less their regressions on Z (:func:`regress_on_z`: a few models, chosen by leave-one-out
error), X's residuals drawn by the local permutation, and KSG on the residuals as the statistic
(with the linear statistic of the residuals beside it, combined by min-p). The map
(X, Z) -> (X - f(Z), Z) is one to one for a fixed f, so
I(X; Y | Z) = I(X - f(Z); Y - g(Z) | Z) and H0 is unchanged; the draws now have to keep only the
law of a residual given Z, which changes little within a neighbourhood where the regression has
taken the steep part of the dependence out. ``z_method="local"`` is Runge's test of X itself with
Frenzel & Pompe's I^(X; Y | Z) on rank scores; ``z_method="gcm"`` the generalised covariance measure
of Shah & Peters (2020) (:func:`gcm_statistic`). A discrete X or Y is dequantised for the k-NN
statistics (ties broken at random within its values, which keeps the MI and the hypothesis). Every
such test is approximate, and no test of conditional independence holds its level over every law
(Shah & Peters 2020): each reports the neighbourhood diagnostic (:func:`neighbourhood_spread`) and
warns where it exceeds the range its scheme was calibrated on. Given a discrete Z, X is permuted
within each group of Z, which keeps its law given Z exactly (an exact test); the statistic is the
MI within each group weighted by the group's share, as :func:`mitool.estimate` computes
I(X; Y | Z).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from mitool.runtime import chosen_threads

Z_METHODS = ("auto", "residual", "local", "gcm")
"""How a test given a continuous Z is made (``z_method``): "residual" (the default, "auto", where no
estimator is named), Runge's "local" permutation of X itself (the default with a named estimator),
or Shah & Peters' generalised covariance measure "gcm" (see :func:`independence_test`)."""

REGRESSION_MODELS = ("linear", "quadratic", "cubic", "spline", "knn")
"""The regressions of X (and of Y) on Z's rank scores that :func:`regress_on_z` chooses from by
leave-one-out error: ridge regressions on the monomials of degree 1, up to 2 and up to 3 (the
third only while its columns are at most n / 4), on additive cubic B-splines (6 interior knots at
each coordinate's quantiles), and the k-nearest-neighbour mean (k up to min(50, n / 4))."""

RIDGE_PENALTIES = np.logspace(-4, 3, 15)
"""The ridge penalties tried, times n / 100, on standardised features (the intercept is not
penalised)."""

CO_SPREAD_WARNING = {"local": 0.1, "residual": 16.0, "gcm": 0.25}
"""The diagnostic's thresholds on the co-spread C (:func:`neighbourhood_spread`), per scheme: a test
given a continuous Z warns where C exceeds its scheme's. "local": Runge's permutation of X rejected
true nulls too often from C of about 0.1 up (10% at C = 0.1 in issue 52's measurement, 30% at a
median C of 0.65, 97% at 6, n = 400); it held its level on nulls of median C up to 0.023
(bench/independence.py's common cause and 3-D Z, of which the threshold warns 1% and 0%).
"residual": about the largest C of the 1700 null data sets at n = 400 the residual scheme was
calibrated on (16.4): beyond, nothing was measured. "gcm": the three nulls of which the GCM
rejected 9 to 12% had a median C of 0.3 or more (it held its level on three others of such C), and
it held its level on every null of median C below 0.25 (docs/independence.md)."""


@dataclass(frozen=True)
class ZRegression:
    """One side's regression on Z (:func:`regress_on_z`): ``target`` the side on the scale chosen
    (standardised values, or the standardised normal scores of the ranks), ``fitted`` its
    leave-one-out prediction from Z, ``residual`` = target - fitted (n, d); ``models``, ``scales``
    and ``z_scales`` (Z's values or rank scores) each column's choice, ``unexplained`` each
    column's leave-one-out mean squared error over its variance (1 - the cross-validated R^2)."""

    target: np.ndarray
    fitted: np.ndarray
    models: tuple[str, ...]
    scales: tuple[str, ...]
    unexplained: np.ndarray
    z_scales: tuple[str, ...] = ()

    @property
    def residual(self) -> np.ndarray:
        return self.target - self.fitted


def _ridge_loo(features: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """The leave-one-out predictions of ridge regression (intercept unpenalised, standardised
    features) at the penalty of :data:`RIDGE_PENALTIES` with the smallest leave-one-out error:
    prediction_i = y_i - e_i / (1 - h_ii), e the residual of the full fit and h the hat matrix's
    diagonal, from one singular value decomposition."""
    n = len(target)
    scale = features.std(axis=0)
    standard = (features - features.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    left, values, _ = np.linalg.svd(standard, full_matrices=False)
    if values.size:
        keep = values > values[0] * 1e-10
        left, values = left[:, keep], values[keep]
    mean = target.mean(axis=0)
    projected = left.T @ (target - mean)
    best: tuple[float, np.ndarray] = (math.inf, np.broadcast_to(mean, target.shape).copy())
    for penalty in RIDGE_PENALTIES * n / 100:
        shrink = values**2 / (values**2 + penalty)
        fitted = mean + left @ (shrink[:, None] * projected)
        leverage = np.minimum((left**2) @ shrink + 1.0 / n, 1 - 1e-9)
        predicted = target - (target - fitted) / (1 - leverage)[:, None]
        error = float(np.mean((target - predicted) ** 2))
        if error < best[0]:
            best = (error, predicted)
    return best


def _monomials(z: np.ndarray, degree: int) -> np.ndarray:
    from itertools import combinations_with_replacement

    columns = [
        np.prod(z[:, list(chosen)], axis=1)
        for power in range(1, degree + 1)
        for chosen in combinations_with_replacement(range(z.shape[1]), power)
    ]
    return np.column_stack(columns)


def _additive_splines(z: np.ndarray, knots: int = 6) -> np.ndarray:
    """Cubic B-splines of each coordinate, interior knots at its quantiles (the first basis
    function of each dropped: the intercept is the ridge's)."""
    from scipy.interpolate import BSpline

    columns = []
    for values in z.T:
        inner = np.unique(np.quantile(values, np.linspace(0, 1, knots + 2)))
        if len(inner) < 2:
            continue
        edges = np.r_[[inner[0]] * 3, inner, [inner[-1]] * 3]
        basis = BSpline.design_matrix(np.clip(values, inner[0], inner[-1]), edges, 3).toarray()
        columns.append(basis[:, 1:])
    return np.hstack(columns) if columns else z


def _knn_loo(z: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray]:
    """The leave-one-out k-nearest-neighbour mean (Euclidean on Z's scores) at the k of smallest
    leave-one-out error, k = 1 .. min(50, n / 4), all from one query."""
    from scipy.spatial import cKDTree

    n = len(z)
    most = max(1, min(50, n // 4))
    found = cKDTree(z).query(z, k=most + 1, workers=chosen_threads())[1]
    itself = found[:, :1] == np.arange(n)[:, None]
    others = np.where(itself, found[:, 1:], found[:, :-1])  # each row's nearest rows but itself
    means = np.cumsum(target[others], axis=1) / np.arange(1, most + 1)[None, :, None]
    errors = np.mean((means - target[:, None, :]) ** 2, axis=(0, 2))
    best = int(np.argmin(errors))
    return float(errors[best]), means[:, best, :]


def _best_regression(z: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray, str]:
    """The model of :data:`REGRESSION_MODELS` with the smallest leave-one-out error on one column."""
    n = len(z)
    found = {"knn": _knn_loo(z, target)}
    candidates = {"linear": lambda: z, "quadratic": lambda: _monomials(z, 2),
                  "spline": lambda: _additive_splines(z)}  # fmt: skip
    if math.comb(z.shape[1] + 3, 3) - 1 <= n / 4:
        candidates["cubic"] = lambda: _monomials(z, 3)
    for name, features in candidates.items():
        found[name] = _ridge_loo(features(), target)
    name = min(found, key=lambda key: found[key][0])
    return found[name][0], found[name][1], name


def regress_on_z(values: np.ndarray, z: np.ndarray) -> ZRegression:
    """Each column of ``values`` regressed on Z: on the scale (the standardised values, or the
    standardised normal scores of their ranks) and with the model (:data:`REGRESSION_MODELS`) of
    smallest leave-one-out mean squared error relative to the column's variance, and the
    leave-one-out predictions (so that a residual is not fitted to itself).

    Z enters standardised, as its values or as the normal scores of its ranks, whichever fits
    better (``z_scales``), as does the column. The choice among a few models by cross-validation is
    a small "super learner" (van der Laan, Polley & Hubbard 2007, Stat. Appl. Genet. Mol. Biol.
    6:25): its error is close to the best of the candidates'. The values' own scale fits a smooth
    dependence best (a rank transform bends tanh's flat ends into steep ones, and moves Z's values
    by more than a small noise: X = z + 0.1 e is linear in Z's values, not in its rank scores); the
    rank scale keeps an outlier from deciding the fit.

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(400, 2)); x = np.sin(2 * z[:, :1]) + 0.3 * rng.normal(size=(400, 1))
    >>> fit = regress_on_z(x, z)
    >>> fit.scales, bool(fit.unexplained[0] < 0.25)
    (('values',), True)
    """
    from mitool.estimators.preparation import normal_scores, standardise

    inputs = {
        "values": standardise(np.asarray(z, dtype=float))[0],
        "ranks": standardise(normal_scores(z)[0])[0],
    }
    rows = np.asarray(values, dtype=float).reshape(len(z), -1)
    targets, fits, models, scales, z_scales, unexplained = [], [], [], [], [], []
    for column in rows.T:
        scaled = {
            "values": standardise(column[:, None])[0],
            "ranks": standardise(normal_scores(column[:, None])[0])[0],
        }
        tried = {(scale, given): _best_regression(inputs[given], target)
                 for scale, target in scaled.items() for given in inputs}  # fmt: skip
        chosen = min(tried, key=lambda key: tried[key][0] / max(float(np.var(scaled[key[0]])), 1e-300))
        error, fitted, model = tried[chosen]
        targets.append(scaled[chosen[0]][:, 0])
        fits.append(fitted[:, 0])
        models.append(model)
        scales.append(chosen[0])
        z_scales.append(chosen[1])
        unexplained.append(error / max(float(np.var(scaled[chosen[0]])), 1e-300))
    return ZRegression(np.column_stack(targets), np.column_stack(fits), tuple(models), tuple(scales),
                       np.array(unexplained), tuple(z_scales))  # fmt: skip


def neighbourhood_spread(fit_x: ZRegression, fit_y: ZRegression, candidates: np.ndarray) -> dict[str, float]:
    """How wide the local permutation's neighbourhoods are for X's and Y's dependence on Z, from
    their regressions f and g on Z (:func:`regress_on_z`) and each row's neighbourhood N(i) (its
    k_perm nearest rows in Z):

        S_X = mean_i var_{j in N(i)} f(z_j) / var(x - f(z))                  (and S_Y with g)
        C   = |mean_i cov_{j in N(i)} (f(z_j), g(z_j))| / sqrt(var(x - f(z)) var(y - g(z)))

    (for several columns, the largest over columns and pairs of columns). S_X is the part of X's
    dependence on Z that a draw within a neighbourhood does not keep, against X's variance given Z.
    A draw of X within the neighbourhoods of Z keeps X's law given Z only where S_X is small
    (Kim, Neykov, Balakrishnan & Wasserman 2022, Ann. Stat. 50:3388, ask that law to change little
    within a neighbourhood); what makes a null rejected is the co-spread C: the covariance of f and
    g within the neighbourhoods that the data carry and the draws lose, as a correlation against
    the noise of X and Y, 0 where the neighbourhoods are points. Returns ``spread_x``, ``spread_y``
    and ``co_spread``.

    Examples
    --------
    >>> from mitool.independence.permutations import neighbours_in_z
    >>> rng = np.random.default_rng(0)
    >>> z = rng.normal(size=(300, 1))
    >>> steep = regress_on_z(5 * z + 0.1 * rng.normal(size=(300, 1)), z)
    >>> spread = neighbourhood_spread(steep, steep, neighbours_in_z(z, 5))
    >>> bool(spread["spread_x"] > 1), bool(spread["co_spread"] > 1)
    (True, True)
    """
    fitted_x, fitted_y = fit_x.fitted[candidates], fit_y.fitted[candidates]  # (n, k, d)
    noise_x = np.maximum(np.var(fit_x.residual, axis=0), 1e-300)
    noise_y = np.maximum(np.var(fit_y.residual, axis=0), 1e-300)
    centred_x = fitted_x - fitted_x.mean(axis=1, keepdims=True)
    centred_y = fitted_y - fitted_y.mean(axis=1, keepdims=True)
    within = np.einsum("nka,nkb->ab", centred_x, centred_y) / (centred_x.shape[0] * centred_x.shape[1])
    return {
        "spread_x": float(np.max(np.mean(centred_x**2, axis=(0, 1)) / noise_x)),
        "spread_y": float(np.max(np.mean(centred_y**2, axis=(0, 1)) / noise_y)),
        "co_spread": float(np.max(np.abs(within) / np.sqrt(np.outer(noise_x, noise_y)))),
    }


def gcm_statistic(residual_x: np.ndarray, residual_y: np.ndarray) -> tuple[float, float, int]:
    """Shah & Peters' generalised covariance measure (2020, "The hardness of conditional
    independence testing and the generalised covariance measure", Ann. Stat. 48:1514) of residuals
    of X and of Y on Z: with R_i the products of row i's residuals (dx dy of them),

        T = n Rbar' Sigma^-1 Rbar,     Sigma the covariance of the R_i,

    chi-square with dx dy degrees of freedom under H0 (for one product, T = (sqrt(n) Rbar / sd R)^2,
    Shah & Peters' normal statistic squared). The level holds as n grows when the product of the
    two regressions' root mean squared errors shrinks faster than 1 / sqrt(n), whatever else the
    law does; only a dependence with E[cov(X, Y | Z)] != 0 is seen. Returns (T, p, degrees).

    Examples
    --------
    >>> rng = np.random.default_rng(0)
    >>> a, b = rng.normal(size=(2, 500, 1))
    >>> bool(gcm_statistic(a, b)[1] > 0.05), bool(gcm_statistic(a, a + b)[1] < 1e-6)
    (True, True)
    """
    from scipy import stats

    n = len(residual_x)
    products = (residual_x[:, :, None] * residual_y[:, None, :]).reshape(n, -1)
    mean = products.mean(axis=0)
    covariance = np.atleast_2d(np.cov(products, rowvar=False, bias=True))
    statistic = float(n * mean @ np.linalg.pinv(covariance) @ mean)
    degrees = products.shape[1]
    return statistic, float(stats.chi2.sf(statistic, degrees)), degrees


def diagnosed(fit_x: ZRegression, fit_y: ZRegression, candidates: np.ndarray,
               scheme: str) -> tuple[dict[str, float], tuple[str, ...]]:  # fmt: skip
    """The neighbourhood diagnostic of a test given a continuous Z (:func:`neighbourhood_spread`,
    with the regressions' unexplained variance) and its warning where the co-spread exceeds the
    scheme's threshold (:data:`CO_SPREAD_WARNING`)."""
    found = neighbourhood_spread(fit_x, fit_y, candidates)
    found["unexplained_x"] = float(np.max(fit_x.unexplained))
    found["unexplained_y"] = float(np.max(fit_y.unexplained))
    threshold = CO_SPREAD_WARNING[scheme]
    if found["co_spread"] <= threshold:
        return found, ()
    measured = ("beyond the largest co-spread of the nulls the residual scheme was calibrated on" if scheme ==
                "residual" else f"where the {scheme} scheme was measured to reject true conditional "
                "independence too often")  # fmt: skip
    return found, (
        f"the neighbourhoods of Z ({candidates.shape[1]} nearest rows) are too wide for X's and Y's "
        f"dependence on Z: the co-spread of their regressions within them is {found['co_spread']:.2g}, above "
        f"{threshold:g}, {measured} (docs/independence.md), so the p-value may be too small; more rows or "
        "fewer variables in Z narrow the neighbourhoods",
    )  # fmt: skip
